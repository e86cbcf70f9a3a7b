"""Offline dream: recall and precision of planted patterns, prevalence error, speed, memory.

Usage::

    python benchmarks/dream.py [--sessions N] [--seeds 1,2,3] [--large N] [--quick]
                               [--verbose] [--json OUT]

For each seed, :func:`memdir.dream.fleet.generate` writes a synthetic fleet of ``--sessions``
(default 2,000) sessions in a temporary directory — Claude Code session files, Codex CLI
rollouts, mini-swe-agent trajectories and τ-bench-shaped OpenAI chat result files, up to 42
agents, 8 projects, 12 users, 10-80 events each, six weeks, with the classic catalogue of 18
planted patterns (13 meant to be found, 5 planted just below the default thresholds) and the
real-world shapes of ``memdir.dream.fleet_shapes`` (5 to find, 2 junk shapes that must not be
proposed) among realistic noise; see the module docstrings. The first table scores the classic
catalogue (``score(..., shapes=False)``), the second the same dreams with the shapes, with the
share of drafts naming the planted fix (``fix_share``), duplicates and junk. The fleet is
imported into a fresh SQLite database with the real importers
(``MemoryService.import_transcripts``) and its memory files (a stale note, an expired one, two
near-duplicates, two healthy ones) are written.
Then, in the same run:

- **raw read** (the baseline): stdlib ``sqlite3`` reads every transcript's events, one
  ``SELECT`` per transcript ordered by ``seq`` (the columns a dream uses, not ``raw``) —
  the floor of merely reading what the dream reads;
- **dream**: the offline engine (``memdir.dream.engine``) fed the way a run feeds it —
  ``list_transcripts`` pages, ``get_transcript`` per transcript, ``Engine.add(Session)``, then
  ``Engine.finish()`` (reduce, decide, drafts) — timed end to end: transcripts/s is sessions
  over that wall time.

Scoring (``memdir.dream.fleet.score``) takes the patterns of the drafts (what would be
proposed): **recall** = planted above-threshold patterns matched / planted above-threshold
patterns; **precision** = proposed patterns matching a planted above-threshold pattern /
proposed patterns (matching a below-threshold one, or nothing planted, counts against it);
**prevalence error** = |reported - true| prevalence in percentage points over the found ones.

Memory: a second dream pass over the first seed's fleet under ``tracemalloc`` (peak of Python
allocations above the level at the start of the pass), and the same on a ``--large`` fleet
(default 8,000 sessions): flat memory means a ratio near 1 although the fleet is 4x larger.

**Real fleets** (``--real``, on by default when ``../shared/data/transcripts/`` exists): every
fleet with a ground-truth manifest in ``tests/fleets/`` is imported into a scratch SQLite store
and dreamed offline ``--repeats`` times by ``tests/fleets/evaluate.py``, which scores the drafts
against the manifest — recall, precision, prevalence error, share of proposals whose draft
names the fix, duplicates (see that module) — beside the raw read baseline of the same run
(plain ``json`` parsing of the same files, as often), with p50/p95 of the transcripts/s over the
repeats and the peak traced memory of one more pass. The synthetic fleet's rows (above) give
the same figures for the planted patterns; its scale rows give the memory growth.

Targets (mean over the seeds): recall >= 0.9, precision >= 0.8, mean and max prevalence error
<= 2 pp, >= 200 transcripts/s, peak memory at the large fleet <= 1.5x the small one.
``--quick``: 500 sessions, one seed, a 2,000-session large fleet.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shutil
import sqlite3
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import fmt, format_table, percentile, write_json

import memdir
from memdir import OWNER
from memdir.dream.fleet import Fleet, Score, fix_share, generate, load, score
from memdir.dream.model import MemoryFile, Pattern, Session

STORE = "dream"
TARGET_RECALL = 0.9
TARGET_PRECISION = 0.8
TARGET_ERROR_PP = 2.0
TARGET_RATE = 200.0
TARGET_MEMORY_RATIO = 1.5
_EVENT_COLUMNS = "kind, role, ts, name, call_id, text, input, is_error, exit_code, duration_ms"


@dataclass
class Loaded:
    """A fleet in a fresh SQLite database."""

    fleet: Fleet
    db_path: Path
    svc: Any
    import_s: float
    events: int


@dataclass
class DreamPass:
    """One dream's figures (``read_s``/``mine_s``/``finish_s``: NaN when not measured)."""

    wall_s: float
    cpu_s: float
    read_s: float
    mine_s: float
    finish_s: float
    sessions: int
    patterns: int
    kept: int
    proposed: list[Pattern] = field(default_factory=list)
    peak_bytes: int | None = None
    drafts: list[Any] = field(default_factory=list)  # the engine's Draft values (not the service's)


