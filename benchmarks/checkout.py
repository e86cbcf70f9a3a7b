"""Checkout, sync and git export timings, beside raw baselines measured in the same run.

``memdir checkout`` of N files and ``memdir sync`` (nothing changed; ``--changed`` files changed
here; as many changed in the store) are timed beside ``cp -r`` of the same files; git export's
commits/s beside ``git fast-import`` of the same history (the floor for writing those commits
to git). Every memdir call goes through the SDK's local transport — the same code path as the
CLI on an embedded database. Repetitions alternate memdir and baseline.

::

    .venv/bin/python benchmarks/checkout.py                      # 10,000 synthetic files
    .venv/bin/python benchmarks/checkout.py --corpus real        # LoCoMo sessions + Aider chats
    .venv/bin/python benchmarks/checkout.py --files 2000 --repeat 3 --commits 300   # quick
    .venv/bin/python benchmarks/checkout.py --changed 10000      # every file changed

A sync's cost beyond the walk is the commit of what changed, and each changed file is screened
on the way in (secrets, injection): with every one of 10,000 files changed that screening is
most of the time, so the default changes 100.

``--corpus real`` makes one file per LoCoMo conversation session and per Aider chat session
(``../shared/data``); sizes over the store's limit are left out and counted.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Stats, fmt, format_table, write_json

import memdir
from memdir import OWNER, Delete, Provenance, Rename, Write
from memdir.checkout import checkout, sync
from memdir.checkout.gitexport import export_git
from memdir.core.content import DEFAULT_MAX_BYTES

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WORDS = [
    "memory",
    "agent",
    "store",
    "file",
    "version",
    "commit",
    "review",
    "policy",
    "path",
    "token",
    "sync",
    "checkout",
    "conflict",
    "change",
    "feed",
    "history",
    "diff",
    "branch",
    "tree",
    "merge",
    "note",
    "rule",
    "fact",
]


def synthetic(n: int, seed: int = 1) -> dict[str, str]:
    rng = random.Random(seed)
    return {
        f"/projects/p{i % 40}/t{i % 7}/file{i}.md": f"# file {i}\n"
        + "".join(" ".join(rng.choices(WORDS, k=12)) + "\n" for _ in range(rng.randint(5, 30)))
        for i in range(n)
    }


def real() -> tuple[dict[str, str], int]:
    """LoCoMo sessions and Aider chat sessions as markdown files; (files, left out as too big)."""
    files: dict[str, str] = {}
    big = 0
    for sample in json.loads((DATA / "locomo" / "locomo10.json").read_text()):
        conversation = sample["conversation"]
        for key, turns in conversation.items():
            if not re.fullmatch(r"session_\d+", key):
                continue
            when = conversation.get(f"{key}_date_time", "")
            text = f"# {sample['sample_id']} {key} ({when})\n\n" + "".join(
                f"**{t['speaker']}** ({t['dia_id']}): {t['text']}\n" for t in turns
            )
            files[f"/locomo/{sample['sample_id']}/{key}.md"] = text
    for history in sorted((DATA / "transcripts" / "aider-chat-history").rglob("*.md")):
        if history.name in ("SOURCE.md",):
            continue
        parts = re.split(r"(?m)^(?=# aider chat started at )", history.read_text(errors="replace"))
        for index, part in enumerate(p for p in parts if p.strip()):
            if len(part.encode()) > DEFAULT_MAX_BYTES:
                big += 1
                continue
            files[f"/aider/{history.parent.name}/{history.stem}/s{index:04d}.md"] = part
    return files, big


def load(svc: memdir.MemoryService, files: dict[str, str]) -> None:
    """Load the files as they are: real chats quote keys and instructions, which the default
    screening would refuse or queue; this measures directories, not screening."""
    from memdir.core.policy import DEFAULT_POLICY_YAML

    permissive = re.sub(r"(?m)^(  \w+): \w+$", r"\1: allow", DEFAULT_POLICY_YAML)
    svc.set_policy(OWNER, "default", permissive)
    items = sorted(files.items())
    for start in range(0, len(items), 500):
        ops = [Write(p, t, if_absent=True) for p, t in items[start : start + 500]]
        svc.commit(OWNER, "default", ops, Provenance(source_kind="import"))


def timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cp(source: Path, dest: Path) -> None:
    subprocess.run(["cp", "-r", str(source), str(dest)], check=True)


def touch(directory: Path, round_: int, changed: int) -> int:
    """Append a line to ``changed`` files of the checkout (spread over it), as ``echo >>``."""
    files = sorted(directory.rglob("*.md"))
    step = max(1, len(files) // max(1, changed))
    count = 0
    for file in files[::step][:changed]:
        with open(file, "a") as handle:
            handle.write(f"local edit {round_}\n")
        count += 1
    return count


def history(svc: memdir.MemoryService, commits: int, seed: int = 3) -> None:
    """``commits`` commits of edits, creates, renames and deletes under /h."""
    rng = random.Random(seed)
    live: dict[str, str] = {}
    for n in range(commits):
        roll = rng.random()
        if not live or roll < 0.25:
            path = f"/h/d{n % 9}/f{n}.md"
            op: memdir.Operation = Write(path, f"# {path}\nline {n}\n", if_absent=True)
            live[path] = op.content
        elif roll < 0.8:
            path = rng.choice(sorted(live))
            live[path] += f"line {n}\n"
            op = Write(path, live[path], if_match=memdir.core.content.sha256_hex(
                live[path][: -len(f"line {n}\n")]))  # fmt: skip
        elif roll < 0.92:
            path = rng.choice(sorted(live))
            new = f"/h/moved/f{n}.md"
            live[new] = live.pop(path)
            op = Rename(path, new)
        else:
            path = rng.choice(sorted(live))
            live.pop(path)
            op = Delete(path)
        svc.commit(OWNER, "default", [op], Provenance(session=f"s{n % 5}", reason=f"step {n}"))


def fast_import(svc: memdir.MemoryService, dest: Path) -> int:
    """The same history through ``git fast-import`` (raw baseline); returns commits written."""
    infos = list(reversed(svc.history(OWNER, "default", prefix="/h", limit=100_000)))
    refs = [(v.file_id, v.version) for c in infos for v in c.changes if v.sha256]
    contents = svc.version_contents(OWNER, "default", refs)
    out = bytearray()
    for mark, info in enumerate(infos, start=1):
        message = (info.reason or "").encode()
        stamp = int(info.created_at.timestamp())
        out += b"commit refs/heads/main\nmark :%d\ncommitter %s <x@memdir> %d +0000\n" % (
            mark, info.actor.encode(), stamp)  # fmt: skip
        out += b"data %d\n%s\n" % (len(message), message)
        if mark > 1:
            out += b"from :%d\n" % (mark - 1)
        for v in info.changes:
            if v.operation == "deleted":
                out += b"D %s\n" % v.path[1:].encode()
                continue
            if v.old_path:
                out += b"R %s %s\n" % (v.old_path[1:].encode(), v.path[1:].encode())
            data = (contents.get((v.file_id, v.version)) or "").encode()
            out += b"M 100644 inline %s\ndata %d\n%s\n" % (v.path[1:].encode(), len(data), data)
    subprocess.run(["git", "init", "-q", "--bare", str(dest)], check=True)
    subprocess.run(["git", "-C", str(dest), "fast-import", "--quiet"], input=bytes(out),
                   check=True)  # fmt: skip
    return len(infos)


def row(name: str, ours: list[float], raw: list[float], unit: float = 1.0) -> list[str]:
    a, b = Stats.of(ours), Stats.of(raw)
    return [name, str(a.n), fmt(a.p50_ms), fmt(a.p95_ms), fmt(b.p50_ms), fmt(b.p95_ms),
            fmt(a.p50_ms / b.p50_ms if b.p50_ms else float("nan"))]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--corpus", choices=["synthetic", "real"], default="synthetic")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--changed", type=int, default=100, help="files changed per sync")
    parser.add_argument("--commits", type=int, default=1000)
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="memdir-bench-checkout-"))
    results: dict[str, Any] = {"corpus": args.corpus, "changed": args.changed}
    try:
        db = f"sqlite:///{work / 'memdir.db'}"
        svc = memdir.open(db, create=True)
        svc.create_store(OWNER, "default")
        if args.corpus == "real":
            files, big = real()
            results["left_out_too_big"] = big
        else:
            files = synthetic(args.files)
        load(svc, files)
        size = sum(len(t.encode()) for t in files.values())
        results.update(files=len(files), bytes=size)
        print(f"{len(files):,} files, {size / 1e6:.1f} MB ({args.corpus})", flush=True)
        rows: list[list[str]] = []
        timings: dict[str, tuple[list[float], list[float]]] = {}
        with memdir.Client(db=db) as client:
            co, cps = [], []
            for i in range(args.repeat):
                target, copy = work / f"co{i}", work / f"cp{i}"
                pair = [lambda t=target: checkout(client, "/", t),
                        lambda c=copy: cp(work / "co0", c)]  # fmt: skip
                if i == 0:
                    co.append(timed(pair[0]))
                    cps.append(timed(pair[1]))
                    continue
                first, second = (0, 1) if i % 2 else (1, 0)
                measured = {first: timed(pair[first]), second: timed(pair[second])}
                co.append(measured[0])
                cps.append(measured[1])
            timings["checkout"] = (co, cps)
            base = work / "co0"
            idle, idle_cp, local, local_cp, remote, remote_cp = ([] for _ in range(6))
            for i in range(args.repeat):
                idle.append(timed(lambda: sync(client, base)))
                idle_cp.append(timed(lambda i=i: cp(base, work / f"idle{i}")))
                touch(base, i, args.changed)
                local.append(timed(lambda i=i: sync(client, base, reason=f"round {i}")))
                local_cp.append(timed(lambda i=i: cp(base, work / f"local{i}")))
                everything = sorted(
                    (v for v in svc.iter_files(OWNER, "default")
                     if not v.path.startswith("/.memdir/")),  # not the policy file
                    key=lambda v: v.path,
                )  # fmt: skip
                chosen = everything[:: max(1, len(everything) // args.changed)][: args.changed]
                for start in range(0, len(chosen), 500):
                    svc.commit(OWNER, "default", [
                        Write(v.path, v.content + f"remote {i}\n", if_match=v.sha256)
                        for v in chosen[start : start + 500]
                    ])  # fmt: skip
                remote.append(timed(lambda: sync(client, base)))
                remote_cp.append(timed(lambda i=i: cp(base, work / f"remote{i}")))
            timings["sync, nothing changed"] = (idle, idle_cp)
            timings[f"sync, {args.changed:,} files changed here"] = (local, local_cp)
            timings[f"sync, {args.changed:,} files changed in the store"] = (remote, remote_cp)
        for name, (ours, raw) in timings.items():
            rows.append(row(name, ours, raw))
            results[name] = {"memdir": Stats.of(ours).to_dict(), "cp -r": Stats.of(raw).to_dict()}
        print(format_table(["operation (whole directory)", "n", "memdir p50 ms", "p95 ms",
                            "cp -r p50 ms", "p95 ms", "p50 ratio"], rows))  # fmt: skip

        history(svc, args.commits)
        exported, raw_runs, commits = [], [], 0
        for i in range(args.repeat):
            target = work / f"git{i}"
            exported.append(timed(lambda t=target: export_git(svc, OWNER, "default", t,
                                                              prefix="/h")))  # fmt: skip
            start = time.perf_counter()
            commits = fast_import(svc, work / f"fi{i}.git")
            raw_runs.append(time.perf_counter() - start)
        ours, raw = Stats.of(exported), Stats.of(raw_runs)
        print()
        print(format_table(
            ["git export", "commits", "memdir commits/s", "p50 s", "p95 s",
             "fast-import commits/s", "p50 s", "p95 s"],
            [["/h history", str(commits), fmt(commits / (ours.p50_ms / 1000)),
              fmt(ours.p50_ms / 1000), fmt(ours.p95_ms / 1000),
              fmt(commits / (raw.p50_ms / 1000)), fmt(raw.p50_ms / 1000),
              fmt(raw.p95_ms / 1000)]],
        ))  # fmt: skip
        results["git export"] = {"commits": commits, "memdir": ours.to_dict(),
                                 "git fast-import": raw.to_dict()}  # fmt: skip
        if args.json:
            write_json(args.json, results)
        svc.db.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
