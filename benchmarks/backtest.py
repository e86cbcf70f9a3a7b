"""Backtest every real fleet in ../shared/data/transcripts/: coverage, the oracle bound and the
quality checks, with the time a plain offline dream over the same sessions takes beside it.

Usage: ``python benchmarks/backtest.py [--split 0.5] [--min-sessions N] [--fleet NAME]``.

Each fleet is imported with the real importers into a fresh SQLite store, then backtested
(:meth:`memdir.service.MemoryService.backtest`): sessions ordered by ``started_at`` (import
order where a fleet has none — the ``order`` column says so), dream over the earlier part,
accept everything into a scratch copy, mine the later part. ``min_sessions`` defaults to 2 on
these small fleets (most have tens of sessions), and ``min_prevalence`` to 0 (then every
pattern the bound counts is proposed unless memory or a stronger pattern explains it: coverage
meets the bound; ``--min-prevalence 0.02``, the default of a run, shows the gap). Time columns:
p50 / p95 over ``--repeat`` runs of the backtest and, as the raw baseline measured in the same
run, of a plain ``dream --dry-run`` over the same sessions.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import memdir
from memdir import OWNER
from memdir.dreams import DreamConfig
from memdir.transcripts.reader import sources_from_paths

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
FLEETS = ("tau2-leaderboard", "tau-bench-airline", "claude-code-happy-cli", "claude-code-samples",
          "swe-agent-trajectories", "openhands-samples", "aider-chat-history",
          "codex-cli-samples")  # fmt: skip
CODING = ("claude-code-happy-cli", "swe-agent-trajectories", "openhands-samples",
          "aider-chat-history")  # fmt: skip


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_fleet(
    name: str, split: float, min_sessions: int, repeat: int, prevalence: float = 0.0
) -> dict[str, Any] | None:
    folder = DATA / name
    if not folder.is_dir():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        svc = memdir.open(f"sqlite:///{Path(tmp) / 'm.db'}", create=True)
        svc.create_store(OWNER, "default")
        sources, _ = sources_from_paths([str(folder)])
        imported = svc.import_transcripts(OWNER, "default", sources)
        if imported.sessions < 2:
            svc.db.close()
            return {"fleet": name, "sessions": imported.sessions, "skipped": "fewer than 2"}
        config = DreamConfig.build(min_sessions=min_sessions, min_prevalence=prevalence)
        times, raw = [], []
        run = None
        for _ in range(repeat):
            began = time.perf_counter()
            run = svc.backtest(OWNER, "default", config, split=split)
            times.append(time.perf_counter() - began)
            began = time.perf_counter()
            svc.dream(OWNER, "default", replace(config, dry_run=True))
            raw.append(time.perf_counter() - began)
        svc.db.close()
    assert run is not None and run.report is not None
    back, quality = run.report["backtest"], run.report["quality"]
    return {
        "fleet": name, "sessions": imported.sessions, "order": back["order"],
        "earlier": back["split"]["earlier"], "later": back["split"]["later"],
        "events": back["events"], "cost": back["cost"], "coverage": back["coverage"],
        "bound": back["bound"], "of_bound": back["of_bound"],
        "proposals": len(run.report["proposed"]), "score": quality["score"],
        "parse": quality["parse_failures"], "loops": back["feedback_loops"],
        "checks": quality["checks"], "p50": statistics.median(times), "p95": _pct(times, 0.95),
        "raw_p50": statistics.median(raw), "raw_p95": _pct(raw, 0.95),
        "top": back["patterns"][:5],
    }  # fmt: skip


def run_all(
    fleets: tuple[str, ...] | list[str] = FLEETS,
    split: float = 0.5,
    min_sessions: int = 2,
    repeat: int = 3,
    prevalence: float = 0.0,
) -> list[dict[str, Any]]:
    """One row per fleet that exists (benchmarks/dream.py reports them beside its scores)."""
    return [r for name in fleets
            if (r := run_fleet(name, split, min_sessions, repeat, prevalence))]  # fmt: skip


def report_backtests(rows: list[dict[str, Any]], verbose: bool = False) -> None:
    """The backtest table (and with ``verbose`` each fleet's checks and top patterns)."""
    head = (f"{'fleet':<24} {'sess':>5} {'early/late':>10} {'events':>6} {'turns':>6} "
            f"{'cover':>7} {'bound':>7} {'of bnd':>7} {'props':>5} {'score':>6} {'parse':>5} "
            f"{'loops':>5} {'bt p50/p95 s':>13} {'raw p50/p95 s':>14}  order")  # fmt: skip
    print(head)
    print("-" * len(head))
    for r in rows:
        if "skipped" in r:
            print(f"{r['fleet']:<24} {r['sessions']:>5}  skipped: {r['skipped']}")
            continue
        of = "-" if r["of_bound"] is None else f"{100 * r['of_bound']:.0f}%"
        print(f"{r['fleet']:<24} {r['sessions']:>5} {r['earlier']:>4}/{r['later']:<5} "
              f"{r['events']:>6} {r['cost']:>6} {100 * r['coverage']:>6.1f}% "
              f"{100 * r['bound']:>6.1f}% {of:>7} {r['proposals']:>5} "
              f"{r['score'] if r['score'] is not None else '-':>6} {r['parse']:>5} "
              f"{r['loops']:>5} {r['p50']:>6.2f}/{r['p95']:<6.2f} "
              f"{r['raw_p50']:>6.2f}/{r['raw_p95']:<7.2f}  {r['order']}")  # fmt: skip
    if verbose:
        for r in rows:
            if "skipped" in r:
                continue
            print(
                f"\n{r['fleet']}: checks failed "
                + ", ".join(f"{k} {v['failed']}" for k, v in r["checks"].items() if v["failed"])
                or "none"
            )
            for p in r["top"]:
                print(
                    f"  {p['cost']:>4} turns {p['events']:>3} events, covered {p['covered']:>3}"
                    f", in bound {p['in_bound']:>3}: {p['title'] or p['pattern']}"[:150]
                )
    coding = [r for r in rows if r["fleet"] in CODING and "skipped" not in r and r["bound"]]
    if coding:
        half = all(r["coverage"] >= 0.5 * r["bound"] for r in coding)
        print(f"\ncoding fleets with coverage >= half the bound: "
              f"{sum(r['coverage'] >= 0.5 * r['bound'] for r in coding)} of {len(coding)}"
              + ("" if half else "  (not all)"))  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--split", type=float, default=0.5)
    parser.add_argument("--min-sessions", type=int, default=2)
    parser.add_argument("--min-prevalence", type=float, default=0.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--fleet", action="append")
    parser.add_argument("--verbose", action="store_true", help="Top patterns and checks too.")
    args = parser.parse_args()
    rows = run_all(args.fleet or FLEETS, args.split, args.min_sessions, args.repeat,
                   args.min_prevalence)  # fmt: skip
    report_backtests(rows, args.verbose)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