def _end() -> dt.datetime:
    """The fleet ends today (UTC, midnight), so "recent" means the same for every entry point."""
    today = dt.datetime.now(dt.UTC).date()
    return dt.datetime(today.year, today.month, today.day, tzinfo=dt.UTC)


def prepare(work: Path, seed: int, sessions: int) -> Loaded:
    out = work / f"fleet-{seed}-{sessions}"
    fleet = generate(seed, sessions, out_dir=out, end=_end())
    db_path = work / f"memdir-{seed}-{sessions}.db"
    svc = memdir.open(f"sqlite:///{db_path}", create=True)
    svc.create_store(OWNER, STORE)
    start = time.perf_counter()
    report = load(svc, OWNER, STORE, fleet)
    took = time.perf_counter() - start
    if report.failed or report.skipped or report.new != sessions:
        raise SystemExit(f"fleet import went wrong: {report.new} of {sessions} new, "
                         f"{len(report.skipped)} skipped, {len(report.failed)} failed")  # fmt: skip
    shutil.rmtree(out)  # the manifest stays in memory; the database holds the sessions
    return Loaded(fleet, db_path, svc, took, report.events)


def memory_snapshot(loaded: Loaded) -> list[MemoryFile]:
    files = []
    for path in sorted(loaded.fleet.memory):
        view = loaded.svc.read(OWNER, STORE, path)
        files.append(MemoryFile(path, view.content, view.sha256))
    return files


def _sessions(svc: Any, timer: list[float]) -> Iterator[Session]:
    """Every readable transcript as a Session, newest first; reading time goes to ``timer``."""
    cursor = None
    while True:
        start = time.perf_counter()
        page = svc.list_transcripts(OWNER, STORE, limit=200, cursor=cursor)
        timer[0] += time.perf_counter() - start
        for info in page.items:
            start = time.perf_counter()
            view = svc.get_transcript(OWNER, STORE, info.id)
            timer[0] += time.perf_counter() - start
            yield Session(info, view.events, view.meta)  # with its task, as a run reads it
        if page.next_cursor is None:
            return
        cursor = page.next_cursor


def _traced(trace: bool) -> int:
    if not trace:
        return 0
    tracemalloc.start()
    return tracemalloc.get_traced_memory()[0]


def _peak(trace: bool, base: int) -> int | None:
    if not trace:
        return None
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return peak


def dream_engine(loaded: Loaded, *, trace: bool = False) -> DreamPass:
    """The engine fed through the service API (list, get per transcript); ``trace``:
    under tracemalloc (slower)."""
    from memdir.dream.engine import Engine, EngineConfig

    memory = memory_snapshot(loaded)
    base = _traced(trace)
    read = [0.0]
    mine = 0.0
    count = 0
    wall, cpu = time.perf_counter(), time.process_time()
    engine = Engine(EngineConfig(), memory, loaded.fleet.now)
    for session in _sessions(loaded.svc, read):
        start = time.perf_counter()
        engine.add(session)
        mine += time.perf_counter() - start
        count += 1
    start = time.perf_counter()
    result = engine.finish()
    finish = time.perf_counter() - start
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = _peak(trace, base)
    proposed = [draft.pattern for draft in result.drafts]
    return DreamPass(wall, cpu, read[0], mine, finish, count, len(result.patterns),
                     len(result.kept), proposed, peak, list(result.drafts))  # fmt: skip


def patterns_from_report(report: dict[str, Any]) -> list[Pattern]:
    """The proposed patterns of a run's JSON report (title, subject and statistics)."""
    out = []
    for entry in report.get("proposed", []):
        miner, _, key = str(entry["pattern"]).partition(":")
        out.append(Pattern(miner, key, entry["title"], entry["subject"],
                           sessions=int(entry["sessions"]),
                           sessions_selected=int(entry["sessions_selected"])))  # fmt: skip
    return out


