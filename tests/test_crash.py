"""Crash safety on SQLite: a writer — a process using the Python API, or `memdir serve` taking
commits over REST — killed with SIGKILL mid-stream loses nothing it acknowledged and leaves no
partial commit behind.

A child process loops making multi-operation commits (three new files, a rename of one of the
previous commit's files and a compare-and-swap update of a counter, each commit with its own
idempotency key) and prints every acknowledged commit after it returns. The parent reads a few
hundred acknowledgements, kills the child at some moment, and then checks the database file:
SQLite's integrity check and the FTS5 index's own check pass, every acknowledged commit is
there and whole, heads, versions, the search index and the store revision agree, and the
database opens and takes a new write. The `memdir serve` variant kills the server several
times at random moments (seeded), restarting it on the same file each time, while a client
makes the same commits over REST; a commit counts as acknowledged when its 201 arrived.
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
import pytest

import memdir
from helpers import STORE, assert_consistent
from memdir import OWNER, Provenance, Write
from test_api_live import ServeProcess

pytestmark = pytest.mark.slow

CHILD = textwrap.dedent(
    """
    import sys

    import memdir
    from memdir import OWNER, Provenance, Rename, Write

    svc = memdir.open(sys.argv[1])
    counter = svc.read(OWNER, "default", "/counter.md")
    digest, n = counter.sha256, int(counter.content)
    print("ready", flush=True)
    while True:
        n += 1
        ops = [
            Write(f"/c/{n}/a.md", f"alpha note number {n}\\n", if_absent=True),
            Write(f"/c/{n}/b.md", f"beta note number {n}\\n" * 20, if_absent=True),
            Write(f"/c/{n}/c.md", f"---\\ndescription: gamma {n}\\n---\\nbody\\n", if_absent=True),
            Write("/counter.md", str(n), if_match=digest),
        ]
        if n > 1:
            ops.append(Rename(f"/c/{n - 1}/c.md", f"/moved/{n - 1}.md"))
        result = svc.commit(OWNER, "default", ops, Provenance(idempotency_key=f"commit-{n}"))
        digest = result.results[3].sha256
        print(n, result.revision, result.commit, flush=True)
    """
)


def _stderr_of(child: subprocess.Popen[str]) -> str:
    """Stop the child (if still running) and return what it wrote to stderr."""
    if child.poll() is None:
        child.kill()
    child.wait()
    assert child.stderr is not None
    if child.stderr.closed:
        return ""
    text = child.stderr.read()
    child.stderr.close()
    return text


def _ops_in(n: int) -> int:
    return 4 if n == 1 else 5


@pytest.mark.parametrize(
    ("acks_before_kill", "delay"),
    [(50, 0.0), (160, 0.004), (300, 0.013)],
    ids=["early", "middle", "late"],
)
def test_sigkill_mid_stream_leaves_a_whole_database(
    tmp_path: Path, acks_before_kill: int, delay: float
) -> None:
    db = tmp_path / "memdir.db"
    url = f"sqlite:///{db}"
    setup = memdir.open(url, create=True)
    setup.create_store(OWNER, STORE)
    setup.write(OWNER, STORE, "/counter.md", "0", if_absent=True)
    setup.db.close()
    script = tmp_path / "writer.py"
    script.write_text(CHILD)

    child = subprocess.Popen(
        [sys.executable, str(script), url],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    assert child.stdout is not None
    out = child.stdout
    acks: list[tuple[int, int, str]] = []
    try:
        assert out.readline().strip() == "ready", _stderr_of(child)
        while len(acks) < acks_before_kill:
            line = out.readline()
            assert line, f"writer died early: {_stderr_of(child)}"
            n, revision, commit = line.split()
            acks.append((int(n), int(revision), commit))
        if delay:
            time.sleep(delay)
        os.kill(child.pid, signal.SIGKILL)
        rest = out.read()  # acknowledged before the kill, still in the pipe
    finally:
        stderr = _stderr_of(child)
        out.close()
    for line in rest.splitlines():
        n, revision, commit = line.split()
        acks.append((int(n), int(revision), commit))
    assert child.returncode == -signal.SIGKILL, stderr
    assert [a[0] for a in acks] == list(range(1, len(acks) + 1))
    _check_after_crashes(db, acks, in_flight=1)


def _check_after_crashes(db: Path, acks: list[tuple[int, int, str]], *, in_flight: int) -> None:
    """The database file after ``in_flight`` kills of writers that acknowledged ``acks``."""
    url = f"sqlite:///{db}"
    # --- the file itself, with plain sqlite3 -------------------------------------------------
    raw = sqlite3.connect(str(db))
    try:
        assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []
        fts5_tables = [
            name
            for (name,) in raw.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND sql LIKE '%USING fts5%'"
            )
        ]
        (store_id,) = raw.execute("SELECT id FROM stores WHERE name = ?", (STORE,)).fetchone()
        fts_table = f"search_fts_{store_id}"
        assert fts_table in fts5_tables
        for name in fts5_tables:  # raises sqlite3.DatabaseError on a corrupt index
            raw.execute(f"INSERT INTO {name}({name}) VALUES ('integrity-check')")
        commits = {
            row[0]: (row[1], row[2])
            for row in raw.execute("SELECT id, revision, idempotency_key FROM commits")
        }
        versions_per_commit = dict(
            raw.execute("SELECT commit_id, count(*) FROM versions GROUP BY commit_id").fetchall()
        )
        (revision,) = raw.execute("SELECT revision FROM stores WHERE name = ?", (STORE,)).fetchone()
        heads = set(raw.execute("SELECT file_id, path FROM heads").fetchall())
        fts = set(raw.execute(f"SELECT rowid, path FROM {fts_table}").fetchall())
        (counter,) = raw.execute(
            "SELECT b.content FROM heads h JOIN blobs b ON b.sha256 = h.sha256 "
            "WHERE h.path = '/counter.md'"
        ).fetchone()
    finally:
        raw.close()

    # every acknowledged commit is there, at the revision it reported
    for n, rev, commit in acks:
        assert commits.get(commit) == (rev, f"commit-{n}"), (n, rev, commit)
    # no commit is partial: each has exactly its operations' versions
    for commit, (rev, key) in commits.items():
        expected = 1 if key is None else _ops_in(int(key.split("-")[1]))
        assert versions_per_commit.get(commit) == expected, (rev, key)
    # at most the in-flight commit of each kill landed without being acknowledged
    committed = len(commits) - 1  # the set-up commit made the counter
    assert len(acks) <= committed <= len(acks) + in_flight
    assert revision == len(commits) == max(rev for rev, _ in commits.values())
    assert sorted(rev for rev, _ in commits.values()) == list(range(1, revision + 1))
    assert int(counter) == committed
    assert fts == heads
    assert len(heads) == 1 + 3 * committed

    # --- and through memdir: invariants, then a new write ------------------------------------
    svc = memdir.open(url)
    try:
        counts = assert_consistent(svc)
        assert counts == {"revision": revision, "commits": revision, "files": len(heads)}
        view = svc.read(OWNER, STORE, "/counter.md")
        svc.commit(
            OWNER,
            STORE,
            [
                Write("/after-crash.md", "written after the crash\n", if_absent=True),
                Write("/counter.md", str(committed + 1), if_match=view.sha256),
            ],
            Provenance(idempotency_key="after-crash"),
        )
        assert svc.store_info(OWNER, STORE).revision == revision + 1
        assert [h.path for h in svc.search(OWNER, STORE, "crash")] == ["/after-crash.md"]
        assert_consistent(svc)
    finally:
        svc.db.close()


def _serve_commits(
    url: str, token: str, acks: list[tuple[int, int, str]], stop: threading.Event
) -> None:
    """Make the crash writer's commits over REST until the server goes away (or ``stop``)."""
    headers = {"Authorization": f"Bearer {token}"}
    base = f"{url}/v1/stores/{STORE}"
    with httpx2.Client(headers=headers, timeout=30) as client:
        try:
            counter = client.get(f"{base}/files/counter.md", params={"format": "json"})
            counter.raise_for_status()
        except httpx2.HTTPError:
            return  # killed before the first request
        digest, n = counter.json()["sha256"], int(counter.json()["content"])
        while not stop.is_set():
            n += 1
            ops: list[dict[str, Any]] = [
                {"op": "write", "path": f"/c/{n}/a.md", "content": f"alpha note number {n}\n",
                 "if_absent": True},
                {"op": "write", "path": f"/c/{n}/b.md", "content": f"beta note number {n}\n" * 20,
                 "if_absent": True},
                {"op": "write", "path": f"/c/{n}/c.md",
                 "content": f"---\ndescription: gamma {n}\n---\nbody\n", "if_absent": True},
                {"op": "write", "path": "/counter.md", "content": str(n), "if_match": digest},
            ]  # fmt: skip
            if n > 1:
                ops.append({"op": "rename", "path": f"/c/{n - 1}/c.md",
                            "new_path": f"/moved/{n - 1}.md"})  # fmt: skip
            try:
                response = client.post(
                    f"{base}/commits",
                    json={"operations": ops},
                    headers={"Idempotency-Key": f"commit-{n}"},
                )
            except httpx2.TransportError:
                return  # the server was killed: this commit is not acknowledged
            assert response.status_code == 201, response.text
            result = response.json()
            digest = result["results"][3]["sha256"]
            acks.append((n, int(result["revision"]), str(result["commit"])))


