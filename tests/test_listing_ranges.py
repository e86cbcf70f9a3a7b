"""Listings cost what they return: ``ls`` of a directory probes one key per entry.

``ls`` (and the REST ``tree`` at a depth) of a caller who reads the whole store skips from one
child to the next in the ``(store_id, path)`` key and counts a directory's files in the index,
instead of reading every file beneath it. These tests check that it lists exactly what the
reading of every file would (expired files, ``/.memdir/``, names that sort around ``/``,
several depths, the owner and a policy reader, a deny rule), recounted here from the paths
written; and that the statements it runs follow the entries, not the files.
"""

from __future__ import annotations

import datetime as dt
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir import OWNER, MemoryService, Principal, Write
from memdir.core.model import Entry

STORE = "default"

_POLICY = """version: 1
rules:
  - {id: admins, who: group:admins, paths: ['/**'], actions: [admin], reason: administrators}
  - {id: readers, who: group:readers, paths: ['/**'], actions: [read], reason: readers}
  - {id: part, who: group:part, paths: ['/**'], actions: [read], reason: most}
  - {id: not-b, who: group:part, paths: ['/a/b/**'], actions: [read], effect: deny, reason: b}
"""

# Names that sort just before and after '/' ('.' and '0'), a file beside a directory of the
# same stem, deep and shallow files, non-ASCII, and the task scopes (which expire by default).
_NAMES = [
    "/a/b.md", "/a/b/c.md", "/a/b/d/e.md", "/a/b0.md", "/a-b/x.md", "/a.b/y.md", "/a/b-c/z.md",
    "/top.md", "/zz/ü/ß.md", "/zz/ü.md", "/tasks/t1/note.md", "/tasks/t2/deep/more.md",
]  # fmt: skip


def _store(url: str) -> tuple[MemoryService, set[str], set[str]]:
    """A store of the names above and random others; returns the live and the expired paths."""
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    rng = random.Random(15)
    paths = set(_NAMES)
    while len(paths) < 300:
        depth = rng.randint(1, 4)
        parts = [rng.choice("abcxyz") + str(rng.randint(0, 3)) for _ in range(depth)]
        paths.add("/" + "/".join(parts) + ".md")
    expired = {p for p in sorted(paths) if rng.random() < 0.1}
    writes = []
    for path in sorted(paths):
        body = "---\nexpires: 2020-01-01\n---\n# gone\n" if path in expired else f"# {path}\n"
        writes.append(Write(path, body))
    svc.commit(OWNER, STORE, writes)
    svc.set_policy(OWNER, STORE, _POLICY)  # /.memdir/policy.yaml: one more live file
    for pid, group in (("user:admin", "admins"), ("user:all", "readers"), ("user:part", "part")):
        svc.add_principal(OWNER, pid, groups=(group,))
    # Old task files expire by default: none here is old, so only the dated ones are hidden.
    return svc, paths | {"/.memdir/policy.yaml"}, expired


def _expected(
    paths: set[str], prefix: str, depth: int, readable: Any, hidden: set[str]
) -> list[tuple[str, str, int | None]]:
    """The listing recounted from the written paths: (path, kind, files)."""
    base = "" if prefix == "/" else prefix
    under = [p for p in paths if p.startswith(base + "/") and readable(p) and p not in hidden]
    files: list[tuple[str, str, int | None]] = []
    dirs: Counter[str] = Counter()
    for path in under:
        rest = path[len(base) + 1 :].split("/")
        if len(rest) <= depth:
            files.append((path, "file", None))
        else:
            dirs[base + "/" + "/".join(rest[:depth])] += 1
    return sorted(files + [(d, "dir", n) for d, n in dirs.items()])


def _shape(entries: list[Entry]) -> list[tuple[str, str, int | None]]:
    return [(e.path, e.kind, e.files if e.kind == "dir" else None) for e in entries]


