"""Backtests in the service: dream over the earlier sessions, measure on the later ones.

``backtest(principal, store, config, split=0.5, keep=None)`` selects what a dream with
``config`` would (the caller's readable transcripts), orders them by ``started_at`` (by import
time where a session has none; the report says how many), and splits them (a fraction of the
sessions, or a time). It dreams over the earlier part with the deterministic miners, accepts
every draft into a **scratch copy** of the pinned memory (in memory: the real store is never
written; with ``keep`` the scratch copy is also written to a new store of that name), mines
the later part with the same engine (:meth:`~memdir.dream.engine.Engine.continue_from`) and the
scratch memory, and reports coverage, the oracle bound, outcome lift and the quality checks
(:mod:`memdir.dream.backtest`, :mod:`memdir.dream.quality`).

The run is recorded as a dream run (``config.backtest`` says so) whose report has a
``backtest`` section; it queues no proposal. It is not resumable: an interrupted backtest is
``failed``/``interrupted`` and is run again. Sessions are read a page at a time; what is kept
per session is its order key, and for the later part its costly events.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from memdir.core.content import sha256_hex
from memdir.core.errors import InvalidInput, MemdirError
from memdir.core.frontmatter import parse_frontmatter
from memdir.core.model import Principal, Provenance
from memdir.dreams import PAGE, DreamConfig, DreamRun, DreamsMixin, Progress, _meta
from memdir.proposals import operation_paths
from memdir.rows import aware, utcnow
from memdir.storage.schema import proposals
from memdir.transcripts.store import info_from_row

if TYPE_CHECKING:  # the engine and the backtest load on the first backtest, not with the service
    from memdir.dream import backtest as bt
    from memdir.dream.model import Draft, MemoryFile, Pattern, Session
    from memdir.dream.report import Outcome

__all__ = ["HALVES_SEED", "BacktestsMixin"]

#: Seed of the two random halves the stability check dreams on (recorded in the report).
HALVES_SEED: Final = 13


def _half(transcript_id: str, seed: int) -> int:
    return hashlib.sha256(f"{seed}:{transcript_id}".encode()).digest()[0] & 1


def _memory_files(files: dict[str, str], before: dict[str, MemoryFile]) -> list[MemoryFile]:
    """The scratch copy as memory files: unchanged ones as pinned, written ones new (their
    change time unknown, so a later session is not read as failing *after* the note: those
    sessions never had it in context)."""
    from memdir.dream.model import MemoryFile

    out = []
    for path in sorted(files):
        content = files[path]
        old = before.get(path)
        if old is not None and old.content == content:
            out.append(old)
            continue
        try:
            front = parse_frontmatter(content).raw
        except MemdirError:
            front = {}
        out.append(MemoryFile(path, content, sha256_hex(content), front, updated_at=None))
    return out


def _fix_of(pattern: Pattern) -> str | None:
    if pattern.miner != "recovery":
        return None
    return str(pattern.subject.get("fixed") or "") or None


class BacktestsMixin(DreamsMixin):
    """Backtest a dream on the caller's fleet; see the module docstring."""

    def backtest(
        self,
        principal: Principal,
        store: str,
        config: DreamConfig | None = None,
        *,
        split: float | dt.datetime = 0.5,
        keep: str | None = None,
        progress: Progress | None = None,
    ) -> DreamRun:
        """Run a backtest and return its run (finished, ``report["backtest"]`` its figures)."""
        config = config or DreamConfig()
        if config.model != "offline":
            raise InvalidInput(
                f"a backtest runs the deterministic miners only; received --model {config.model}"
                "; leave --model out"
            )
        if isinstance(split, dt.datetime):
            if split.tzinfo is None:
                raise InvalidInput(f"--split time needs a timezone, received {split.isoformat()}")
        elif not 0 < split < 1:
            raise InvalidInput(
                f"--split takes a fraction between 0 and 1 or a time, received {split}"
            )
        if keep is not None:
            service: Any = self  # MemoryService: stores and writes live there, not in a mixin
            service.create_store(principal, keep)  # refused when it exists: never mixed into one
        config = replace(config, dry_run=True)
        row, config = self._start_row(principal, store, config)
        run_id = row.id
        try:
            return self._run_backtest(principal, store, row, config, split, keep, progress)
        except KeyboardInterrupt:
            self._update_run(run_id, status="interrupted", error="interrupted")
            raise
        except Exception as exc:
            self._update_run(run_id, status="failed", error=f"{type(exc).__name__}: {exc}")
            raise

    def _ordered(self, principal: Principal, store_id: int, config: DreamConfig) -> tuple[
        list[Any], int
    ]:  # fmt: skip
        """The selected transcript rows in backtest order, and how many lack ``started_at``."""
        from memdir.dream import backtest as bt

        rows = [r for page, _ in self._candidates(principal, store_id, config.selection, None)
                for r in page]  # fmt: skip
        missing = sum(1 for r in rows if r.started_at is None)
        rows.sort(
            key=lambda r: bt.order_key(
                aware(r.started_at) if r.started_at else None, aware(r.imported_at), r.id
            )
        )
        return rows, missing

    def _sessions(self, rows: Sequence[Any]) -> Iterator[Session]:
        from memdir.dream.model import Session
        from memdir.dream.selection import load_events

        for start in range(0, len(rows), PAGE):
            page = rows[start : start + PAGE]
            with self.db.read() as repo:
                events = load_events(repo, [r.id for r in page])
            for r in page:
                # with the import metadata, as a dream run mines them (task ids: distinct tasks)
                yield Session(info_from_row(r), events.pop(r.id, []), _meta(r.meta))

    def _run_backtest(
        self, principal: Principal, store: str, row: Any, config: DreamConfig,
        split: float | dt.datetime, keep: str | None, progress: Progress | None,
    ) -> DreamRun:  # fmt: skip
        from memdir.dream import backtest as bt
        from memdir.dream import quality
        from memdir.dream.engine import Engine, EngineConfig
        from memdir.dream.miners.failures import FailureRules
        from memdir.dream.report import Outcome, build

        began = time.perf_counter()
        memory = self._memory(row.store_id, dict(row.memory))
        rules = FailureRules()
        engine_config = EngineConfig(thresholds=config.thresholds, miners=config.miners,
                                     failure_rules=rules)  # fmt: skip
        k = config.thresholds.min_sessions
        rows, missing = self._ordered(principal, row.store_id, config)
        keys = [bt.order_key(aware(r.started_at) if r.started_at else None,
                             aware(r.imported_at), r.id)[0] for r in rows]  # fmt: skip
        cut = bt.split_index(keys, split)
        if cut == 0 or cut == len(rows):
            raise InvalidInput(
                f"the split leaves {'no' if cut == 0 else 'every'} session in the earlier part "
                f"({len(rows)} selected); choose a split inside the sessions' time range"
            )
        self._update_run(row.id, selected=len(rows))
        split_at = keys[cut]
        earlier_rows, later_rows = rows[:cut], rows[cut:]
        # --- dream over the earlier part
        engine = Engine(engine_config, memory, split_at)  # the dream as it ran at the split
        seen: dict[str, set[tuple[int, int]]] = {}
        halves: dict[str, list[int]] = {}
        for ordinal, session in enumerate(self._sessions(earlier_rows)):
            half = _half(session.id, HALVES_SEED)
            signals = engine.observe(session)
            for signal in signals:  # anchors: (session, event) where the pattern showed
                at = signal.excerpt.first_event if signal.excerpt is not None else -1
                seen.setdefault(signal.pattern_id, set()).add((ordinal, at))
            for pid in {s.pattern_id for s in signals}:
                halves.setdefault(pid, [0, 0])[half] += 1
            if progress is not None:
                progress("read", ordinal + 1, len(rows))
        sessions_of: dict[str, set[tuple[int, int]]] = {}
        halves_of: dict[str, list[int]] = {}
        for pid, anchors in seen.items():  # follow the templates that generalised
            sessions_of.setdefault(engine.current_id(pid), set()).update(anchors)
        for pid, (a, b) in halves.items():
            counts = halves_of.setdefault(engine.current_id(pid), [0, 0])
            counts[0] += a
            counts[1] += b
        result = engine.finish(self._audience(row.store_id))
        drafts = result.drafts
        # --- accept every draft into the scratch copy
        before = {f.path: f for f in memory}
        files = {f.path: f.content for f in memory}
        # path -> the patterns whose accepted notes wrote it: this run's drafts, and the notes
        # earlier dreams wrote (a later draft on either is the dream reacting to its own notes)
        wrote: dict[str, list[str]] = {
            f.path: [str(f.frontmatter.get("dream_pattern") or f.path)]
            for f in memory if f.frontmatter.get("source") == "dream"
        }  # fmt: skip
        for draft in drafts:
            for path in bt.apply_operations(files, draft.operations):
                wrote.setdefault(path, []).append(draft.pattern.id)
        after = _memory_files(files, before)
        if keep is not None:
            self._keep(principal, keep, after, row.id)
        # --- mine the later part with the same engine
        # "now" of each part is its own end: recent-window checks see what they saw then
        end = max(keys[-1], split_at) + dt.timedelta(seconds=1)
        later = Engine.continue_from(engine_config, after, end, engine.state())
        events: list[bt.CostlyEvent] = []
        outcomes = bt.Outcomes()
        proposed = {d.pattern.id: d.pattern for d in drafts}
        phrases = {pid: quality.phrase_of(p) for pid, p in proposed.items()}
        counter = quality.PhraseCounter(phrases)
        fixes = {pid: f for pid, p in proposed.items() if (f := _fix_of(p)) is not None}
        fixed_later: dict[str, set[str]] = {}
        for done, session in enumerate(self._sessions(later_rows), start=cut + 1):
            signals = later.observe(session)
            events.extend(bt.costly_events(session, signals, rules))
            outcomes.add(session.info.outcome, [s.pattern_id for s in signals])
            for signal in signals:
                if signal.miner == "recovery" and signal.subject.get("fixed"):
                    fixed_later.setdefault(signal.pattern_id, set()).add(
                        str(signal.subject["fixed"])
                    )
            counter.add_session(session, rules)
            if progress is not None:
                progress("read", done, len(rows))
        resolve = later.current_id
        recurring = [p.id for p in result.patterns if p.sessions >= k
                     and p.miner not in ("consolidation",)]  # fmt: skip
        in_memory = {p.id: p.memory_paths[0] for p, _ in result.left_out
                     if p.coverage == "covered" and p.memory_paths}  # fmt: skip
        tally = bt.tally(events, proposed, recurring, resolve, in_memory)
        later_result = later.finish(self._audience(row.store_id))
        loops = bt.feedback_loops(later_result.drafts, wrote)
        for draft in drafts:  # the earlier dream reporting a note an earlier dream wrote stale
            path = str(draft.pattern.subject.get("path", ""))
            if draft.pattern.miner == "stale_memory" and path in wrote:
                loops.setdefault(draft.pattern.id, []).append(
                    f"reports the dream note {path} stale"
                )
        fixed_resolved: dict[str, set[str]] = {}
        for pid, found in fixed_later.items():
            fixed_resolved.setdefault(resolve(pid), set()).update(found)
        evidence = quality.Evidence(
            min_sessions=k, anchors={resolve(p): s for p, s in sessions_of.items()},
            halves={p: (c[0], c[1]) for p, c in halves_of.items()},
            success_phrases=counter.counts(),
            fix_validated={pid: fix in fixed_resolved.get(resolve(pid), set())
                           for pid, fix in fixes.items()},
            feedback_loops={pid: sorted(set(v)) for pid, v in loops.items()} | {
                pid: [] for pid in proposed if pid not in loops},
        )  # fmt: skip
        checks = quality.check_all(list(proposed.values()), evidence)
        section = self._backtest_section(
            config, split, split_at, earlier_rows, later_rows, missing, tally, proposed,
            drafts, outcomes, resolve, wrote, loops, keep, k,
            {p.id: p.title for p in later_result.patterns},
        )  # fmt: skip
        header = {
            "run": row.id, "store": store, "principal": principal.id, "status": "finished",
            "revision": row.revision, "created_at": aware(row.created_at).isoformat(),
            "finished_at": utcnow().isoformat(), "selection": row.selection,
            "model": "offline", "dry_run": True, "thresholds": config.to_json()["thresholds"],
            "sessions": {"selected": len(rows), "processed": len(rows),
                         "agents": len({r.agent for r in rows}),
                         "projects": len({r.project for r in rows})},
            "memory_files": len(memory), "usage": None, "budget_stopped": False,
            "model_review": None, "model_summary": [],
            "seconds": round(time.perf_counter() - began, 3), "backtest": section,
        }  # fmt: skip
        made = [Outcome(p, None, reason) for p, reason in result.left_out]
        made += [_draft_outcome(d) for d in drafts]
        report = build(header, made, dry_run=True, checks=checks)
        self._update_run(row.id, status="finished", report=report, finished_at=utcnow(),
                         processed=len(rows), checkpoint=None)  # fmt: skip
        return self.get_dream_run(principal, store, row.id)

    def _backtest_section(
        self, config: DreamConfig, split: float | dt.datetime, split_at: dt.datetime,
        earlier: Sequence[Any], later: Sequence[Any], missing: int, tally: bt.Tally,
        proposed: dict[str, Pattern], drafts: Sequence[Draft], outcomes: bt.Outcomes,
        resolve: Any, wrote: dict[str, list[str]], loops: dict[str, list[str]],
        keep: str | None, k: int, later_titles: dict[str, str],
    ) -> dict[str, Any]:  # fmt: skip
        from memdir.dream import backtest as bt

        titles = {**later_titles, **{resolve(pid): p.title for pid, p in proposed.items()}}
        per_proposal = []
        for draft in drafts:
            pid = draft.pattern.id
            counts = tally.by_proposal.get(resolve(pid), [0, 0])
            per_proposal.append({
                "pattern": pid, "title": draft.pattern.title,
                "paths": sorted({p for op in draft.operations for p in operation_paths(op)}),
                "covered_events": counts[0], "covered_cost": counts[1],
                "lift": outcomes.lift(resolve(pid)),
                "feedback_loops": sorted(set(loops.get(pid, []))),
            })  # fmt: skip
        order = ("started_at" if not missing else
                 f"started_at; import time for {missing} session(s) without one")  # fmt: skip
        return {
            "order": order,
            "split": {"by": "time" if isinstance(split, dt.datetime) else "fraction",
                      "value": split.isoformat() if isinstance(split, dt.datetime) else split,
                      "at": split_at.isoformat(), "earlier": len(earlier),
                      "later": len(later)},
            "min_sessions": k, "cost_cap": bt.COST_CAP,
            "outcomes": {"sessions": outcomes.sessions, "failures": outcomes.failures},
            "accepted_paths": sorted(wrote), "kept": keep,
            "halves_seed": HALVES_SEED,
            **tally.to_json(titles),
            "proposals": per_proposal,
            "feedback_loops": sum(len(set(v)) for v in loops.values()),
        }  # fmt: skip

    # --- quality -------------------------------------------------------------------------

    def dream_quality(
        self, principal: Principal, store: str, run_id: str | None = None, *, limit: int = 50
    ) -> dict[str, Any]:
        """The quality page's data: one run's summary (``run_id``), or the caller's last
        ``limit`` runs oldest first (``runs``) — proposals by origin, miner and scope, review
        outcomes and acceptance rate, backtest coverage and bound, the checks, tokens and cost
        per accepted proposal (:func:`memdir.dream.quality.run_summary`)."""
        from memdir.dream import quality

        if run_id is not None:
            runs = [self.get_dream_run(principal, store, run_id)]
        else:
            runs = list(reversed(self.list_dream_runs(principal, store, limit=limit)))
        ids = [r.id for r in runs]
        statuses: dict[str, dict[str, str]] = {i: {} for i in ids}
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            for chunk in range(0, len(ids), 500):
                for p in repo.conn.execute(
                    sa.select(proposals.c.id, proposals.c.run_id, proposals.c.status).where(
                        proposals.c.store_id == srow.id,
                        proposals.c.run_id.in_(ids[chunk : chunk + 500]),
                    )
                ):
                    statuses[p.run_id][p.id] = p.status
        summaries = [
            quality.run_summary(
                {"id": r.id, "status": r.status, "created_at": r.created_at.isoformat()},
                r.report, statuses[r.id],
            )
            for r in runs
        ]  # fmt: skip
        if run_id is not None:
            return summaries[0]
        return {"store": store, "runs": summaries}

    # --- replay --------------------------------------------------------------------------

    def replay_sessions(
        self,
        principal: Principal,
        store: str,
        transcript_ids: Sequence[str],
        model: str,
        *,
        run: str | None = None,
    ) -> dict[str, Any]:
        """Replay chosen failed sessions' openings without and with the accepted memory
        (:mod:`memdir.dream.replay`): the files run ``run``'s accepted proposals wrote, or,
        without ``run``, every readable file a dream wrote (``source: dream``). Needs a model."""
        from memdir.dream.llm import model_from_spec
        from memdir.dream.model import MemoryFile, Session
        from memdir.dream.replay import replay

        port = model_from_spec(model)
        if port is None:
            raise InvalidInput("a replay needs a model: pass --model anthropic:<model>, "
                               "openai:<model>@<url> or fake")  # fmt: skip
        if not transcript_ids:
            raise InvalidInput("name the failed sessions to replay (transcript ids)")
        wanted: set[str] | None = None
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            if run is not None:
                self._run_row(repo, srow.id, principal, run)
                wanted = {
                    path
                    for r in repo.conn.execute(
                        sa.select(proposals.c.paths).where(
                            proposals.c.run_id == run, proposals.c.status == "accepted"
                        )
                    )
                    for path in r.paths
                }
            access = self._access(repo, srow.id, principal)
            memory = []
            for head in repo.heads_under(srow.id, "/", with_content=True):
                if not access.can_read(head.path) or (wanted is not None
                                                      and head.path not in wanted):  # fmt: skip
                    continue
                content = head.content or ""
                try:
                    front = parse_frontmatter(content).raw
                except MemdirError:
                    front = {}
                if wanted is None and front.get("source") != "dream":
                    continue
                memory.append(MemoryFile(head.path, content, head.sha256, front))
        sessions = []
        for tid in transcript_ids:
            view = self.get_transcript(principal, store, tid)  # type: ignore[attr-defined]
            sessions.append(Session(view.info, view.events))
        report = replay(port, sessions, memory).to_json()
        report["model"] = model
        report["run"] = run
        return report

    def _keep(self, principal: Principal, keep: str, files: list[MemoryFile], run: str) -> None:
        provenance = Provenance(session=run, reason=f"backtest {run}: scratch copy",
                                source_kind="dream")  # fmt: skip
        service: Any = self  # MemoryService (see backtest)
        for file in files:
            service.write(principal, keep, file.path, file.content, if_absent=True,
                       provenance=provenance)  # fmt: skip


def _draft_outcome(draft: Draft) -> Outcome:
    from memdir.dream.report import Outcome

    paths = tuple(sorted({p for op in draft.operations for p in operation_paths(op)}))
    return Outcome(draft.pattern, None, None, paths, draft.rationale, draft.confidence,
                   tuple(draft.flags))  # fmt: skip