def dream_service(loaded: Loaded, *, trace: bool = False) -> DreamPass:
    """``MemoryService.dream`` offline: selection, mining, reduce, proposals in the queue."""
    from memdir.dreams import DreamConfig

    base = _traced(trace)
    wall, cpu = time.perf_counter(), time.process_time()
    run = loaded.svc.dream(OWNER, STORE, DreamConfig())
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    peak = _peak(trace, base)
    report = run.report or {}
    proposed = patterns_from_report(report)
    return DreamPass(wall, cpu, math.nan, math.nan, math.nan, run.processed,
                     int(report.get("patterns_found", 0)), len(proposed), proposed,
                     peak)  # fmt: skip


def has_service_run() -> bool:
    return hasattr(memdir.MemoryService, "dream")


def raw_read(db_path: Path) -> tuple[float, int, int]:
    """Read every transcript's events with stdlib sqlite3; returns (seconds, transcripts, rows)."""
    conn = sqlite3.connect(db_path)
    try:
        start = time.perf_counter()
        ids = [r[0] for r in conn.execute("SELECT id FROM transcripts ORDER BY started_at DESC")]
        rows = 0
        query = (
            f"SELECT {_EVENT_COLUMNS} FROM transcript_events WHERE transcript_id = ? ORDER BY seq"
        )
        for tid in ids:
            rows += len(conn.execute(query, (tid,)).fetchall())
        return time.perf_counter() - start, len(ids), rows
    finally:
        conn.close()


def _describe(patterns: list[Pattern], ids: list[str]) -> list[str]:
    by_id = {p.id: p for p in patterns}
    return [f"{by_id[i].sessions:>5} sessions  {by_id[i].title[:100]}" for i in ids if i in by_id]


ENTRIES = {"engine": dream_engine, "service": dream_service}


def run_seed(loaded: Loaded, entries: list[str], verbose: bool) -> list[dict[str, Any]]:
    """Raw read, each entry point's dream, raw read again (the baseline is the mean of both
    reads), and each dream's score."""
    seed, sessions = loaded.fleet.seed, loaded.fleet.sessions
    planted = loaded.fleet.planted
    raw_before = raw_read(loaded.db_path)
    passes = [(entry, ENTRIES[entry](loaded)) for entry in entries]
    raw_after = raw_read(loaded.db_path)
    raw_s = (raw_before[0] + raw_after[0]) / 2
    rows = []
    for entry, passed in passes:
        result: Score = score(passed.proposed, planted, shapes=False)  # the classic catalogue
        shaped: Score = score(passed.proposed, planted)  # with the real-world shapes
        if verbose:
            print(f"\nseed {seed}, {entry}: missed {result.missed or '-'}")
            for title, ids in (("proposed, planted below threshold", result.below_proposed),
                               ("proposed, nothing planted", result.unmatched)):  # fmt: skip
                for line in _describe(passed.proposed, ids):
                    print(f"  {title}: {line}")
        rows.append({
            "seed": seed, "entry": entry, "sessions": sessions, "events": loaded.events,
            "planted_above": sum(p["above"] for p in planted),
            "planted_below": sum(not p["above"] for p in planted),
            "import_s": loaded.import_s, "patterns": passed.patterns, "kept": passed.kept,
            "proposed": len(passed.proposed), "recall": result.recall,
            "precision": result.precision, "missed": result.missed,
            "below_proposed": result.below_proposed, "unmatched": result.unmatched,
            "mean_error_pp": result.mean_error_pp, "max_error_pp": result.max_error_pp,
            "prevalence_errors_pp": result.prevalence_errors,
            "shapes_recall": shaped.recall, "shapes_precision": shaped.precision,
            "shapes_missed": [m for m in shaped.missed if m not in result.missed],
            "junk": shaped.junk, "duplicates": sum(shaped.duplicates.values()),
            "fix_share": fix_share(passed.drafts, planted) if passed.drafts else math.nan,
            "dream_s": passed.wall_s, "cpu_s": passed.cpu_s, "read_s": passed.read_s,
            "mine_s": passed.mine_s, "finish_s": passed.finish_s,
            "rate": passed.sessions / passed.wall_s, "cpu_rate": passed.sessions / passed.cpu_s,
            "raw_read_s": raw_s, "raw_rate": raw_before[1] / raw_s,
        })  # fmt: skip
    return rows


