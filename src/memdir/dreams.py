"""Dream runs in the service: select, mine, reduce, decide, propose, report — and revert.

A run acts as one principal and sees only what that principal may read: transcripts by the
transcripts' rule (read on every scope label), memory files by the policy. It never writes
memory. Its output is proposals (origin ``dream``, naming the run) on paths the principal may
propose to, each screened by the write guard like any write, and a report.

Invariants and reasons:

- **Pinned.** The run records the store revision and the memory manifest (path -> sha256 of
  every readable file) when it starts, and an arrival window on transcripts (updated at or
  before the start). A resumed run reloads the same memory by sha256 and the same transcripts,
  so resuming gives the result an uninterrupted run would.
- **Resumable.** Transcripts are visited in id order; every :data:`CHECKPOINT_EVERY` sessions
  (or :data:`CHECKPOINT_SECONDS`) the engine state, the last id done and the model usage are
  written to the run row in their own transaction. Proposals are queued one per transaction,
  and a resumed run skips patterns it already proposed. ``dream(..., resume=RUN)`` continues a
  run left ``running``, ``interrupted`` or ``failed``.
- **Streaming.** Sessions are read a page at a time (:data:`PAGE` transcripts, their events in
  one query) and handed to the engine one by one; nothing keeps the fleet in memory.
- **Revertible.** An accepted dream proposal lands as a commit whose provenance names the run
  (``session`` = run id, ``source_kind`` = ``dream``); :meth:`DreamsMixin.revert_dream_run`
  reverts those commits, newest first.

- **Placed for its readers.** A proposal's text and statistics come only from transcripts that
  every reader of its target paths may read (:mod:`memdir.dream.placement`). The readers are
  the principals registered when the run drafts (the database owner reads everything), by the
  store's policy without any token narrowing; a transcript "may be read" by the transcripts'
  rule. A principal registered, or given a project, after the run is not considered — the
  proposal's paths still decide who sees the proposal, and its evidence is shown only to
  viewers who may read each transcript.

Who may see a run: the principal that ran it, and administrators. Its report (titles, keys,
wordings, counts, paths and reasons of every pattern found) and its session and proposal counts
are drawn from the transcripts it read, so they are shown only to a viewer who may read, now and
through its token, every source class of the run — the scope labels of the transcripts it
selected (``source_scopes``, recorded with the first checkpoint and in the report), decided by
:func:`memdir.proposals.sources_readable`, the rule a dream proposal's viewer meets. Anyone else
who may see the run gets it with ``withheld`` saying why, no report, zero counts and no
proposal ids: whole or not at all, since a report filtered pattern by pattern would still show
counts over sessions the viewer may not read. A run recorded before its classes were gets the
classes of every transcript in the store.
"""

from __future__ import annotations

import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from memdir.access import DREAM_RUNS, Access
from memdir.core.dream_options import DEFAULTS
from memdir.core.errors import Conflict, Forbidden, InvalidInput, MemdirError, NotFound
from memdir.core.frontmatter import parse_frontmatter
from memdir.core.model import CommitResult, Principal, Provenance
from memdir.core.results import DreamRun
from memdir.history import HistoryMixin
from memdir.proposals import ProposalsMixin, operation_paths, sources_readable
from memdir.rows import aware, utcnow
from memdir.screening import verdict
from memdir.storage.repository import Repository, Row
from memdir.storage.schema import dream_runs, principals, proposals, transcripts
from memdir.transcripts.model import TranscriptInfo
from memdir.transcripts.service import allowed as transcript_allowed
from memdir.transcripts.store import info_from_row

if TYPE_CHECKING:  # the engine loads on the first dream call, not with the service
    from memdir.dream.engine import Engine, EngineResult
    from memdir.dream.model import Draft, MemoryFile, Session, Signal, Thresholds
    from memdir.dream.placement import Audience
    from memdir.dream.report import Outcome
    from memdir.dream.selection import Selection

__all__ = ["DreamConfig", "DreamRun", "DreamsMixin", "Progress"]


