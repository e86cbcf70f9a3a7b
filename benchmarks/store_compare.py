"""Two checkouts of memdir on the store benchmark's workload, interleaved in one run.

Usage::

    python benchmarks/store_compare.py --before REV_OR_DIR [--after DIR] [--files 5000]
                                       [--ops 1000] [--queries 150] [--seed 1] [--json OUT]

``--before`` is a directory holding a checkout (its ``src/memdir``) or a git revision, which is
exported with ``git archive`` into a temporary directory; ``--after`` defaults to this
checkout. Each side runs in its own worker process (``PYTHONPATH=<side>/src``, so the two
``memdir`` packages never meet in one interpreter) holding a fresh SQLite store, loaded with
the same deterministic corpus as ``benchmarks/store.py`` (``Corpus``, ``file_path``,
``make_queries``); a raw SQLite baseline (``store.RawSQLite``) runs in this process. Then reads,
CAS overwrites and searches — all as the database owner, like ``benchmarks/store.py`` — run
in chunks of ``--chunk`` calls on the three sides in turn, the side that goes first rotating
each chunk, so machine noise falls on all of them alike. Each call is timed inside its worker
(the pipe is not measured). The table gives p50/p95 for raw, before and after, and
after / before.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BATCH = 500  # files per commit while loading (set-up, not measured)
WARM = 50  # calls per operation run untimed on every side first (their own items)


# --- the worker: one checkout's memdir, driven over stdin/stdout -----------------------------


def worker() -> None:  # pragma: no cover - runs in a subprocess
    """Answer one JSON request per line with one JSON line: ``{"t": [seconds, ...]}``."""
    import memdir
    from memdir import OWNER, Provenance, Write

    svc: Any = None
    sha: dict[str, str] = {}
    clock = time.perf_counter
    for line in sys.stdin:
        request = json.loads(line)
        op, args = request["op"], request.get("args")
        times: list[float] = []
        if op == "open":
            svc = memdir.open(f"sqlite:///{args}", create=True)
            svc.create_store(OWNER, "bench")
        elif op == "load":
            writes = [Write(p, c, if_absent=True) for p, c in args]
            done = svc.commit(OWNER, "bench", writes, Provenance(reason="benchmark load"))
            sha.update((r.path, r.sha256 or "") for r in done.results)
        elif op == "read":
            for path in args:
                start = clock()
                svc.read(OWNER, "bench", path)
                times.append(clock() - start)
        elif op == "cas":
            for path, content in args:
                start = clock()
                done = svc.write(OWNER, "bench", path, content, if_match=sha[path])
                times.append(clock() - start)
                sha[path] = done.results[0].sha256 or ""
        elif op == "search":
            found = []
            for text in args:
                start = clock()
                hits = svc.search(OWNER, "bench", text, limit=10)
                times.append(clock() - start)
                found.append([h.path for h in hits])
            print(json.dumps({"t": times, "hits": found}), flush=True)
            continue
        elif op == "close":
            svc.db.close()
            print(json.dumps({"t": []}), flush=True)
            return
        print(json.dumps({"t": times}), flush=True)


class Side:
    """One worker process over one checkout."""

    def __init__(self, name: str, root: Path) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(root / "src")}
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env, cwd=root,
        )  # fmt: skip

    def call(self, op: str, args: Any = None) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the {self.name} worker stopped (exit {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        try:
            self.call("close")
        finally:
            self.proc.wait(timeout=60)


def _checkout(spec: str, tmp: Path) -> Path:
    """A directory holding ``spec``'s ``src/memdir``: ``spec`` itself, or a git export."""
    path = Path(spec)
    if (path / "src" / "memdir").is_dir():
        return path.resolve()
    out = tmp / f"checkout-{spec.replace('/', '_')}"
    out.mkdir()
    repo = HERE.parent
    archive = subprocess.run(["git", "-C", str(repo), "archive", spec], check=True,
                             capture_output=True).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(out)], input=archive, check=True)
    return out