def run_memory(work: Path, first: Loaded, large: int, entry: str) -> list[dict[str, Any]]:
    """Peak traced memory of a dream over ``first`` and over a ``large`` fleet of its seed."""
    out = []
    for sessions in (first.fleet.sessions, large):
        loaded = first if sessions == first.fleet.sessions else None
        if loaded is None:
            print(f"generating and importing {sessions:,} sessions ...", file=sys.stderr)
            loaded = prepare(work, first.fleet.seed, sessions)
        print(f"memory: {sessions:,} sessions under tracemalloc ...", file=sys.stderr)
        try:
            passed = ENTRIES[entry](loaded, trace=True)
        finally:
            if loaded is not first:
                loaded.svc.db.close()
        out.append({"sessions": sessions, "entry": entry, "peak_bytes": passed.peak_bytes,
                    "patterns": passed.patterns, "traced_s": passed.wall_s})  # fmt: skip
    return out


def _mean(rows: list[dict[str, Any]], key: str) -> float:
    return sum(float(r[key]) for r in rows) / len(rows)


_KEYS = ("recall", "precision", "mean_error_pp", "rate", "cpu_rate", "raw_rate", "dream_s",
         "read_s", "mine_s", "shapes_recall", "shapes_precision", "fix_share",
         "duplicates")  # fmt: skip


def _table(rows: list[dict[str, Any]], entries: list[str]) -> dict[str, dict[str, float]]:
    headers = ["seed", "entry", "sessions", "planted", "proposed", "recall", "precision",
               "prev err pp", "max pp", "dream s", "read s", "mine s", "transcripts/s",
               "per CPU s", "raw read/s", "x raw"]  # fmt: skip
    table = [[
        str(r["seed"]), r["entry"], f"{r['sessions']:,}",
        f"{r['planted_above']}+{r['planted_below']}", str(r["proposed"]), fmt(r["recall"]),
        fmt(r["precision"]), fmt(r["mean_error_pp"]), fmt(r["max_error_pp"]), fmt(r["dream_s"]),
        fmt(r["read_s"]), fmt(r["mine_s"]), fmt(r["rate"], 0), fmt(r["cpu_rate"], 0),
        fmt(r["raw_rate"], 0), fmt(r["rate"] / r["raw_rate"]),
    ] for r in rows]  # fmt: skip
    means: dict[str, dict[str, float]] = {}
    for entry in entries:
        mine = [r for r in rows if r["entry"] == entry]
        m = {k: _mean(mine, k) for k in _KEYS}
        m["max_error_pp"] = max(r["max_error_pp"] for r in mine)
        means[entry] = m
        table.append(["mean", entry, "", "", "", fmt(m["recall"]), fmt(m["precision"]),
                      fmt(m["mean_error_pp"]), fmt(m["max_error_pp"]), fmt(m["dream_s"]),
                      fmt(m["read_s"]), fmt(m["mine_s"]), fmt(m["rate"], 0),
                      fmt(m["cpu_rate"], 0), fmt(m["raw_rate"], 0),
                      fmt(m["rate"] / m["raw_rate"])])  # fmt: skip
    print("\nOffline dream on synthetic fleets, classic catalogue (planted: above+below "
          "threshold; SQLite)")  # fmt: skip
    print(format_table(headers, table))
    shape_rows = [[
        str(r["seed"]), r["entry"], fmt(r["shapes_recall"]), fmt(r["shapes_precision"]),
        fmt(r["fix_share"]), str(r["duplicates"]), str(len(r["junk"])),
        ", ".join(r["shapes_missed"]) or "-",
    ] for r in rows]  # fmt: skip
    print("\nThe same dreams scored with the real-world shapes (memdir.dream.fleet_shapes): "
          "fix share = drafts naming the planted fix")  # fmt: skip
    print(format_table(["seed", "entry", "recall", "precision", "fix share", "dupes", "junk",
                        "shapes missed"], shape_rows))  # fmt: skip
    return means