def _reporting(failures: list[BaseException], fn: Any, *args: Any) -> None:
    """Run ``fn(*args)`` in a thread, keeping what it raised for the test to report."""
    try:
        fn(*args)
    except BaseException as exc:
        failures.append(exc)


def test_sigkill_of_memdir_serve_loses_no_acknowledged_commit(tmp_path: Path) -> None:
    db = tmp_path / "memdir.db"
    url = f"sqlite:///{db}"
    setup = memdir.open(url, create=True)
    setup.create_store(OWNER, STORE)
    setup.write(OWNER, STORE, "/counter.md", "0", if_absent=True)
    setup.add_principal(OWNER, "user:admin", groups=("admins",))
    token = setup.create_token(OWNER, "user:admin").token
    assert token is not None
    setup.db.close()

    rng = random.Random(20)  # the kill points: seeded, so a failure can be replayed
    kills = 3
    acks: list[tuple[int, int, str]] = []
    for _ in range(kills):
        server = ServeProcess(url, tmp_path)
        stop = threading.Event()
        failures: list[BaseException] = []
        writer = threading.Thread(
            target=_reporting, args=(failures, _serve_commits, server.url, token, acks, stop)
        )
        try:
            server.wait_healthy(timeout=60)
            before = len(acks)
            writer.start()
            goal, deadline = before + rng.randint(5, 60), time.monotonic() + 30
            while len(acks) < goal and writer.is_alive():
                assert time.monotonic() < deadline, "the writer made no progress"
                time.sleep(0.002)
            time.sleep(rng.uniform(0, 0.02))  # somewhere inside the next commit
            server.proc.send_signal(signal.SIGKILL)
            assert server.proc.wait(10) == -signal.SIGKILL, "".join(server.stderr)
            writer.join(30)
            assert not writer.is_alive() and failures == []
            assert len(acks) > before, "".join(server.stderr)
        finally:
            stop.set()
            server.stop()
            if writer.is_alive():
                writer.join(30)
    numbers = [a[0] for a in acks]
    assert numbers == sorted(set(numbers))  # each acknowledged once, in order
    _check_after_crashes(db, acks, in_flight=kills)