def _meta(text: str | None) -> dict[str, Any]:
    """A transcript row's metadata (task ids and the like) for the miners; {} when unreadable."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


PAGE: Final = 100
CHECKPOINT_EVERY: Final = 2_000
CHECKPOINT_SECONDS: Final = 10.0
RUN_STATUSES: Final = ("running", "interrupted", "failed", "finished")

#: ``progress(stage, done, total)``; stages ``read``, ``model``, ``propose``.
Progress = Callable[[str, int, int], None]


def _selection() -> Selection:  # the defaults, imported only when a run is configured
    from memdir.dream.selection import Selection

    return Selection()


def _thresholds() -> Thresholds:
    from memdir.dream.model import Thresholds

    return Thresholds()


@dataclass(frozen=True)
class DreamConfig:
    """What a run reads and how it decides (recorded on the run; a resume reuses it)."""

    selection: Selection = field(default_factory=_selection)
    since_last: bool = False
    model: str = "offline"
    instructions: str | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    batches: bool = False
    thresholds: Thresholds = field(default_factory=_thresholds)
    miners: tuple[str, ...] | None = None
    dry_run: bool = False

    @classmethod
    def build(
        cls,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        since_last: bool = False,
        agent: str | None = None,
        project: str | None = None,
        outcome: str | None = None,
        limit: int | None = None,
        model: str = DEFAULTS.model,
        instructions: str | None = None,
        budget_tokens: int | None = None,
        budget_usd: float | None = None,
        batches: bool = DEFAULTS.batches,
        min_sessions: int = DEFAULTS.min_sessions,
        min_prevalence: float = DEFAULTS.min_prevalence,
        miners: Sequence[str] | None = None,
        dry_run: bool = DEFAULTS.dry_run,
    ) -> DreamConfig:
        """A configuration from every surface's flat options (defaults: ``DEFAULTS``)."""
        from memdir.dream.model import Thresholds
        from memdir.dream.selection import Selection

        selection = Selection(
            since=since, until=until, agent=agent, project=project, outcome=outcome, limit=limit
        )
        config = cls(
            selection=selection, since_last=since_last, model=model, instructions=instructions,
            budget_tokens=budget_tokens, budget_usd=budget_usd, batches=batches,
            thresholds=Thresholds(min_sessions=min_sessions, min_prevalence=min_prevalence),
            miners=tuple(miners) if miners is not None else None, dry_run=dry_run,
        )  # fmt: skip
        return config

    def to_json(self) -> dict[str, Any]:
        return {
            "since_last": self.since_last,
            "model": self.model,
            "instructions": self.instructions,
            "budget_tokens": self.budget_tokens,
            "budget_usd": self.budget_usd,
            "batches": self.batches,
            "thresholds": {
                "min_sessions": self.thresholds.min_sessions,
                "min_prevalence": self.thresholds.min_prevalence,
                "per_miner": dict(self.thresholds.per_miner),
                "max_examples": self.thresholds.max_examples,
            },
            "miners": list(self.miners) if self.miners is not None else None,
            "dry_run": self.dry_run,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], selection: Selection) -> DreamConfig:
        from memdir.dream.model import Thresholds

        t = data.get("thresholds") or {}
        miners = data.get("miners")
        return cls(
            selection=selection,
            since_last=bool(data.get("since_last")),
            model=str(data.get("model") or "offline"),
            instructions=data.get("instructions"),
            budget_tokens=data.get("budget_tokens"),
            budget_usd=data.get("budget_usd"),
            batches=bool(data.get("batches")),
            thresholds=Thresholds(**t) if t else Thresholds(),
            miners=tuple(miners) if miners is not None else None,
            dry_run=bool(data.get("dry_run")),
        )


WITHHELD: Final = (
    "this run read transcripts you may not read now: its report, counts and proposals are "
    "withheld (proposals you may see are in the review queue)"
)


def _run_view(row: Row, store: str, scopes: Sequence[dict[str, str]], access: Access) -> DreamRun:
    """The run as ``access.principal`` may see it: whole, or withheld (module docstring)."""
    if not sources_readable(access, scopes):
        return replace(
            _run_view(row, store, (), access), report=None, selected=0, processed=0,
            proposals=(), withheld=WITHHELD,
        )  # fmt: skip
    return DreamRun(
        id=row.id, store=store, principal=row.principal, status=row.status,
        revision=row.revision, selection=row.selection, config=row.config,
        selected=row.selected, processed=row.processed, usage=row.usage, report=row.report,
        error=row.error, created_at=aware(row.created_at), updated_at=aware(row.updated_at),
        finished_at=aware(row.finished_at) if row.finished_at else None,
        proposals=tuple(
            e["proposal"] for e in (row.report or {}).get("proposed", []) if e.get("proposal")
        ),
    )  # fmt: skip