def report(
    rows: list[dict[str, Any]], memory: list[dict[str, Any]], entries: list[str]
) -> list[tuple[str, bool, str]]:
    """Print the tables and the PASS/FAIL lines (targets on the last entry: the service's run
    when there is one)."""
    means = _table(rows, entries)
    entry = entries[-1]
    m = means[entry]
    verdicts = [
        ("recall", m["recall"] >= TARGET_RECALL,
         f"{entry}: mean recall {m['recall']:.3f} (target >= {TARGET_RECALL})"),
        ("precision", m["precision"] >= TARGET_PRECISION,
         f"{entry}: mean precision {m['precision']:.3f} (target >= {TARGET_PRECISION})"),
        ("prevalence", m["max_error_pp"] <= TARGET_ERROR_PP,
         f"{entry}: prevalence error mean {m['mean_error_pp']:.2f} pp, max "
         f"{m['max_error_pp']:.2f} pp (target <= {TARGET_ERROR_PP} pp)"),
        ("throughput", m["rate"] >= TARGET_RATE,
         f"{entry}: {m['rate']:,.0f} transcripts/s wall-clock, {m['cpu_rate']:,.0f} per CPU "
         f"second (raw read {m['raw_rate']:,.0f}/s; target >= {TARGET_RATE:,.0f})"),
    ]  # fmt: skip
    if len(memory) >= 2:
        mem_table = [[f"{m['sessions']:,}", fmt(m["peak_bytes"] / 1e6), f"{m['patterns']:,}",
                      fmt(m["peak_bytes"] / memory[0]["peak_bytes"])] for m in memory]  # fmt: skip
        print(f"\nPeak traced memory of the dream ({memory[0]['entry']}; tracemalloc, above "
              "its level at the start)")  # fmt: skip
        print(format_table(["sessions", "peak MB", "patterns", "x smallest"], mem_table))
        ratio = memory[-1]["peak_bytes"] / memory[0]["peak_bytes"]
        growth = memory[-1]["sessions"] / memory[0]["sessions"]
        verdicts.append(("memory", ratio <= TARGET_MEMORY_RATIO,
                         f"peak memory x{ratio:.2f} for a {growth:.0f}x larger fleet (target <= "
                         f"x{TARGET_MEMORY_RATIO})"))  # fmt: skip
    print()
    for _, ok, line in verdicts:
        print(f"{'PASS' if ok else 'FAIL'}: {line}")
    return verdicts


def run_real(repeats: int) -> list[dict[str, Any]]:
    """Each real fleet's score and timings (``tests/fleets/evaluate.py``), one row per fleet."""
    fleets_dir = Path(__file__).resolve().parents[1] / "tests" / "fleets"
    sys.path.insert(0, str(fleets_dir))
    import evaluate  # the real-fleet evaluation beside the manifests

    rows = []
    for name in evaluate.fleets():
        print(f"real fleet {name}: import and dream x{repeats} ...", file=sys.stderr)
        result, _ = evaluate.evaluate(name, repeats=repeats, trace=True)
        # p95 of the wall time (the slow tail), as transcripts/s
        rates = [result.sessions / percentile(result.dream_times, q) for q in (50, 95)]
        raw_rate = result.sessions / percentile(result.raw_times, 50)
        rows.append({
            "fleet": name, "sessions": result.sessions, "proposed": result.drafts,
            "recall": result.recall, "precision": result.precision,
            "max_error_pp": result.max_error_pp, "fix_share": result.fix_share,
            "duplicates": result.duplicates, "parse_junk": result.parse_junk,
            "probe_errors": result.probe_errors, "missed": result.missed,
            "unmatched": result.unmatched, "rate_p50": rates[0],
            "rate_p95": rates[1], "raw_rate_p50": raw_rate,
            "peak_bytes": result.peak_bytes, "import_s": result.import_s,
        })  # fmt: skip
    return rows


