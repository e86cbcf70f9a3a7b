"""CLI start-up: what one ``memdir`` call costs an agent, beside the floor of any click CLI.

Each figure is the wall time of one whole process, from spawn to exit, over ``--calls`` calls
(default 30) of each verb on a ``--files``-file store (default 1,000; contents are LoCoMo
conversation turns from ``../shared/data/locomo``, six per file):

- ``read``   ``memdir read /org/team{k}/note{i}.md`` (a different file each call)
- ``search`` ``memdir search WORD`` (a word of the data, ten results)
- ``write``  ``memdir write /bench/new{i}.md --create`` (content on stdin)
- ``edit``   ``memdir edit /org/team{k}/note{i}.md --old A --new B`` (once per file)
- ``ls``     ``memdir ls /org`` (ten directories with their counts)

beside, in the same run and interleaved call by call (so a busy machine weighs on all alike):

- the **floor**: ``python -c 'import click, sqlite3'`` with the same interpreter, what any
  click CLI over SQLite pays before doing anything;

- the **sqlite3 CLI** running the same query on a raw copy of the data (one table of files
  and an FTS5 index over it): a select by path, an FTS5 ``MATCH`` ranked by ``bm25`` with a
  limit of ten, an insert, an ``UPDATE ... replace()``, a range scan of ``/org/``;

every process with a bytecode cache (``PYTHONPYCACHEPREFIX`` in the run's temporary
directory), as an installed program has, after one untimed round that fills it.

The target (issue 15): every verb's p50 and p95 within 1.5x the floor's. The ``memdir``
command is the console script beside the interpreter (what agents run), else ``python -m
memdir.cli``.

Run: ``python benchmarks/cli.py [--files 1000] [--calls 30] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from _common import Stats, fmt, format_table, write_json

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
TARGET = 1.5
WORD = "painting"


def turns(data: Path) -> list[str]:
    """Every LoCoMo turn's text, in file order."""
    found = []
    for conv in json.loads((data / "locomo" / "locomo10.json").read_text(encoding="utf-8")):
        for key, value in conv["conversation"].items():
            if key.startswith("session_") and isinstance(value, list):
                found.extend(turn["text"] for turn in value)
    return found


def contents(data: Path, files: int) -> dict[str, str]:
    """``files`` markdown files of six turns each, under ten team directories of ``/org``."""
    texts = turns(data)
    out = {}
    for i in range(files):
        body = "\n\n".join(texts[(i * 6 + j) % len(texts)] for j in range(6))
        out[f"/org/team{i % 10}/note{i}.md"] = f"# Note {i}\n\n{body}\n\nmarker-{i}\n"
    return out


def load_memdir(url: str, files: dict[str, str]) -> dict[str, str]:
    """Write ``files`` through the service (batches of 100; a file screening holds back is
    left out); returns the files stored."""
    import memdir
    from memdir.core.model import Write

    svc = memdir.open(url, create=True)
    svc.create_store(memdir.OWNER, "default", exist_ok=True)
    stored: dict[str, str] = {}
    items = list(files.items())
    for start in range(0, len(items), 100):
        batch = items[start : start + 100]
        try:
            svc.commit(memdir.OWNER, "default", [Write(p, c, if_absent=True) for p, c in batch])
            stored.update(batch)
        except memdir.MemdirError:  # something in the batch needs review: one by one
            for path, content in batch:
                try:
                    svc.write(memdir.OWNER, "default", path, content, if_absent=True)
                    stored[path] = content
                except memdir.MemdirError:
                    pass
    svc.close()
    return stored


def load_raw(path: Path, files: dict[str, str]) -> None:
    """The raw baseline: one table of files and an FTS5 index over it, same content."""
    import sqlite3

    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE files (path TEXT PRIMARY KEY, content TEXT NOT NULL)")
    conn.execute(
        "CREATE VIRTUAL TABLE fts USING fts5(path, body, tokenize = "
        "'porter unicode61 remove_diacritics 2')"
    )
    for rowid, (p, c) in enumerate(files.items(), 1):
        conn.execute("INSERT INTO files (rowid, path, content) VALUES (?, ?, ?)", (rowid, p, c))
        conn.execute("INSERT INTO fts (rowid, path, body) VALUES (?, ?, ?)", (rowid, p, c))
    conn.commit()
    conn.close()


def memdir_command() -> list[str]:
    script = Path(sys.executable).with_name("memdir")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memdir.cli"]


def timed(
    argv: Sequence[str], stdin: str | None = None, env: dict[str, str] | None = None
) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr[-500:]}")
    return elapsed