class _State:
    """What a run carries between checkpoints."""

    def __init__(self, engine: Engine, last_id: str | None, processed: int) -> None:
        self.engine = engine
        self.last_id = last_id
        self.processed = processed
        self.agents: set[str] = set()
        self.projects: set[str] = set()
        #: The source classes of the transcripts the run selected (who may see its report).
        self.classes: set[str] = set()


class DreamsMixin(HistoryMixin, ProposalsMixin):
    """Run, list, show and revert dream runs; see the module docstring."""

    # --- run ------------------------------------------------------------------------------

    def dream(
        self,
        principal: Principal,
        store: str,
        config: DreamConfig | None = None,
        *,
        resume: str | None = None,
        progress: Progress | None = None,
    ) -> DreamRun:
        """Run a dream (or continue run ``resume``) and return it, finished, with its report."""
        if resume is not None:
            row, config = self._resume_row(principal, store, resume)
        else:
            config = config or DreamConfig()
            _assistant(config, None)  # a bad model spec or a missing SDK fails before the run
            row, config = self._start_row(principal, store, config)
        run_id = row.id
        try:
            return self._execute(principal, store, row, config, progress)
        except KeyboardInterrupt:
            self._update_run(run_id, status="interrupted", error="interrupted")
            raise
        except Exception as exc:
            self._update_run(run_id, status="failed", error=f"{type(exc).__name__}: {exc}")
            raise

    def _start_row(
        self, principal: Principal, store: str, config: DreamConfig
    ) -> tuple[Row, DreamConfig]:
        now = utcnow()
        with self.db.write() as repo:
            srow = self._store_row(repo, store)
            access = self._access(repo, srow.id, principal)
            selection = replace(config.selection, arrived_until=now)
            if config.since_last:
                earlier = repo.conn.execute(
                    sa.select(dream_runs.c.created_at, dream_runs.c.config)
                    .where(
                        dream_runs.c.store_id == srow.id,
                        dream_runs.c.principal == principal.id,
                        dream_runs.c.status == "finished",
                    )
                    .order_by(dream_runs.c.created_at.desc())
                )
                # A dry run queued nothing: "since the last run" means the last real one.
                last = next((r for r in earlier if not (r.config or {}).get("dry_run")), None)
                if last is not None:
                    selection = replace(selection, arrived_after=aware(last.created_at))
            config = replace(config, selection=selection)
            manifest = {
                head.path: [head.sha256, aware(head.updated_at).isoformat()]
                for head in repo.heads_under(srow.id, "/", with_content=False)
                if access.can_read(head.path)
            }
            run_id = "d_" + uuid.uuid4().hex[:20]
            repo.conn.execute(
                sa.insert(dream_runs).values(
                    id=run_id, store_id=srow.id, principal=principal.id, status="running",
                    revision=srow.revision, selection=selection.to_json(),
                    config=config.to_json(), memory=manifest, selected=0, processed=0,
                    checkpoint=None, usage=None, report=None, error=None, created_at=now,
                    updated_at=now, finished_at=None,
                )
            )  # fmt: skip
            row = self._run_row(repo, srow.id, principal, run_id)
        return row, config

    def _resume_row(self, principal: Principal, store: str, run_id: str) -> tuple[Row, DreamConfig]:
        from memdir.dream.selection import Selection

        with self.db.write() as repo:
            srow = self._store_row(repo, store)
            row = self._run_row(repo, srow.id, principal, run_id)
            if row.status == "finished":
                raise Conflict(
                    f"dream run {run_id} already finished; start a new run instead",
                    run=run_id,
                    status=row.status,
                )
            if row.principal != principal.id:
                raise Forbidden(f"dream run {run_id} belongs to {row.principal}; only it resumes")
            repo.conn.execute(
                sa.update(dream_runs)
                .where(dream_runs.c.id == run_id)
                .values(status="running", error=None, updated_at=utcnow())
            )
            row = self._run_row(repo, srow.id, principal, run_id)
        config = DreamConfig.from_json(row.config, Selection.from_json(row.selection))
        return row, config

    def _memory(self, store_id: int, manifest: dict[str, list[str]]) -> list[MemoryFile]:
        """The pinned memory: each manifest entry is ``[sha256, updated_at]`` at the start."""
        from memdir.dream.model import MemoryFile

        files: list[MemoryFile] = []
        with self.db.read() as repo:
            for path in sorted(manifest):
                sha, updated = manifest[path]
                content = repo.blob(store_id, sha)
                if content is None:  # redacted or purged since the run started
                    continue
                try:
                    front = parse_frontmatter(content).raw
                except MemdirError:
                    front = {}
                changed = dt.datetime.fromisoformat(updated)
                files.append(MemoryFile(path, content, sha, front, updated_at=changed))
        return files

    def _execute(
        self,
        principal: Principal,
        store: str,
        row: Row,
        config: DreamConfig,
        progress: Progress | None,
    ) -> DreamRun:
        from memdir.dream.engine import Engine, EngineConfig
        from memdir.dream.reduce import source_scopes
        from memdir.dream.report import build

        began = time.perf_counter()
        memory = self._memory(row.store_id, dict(row.memory))
        created = aware(row.created_at)
        engine_config = EngineConfig(thresholds=config.thresholds, miners=config.miners)
        checkpoint = json.loads(row.checkpoint) if row.checkpoint else None
        if checkpoint is None:
            state = _State(Engine(engine_config, memory, created), None, 0)
        else:
            engine = Engine.restore(engine_config, memory, created, checkpoint["engine"])
            state = _State(engine, checkpoint["last_id"], int(checkpoint["processed"]))
            state.agents = set(checkpoint.get("agents", []))
            state.projects = set(checkpoint.get("projects", []))
            state.classes = set(checkpoint.get("classes", []))
        assistant = _assistant(config, checkpoint)
        selected, classes = self._count_selected(principal, row.store_id, config.selection)
        state.classes |= classes
        # The classes are stored with the count, so no viewer sees one without the other.
        self._checkpoint(row.id, state, assistant, selected=selected)
        self._mine(principal, row, config, state, assistant, selected, memory, progress)
        result = state.engine.finish(self._audience(row.store_id))
        drafts = result.drafts
        if assistant is not None and drafts:  # screens every draft even when out of budget
            drafts = assistant.write(drafts, memory)
        outcomes = self._queue_drafts(principal, store, row, config, result, drafts, progress)
        usage = assistant.usage.to_json() if assistant is not None else None
        header = {
            "run": row.id, "store": store, "principal": principal.id, "status": "finished",
            "revision": row.revision, "created_at": created.isoformat(),
            "finished_at": utcnow().isoformat(), "selection": row.selection,
            "model": config.model, "dry_run": config.dry_run,
            "thresholds": config.to_json()["thresholds"],
            "sessions": {
                "selected": selected, "processed": state.processed,
                "agents": len(state.agents - {""}), "projects": len(state.projects),
            },
            "source_scopes": [source_scopes(c) for c in sorted(state.classes)],
            "memory_files": len(memory), "usage": usage,
            "budget_stopped": bool(assistant is not None and assistant.state.stopped),
            "model_review": assistant.state.to_json() if assistant is not None else None,
            "model_summary": assistant.state.summary() if assistant is not None else [],
            "seconds": round(time.perf_counter() - began, 3),
        }  # fmt: skip
        report = build(header, outcomes, dry_run=config.dry_run)
        self._update_run(
            row.id, status="finished", report=report, usage=usage, finished_at=utcnow(),
            processed=state.processed, checkpoint=None,
        )  # fmt: skip
        return self.get_dream_run(principal, store, row.id)

    def _audience(self, store_id: int) -> Audience:
        """``audience(paths, scopes)``: may every (registered, untokened) reader of one of
        ``paths`` read a transcript with these scope labels?"""
        with self.db.read() as repo:
            policy = self._policies.get(repo, store_id)
            people = [
                Access(Principal(id=r.id, groups=frozenset(r.groups), projects=tuple(r.projects),
                                 tasks=tuple(r.tasks), acts_for=r.acts_for), policy)
                for r in repo.conn.execute(sa.select(principals).order_by(principals.c.id))
            ]  # fmt: skip
        readers: dict[str, list[Access]] = {}
        decided: dict[tuple[tuple[str, ...], str], bool] = {}

        def readers_of(path: str) -> list[Access]:
            found = readers.get(path)
            if found is None:
                found = readers[path] = [a for a in people if a.can_read(path)]
            return found

        def audience(paths: tuple[str, ...], scopes: Any) -> bool:
            key = (paths, json.dumps(dict(scopes), sort_keys=True))
            verdict_ = decided.get(key)
            if verdict_ is None:
                verdict_ = decided[key] = all(
                    transcript_allowed(reader, dict(scopes), "read")
                    for path in paths
                    for reader in readers_of(path)
                )
            return verdict_

        return audience

    def _candidates(
        self, principal: Principal, store_id: int, selection: Selection, after: str | None
    ) -> Iterator[tuple[list[Any], str]]:
        """Pages of readable transcript rows in id order after ``after`` (within the limit),
        each with the last candidate id it covered (the checkpoint cursor)."""
        from memdir.dream.selection import select_page

        taken = 0
        while True:
            with self.db.read() as repo:
                access = self._access(repo, store_id, principal)
                rows = select_page(repo, store_id, selection, after, PAGE)
            if not rows:
                return
            after = rows[-1].id
            page = [r for r in rows if transcript_allowed(access, info_from_row(r).scopes(),
                                                          "read")]  # fmt: skip
            if selection.limit is not None:
                page = page[: max(0, selection.limit - taken)]
            taken += len(page)
            yield page, after
            if selection.limit is not None and taken >= selection.limit:
                return

    def _count_selected(
        self, principal: Principal, store_id: int, selection: Selection
    ) -> tuple[int, set[str]]:
        """How many transcripts the run selects, and their source classes."""
        from memdir.dream.reduce import source_class

        count, classes = 0, set[str]()
        for page, _ in self._candidates(principal, store_id, selection, None):
            count += len(page)
            classes.update(source_class(info_from_row(r)) for r in page)
        return count, classes

    def _mine(
        self,
        principal: Principal,
        row: Row,
        config: DreamConfig,
        state: _State,
        assistant: Any,
        selected: int,
        memory: list[MemoryFile],
        progress: Progress | None,
    ) -> None:
        from memdir.dream.model import Session
        from memdir.dream.selection import load_events

        last_save = time.monotonic()
        since_save = 0
        buffer: list[Session] = []
        remaining = replace(
            config.selection,
            limit=None if config.selection.limit is None
            else max(1, config.selection.limit - state.processed),
        )  # fmt: skip
        if config.selection.limit is not None and state.processed >= config.selection.limit:
            return
        for rows, page_last in self._candidates(principal, row.store_id, remaining, state.last_id):
            with self.db.read() as repo:
                events = load_events(repo, [r.id for r in rows])
            for r in rows:
                session = Session(info_from_row(r), events.pop(r.id), _meta(r.meta))
                state.engine.add(session)
                state.agents.add(r.agent or "")
                state.projects.add(r.project or "")
                if assistant is not None and not assistant.state.stopped:  # else: offline
                    buffer.append(session)
                state.processed += 1
                since_save += 1
            state.last_id = page_last
            if (
                assistant is not None
                and len(buffer) >= assistant.batch_size * assistant.concurrency
            ):
                self._review(assistant, buffer, state, memory, progress)
            if progress is not None:
                progress("read", state.processed, selected)
            due = since_save >= CHECKPOINT_EVERY or time.monotonic() - last_save > (
                CHECKPOINT_SECONDS
            )
            if due and not buffer:
                self._checkpoint(row.id, state, assistant)
                last_save, since_save = time.monotonic(), 0
        if assistant is not None and buffer:
            self._review(assistant, buffer, state, memory, progress)

    def _review(
        self,
        assistant: Any,
        buffer: list[Session],
        state: _State,
        memory: list[MemoryFile],
        progress: Progress | None,
    ) -> None:
        found: dict[str, tuple[TranscriptInfo, list[Signal]]] = {}
        for info, signal in assistant.review(list(buffer), memory):
            found.setdefault(info.id, (info, []))[1].append(signal)
        for info, signals in found.values():  # once per session: it counts once per pattern
            state.engine.add_signals(info, signals)
        buffer.clear()
        if progress is not None:
            progress("model", assistant.usage.requests, 0)

    def _checkpoint(self, run_id: str, state: _State, assistant: Any, **values: Any) -> None:
        from memdir.dream.reduce import json_object, json_text

        usage = assistant.usage.to_json() if assistant is not None else None
        data = {
            "last_id": state.last_id,
            "processed": state.processed,
            "agents": sorted(state.agents),
            "projects": sorted(state.projects),
            "classes": sorted(state.classes),
            "usage": usage,
        }
        texts = {key: json_text(value) for key, value in data.items()}
        texts["engine"] = state.engine.state_text()  # written pattern by pattern
        self._update_run(
            run_id,
            checkpoint=json_object(texts),
            processed=state.processed,
            usage=usage,
            **values,
        )

    def _update_run(self, run_id: str, **values: Any) -> None:
        with self.db.write() as repo:
            repo.conn.execute(
                sa.update(dream_runs)
                .where(dream_runs.c.id == run_id)
                .values(updated_at=utcnow(), **values)
            )

    # --- propose --------------------------------------------------------------------------

    def _queue_drafts(
        self,
        principal: Principal,
        store: str,
        row: Row,
        config: DreamConfig,
        result: EngineResult,
        drafts: list[Draft],
        progress: Progress | None,
    ) -> list[Outcome]:
        """Queue each draft as a proposal (or record why not); one transaction per draft."""
        from memdir.dream.report import Outcome

        outcomes = [Outcome(p, None, reason) for p, reason in result.left_out]
        with self.db.read() as repo:
            done = {  # a pattern may be placed in several scopes: one proposal per placement
                ((p.statistics or {}).get("pattern"), tuple(sorted(p.paths))): p.id
                for p in repo.conn.execute(
                    sa.select(proposals.c.id, proposals.c.statistics, proposals.c.paths).where(
                        proposals.c.run_id == row.id
                    )
                )
            }
        for index, draft in enumerate(drafts):
            paths = tuple(sorted({p for op in draft.operations for p in operation_paths(op)}))
            pattern = draft.pattern
            if (pattern.id, paths) in done:
                outcomes.append(_proposed(draft, done[(pattern.id, paths)], paths))
                continue
            if config.dry_run:
                outcomes.append(Outcome(pattern, None, None, paths, draft.rationale,
                                        draft.confidence, tuple(draft.flags)))  # fmt: skip
                continue
            try:
                pid = self._propose_draft(principal, store, row, draft)
            except (Forbidden, NotFound) as exc:
                reason = f"no propose right on {', '.join(paths)}: {exc}"
                outcomes.append(Outcome(pattern, None, reason, paths))
            except MemdirError as exc:
                outcomes.append(Outcome(pattern, None, f"refused: {exc}", paths))
            else:
                outcomes.append(_proposed(draft, pid, paths))
            if progress is not None:
                progress("propose", index + 1, len(drafts))
        return outcomes

    def _propose_draft(self, principal: Principal, store: str, row: Row, draft: Draft) -> str:
        provenance = Provenance(session=row.id, reason=draft.rationale[:4000], source_kind="dream")
        found = self._screen_ops(draft.operations, provenance)
        with self.db.write() as repo:
            srow = self._store_row(repo, store)
            self._writable_store(srow)
            access = self._access(repo, srow.id, principal)
            for op in draft.operations:
                for path in operation_paths(op):
                    access.require("propose", path)
            screened = verdict(found, self._policy(repo, srow.id))  # raises on a reject
            findings = [*screened.findings, *({"rule": f, "category": "dream"}
                                              for f in draft.flags)]  # fmt: skip
            return self._insert_proposal(
                repo, srow.id, principal, draft.operations, origin="dream",
                rationale=draft.rationale,
                evidence=[{**e, "verified": True} for e in draft.evidence],  # from the run
                statistics=draft.statistics(), findings=findings or None,
                provenance=provenance, run_id=row.id,
            )  # fmt: skip

    # --- read -----------------------------------------------------------------------------

    def _run_row(self, repo: Repository, store_id: int, principal: Principal, run_id: str) -> Row:
        row = repo.conn.execute(
            sa.select(dream_runs).where(
                dream_runs.c.id == run_id, dream_runs.c.store_id == store_id
            )
        ).first()
        admin = self._is_admin(principal, DREAM_RUNS)
        if row is None or not (admin or row.principal == principal.id):
            raise NotFound(f"no dream run {run_id!r} in this store; see `memdir dream list`")
        return row

    def list_dream_runs(
        self, principal: Principal, store: str, *, limit: int = 50, offset: int = 0
    ) -> list[DreamRun]:
        """The caller's runs (every run, for administrators), newest first, from the
        ``offset``-th on (paging: the order is total, by start time and id)."""
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, received {limit}")
        if offset < 0:
            raise InvalidInput(f"offset must be 0 or more, received {offset}")
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            query = sa.select(dream_runs).where(dream_runs.c.store_id == srow.id)
            if not self._is_admin(principal, DREAM_RUNS):
                query = query.where(dream_runs.c.principal == principal.id)
            rows = repo.conn.execute(
                query.order_by(dream_runs.c.created_at.desc(), dream_runs.c.id)
                .limit(limit)
                .offset(offset)
            ).all()
            access = self._access(repo, srow.id, principal)
            every: list[dict[str, str]] | None = None  # the store's classes, if a run needs it
            out = []
            for r in rows:
                scopes = _recorded_scopes(r)
                if scopes is None:
                    every = every if every is not None else _store_scopes(repo, srow.id)
                    scopes = every
                out.append(_run_view(r, srow.name, scopes, access))
            return out

    def get_dream_run(self, principal: Principal, store: str, run_id: str) -> DreamRun:
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            row = self._run_row(repo, srow.id, principal, run_id)
            scopes = _recorded_scopes(row)
            if scopes is None:
                scopes = _store_scopes(repo, srow.id)
            return _run_view(row, srow.name, scopes, self._access(repo, srow.id, principal))

    def revert_dream_run(
        self,
        principal: Principal,
        store: str,
        run_id: str,
        provenance: Provenance | None = None,
    ) -> list[CommitResult]:
        """Revert every commit that came from the run's accepted proposals, newest first.

        Needs the rights each revert needs (write on the files). Refused (:class:`Conflict`)
        when a file changed since its commit; earlier reverts of the same call stay done and
        the error says which commit is left.
        """
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            self._run_row(repo, srow.id, principal, run_id)
            commits = [
                r.commit_id
                for r in repo.conn.execute(
                    sa.select(proposals.c.commit_id)
                    .where(
                        proposals.c.run_id == run_id,
                        proposals.c.status == "accepted",
                        proposals.c.commit_id.is_not(None),
                    )
                    .order_by(proposals.c.reviewed_at.desc(), proposals.c.id)
                )
            ]
        base = provenance or Provenance(
            session=run_id, reason=f"revert dream run {run_id}", source_kind="dream"
        )
        key = base.idempotency_key
        return [  # one key per commit: a repeated call replays each revert, none twice
            self.revert_commit(
                principal, store, cid,
                replace(base, idempotency_key=f"{key}:{cid}"[:4000] if key else None),
            )
            for cid in commits
        ]  # fmt: skip