def report_real(rows: list[dict[str, Any]]) -> None:
    """The real-fleet table (the targets are the acceptance test's, not a verdict here)."""
    headers = ["fleet", "sessions", "proposed", "recall", "precision", "prev err pp", "fix share",
               "dupes", "junk", "probes", "transcripts/s p50", "at p95 time", "raw read/s p50",
               "peak MB"]  # fmt: skip
    table = [[
        r["fleet"], f"{r['sessions']:,}", str(r["proposed"]), fmt(r["recall"]),
        fmt(r["precision"]), fmt(r["max_error_pp"]), fmt(r["fix_share"]), str(r["duplicates"]),
        str(r["parse_junk"]), str(r["probe_errors"]), fmt(r["rate_p50"], 0),
        fmt(r["rate_p95"], 0), fmt(r["raw_rate_p50"], 0),
        fmt((r["peak_bytes"] or 0) / 1e6),
    ] for r in rows]  # fmt: skip
    print(
        "\nOffline dream on the real fleets, scored against tests/fleets/ manifests (targets: "
        "recall, precision >= 0.8, prevalence <= 2 pp, fix share 1, no dupes/junk/probes)"
    )
    print(format_table(headers, table))
    for r in rows:
        if r["missed"] or r["unmatched"]:
            print(f"  {r['fleet']}: missed {r['missed'] or '-'}; unmatched {r['unmatched'] or '-'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=2000, help="Sessions per fleet.")
    parser.add_argument("--seeds", default="1,2,3", help="Comma-separated fleet seeds.")
    parser.add_argument(
        "--large",
        type=int,
        default=8000,
        help="Sessions of the fleet whose peak memory is compared (0: skip).",
    )
    parser.add_argument(
        "--quick", action="store_true", help="500 sessions, one seed, a 2,000-session large fleet."
    )
    parser.add_argument(
        "--entry",
        choices=["engine", "service", "both"],
        help="The engine fed through the service API, the service's run, or "
        "both (default: both when the service has a run, else the engine).",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="List missed, below-threshold and unplanted proposals per seed.",
    )
    parser.add_argument(
        "--real",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Score the real fleets of tests/fleets/ (default: when the shared data exists).",
    )
    parser.add_argument(
        "--repeats", type=int, default=3, help="Dream passes per real fleet (p50/p95)."
    )
    parser.add_argument(
        "--backtest",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Backtest every real fleet too: coverage, the oracle bound and the quality checks "
        "(benchmarks/backtest.py; default: when the shared data exists).",
    )
    parser.add_argument("--json", dest="json_out", help="Also write the figures here.")
    args = parser.parse_args()  # fmt: skip
    # benchmarks/ must not shadow standard modules imported later (benchmarks/http_bench.py: http).
    here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if not p or Path(p).resolve() != here]
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    sessions, large = args.sessions, args.large
    if args.quick:
        sessions, seeds, large = 500, seeds[:1], 2000
    choice = args.entry or ("both" if has_service_run() else "engine")
    entries = ["engine", "service"] if choice == "both" else [choice]
    if "service" in entries and not has_service_run():
        print("FAIL: MemoryService has no dream run here (use --entry engine)")
        return 1
    work = Path(tempfile.mkdtemp(prefix="memdir-bench-dream-"))
    opened: list[Loaded] = []
    try:
        rows = []
        for seed in seeds:
            print(f"seed {seed}: generating and importing {sessions:,} sessions ...",
                  file=sys.stderr)  # fmt: skip
            opened.append(prepare(work, seed, sessions))
            rows.extend(run_seed(opened[-1], entries, args.verbose))
            if len(opened) > 1:
                opened.pop().svc.db.close()
        memory = run_memory(work, opened[0], large, entries[-1]) if large > sessions else []
    finally:
        for loaded in opened:
            loaded.svc.db.close()
        shutil.rmtree(work, ignore_errors=True)
    data = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
    real = run_real(args.repeats) if (data.is_dir() if args.real is None else args.real) else []
    verdicts = report(rows, memory, entries)
    if real:
        report_real(real)
    backtests: list[dict[str, Any]] = []
    if data.is_dir() if args.backtest is None else args.backtest:
        import importlib.util

        spec = importlib.util.spec_from_file_location("backtest", here / "backtest.py")
        assert spec is not None and spec.loader is not None
        backtest = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(backtest)
        print("\nBacktests of the real fleets (split 0.5, min-sessions 2, min-prevalence 0):")
        backtests = backtest.run_all(repeat=min(args.repeats, 3))
        backtest.report_backtests(backtests)
    if args.json_out:
        write_json(args.json_out, {
            "entries": entries, "seeds": rows, "memory": memory, "real": real,
            "backtests": [{k: v for k, v in r.items() if k != "top"} for r in backtests],
            "verdicts": {name: ok for name, ok, _ in verdicts},
        })  # fmt: skip
    return 0 if all(ok for _, ok, _ in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
