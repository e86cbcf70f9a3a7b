"""Helpers shared by the store test suites (no fixtures here; see conftest.py).

:func:`assert_consistent` checks the storage invariants every commit must keep, straight from
the tables, on any backend. :func:`increment_worker` is the body of the concurrency test's
processes (it lives here so spawned children can import it).
"""

from __future__ import annotations

import hashlib
import random
import time
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import memdir
from memdir import OWNER, MemoryService, PreconditionFailed
from memdir.storage.schema import commits, files, heads, stores, versions

STORE = "default"


def sha(content: str) -> str:
    """The sha256 contract: lowercase hex SHA-256 of the UTF-8 bytes."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Snapshot:
    """What a refused request must leave untouched: the revision and every live file."""

    revision: int
    files: dict[str, tuple[str, int, int]]  # path -> (sha256, version, file_id)
    commits: int


def snapshot(svc: MemoryService, store: str = STORE) -> Snapshot:
    info = svc.store_info(OWNER, store)
    live = {f.path: (f.sha256, f.version, f.file_id) for f in svc.iter_files(OWNER, store)}
    with svc.db.read() as repo:
        store_id = repo.store(store).id  # type: ignore[union-attr]
        count = repo.conn.execute(
            sa.select(sa.func.count()).select_from(commits).where(commits.c.store_id == store_id)
        ).scalar_one()
    return Snapshot(info.revision, live, int(count))


def indexed(svc: MemoryService, store: str = STORE) -> set[tuple[int, str]]:
    """(file id, path) of every search index row belonging to ``store``."""
    with svc.db.read() as repo:
        row = repo.store(store)
        assert row is not None
        ids = set(
            repo.conn.execute(sa.select(files.c.id).where(files.c.store_id == row.id)).scalars()
        )
        return {(fid, path) for fid, path in repo.dialect.indexed_files(repo.conn) if fid in ids}


def live_heads(svc: MemoryService, store: str = STORE) -> set[tuple[int, str]]:
    return {(f.file_id, f.path) for f in svc.iter_files(OWNER, store)}


def assert_consistent(svc: MemoryService, store: str = STORE) -> dict[str, Any]:
    """Check the invariants of ``store`` from its tables; returns a few counts.

    - the store revision equals the number of commits and their highest revision, and the
      commits' revisions are exactly 1..revision (gap-free);
    - every commit has at least one version, each carrying the commit's revision;
    - each file's version numbers are exactly 1..n;
    - a file has a head iff its latest version is not a deletion, and the head matches that
      version's number, path and sha256, and the head's blob exists with that hash;
    - the search index holds exactly the live files, at their current paths.
    """
    with svc.db.read() as repo:
        conn = repo.conn
        row = repo.store(store)
        assert row is not None, f"no store {store!r}"
        sid = row.id
        revisions = sorted(
            conn.execute(sa.select(commits.c.revision).where(commits.c.store_id == sid)).scalars()
        )
        assert revisions == list(range(1, row.revision + 1)), (
            f"store revision {row.revision} but commit revisions {revisions[:5]}..."
            f"{revisions[-5:]} ({len(revisions)} commits)"
        )
        commit_revision = dict(
            conn.execute(
                sa.select(commits.c.id, commits.c.revision).where(commits.c.store_id == sid)
            ).all()
        )
        rows = conn.execute(
            sa.select(versions).where(versions.c.store_id == sid).order_by(versions.c.id)
        ).all()
        by_file: dict[int, list[Any]] = {}
        per_commit: dict[str, int] = dict.fromkeys(commit_revision, 0)
        for v in rows:
            by_file.setdefault(v.file_id, []).append(v)
            assert v.commit_id in commit_revision, f"version {v.id} names an unknown commit"
            assert v.revision == commit_revision[v.commit_id]
            per_commit[v.commit_id] += 1
        empty = [c for c, n in per_commit.items() if n == 0]
        assert not empty, f"commits without versions: {empty}"
        head_rows = {
            h.file_id: h for h in conn.execute(sa.select(heads).where(heads.c.store_id == sid))
        }
        expected_live: dict[int, Any] = {}
        for file_id, vs in by_file.items():
            numbers = sorted(v.number for v in vs)
            assert numbers == list(range(1, len(vs) + 1)), f"file {file_id} numbers {numbers}"
            last = max(vs, key=lambda v: v.number)
            if last.operation != "deleted":
                expected_live[file_id] = last
        assert set(head_rows) == set(expected_live), (
            f"heads {sorted(head_rows)} but live files by version {sorted(expected_live)}"
        )
        for file_id, head in head_rows.items():
            last = expected_live[file_id]
            assert (head.version, head.path, head.sha256) == (last.number, last.path, last.sha256)
            content = repo.blob(sid, head.sha256)
            assert content is not None and sha(content) == head.sha256
            assert head.revision == last.revision
        ids = set(conn.execute(sa.select(files.c.id).where(files.c.store_id == sid)).scalars())
        index = {(fid, p) for fid, p in repo.dialect.indexed_files(conn) if fid in ids}
        assert index == {(fid, h.path) for fid, h in head_rows.items()}, "search index out of sync"
        return {"revision": row.revision, "commits": len(revisions), "files": len(head_rows)}


def store_id(svc: MemoryService, store: str = STORE) -> int:
    with svc.db.read() as repo:
        row = repo.conn.execute(sa.select(stores.c.id).where(stores.c.name == store)).scalar()
        assert row is not None
        return int(row)


# --- multi-process workers ------------------------------------------------------------------


def increment_worker(
    url: str, store: str, path: str, count: int, barrier: Any, results: Any, index: int
) -> None:
    """Increment the integer in ``path`` ``count`` times by read-modify-write with if_match.

    A failed precondition is retried after a random pause growing exponentially with the
    failures in a row (capped at 200 ms), as a well-behaved client does, so that eight writers
    do not all queue for the store's lock only to find their read stale.
    """
    retries = 0
    rng = random.Random(index)
    try:
        svc = memdir.open(url)
        barrier.wait(timeout=120)
        for _ in range(count):
            streak = 0
            while True:
                view = svc.read(OWNER, store, path)
                try:
                    svc.write(OWNER, store, path, str(int(view.content) + 1), if_match=view.sha256)
                    break
                except PreconditionFailed:
                    retries += 1
                    streak += 1
                    time.sleep(rng.uniform(0, min(0.2, 0.01 * 2**streak)))
        svc.db.close()
        results.put((index, "ok", retries))
    except BaseException as exc:  # report, so the parent fails with the cause
        results.put((index, "error", f"{type(exc).__name__}: {exc}"))
        raise