def _rotating(calls: Sequence[Callable[[Sequence[Any]], list[float]]], items: Sequence[Any],
              chunk: int) -> list[list[float]]:  # fmt: skip
    """Each chunk of ``items`` through every side, the first side rotating per chunk."""
    out: list[list[float]] = [[] for _ in calls]
    for index, start in enumerate(range(0, len(items), chunk)):
        part = items[start : start + chunk]
        for k in range(len(calls)):
            side = (index + k) % len(calls)
            out[side].extend(calls[side](part))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="a checkout directory or git revision")
    parser.add_argument("--after", default=str(HERE.parent), help="default: this checkout")
    parser.add_argument("--files", type=int, default=5000)
    parser.add_argument("--ops", type=int, default=1000, help="reads and CAS overwrites each")
    parser.add_argument("--queries", type=int, default=150, help="searches (1/3 per band)")
    parser.add_argument("--chunk", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(HERE))
    from _common import Stats, format_table, write_json
    from store import CasItem, Corpus, Doc, RawSQLite, file_path, make_queries

    corpus = Corpus(args.seed)
    with tempfile.TemporaryDirectory(prefix="memdir-compare-") as tmp_name:
        tmp = Path(tmp_name)
        roots = {"before": _checkout(args.before, tmp), "after": _checkout(args.after, tmp)}
        sides = {name: Side(name, root) for name, root in roots.items()}
        raw = RawSQLite(tmp / "raw.db")
        try:
            started = time.perf_counter()
            docs = [Doc(file_path(i, args.files), corpus.content(i)) for i in range(args.files)]
            for name, side in sides.items():
                side.call("open", str(tmp / f"{name}.db"))
            for start in range(0, len(docs), BATCH):
                batch = docs[start : start + BATCH]
                for side in sides.values():
                    side.call("load", [[d.path, d.content] for d in batch])
                raw.bulk_create(batch)
            print(f"loaded {args.files} files on each side in "
                  f"{time.perf_counter() - started:.0f} s", flush=True)  # fmt: skip
            rng = random.Random(f"compare:{args.seed}")
            paths = [d.path for d in docs]
            index_of = {p: i for i, p in enumerate(paths)}
            reads = rng.choices(paths, k=WARM + args.ops)
            revs: dict[str, int] = {}
            cas: list[list[str]] = []
            for path in rng.choices(paths, k=WARM + args.ops):
                revs[path] = revs.get(path, 0) + 1
                cas.append([path, corpus.content(index_of[path], revs[path])])
            queries = [q.text for q in make_queries(corpus, WARM + args.queries, args.seed)]
            hits: dict[str, list[list[str]]] = {}

            def remote(name: str, op: str) -> Callable[[Sequence[Any]], list[float]]:
                def run(part: Sequence[Any]) -> list[float]:
                    answer = sides[name].call(op, list(part))
                    if "hits" in answer:
                        hits.setdefault(name, []).extend(answer["hits"])
                    times: list[float] = answer["t"]
                    return times

                return run

            def local(fn: Callable[[Any], object], wrap: Callable[[Any], Any]) -> Any:
                def run(part: Sequence[Any]) -> list[float]:
                    times = []
                    for item in part:
                        value = wrap(item)
                        start = time.perf_counter()
                        fn(value)
                        times.append(time.perf_counter() - start)
                    return times

                return run

            from store import SearchItem

            workloads = {
                "read": (reads, local(raw.read, lambda p: p)),
                "cas": (cas, local(raw.cas_write, lambda pc: CasItem(pc[0], pc[1]))),
                "search": (queries, local(raw.search,
                                          lambda t: SearchItem("q", tuple(t.split())))),
            }  # fmt: skip
            figures: dict[str, dict[str, Any]] = {}
            for op, (items, raw_call) in workloads.items():
                calls = [raw_call, remote("before", op), remote("after", op)]
                _rotating(calls, items[:WARM], args.chunk)  # untimed warm-up on every side
                hits.clear()
                lat_raw, lat_before, lat_after = _rotating(calls, items[WARM:], args.chunk)
                figures[op] = {"raw": Stats.of(lat_raw), "before": Stats.of(lat_before),
                               "after": Stats.of(lat_after)}  # fmt: skip
                if op == "search":
                    same = sum(a == b for a, b in zip(hits["before"], hits["after"], strict=True))
                    figures[op]["same_top10"] = f"{same}/{len(hits['after'])}"
        finally:
            for side in sides.values():
                side.close()
            raw.close()

    rows = []
    for op, f in figures.items():
        raw_s, before, after = f["raw"], f["before"], f["after"]
        rows.append([
            op, f"{raw_s.p50_ms:.3f}", f"{raw_s.p95_ms:.3f}", f"{before.p50_ms:.3f}",
            f"{before.p95_ms:.3f}", f"{after.p50_ms:.3f}", f"{after.p95_ms:.3f}",
            f"{after.p50_ms / before.p50_ms:.2f}x", f"{after.p95_ms / before.p95_ms:.2f}x",
        ])  # fmt: skip
    headers = ["op", "raw p50", "raw p95", "before p50", "before p95", "after p50",
               "after p95", "after/before p50", "after/before p95"]  # fmt: skip
    print(f"\n{args.files} files, {args.ops} reads and CAS overwrites, {args.queries} searches "
          f"(ms; before = {args.before}, after = {args.after})")  # fmt: skip
    print(format_table(headers, rows))
    if "same_top10" in figures.get("search", {}):
        print(f"search: identical top-10 paths before and after for "
              f"{figures['search']['same_top10']} queries")  # fmt: skip
    if args.json is not None:
        write_json(args.json, {
            "files": args.files, "ops": args.ops, "queries": args.queries,
            "before": args.before, "after": args.after,
            "figures": {op: {k: (v.to_dict() if hasattr(v, "to_dict") else v)
                             for k, v in f.items()} for op, f in figures.items()},
        })  # fmt: skip
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker()
    else:
        sys.exit(main())