def test_ls_lists_what_reading_every_file_would(backend: str) -> None:
    """On SQLite and PostgreSQL (paths in binary order on both)."""
    svc, paths, expired = _store(backend)
    try:
        for who in ("owner", "user:admin", "user:all", "user:part"):
            _check_listings(svc, who, paths, expired)
    finally:
        svc.db.close()


def _check_listings(svc: MemoryService, who: str, paths: set[str], expired: set[str]) -> None:
    principal: Principal = OWNER if who == "owner" else svc.resolve(who)

    def readable(path: str) -> bool:
        return who == "owner" or svc.check_policy(OWNER, STORE, principal, "read", path).allowed

    for prefix in ("/", "/a", "/a/b", "/zz", "/tasks", "/x0"):
        for depth in (1, 2, 3):
            for include_expired in (False, True):
                hidden = set() if include_expired else expired
                want = _expected(paths, prefix, depth, readable, hidden)
                if not want:
                    continue
                got = svc.ls(principal, STORE, prefix, depth=depth, include_expired=include_expired)
                assert _shape(got) == want, (who, prefix, depth, include_expired)


def test_ls_probes_one_key_per_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``ls /`` of a store with one top directory of many files runs a handful of statements
    and fetches a handful of rows, however many files there are."""
    svc = memdir.open(f"sqlite:///{tmp_path / 'big.db'}", create=True)
    try:
        svc.create_store(OWNER, STORE)
        for part in range(2):
            writes = [Write(f"/big/d{i % 7}/f{i}.md", "x\n") for i in range(part, 2000, 2)]
            svc.commit(OWNER, STORE, writes)
        svc.write(OWNER, STORE, "/readme.md", "# hi\n")
        fetched: list[int] = []
        from memdir.storage import repository

        probe = repository.Repository.next_head

        def counting(self: Any, *args: Any, **kwargs: Any) -> Any:
            fetched.append(1)
            return probe(self, *args, **kwargs)

        monkeypatch.setattr(repository.Repository, "next_head", counting)
        scanned: list[int] = []
        heads_under = repository.Repository.heads_under

        def scanning(self: Any, *args: Any, **kwargs: Any) -> Any:
            for row in heads_under(self, *args, **kwargs):
                scanned.append(1)
                yield row

        monkeypatch.setattr(repository.Repository, "heads_under", scanning)
        entries = svc.ls(OWNER, STORE, "/")
        assert _shape(entries) == [("/big", "dir", 2000), ("/readme.md", "file", None)]
        assert len(fetched) == 3 and scanned == []  # /big, /readme.md, the end
        top = _shape(svc.ls(OWNER, STORE, "/big"))
        assert top[:2] == [("/big/d0", "dir", 286), ("/big/d1", "dir", 286)]
        assert scanned == []
    finally:
        svc.db.close()


def test_expired_files_stay_hidden_by_either_rule(backend: str) -> None:
    """Both expiry rules still hide files from listings: a dated ``expires`` that has come,
    and a /tasks/ file older than the task lifetime with no ``expires`` (``never`` keeps it)."""
    svc = memdir.open(backend, create=True)
    try:
        svc.create_store(OWNER, STORE)
        svc.write(OWNER, STORE, "/tasks/t/old.md", "# old\n")
        svc.write(OWNER, STORE, "/tasks/t/kept.md", "---\nexpires: never\n---\n# kept\n")
        svc.write(OWNER, STORE, "/org/gone.md", "---\nexpires: 2020-01-01\n---\n# gone\n")
        svc.write(OWNER, STORE, "/org/live.md", "# live\n")
        with svc.db.read() as repo:
            from memdir.storage.meta import expired_paths

            sid = svc._store_row(repo, STORE).id
            later = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
            assert set(expired_paths(repo, sid, later, 30)) == {"/tasks/t/old.md", "/org/gone.md"}
            assert set(expired_paths(repo, sid, later, 0)) == {"/org/gone.md"}
            assert set(expired_paths(repo, sid, later, 30, ("/tasks",))) == {"/tasks/t/old.md"}
        assert [e.path for e in svc.ls(OWNER, STORE, "/org")] == ["/org/live.md"]
        assert [e.files for e in svc.ls(OWNER, STORE, "/")] == [1, 2]
    finally:
        svc.db.close()


def test_prefix_history_reads_only_the_directory_s_versions(tmp_path: Path) -> None:
    """History under a directory keeps the commits that wrote under it or moved a file out of
    it, and SQLite reaches those versions through the path and old-path keys: no step of the
    query plan reads the store's versions or commits whole."""
    import sqlalchemy as sa

    svc = memdir.open(f"sqlite:///{tmp_path / 'hist.db'}", create=True)
    try:
        svc.create_store(OWNER, STORE)
        for i in range(30):
            svc.write(OWNER, STORE, f"/other/f{i}.md", f"# {i}\n")
        svc.write(OWNER, STORE, "/d/a.md", "# a\n")
        svc.write(OWNER, STORE, "/d.md", "# beside\n")
        svc.rename(OWNER, STORE, "/d/a.md", "/e/a.md")
        svc.write(OWNER, STORE, "/d/b.md", "# b\n")
        statements: list[tuple[str, Any]] = []

        def capture(conn: Any, cursor: Any, statement: str, params: Any, *_: Any) -> None:
            if "FROM commits" in statement:
                statements.append((statement, params))

        sa.event.listen(svc.db.engine, "before_cursor_execute", capture)
        try:
            log = svc.history(OWNER, STORE, prefix="/d", limit=10)
        finally:
            sa.event.remove(svc.db.engine, "before_cursor_execute", capture)
        touched = [{c.path for c in commit.changes} for commit in log]
        assert touched == [{"/d/b.md"}, {"/e/a.md"}, {"/d/a.md"}]
        assert statements
        with svc.db.engine.connect() as conn:
            for statement, params in statements:
                plan = conn.exec_driver_sql("EXPLAIN QUERY PLAN " + statement, params).all()
                steps = [str(row[-1]) for row in plan]
                assert not any(s.startswith("SCAN") for s in steps), steps
                versions = [s for s in steps if "versions" in s]
                assert versions and all("path=?" in s or "path>?" in s for s in versions), steps
                assert not any("commits" in s and "id=?" not in s for s in steps), steps
    finally:
        svc.db.close()