def sql_quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", dest="json_out", help="Also write the figures as JSON here.")
    parser.add_argument(
        "--command", help="The memdir command to time (default: the console script), e.g. "
        "'python -m memdir.cli' with PYTHONPATH pointing at another checkout's src/",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sqlite_cli = shutil.which("sqlite3")
    tmp = Path(tempfile.mkdtemp(prefix="memdir-cli-bench-"))
    try:
        url = f"sqlite:///{tmp / 'memdir.db'}"
        files = load_memdir(url, contents(args.data, args.files))
        raw = tmp / "raw.db"
        load_raw(raw, files)
        paths = sorted(files)
        # Compiled bytecode is cached as an installed program's is, even where the
        # environment forbids writing it beside the sources (PYTHONDONTWRITEBYTECODE).
        env = {**os.environ, "MEMDIR_DB": url, "PYTHONPYCACHEPREFIX": str(tmp / "pycache")}
        for name in ("MEMDIR_TOKEN", "MEMDIR_STORE", "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        memdir = args.command.split() if args.command else memdir_command()
        floor = [sys.executable, "-c", "import click, sqlite3"]
        lat: dict[str, list[float]] = {}

        def note(name: str, seconds: float) -> None:
            lat.setdefault(name, []).append(seconds)

        for i in range(-1, args.calls):  # round -1 warms the caches up, untimed
            read_path = paths[(i * 37) % len(paths)]
            edit_path = paths[(i * 53 + 11) % len(paths)]  # a different file each round
            marker = files[edit_path].rsplit("marker-", 1)[1].strip()
            steps = [
                ("floor", floor, None),
                ("read", [*memdir, "read", read_path], None),
                ("search", [*memdir, "search", WORD], None),
                ("write", [*memdir, "write", f"/bench/new{i + 1}.md", "--create"], "new\n"),
                ("edit", [*memdir, "edit", edit_path, "--old", f"marker-{marker}\n",
                          "--new", f"marker-{marker} edited\n"], None),
                ("ls", [*memdir, "ls", "/org"], None),
            ]  # fmt: skip
            if sqlite_cli is not None:
                db = str(raw)
                steps += [
                    ("sqlite3 read", [sqlite_cli, db,
                     f"SELECT content FROM files WHERE path = {sql_quote(read_path)}"], None),
                    ("sqlite3 search", [sqlite_cli, db,
                     f"SELECT path, snippet(fts, 1, '', '', '...', 12) FROM fts WHERE fts "
                     f"MATCH {sql_quote(WORD)} ORDER BY bm25(fts) LIMIT 10"], None),
                    ("sqlite3 write", [sqlite_cli, db, "BEGIN; INSERT INTO files VALUES "
                     f"({sql_quote(f'/bench/new{i + 1}.md')}, 'new'); COMMIT;"], None),
                    ("sqlite3 edit", [sqlite_cli, db,
                     f"UPDATE files SET content = replace(content, 'marker-{marker}', "
                     f"'marker-{marker} edited') WHERE path = {sql_quote(edit_path)}"], None),
                    ("sqlite3 ls", [sqlite_cli, db, "SELECT path FROM files WHERE path >= "
                     "'/org/' AND path < '/org0' ORDER BY path"], None),
                ]  # fmt: skip
            order = steps if i % 2 == 0 else list(reversed(steps))
            for name, command, stdin in order:
                seconds = timed(command, stdin, env)
                if i >= 0:
                    note(name, seconds)
        stats = {name: Stats.of(values) for name, values in lat.items()}
        base = stats["floor"]
        rows = []
        result: dict[str, object] = {"files": len(files), "calls": args.calls}
        for verb in ("read", "search", "write", "edit", "ls"):
            s = stats[verb]
            raw_s = stats.get(f"sqlite3 {verb}")
            r50, r95 = s.p50_ms / base.p50_ms, s.p95_ms / base.p95_ms
            ok = "yes" if r50 <= TARGET and r95 <= TARGET else "no"
            rows.append([
                f"memdir {verb}", fmt(s.p50_ms), fmt(s.p95_ms), fmt(base.p50_ms),
                fmt(base.p95_ms), f"{r50:.2f}x", f"{r95:.2f}x",
                fmt(raw_s.p50_ms) if raw_s else "n/a", fmt(raw_s.p95_ms) if raw_s else "n/a", ok,
            ])  # fmt: skip
            result[verb] = {
                "memdir": s.to_dict(), "floor": base.to_dict(),
                "sqlite3": raw_s.to_dict() if raw_s else None,
                "ratio_p50": r50, "ratio_p95": r95,
            }  # fmt: skip
        headers = ["verb", "p50 ms", "p95 ms", "floor p50", "floor p95", "x floor p50",
                   "x floor p95", "sqlite3 p50", "sqlite3 p95", f"<= {TARGET}x"]  # fmt: skip
        print(f"{len(files)} files, {args.calls} calls each, memdir = {' '.join(memdir)}")
        print(f"floor = {' '.join(floor)}")
        print(format_table(headers, rows))
        if args.json_out:
            write_json(args.json_out, result)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