def _recorded_scopes(row: Row) -> list[dict[str, str]] | None:
    """The source classes a run recorded (report, else checkpoint); None when it recorded
    none although it may have read something (a run from before they were recorded)."""
    from memdir.dream.reduce import source_scopes

    if isinstance(row.report, dict) and isinstance(row.report.get("source_scopes"), list):
        return [dict(s) for s in row.report["source_scopes"] if isinstance(s, dict)]
    if row.checkpoint:
        classes = json.loads(row.checkpoint).get("classes")
        if isinstance(classes, list):
            return [source_scopes(c) for c in classes]
    return [] if row.report is None and not row.selected and not row.processed else None


def _store_scopes(repo: Repository, store_id: int) -> list[dict[str, str]]:
    """The scope labels of every transcript in the store (each combination once)."""
    t = transcripts.c
    rows = repo.conn.execute(
        sa.select(t.project, t.user, t.agent, t.task).where(t.store_id == store_id).distinct()
    )
    values = ("project", "user", "agent", "task")
    return [{k: v for k, v in zip(values, r, strict=True) if v is not None} for r in rows]


def _proposed(draft: Draft, pid: str, paths: tuple[str, ...]) -> Outcome:
    from memdir.dream.report import Outcome

    return Outcome(draft.pattern, pid, None, paths, draft.rationale, draft.confidence,
                   tuple(draft.flags))  # fmt: skip


def _window(assistant: Any) -> int:
    """Sessions to buffer before a model review: every sub-agent gets a full batch."""
    return int(assistant.batch_size * assistant.concurrency)


def _assistant(config: DreamConfig, checkpoint: dict[str, Any] | None) -> Any:
    """The model orchestrator for ``config.model`` (None offline), usage restored on resume."""
    if config.model == "offline":
        return None
    from memdir.dream.llm import Assistant, Budget, Usage, model_from_spec

    port = model_from_spec(config.model)
    if port is None:
        return None
    saved = (checkpoint or {}).get("usage")  # a resumed run keeps counting its spend
    return Assistant(
        port,
        instructions=config.instructions or "",
        budget=Budget(tokens=config.budget_tokens, usd=config.budget_usd),
        use_batches=config.batches,
        usage=Usage.from_json(saved) if saved else None,
    )
