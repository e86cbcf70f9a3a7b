"""Run the offline dream on a real fleet and score its proposals against the fleet's manifest.

:func:`evaluate` imports the manifest's files into a scratch SQLite store with the real
importers (formats detected, as ``memdir transcripts import`` does), feeds every transcript to
the offline engine the way a run does (``list_transcripts`` pages, ``get_transcript`` per
transcript, ``Engine.add``, ``Engine.finish``) with the manifest's thresholds and no memory, and
scores the drafts — what the run would queue:

- **recall**: manifest patterns that are above the thresholds and should be queued (``above``
  and ``queue``) matched by a draft, over those patterns (1.0 when there are none);
- **precision**: drafts matching such a pattern, over the drafts (1.0 when there are none): a
  draft matching a below-threshold or report-only pattern, a known junk shape
  (``not_patterns``) or nothing counts against it;
- **prevalence error**: per found pattern, |draft prevalence − manifest prevalence| in
  percentage points (the closest matching draft);
- **fix share**: drafts whose note text names the fix the sessions show — one of the matched
  pattern's ``fix_terms`` that is not in what the subject says of the failure (its
  signature, command, input: the failure's own words are no fix); a draft matching no pattern
  names none;
- **duplicates**: drafts beyond the first for one manifest pattern;
- **parse junk**: drafts whose subject holds heredoc or redirection tokens, or a harness
  wrapper as its signature (:data:`JUNK_TOKENS`);
- **probe errors**: tool-error drafts for a probe (grep/rg/ls/test/diff … ) or a test runner's
  report of failing tests (:func:`probe_error`).

A draft *matches* a manifest pattern when its miner is one of ``match.miners`` (if given), its
subject's ``tool`` is ``match.tool`` or one of ``match.tools`` (if given, ignoring case), and one
of ``match.any`` is a case-insensitive substring of its title or subject JSON (any text, when
``match.any`` is absent). The manifests and their recount live beside this module
(``recount.py``, standard library only).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import memdir
from memdir import OWNER
from memdir.dream.engine import Engine, EngineConfig
from memdir.dream.model import Draft, Session, Thresholds
from memdir.transcripts.reader import Source

sys.path.insert(0, str(Path(__file__).resolve().parent))
import recount

STORE: Final = "fleet"
#: Tokens that make a subject a parsing accident rather than a cause.
JUNK_TOKENS: Final = ("<<", " >> ", " > ", "2>&1", "| tee", "<returncode>", "<output>",
                      "exit code ", "process exited with code", "[file:", "end_of_edit",
                      "=== failures", "observation:")  # fmt: skip
_PROBES: Final = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "ls", "test", "[", "[[",
                            "diff", "cmp", "find", "stat", "which"})  # fmt: skip
_RUNNER_REPORT: Final = re.compile(
    r"\b\d+ (failed|passed)\b|^FAILED |={3,} FAILURES|\btests? failed\b", re.I | re.M
)


@dataclass
class FleetScore:
    """One fleet's figures (see the module docstring)."""

    fleet: str
    sessions: int
    drafts: int
    recall: float
    precision: float
    fix_share: float
    duplicates: int
    parse_junk: int
    probe_errors: int
    prevalence_errors: dict[str, float] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    import_s: float = 0.0
    #: wall seconds of each dream pass and of each raw read of the same files
    dream_times: list[float] = field(default_factory=list)
    raw_times: list[float] = field(default_factory=list)
    #: peak traced Python allocations of one more dream pass (``trace=True``), else None
    peak_bytes: int | None = None

    @property
    def dream_s(self) -> float:
        return sorted(self.dream_times)[len(self.dream_times) // 2] if self.dream_times else 0.0

    @property
    def raw_s(self) -> float:
        return sorted(self.raw_times)[len(self.raw_times) // 2] if self.raw_times else 0.0

    @property
    def max_error_pp(self) -> float:
        return max(self.prevalence_errors.values(), default=0.0)

    @property
    def rate(self) -> float:
        return self.sessions / self.dream_s if self.dream_s else 0.0

    @property
    def raw_rate(self) -> float:
        return self.sessions / self.raw_s if self.raw_s else 0.0

    def line(self) -> str:
        return (f"{self.fleet}: {self.drafts} proposals over {self.sessions} sessions; recall "
                f"{self.recall:.2f} precision {self.precision:.2f} max prevalence error "
                f"{self.max_error_pp:.1f} pp, fix share {self.fix_share:.2f}, duplicates "
                f"{self.duplicates}, parse junk {self.parse_junk}, probe errors "
                f"{self.probe_errors}; missed {self.missed or '-'}; unmatched "
                f"{self.unmatched or '-'}")  # fmt: skip


def _text(draft: Draft) -> str:
    p = draft.pattern
    return (p.title + "\n" + json.dumps(p.subject, ensure_ascii=False, sort_keys=True)).lower()


def _failure_text(draft: Draft) -> str:
    """What the draft's subject says about the failure itself (its words are no fix)."""
    subject = draft.pattern.subject
    keys = ("signature", "command", "input", "failed", "error")
    return " ".join(str(subject.get(k, "")) for k in keys).lower()


def _body(draft: Draft) -> str:
    parts = [str(getattr(op, name, "") or "") for op in draft.operations
             for name in ("content", "new", "text")]  # fmt: skip
    return "\n".join(parts).lower()


def matches(draft: Draft, match: dict[str, Any]) -> bool:
    """Is ``draft`` the finding ``match`` describes (see the module docstring)?"""
    p = draft.pattern
    miners = match.get("miners")
    if miners and p.miner not in miners:
        return False
    tools = [t.lower() for t in ([match["tool"]] if match.get("tool") else [])
             + list(match.get("tools") or [])]  # fmt: skip
    if tools and str(p.subject.get("tool", "")).lower() not in tools:
        return False
    wanted = match.get("any")
    text = _text(draft)
    return not wanted or any(w.lower() in text for w in wanted)


def parse_junk(draft: Draft) -> bool:
    """A subject holding heredoc/redirection tokens or a harness wrapper (:data:`JUNK_TOKENS`)."""
    subject = draft.pattern.subject
    text = " ".join(str(subject.get(k, "")) for k in ("signature", "command", "input", "failed"))
    text = f" {text.lower()} "
    return any(token in text for token in JUNK_TOKENS)


def probe_error(draft: Draft) -> bool:
    """A tool-error draft for a probe's answer or a test runner's report of failing tests."""
    p = draft.pattern
    if p.miner != "tool_errors":
        return False
    command = str(p.subject.get("command") or p.subject.get("input") or "").split()
    program = command[0].rsplit("/", 1)[-1] if command else ""
    return program in _PROBES or bool(_RUNNER_REPORT.search(str(p.subject.get("signature", ""))))


def score(manifest: dict[str, Any], drafts: Sequence[Draft], sessions: int) -> FleetScore:
    """Score ``drafts`` against ``manifest`` (see the module docstring)."""
    patterns = manifest["patterns"]
    wanted = [p for p in patterns if p["above"] and p["queue"]]
    hits = {p["id"]: [d for d in drafts if matches(d, p["match"])] for p in patterns}
    result = FleetScore(manifest["fleet"], sessions, len(drafts), 0.0, 0.0, 0.0, 0, 0, 0)
    for p in wanted:
        found = hits[p["id"]]
        if not found:
            result.missed.append(p["id"])
            continue
        result.found.append(p["id"])
        best = min(found, key=lambda d: abs(d.pattern.prevalence - p["prevalence"]))
        result.prevalence_errors[p["id"]] = abs(best.pattern.prevalence - p["prevalence"]) * 100
        result.duplicates += len(found) - 1
    good = fixed = 0
    for draft in drafts:
        mine = [p for p in patterns if draft in hits[p["id"]]]
        if any(p["above"] and p["queue"] for p in mine):
            good += 1
        else:
            result.unmatched.append(draft.pattern.id)
        body, said = _body(draft), _failure_text(draft)
        terms = [t.lower() for p in mine for t in p["fix_terms"]]
        if any(t in body and t not in said for t in terms):
            fixed += 1
        result.parse_junk += parse_junk(draft)
        result.probe_errors += probe_error(draft)
    result.recall = len(result.found) / len(wanted) if wanted else 1.0
    result.precision = good / len(drafts) if drafts else 1.0
    result.fix_share = fixed / len(drafts) if drafts else 1.0
    return result


def raw_read(manifest: dict[str, Any]) -> float:
    """Seconds to read and ``json``-parse the fleet's files (the baseline: plain parsing)."""
    start = time.perf_counter()
    for path in recount.manifest_files(manifest):
        text = path.read_text(encoding="utf-8")
        if path.suffix == ".jsonl":
            for line in text.splitlines():
                if line.strip():
                    json.loads(line)
        elif path.suffix in (".json", ".traj"):
            json.loads(text)
    return time.perf_counter() - start


def run_engine(svc: Any, manifest: dict[str, Any]) -> tuple[list[Draft], int]:
    """The offline engine over every transcript in the store, as a run feeds it."""
    t = manifest["thresholds"]
    tasks = {"min_tasks": t["min_tasks"]} if "min_tasks" in t else {}  # else the engine's
    config = EngineConfig(Thresholds(min_sessions=t["min_sessions"],
                                     min_prevalence=t["min_prevalence"], **tasks))  # fmt: skip
    engine = Engine(config, [], dt.datetime.now(dt.UTC))
    cursor, count = None, 0
    while True:
        page = svc.list_transcripts(OWNER, STORE, limit=200, cursor=cursor)
        for info in page.items:
            view = svc.get_transcript(OWNER, STORE, info.id)
            engine.add(Session(info, view.events, view.meta))
            count += 1
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return engine.finish().drafts, count


def evaluate(
    name: str, work: Path | None = None, *, repeats: int = 1, trace: bool = False
) -> tuple[FleetScore, list[Draft]]:
    """Import fleet ``name`` into a scratch store under ``work`` (a temporary directory when
    None), dream offline ``repeats`` times (the passes are deterministic: the last one is
    scored) and read the raw files as often; ``trace``: one more pass under tracemalloc.
    Returns the score and the drafts."""
    import tracemalloc

    manifest = recount.load(name)
    if manifest.get("skip"):
        raise ValueError(f"fleet {name} is skipped: {manifest['skip']}")
    with tempfile.TemporaryDirectory(dir=work) as tmp:
        svc = memdir.open(f"sqlite:///{Path(tmp) / 'fleet.db'}", create=True)
        try:
            svc.create_store(OWNER, STORE)
            sources = [Source.from_path(p) for p in recount.manifest_files(manifest)]
            start = time.perf_counter()
            report = svc.import_transcripts(OWNER, STORE, sources)
            import_s = time.perf_counter() - start
            if report.failed:
                raise RuntimeError(f"{name}: {len(report.failed)} files failed to import: "
                                   f"{report.failed[:3]}")  # fmt: skip
            times, raw = [], []
            for _ in range(max(1, repeats)):
                start = time.perf_counter()
                drafts, count = run_engine(svc, manifest)
                times.append(time.perf_counter() - start)
                raw.append(raw_read(manifest))
            peak = None
            if trace:
                tracemalloc.start()
                base = tracemalloc.get_traced_memory()[0]
                run_engine(svc, manifest)
                peak = tracemalloc.get_traced_memory()[1] - base
                tracemalloc.stop()
        finally:
            svc.db.close()
    result = score(manifest, drafts, count)
    result.import_s, result.dream_times, result.raw_times = import_s, times, raw
    result.peak_bytes = peak
    return result, drafts


def fleets() -> list[str]:
    """The manifests that describe a fleet to dream on (skipped sets left out)."""
    return [n for n in recount.names() if not recount.load(n).get("skip")]


def main(argv: list[str]) -> int:
    for name in argv or fleets():
        result, drafts = evaluate(name)
        print(result.line())
        for draft in drafts:
            p = draft.pattern
            print(f"   {p.sessions:>4}  {p.id[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