def test_directory_counts_follow_every_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A directory's count is remembered for the store's revision only: a write, a delete, a
    rename out and a store made again under the same name each show in the next listing, and
    a listing at the same revision counts nothing again."""
    url = f"sqlite:///{tmp_path / 'counts.db'}"
    svc = memdir.open(url, create=True)
    other = memdir.open(url)  # a second server over the same database
    try:
        svc.create_store(OWNER, STORE)
        svc.commit(OWNER, STORE, [Write(f"/d/f{i}.md", "x\n") for i in range(5)])

        def files() -> list[int | None]:
            return [e.files for e in svc.ls(OWNER, STORE, "/")]

        assert files() == [5]
        other.write(OWNER, STORE, "/d/new.md", "y\n")
        assert files() == [6]
        other.delete(OWNER, STORE, "/d/f0.md")
        assert files() == [5]
        other.rename(OWNER, STORE, "/d/f1.md", "/e/f1.md")
        assert files() == [4, 1]
        other.delete_store(OWNER, STORE)
        other.create_store(OWNER, STORE)
        other.write(OWNER, STORE, "/d/only.md", "z\n")
        assert files() == [1]
        counted: list[int] = []
        from memdir.storage import repository

        count_under = repository.Repository.count_under

        def counting(self: Any, *args: Any) -> int:
            counted.append(1)
            return count_under(self, *args)

        monkeypatch.setattr(repository.Repository, "count_under", counting)
        assert files() == [1] and counted == []
    finally:
        other.db.close()
        svc.db.close()
