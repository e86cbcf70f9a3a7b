"""How much the time of search, grep, glob, tree and log says about documents a caller cannot read.

Usage::

    python benchmarks/search_leak.py [--readable N] [--hidden H] [--factor F] [--json OUT]

An agent reads ``/projects/alpha/**`` of store ``mine``, which holds ``N`` files it may read.
Three databases hold the same readable files and differ only in what the agent cannot read:

- ``base``: ``H`` files under ``/projects/beta/`` of ``mine`` and ``H`` files in store ``theirs``;
- ``scope x F``: ``F·H`` files under ``/projects/beta/`` (another scope of the same store);
- ``store x F``: ``F·H`` files in store ``theirs`` (another store).

Hidden files use the same vocabulary as readable ones, so every query term is also common
among them. The same calls run against each database, interleaved in chunks; the table shows
p50/p95 per operation and database, and the ratio of each p50 to ``base``'s — the residual
timing signal (1.00 = none). Results are checked identical across the databases (they must
be: nothing the agent may read differs).

Target (reported, not enforced): the ratios stay near 1 for every operation — the cost
follows what the caller may read. (Search's per-term index scans still cover the whole
index; the report says how much that shows.)
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _bulk import MemdirLoader, materialise
from _common import Stats, fmt, format_table, write_json

import memdir
from memdir import OWNER, MemoryService, Principal, Provenance

AGENT = Principal("agent:alpha", projects=("alpha",))
VOCAB = [f"w{i}" for i in range(2000)]
QUERIES = ["w1 w2", "w3", "w1500 w1700 w42", "w7 w8 w9 w10", "w1999"]


def _text(rng: random.Random) -> str:
    words = [VOCAB[min(int(rng.paretovariate(1.0)) - 1, len(VOCAB) - 1)] for _ in range(60)]
    return " ".join(words) + "\n"


def _load(svc: MemoryService, store: str, paths: list[str], seed: int) -> None:
    rng = random.Random(seed)
    texts = [_text(rng) for _ in paths]
    loader = MemdirLoader(svc, store, Provenance(source_kind="import"), lambda i, _r: texts[i])
    for lo in range(0, len(paths), 500):
        steps = [(i, 0) for i in range(lo, min(lo + 500, len(paths)))]
        loader.add_commit(materialise(steps, paths, lambda i, _r: texts[i]))
    loader.finish()


def build(where: Path, name: str, readable: int, same: int, other: int) -> MemoryService:
    svc = memdir.open(f"sqlite:///{where / (name + '.db')}", create=True)
    svc.create_store(OWNER, "mine")
    svc.create_store(OWNER, "theirs")
    svc.add_principal(OWNER, AGENT.id, projects=AGENT.projects)
    mine = [f"/projects/alpha/t{i % 8}/f{i}.md" for i in range(readable)]
    mine += [f"/projects/beta/t{i % 8}/f{i}.md" for i in range(same)]
    _load(svc, "mine", mine, seed=1)  # the readable files' text is the same in every database
    _load(svc, "theirs", [f"/projects/alpha/t{i % 8}/g{i}.md" for i in range(other)], seed=2)
    return svc


def operations(svc: MemoryService) -> dict[str, Callable[[int], Any]]:
    agent = svc.resolve(AGENT.id)
    return {
        "search": lambda i: svc.search(agent, "mine", QUERIES[i % len(QUERIES)]),
        "grep literal": lambda i: svc.grep(agent, "mine", "w1999", limit=10_000),
        "grep regex": lambda i: svc.grep(agent, "mine", r"w1[0-9]{3}\b", limit=10_000),
        "glob": lambda i: svc.glob(agent, "mine", "/projects/*/t3/*.md"),
        "tree": lambda i: svc.ls(agent, "mine", "/", depth=None),
        "log": lambda i: [
            [(v.path, v.version) for v in c.changes] for c in svc.history(agent, "mine", limit=50)
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readable", type=int, default=1000)
    parser.add_argument("--hidden", type=int, default=1000)
    parser.add_argument("--factor", type=int, default=10)
    parser.add_argument("--calls", type=int, default=60, help="timed calls per operation")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    n, h, f = args.readable, args.hidden, args.factor
    with tempfile.TemporaryDirectory(prefix="memdir-leak-") as tmp:
        started = time.perf_counter()
        dbs = {
            "base": build(Path(tmp), "base", n, h, h),
            f"scope x{f}": build(Path(tmp), "scope", n, h * f, h),
            f"store x{f}": build(Path(tmp), "store", n, h, h * f),
        }
        print(f"loaded {len(dbs)} databases in {time.perf_counter() - started:.1f}s")
        ops = {name: operations(svc) for name, svc in dbs.items()}
        latencies: dict[tuple[str, str], list[float]] = {}
        mismatches: list[str] = []
        for op in ops["base"]:
            reference = [repr(ops["base"][op](i)) for i in range(len(QUERIES))]
            for name in dbs:
                if [repr(ops[name][op](i)) for i in range(len(QUERIES))] != reference:
                    mismatches.append(f"{op} on {name}")
            order = list(dbs)
            for chunk in range(0, args.calls, 10):
                order.reverse()  # alternate who goes first
                for name in order:
                    times = latencies.setdefault((op, name), [])
                    for i in range(chunk, min(chunk + 10, args.calls)):
                        began = time.perf_counter()
                        ops[name][op](i)
                        times.append(time.perf_counter() - began)
        for svc in dbs.values():
            svc.db.close()
    rows: list[list[str]] = []
    figures: dict[str, Any] = {}
    for op in ops["base"]:
        base = Stats.of(latencies[(op, "base")])
        for name in dbs:
            stats = Stats.of(latencies[(op, name)])
            ratio = stats.p50_ms / base.p50_ms
            rows.append([op, name, fmt(stats.p50_ms, 3), fmt(stats.p95_ms, 3), fmt(ratio)])
            figures[f"{op} / {name}"] = {**stats.to_dict(), "p50_ratio": ratio}
    print(f"{n} readable files; hidden: {h} (base) or {h * f} (x{f}) in the scope or the store")
    print(format_table(["operation", "database", "p50 ms", "p95 ms", "p50 / base"], rows))
    print("results identical across databases: " + ("yes" if not mismatches else "NO"))
    for what in mismatches:
        print(f"  differs: {what}")
    if args.json:
        write_json(args.json, {"readable": n, "hidden": h, "factor": f, "figures": figures})
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
