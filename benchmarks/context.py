"""Context assembly time at 10,000 and 100,000 files, beside a raw SQL query of the same rows.

    .venv/bin/python benchmarks/context.py [--sizes 10000,100000] [--runs 30] [--json out.json]

Each store (SQLite, in a temporary directory) holds files over every scope — /org, two
projects, a user, two agents, two tasks — of which ``agent:bot`` (project acme, task t1, acting
for ana) may read about two thirds; 1% are core, 1% skills, 2% expired, 2% due for review.
Loading writes the rows the writer would (files, blobs, heads, ``file_meta`` from
:func:`memdir.core.frontmatter.describe`) in batches: loading is set-up, not what is measured.

Then the cost of last-read tracking on reads by path: the same reads, interleaved, on two
services over one store, one with the read log and one with its ``record`` a no-op.

Measured, interleaved in the same run: ``memdir context`` for agent:bot at the default budget
(the service: its read rights decided once as key ranges, counts by scope in SQL, the rows
streamed in the assembly's order until the budget is full, the policy on every file shown,
rendering, cutting) and the raw baseline, one SQL statement on the sqlite3 driver that fetches
the same rows (heads ⟕ file_meta ⟕ file_reads over the same key ranges) without deciding
anything. Target: context under 100 ms at 10,000 files, p50 and p95.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sqlite3
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Stats, fmt, format_table, run_interleaved, write_json

import memdir
from memdir import OWNER
from memdir.core.content import sha256_hex
from memdir.core.frontmatter import describe
from memdir.storage.schema import blobs, file_meta, files, heads

ROOTS = [
    ("/org", 10), ("/projects/acme", 25), ("/projects/beta", 20), ("/users/ana", 10),
    ("/agents/bot", 10), ("/agents/other", 5), ("/tasks/t1", 10), ("/tasks/t2", 10),
]  # fmt: skip
READABLE = ["/agents/bot/", "/org/", "/projects/acme/", "/tasks/t1/", "/users/ana/"]


def _content(n: int, root: str) -> str:
    kind = n % 100
    if kind == 0:
        return f"---\ncore: true\ndescription: core rule {n}\n---\nAlways run check {n}.\n"
    if kind == 1:
        return f"---\nname: skill-{n}\ndescription: Do task {n}\n---\nSteps for {n}.\n"
    if kind in (2, 3):
        return f"---\nexpires: 2020-01-01\n---\n# Old fact {n}\n"
    if kind in (4, 5):
        return f"---\nreview_after: 2020-01-01\nverify: run `probe {n}`\n---\n# Due fact {n}\n"
    return f"# Note {n} in {root}\n\nSomething worth remembering about item {n}.\n"


def load(url: str, size: int) -> None:
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, "default")
    svc.add_principal(OWNER, "agent:bot", projects=("acme",), tasks=("t1",), acts_for="ana")
    weights = [w for _, w in ROOTS]
    plan = [r for r, w in ROOTS for _ in range(w)]
    now = dt.datetime.now(dt.UTC)
    with svc.db.write() as repo:
        store_id = repo.store("default").id  # type: ignore[union-attr]
        rows_f, rows_b, rows_h, rows_m = [], [], [], []
        for n in range(size):
            root = plan[n % sum(weights)]
            name = "SKILL.md" if n % 100 == 1 else f"n{n:06d}.md"
            path = (
                f"{root}/d{n % 50:02d}/{n:06d}/{name}"
                if name == "SKILL.md"
                else (f"{root}/d{n % 50:02d}/{name}")
            )
            content = _content(n, root)
            sha = sha256_hex(content)
            when = now - dt.timedelta(minutes=n)
            rows_f.append({"id": n + 1, "store_id": store_id, "created_revision": 1})
            rows_b.append({"store_id": store_id, "sha256": sha, "size": len(content),
                           "content": content})  # fmt: skip
            rows_h.append({"store_id": store_id, "path": path, "file_id": n + 1, "version": 1,
                           "sha256": sha, "size": len(content), "revision": 1,
                           "updated_at": when})  # fmt: skip
            d = describe(path, content, when)
            rows_m.append({"file_id": n + 1, "store_id": store_id, "summary": d.summary,
                           "name": d.name, "core": d.core, "skill": d.skill,
                           "expires_at": d.expires_at, "no_expiry": d.no_expiry,
                           "review_after": d.review_after, "verify": d.verify,
                           "actor": "owner", "source_kind": None})  # fmt: skip
        unique = {(b["sha256"]): b for b in rows_b}
        repo.conn.execute(files.insert(), rows_f)
        repo.conn.execute(blobs.insert(), list(unique.values()))
        repo.conn.execute(heads.insert(), rows_h)
        repo.conn.execute(file_meta.insert(), rows_m)
    svc.close()


RAW = (
    "SELECT h.path, h.file_id, h.sha256, h.updated_at, m.summary, m.name, m.core, m.skill, "
    "m.expires_at, m.no_expiry, m.review_after, m.verify, m.actor, m.source_kind, r.read_at "
    "FROM heads h LEFT JOIN file_meta m ON m.file_id = h.file_id "
    "LEFT JOIN file_reads r ON r.file_id = h.file_id WHERE h.store_id = 1 AND ("
    + " OR ".join("(h.path >= ? AND h.path < ?)" for _ in READABLE)
    + ") ORDER BY h.path"
)
PARAMS = [p for prefix in READABLE for p in (prefix, prefix[:-1] + "0")]


def bench(size: int, runs: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/memdir.db"
        load(url, size)
        svc = memdir.open(url)
        bot = svc.resolve("agent:bot")
        raw = sqlite3.connect(f"{tmp}/memdir.db")
        got = svc.context(bot, "default")
        rows = raw.execute(RAW, PARAMS).fetchall()

        def ours(_: int) -> object:
            return svc.context(bot, "default")

        def baseline(_: int) -> object:
            return raw.execute(RAW, PARAMS).fetchall()

        a, b = run_interleaved(ours, baseline, list(range(runs + 2)), chunk=5, warmup=2)
        svc.close()
        raw.close()
        return {
            "files": size,
            "readable": got.readable,
            "raw_rows": len(rows),
            "context_tokens": got.tokens,
            "context": Stats.of(a).to_dict(),
            "raw_sql": Stats.of(b).to_dict(),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    results = []
    for size in (int(s) for s in args.sizes.split(",")):
        runs = args.runs if size <= 10_000 else max(5, args.runs // 3)
        results.append(bench(size, runs))
        print(f"measured {size} files", file=sys.stderr)
    table = []
    for r in results:
        c, q = r["context"], r["raw_sql"]
        assert isinstance(c, dict) and isinstance(q, dict)
        table.append([
            f"{r['files']:,} files ({r['readable']:,} readable, {r['raw_rows']:,} raw rows)",
            fmt(c["p50_ms"]), fmt(c["p95_ms"]), fmt(q["p50_ms"]), fmt(q["p95_ms"]),
            fmt(c["p50_ms"] / q["p50_ms"], 1) + "x",
        ])  # fmt: skip
    print(format_table(
        ["store", "context p50 ms", "context p95 ms", "raw SQL p50 ms", "raw SQL p95 ms",
         "ratio p50"], table))  # fmt: skip
    cost = read_tracking_cost()
    t, u = cost["tracked"], cost["untracked"]
    assert isinstance(t, dict) and isinstance(u, dict)
    print()
    print(format_table(
        ["read by path (10,000 files)", "p50 ms", "p95 ms", "mean ms"],
        [["last-read tracking on", fmt(t["p50_ms"], 3), fmt(t["p95_ms"], 3), fmt(t["mean_ms"], 3)],
         ["tracking off", fmt(u["p50_ms"], 3), fmt(u["p95_ms"], 3), fmt(u["mean_ms"], 3)],
         ["cost", fmt((t["p50_ms"] / u["p50_ms"] - 1) * 100, 1) + "%",
          fmt((t["p95_ms"] / u["p95_ms"] - 1) * 100, 1) + "%",
          fmt((t["mean_ms"] / u["mean_ms"] - 1) * 100, 1) + "%"]]))  # fmt: skip
    print(f"({cost['flushes']} flushes of the read log during the tracked reads)")
    if args.json_path:
        write_json(args.json_path, {"context": results, "read_tracking": cost})


def read_tracking_cost(ops: int = 3000) -> dict[str, object]:
    """Reads by path with last-read tracking on (the shipped :class:`~memdir.reads.ReadLog`)
    and off (its ``record`` a no-op), interleaved on one store in the same run."""
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{tmp}/memdir.db"
        load(url, 10_000)
        on, off = memdir.open(url), memdir.open(url)
        off.reads.record = lambda *_args, **_kwargs: None  # type: ignore[method-assign]
        bot = on.resolve("agent:bot")
        paths = [e.path for e in on.ls(bot, "default", "/projects/acme", depth=None)]
        items = [paths[i % len(paths)] for i in range(ops)]
        a, b = run_interleaved(lambda p: on.read(bot, "default", p),
                               lambda p: off.read(bot, "default", p), items, chunk=100,
                               warmup=100)  # fmt: skip
        flushes = on.reads.flushes
        on.close()
        off.close()
        return {"tracked": Stats.of(a).to_dict(), "untracked": Stats.of(b).to_dict(),
                "flushes": flushes}  # fmt: skip


if __name__ == "__main__":
    main()
