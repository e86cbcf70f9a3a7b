"""The leak oracle's long profile: many random worlds, many operations each, every finding.

Usage::

    python benchmarks/leak_oracle.py [--cases 40] [--operations 80] [--seed S] [--json OUT]

Runs the world-building and judging of ``tests/test_leak_oracle.py`` (modules
``tests/leak_*.py``) for ``--cases`` seeds, ``--operations`` random calls each, and prints the
cases and operations run and every distinct finding — one line per (operation, surface, kind of
leak), with how many cases hit it and one example. Exit status 1 when anything leaked, so it can
gate a long CI job; ``--json`` writes the same report as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from leak_check import Finding, run_case


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=40, help="worlds to build")
    parser.add_argument("--operations", type=int, default=80, help="random calls per world")
    parser.add_argument("--seed", type=int, default=None, help="first seed (default: random)")
    parser.add_argument("--json", type=Path, default=None, help="write the report here")
    args = parser.parse_args(argv)
    first = args.seed if args.seed is not None else random.SystemRandom().randrange(2**32)
    hits: dict[tuple[str, str, str, str], tuple[Finding, list[int]]] = {}
    operations = 0
    started = time.perf_counter()
    for n in range(args.cases):
        seed = first + n
        with tempfile.TemporaryDirectory(prefix="memdir-leak-") as tmp:
            oracle = run_case(Path(tmp), random.Random(seed), args.operations)
        operations += oracle.cases
        for key, finding in oracle.findings.items():
            hits.setdefault(key, (finding, []))[1].append(seed)
        found = len(oracle.findings)
        print(f"case {n + 1}/{args.cases} (seed {seed}): {oracle.cases} operations, "
              f"{found} findings, {len(hits)} distinct so far", flush=True)  # fmt: skip
    elapsed = time.perf_counter() - started
    print(f"\n{args.cases} cases, {operations} operations judged in {elapsed:.0f} s; "
          f"{len(hits)} distinct findings")  # fmt: skip
    report: list[dict[str, Any]] = []
    for key in sorted(hits):
        finding, seeds = hits[key]
        print(f"- [{len(seeds)} cases, seed {seeds[0]}] {finding}")
        entry = {"op": finding.op, "surface": finding.surface, "kind": finding.kind}
        report.append({**entry, "what": finding.what, "example": finding.example, "seeds": seeds})
    if args.json is not None:
        summary = {"cases": args.cases, "operations": operations, "first_seed": first,
                   "seconds": round(elapsed, 1), "findings": report}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=2) + "\n")
    return 1 if hits else 0


if __name__ == "__main__":
    sys.exit(main())
