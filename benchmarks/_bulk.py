"""Bulk loading for the store benchmark: the rows a real history leaves, written fast.

Loading is the benchmark's set-up, not what it measures. Growing 1,000,000 versions through
``svc.commit`` (500 ``Write`` ops per commit) runs at a few hundred versions per second on a
2-core machine, hours at the sizes the issue asks for; so the benchmark can instead write the
same rows directly, in large batches (``COPY`` on PostgreSQL, ``executemany`` on SQLite), a
few transactions per 100,000 versions.

The history is a list of commits, each a list of :data:`Step` — ``(file index, rev)``: rev 0
creates the file with its base content, rev N > 0 overwrites it with the base content whose
``[[rev 0]]`` marker reads ``[[rev N]]`` (see ``benchmarks/store.py``). :func:`plan_history`
yields exactly the commits the service path would make (creates in batches, then round-robin
overwrites), so either load leaves the same store.

What :class:`MemdirLoader` writes is what :class:`memdir.writer.CommitWriter` and
``ServiceBase._run`` write for commits of ``Write`` ops (``if_absent`` for creates, ``if_match``
for overwrites), through the same schema objects, hash function and search-index function:

- ``commits``: one row per commit, revisions continuing the store's counter gap-free, the
  provenance given, ``result`` = ``json.dumps(CommitResult.to_dict())`` as the service stores
  it, a random :func:`memdir.base.new_commit_id`;
- ``files``: one row per new file (``created_revision`` its commit's revision);
- ``versions``: one row per step, numbers 1, 2, ... per file continuing from its head,
  ``operation`` ``created`` / ``modified``, no findings;
- ``blobs``: each content once per (store, sha256), ``sha256`` = :func:`sha256_hex`;
- ``heads``: the final state of every file touched (version, sha256, size, and the revision
  and time of the last commit that touched it);
- the search index: the final path and content of every live file, through the dialect's own
  ``index_file`` (PostgreSQL inserts of new files go by ``COPY`` into the same columns);
- ``stores.revision``: the last revision.

The store is consistent only after :meth:`MemdirLoader.finish` (heads and the index are
written last); :func:`check_store` then reads it back through the service. Raw baselines
(:class:`RawLoader`) get the same content, version for version, in their own tables.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

import memdir
from memdir import OWNER, Provenance
from memdir.base import new_commit_id
from memdir.core.content import sha256_hex
from memdir.core.model import CommitResult, OpResult
from memdir.rows import utcnow
from memdir.search.query import STOP_WORDS
from memdir.storage.schema import blobs, commits, files, versions

__all__ = [
    "MemdirLoader",
    "RawLoader",
    "Step",
    "Version",
    "check_store",
    "plan_history",
]

#: (file index, rev): rev 0 creates the file, rev N > 0 overwrites it with marker N.
Step = tuple[int, int]


@dataclass(frozen=True)
class Version:
    """One step with its content computed once for every loader."""

    index: int
    path: str
    rev: int
    content: str
    sha256: str
    size: int


def plan_history(
    n_files: int, first_bulk: int, total_versions: int, batch: int
) -> Iterator[list[Step]]:
    """The commits of a load: files ``first_bulk``..n-1 created ``batch`` per commit, then
    ``total_versions - n_files`` overwrites round-robin over all files, ``batch`` per commit
    (never one file twice in a commit) — the order ``benchmarks/store.py`` uses through the
    service. Revs count per file from 1; files below ``first_bulk`` exist already at rev 0.
    """
    for lo in range(first_bulk, n_files, batch):
        yield [(i, 0) for i in range(lo, min(lo + batch, n_files))]
    extra = max(0, total_versions - n_files)
    revs = [0] * n_files
    done = cursor = 0
    while done < extra:
        size = min(batch, extra - done, n_files)
        steps: list[Step] = []
        for k in range(size):
            i = (cursor + k) % n_files
            revs[i] += 1
            steps.append((i, revs[i]))
        cursor += size
        done += size
        yield steps


def materialise(
    steps: Sequence[Step], paths: Sequence[str], content: Callable[[int, int], str]
) -> list[Version]:
    out: list[Version] = []
    for index, rev in steps:
        text = content(index, rev)
        out.append(
            Version(index, paths[index], rev, text, sha256_hex(text), len(text.encode("utf-8")))
        )
    return out


@dataclass
class _Head:
    file_id: int
    version: int
    sha256: str
    size: int
    revision: int
    updated_at: Any
    existed: bool  # in the database before the load (its head row is updated, not inserted)
    index: int = -1
    rev: int = 0


_VERSION_COLUMNS = tuple(
    c.name for c in versions.c if c.name not in ("id", "redacted_at", "redacted_by")
)
_COMMIT_COLUMNS = tuple(c.name for c in commits.c)
_BLOB_COLUMNS = tuple(c.name for c in blobs.c)
_FILE_COLUMNS = tuple(c.name for c in files.c)


class MemdirLoader:
    """Writes commits of ``Write`` ops into a memdir store as the service would (see above)."""

    def __init__(
        self,
        svc: memdir.MemoryService,
        store: str,
        provenance: Provenance,
        content: Callable[[int, int], str],
        *,
        flush_versions: int = 50_000,
    ) -> None:
        self.db = svc.db
        self.pg = self.db.url.get_backend_name() == "postgresql"
        self.provenance = provenance
        self.content = content
        self.flush_versions = flush_versions
        self.actor = OWNER.id
        with self.db.read() as repo:
            row = repo.store(store)
            assert row is not None, store
            self.store_id = int(row.id)
            self.revision = int(row.revision)
            self.heads: dict[str, _Head] = {
                h.path: _Head(
                    h.file_id, h.version, h.sha256, h.size, h.revision, h.updated_at, True
                )
                for h in repo.heads_under(self.store_id, "/")
            }
            self.seen = {
                str(s)
                for (s,) in repo.conn.execute(
                    blobs.select()
                    .with_only_columns(blobs.c.sha256)
                    .where(blobs.c.store_id == self.store_id)
                )
            }
            self.next_file = int(
                repo.conn.exec_driver_sql("SELECT coalesce(max(id), 0) FROM files").scalar_one()
            )
        self._rows: dict[str, list[tuple[Any, ...]]] = {}
        self._pending = 0

    # --- commits ----------------------------------------------------------------------------

    def add_commit(self, changes: Sequence[Version], provenance: Provenance | None = None) -> None:
        """One commit of these versions (creates for new paths, overwrites otherwise)."""
        self.revision += 1
        revision = self.revision
        commit_id = new_commit_id()
        now = utcnow()
        encode_time = self.db.dialect.encode_time
        results: list[OpResult] = []
        buf = self._rows
        for v in changes:
            head = self.heads.get(v.path)
            if head is None:
                self.next_file += 1
                head = _Head(self.next_file, 0, "", 0, revision, now, False)
                self.heads[v.path] = head
                buf.setdefault("files", []).append((head.file_id, self.store_id, revision))
                operation = "created"
            else:
                operation = "modified"
            head.version += 1
            head.sha256, head.size, head.revision, head.updated_at = v.sha256, v.size, revision, now
            head.index, head.rev = v.index, v.rev
            if v.sha256 not in self.seen:
                self.seen.add(v.sha256)
                buf.setdefault("blobs", []).append((self.store_id, v.sha256, v.size, v.content))
            buf.setdefault("versions", []).append(
                (
                    self.store_id,
                    head.file_id,
                    head.version,
                    commit_id,
                    revision,
                    operation,
                    v.path,
                    None,
                    v.sha256,
                    v.size,
                    None,
                )
            )
            results.append(
                OpResult("write", v.path, head.file_id, head.version, operation, v.sha256, v.size)
            )
        result = CommitResult(commit_id, revision, tuple(results), now)
        p = provenance or self.provenance
        buf.setdefault("commits", []).append(
            (
                commit_id,
                self.store_id,
                revision,
                self.actor,
                encode_time(now),
                p.session,
                p.transcript,
                p.reason,
                p.source_kind,
                None,
                None,
                json.dumps(result.to_dict()),
                None,
            )
        )
        self._pending += len(changes)
        if self._pending >= self.flush_versions:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows in one transaction (foreign keys: files, commits first)."""
        if not self._rows:
            return
        order = (
            ("files", _FILE_COLUMNS),
            ("commits", _COMMIT_COLUMNS),
            ("versions", _VERSION_COLUMNS),
            ("blobs", _BLOB_COLUMNS),
        )
        with self.db.write() as repo:
            for table, columns in order:
                self._insert(repo, table, columns, self._rows.get(table, []))
        self._rows = {}
        self._pending = 0

    def _insert(
        self, repo: Any, table: str, columns: Sequence[str], rows: Sequence[tuple[Any, ...]]
    ) -> None:
        if not rows:
            return
        cursor = repo.conn.connection.driver_connection.cursor()
        if self.pg:
            with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" for _ in columns)
            cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)
        cursor.close()

    # --- the live tree ----------------------------------------------------------------------

    def finish(self) -> dict[str, str]:
        """Write heads, the search index and the store's revision; return path -> sha256."""
        self.flush()
        encode_time = self.db.dialect.encode_time
        new_heads: list[tuple[Any, ...]] = []
        changed: list[tuple[Any, ...]] = []
        new_index: list[tuple[Any, ...]] = []
        changed_index: list[tuple[int, str, str]] = []
        for path, h in self.heads.items():
            if h.index < 0:
                continue  # not touched by the load
            text = self.content(h.index, h.rev)
            if h.existed:
                changed.append(
                    (
                        h.version,
                        h.sha256,
                        h.size,
                        h.revision,
                        encode_time(h.updated_at),
                        self.store_id,
                        path,
                    )
                )
                changed_index.append((h.file_id, path, text))
            else:
                new_heads.append(
                    (
                        self.store_id,
                        path,
                        h.file_id,
                        h.version,
                        h.sha256,
                        h.size,
                        h.revision,
                        encode_time(h.updated_at),
                    )
                )
                new_index.append((h.file_id, self.store_id, path, text))
        head_columns = (
            "store_id",
            "path",
            "file_id",
            "version",
            "sha256",
            "size",
            "revision",
            "updated_at",
        )
        with self.db.write() as repo:
            self._insert(repo, "heads", head_columns, new_heads)
            cursor = repo.conn.connection.driver_connection.cursor()
            sql = self.db.dialect.sql(
                "UPDATE heads SET version = ?, sha256 = ?, size = ?, revision = ?, "
                "updated_at = ? WHERE store_id = ? AND path = ?"
            )
            if changed:
                cursor.executemany(sql, changed)
            if self.pg:
                with _indexes_rebuilt(cursor, "search_index", len(new_index) + len(changed_index)):
                    self._insert(
                        repo, "search_index", ("file_id", "store_id", "path", "body"), new_index
                    )
                    for file_id, path, text in changed_index:
                        repo.index_file(file_id, path, text, store_id=self.store_id)
                    changed_index = []
                # Reserve the file ids used above in the sequence, as inserts would.
                cursor.execute(
                    "SELECT setval(pg_get_serial_sequence('files', 'id'), %s)",
                    (self.next_file,),
                )
            else:
                for file_id, _store, path, text in new_index:
                    repo.index_file(file_id, path, text, store_id=self.store_id, new=True)
            for file_id, path, text in changed_index:
                repo.index_file(file_id, path, text, store_id=self.store_id)
            cursor.execute(
                self.db.dialect.sql("UPDATE stores SET revision = ? WHERE id = ?"),
                (self.revision, self.store_id),
            )
            cursor.close()
        return {path: h.sha256 for path, h in self.heads.items()}


class RawLoader:
    """The same versions into a raw baseline's tables (heads, versions, search index)."""

    def __init__(self, conn: Any, *, pg: bool, flush_versions: int = 50_000) -> None:
        self.conn = conn
        self.pg = pg
        self.flush_versions = flush_versions
        self.heads: dict[str, _Head] = {
            str(p): _Head(int(f), int(v), str(s), 0, 0, None, True)
            for p, f, v, s in conn.execute("SELECT path, file_id, version, sha256 FROM heads")
        }
        row = conn.execute("SELECT coalesce(max(file_id), 0) FROM heads").fetchone()
        self.next_file = int(row[0])
        self._versions: list[tuple[Any, ...]] = []

    def _now(self) -> Any:
        if self.pg:
            return utcnow()
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    def add_commit(self, changes: Sequence[Version]) -> None:
        now = self._now()
        for v in changes:
            head = self.heads.get(v.path)
            if head is None:
                self.next_file += 1
                head = self.heads[v.path] = _Head(self.next_file, 0, "", 0, 0, now, False)
            head.version += 1
            head.sha256, head.size, head.updated_at = v.sha256, v.size, now
            head.index, head.rev = v.index, v.rev
            self._versions.append((head.file_id, head.version, v.sha256, v.size, v.content, now))
        if len(self._versions) >= self.flush_versions:
            self.flush()

    def _copy_or_many(self, table: str, columns: Sequence[str], rows: Sequence[Any]) -> None:
        if not rows:
            return
        if self.pg:
            with (
                self.conn.cursor() as cur,
                cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy,
            ):
                for row in rows:
                    copy.write_row(row)
        else:
            marks = ", ".join("?" for _ in columns)
            self.conn.executemany(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows
            )

    def _transaction(self) -> Any:
        if self.pg:
            return self.conn.transaction()
        return _SQLiteTransaction(self.conn)

    def flush(self) -> None:
        if not self._versions:
            return
        with self._transaction():
            self._copy_or_many(
                "versions",
                ("file_id", "number", "sha256", "size", "content", "created_at"),
                self._versions,
            )
        self._versions = []

    def finish(self, content: Callable[[int, int], str]) -> dict[str, str]:
        self.flush()
        new_heads: list[tuple[Any, ...]] = []
        changed: list[tuple[Any, ...]] = []
        new_index: list[tuple[Any, ...]] = []
        changed_index: list[tuple[Any, ...]] = []
        for path, h in self.heads.items():
            if h.index < 0:
                continue
            text = content(h.index, h.rev)
            if h.existed:
                changed.append((h.version, h.sha256, h.size, h.updated_at, path))
                changed_index.append((text, h.file_id))
            else:
                new_heads.append((h.file_id, path, h.version, h.sha256, h.size, h.updated_at))
                new_index.append((h.file_id, path, text))
        mark = "%s" if self.pg else "?"
        with self._transaction():
            self._copy_or_many(
                "heads", ("file_id", "path", "version", "sha256", "size", "updated_at"), new_heads
            )
            update = (
                f"UPDATE heads SET version = {mark}, sha256 = {mark}, size = {mark}, "
                f"updated_at = {mark} WHERE path = {mark}"
            )
            if self.pg:
                with self.conn.cursor() as cur:
                    cur.executemany(update, changed)
                    rows = len(new_index) + len(changed_index)
                    with _indexes_rebuilt(cur, "search_index", rows):
                        self._copy_or_many("search_index", ("file_id", "path", "body"), new_index)
                        cur.executemany(
                            "UPDATE search_index SET body = %s WHERE file_id = %s", changed_index
                        )
                    cur.execute(
                        "SELECT setval(pg_get_serial_sequence('heads', 'file_id'), %s)",
                        (self.next_file,),
                    )
            else:
                self.conn.executemany(update, changed)
                self._copy_or_many("search_fts", ("rowid", "path", "body"), new_index)
                self.conn.executemany(
                    "UPDATE search_fts SET body = ? WHERE rowid = ?", changed_index
                )
        return {path: h.sha256 for path, h in self.heads.items()}


#: From this many new rows on, a table's secondary indexes are rebuilt after the COPY.
REBUILD_FROM = 10_000


@contextmanager
def _indexes_rebuilt(cursor: Any, table: str, rows: int) -> Iterator[None]:
    """Drop ``table``'s indexes that back no constraint, run the body, create them again.

    What ``pg_restore`` does: one sorted build per index instead of row-by-row inserts, which
    for the search index's GIN indexes (``tsvector`` and ``pg_trgm``) is many times faster. The
    definitions are PostgreSQL's own (``pg_get_indexdef``), so they come back exactly as the
    migrations made them. In the caller's transaction: the table is locked meanwhile.
    """
    if rows < REBUILD_FROM:
        yield
        return
    cursor.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid "
        "WHERE t.relname = %s AND t.relnamespace = to_regnamespace(current_schema()) "
        "AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid)",
        (table,),
    )
    found = cursor.fetchall()
    for name, _definition in found:
        cursor.execute(f'DROP INDEX "{name}"')
    yield
    cursor.execute("SET LOCAL maintenance_work_mem = '512MB'")
    for _name, definition in found:
        cursor.execute(definition)


class _SQLiteTransaction:
    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self.conn.execute("ROLLBACK" if exc_type is not None else "COMMIT")


# --- the check after loading -----------------------------------------------------------------


def check_store(
    svc: memdir.MemoryService,
    store: str,
    paths: Sequence[str],
    content: Callable[[int, int], str],
    revs: dict[str, int],
    *,
    revision: int,
    samples: int = 200,
    seed: int = 0,
) -> list[str]:
    """Read a loaded store back through the service; return what disagrees (empty: none).

    Checks on ``samples`` random files: the current content, sha256 and version number (rev + 1
    versions per file); every version's content of a few files (``read(version=k)``); the
    per-file history length and the commits ``history(prefix=path)`` finds; searches for a
    quoted phrase of six words (three or more not stop words) from known documents, a phrase
    that over a Zipf vocabulary occurs in that document alone; the store's revision and file count.
    """
    rng = random.Random(f"check:{seed}")
    problems: list[str] = []
    info = svc.store_info(OWNER, store)
    if info.files != len(paths):
        problems.append(f"store holds {info.files} files, expected {len(paths)}")
    if info.revision != revision:
        problems.append(f"store revision {info.revision}, expected {revision}")
    picks = rng.sample(range(len(paths)), min(samples, len(paths)))
    for i in picks:
        path = paths[i]
        rev = revs.get(path, 0)
        expected = content(i, rev)
        got = svc.read(OWNER, store, path)
        if got.content != expected or got.sha256 != sha256_hex(expected) or got.version != rev + 1:
            problems.append(f"{path}: read v{got.version} {got.sha256[:12]}, expected v{rev + 1}")
    for i in picks[:5]:
        path = paths[i]
        rev = revs.get(path, 0)
        history = svc.file_history(OWNER, store, path)
        if [v.version for v in history] != list(range(rev + 1, 0, -1)):
            problems.append(
                f"{path}: history {[v.version for v in history][:5]}..., "
                f"expected {rev + 1} versions"
            )
        for k in range(rev + 1):
            old = svc.read(OWNER, store, path, version=k + 1)
            if old.content != content(i, k):
                problems.append(f"{path}: version {k + 1} content differs")
        commits_seen = svc.history(OWNER, store, prefix=path, limit=rev + 10)
        if len(commits_seen) != rev + 1:
            problems.append(
                f"{path}: history(prefix) has {len(commits_seen)} commits, expected {rev + 1}"
            )
    for i in picks[:20]:
        text = content(i, revs.get(paths[i], 0))
        body = re.findall(r"\w+", text.split("\n\n")[-1])
        start = next(
            (
                k
                for k in range(len(body))
                if sum(w.lower() not in STOP_WORDS for w in body[k : k + 6]) >= 3
            ),
            0,
        )
        words = body[start : start + 6]
        hits = svc.search(OWNER, store, '"' + " ".join(words) + '"', limit=10)
        if paths[i] not in {h.path for h in hits}:
            problems.append(f"search for the phrase {' '.join(words)!r} missed {paths[i]}")
    return problems


# --- the loader against the service ----------------------------------------------------------


def store_rows(svc: memdir.MemoryService, store: str) -> dict[str, list[Any]]:
    """Every row of a store that the service writes, with what must differ between two loads
    of the same history taken out: commit ids and times become the commit's revision, file ids
    the file's first path. Sorted, so two stores compare with ``==``."""
    from memdir.storage.schema import heads, stores

    with svc.db.read() as repo:
        conn = repo.conn
        store_id, revision = conn.execute(
            sa.select(stores.c.id, stores.c.revision).where(stores.c.name == store)
        ).one()
        first_path = dict(
            conn.execute(
                sa.select(versions.c.file_id, versions.c.path).where(
                    versions.c.store_id == store_id, versions.c.number == 1
                )
            ).all()
        )
        commit_rev = dict(
            conn.execute(
                sa.select(commits.c.id, commits.c.revision).where(commits.c.store_id == store_id)
            ).all()
        )
        out: dict[str, list[Any]] = {"revision": [revision]}
        out["commits"] = sorted(
            (
                r.revision, r.actor, r.session, r.transcript, r.reason, r.source_kind,
                r.idempotency_key, r.request_hash, r.proposal_id,
                json.dumps([{**op, "file_id": first_path[op["file_id"]]}
                            for op in json.loads(r.result)["results"]]),
            )
            for r in conn.execute(sa.select(commits).where(commits.c.store_id == store_id))
        )  # fmt: skip
        out["files"] = sorted(
            (first_path[r.id], r.created_revision)
            for r in conn.execute(sa.select(files).where(files.c.store_id == store_id))
        )
        out["versions"] = sorted(
            (
                first_path[r.file_id], r.number, commit_rev[r.commit_id], r.revision,
                r.operation, r.path, r.old_path, r.sha256, r.size, r.redacted_at, r.findings,
            )
            for r in conn.execute(sa.select(versions).where(versions.c.store_id == store_id))
        )  # fmt: skip
        out["blobs"] = sorted(
            (r.sha256, r.size, r.content)
            for r in conn.execute(sa.select(blobs).where(blobs.c.store_id == store_id))
        )
        out["heads"] = sorted(
            (r.path, first_path[r.file_id], r.version, r.sha256, r.size, r.revision)
            for r in conn.execute(sa.select(heads).where(heads.c.store_id == store_id))
        )
        live = {int(r.file_id) for r in conn.execute(
            sa.select(heads.c.file_id).where(heads.c.store_id == store_id))}  # fmt: skip
        if svc.db.url.get_backend_name() == "postgresql":
            index_sql = "SELECT file_id, path, body, tsv::text FROM search_index"
        else:
            index_sql = f"SELECT rowid, path, body, NULL FROM search_fts_{int(store_id)}"
        out["search index"] = sorted(
            (first_path[int(r[0])], r[1], r[2], r[3])
            for r in conn.exec_driver_sql(index_sql)
            if int(r[0]) in live
        )
    return out


def compare_loads(
    svc: memdir.MemoryService,
    paths: Sequence[str],
    content: Callable[[int, int], str],
    *,
    sample: int,
    total_versions: int,
    batch: int,
    provenance: Provenance,
) -> list[str]:
    """Load one history through ``svc.commit`` and through :class:`MemdirLoader` into two new
    stores; return the tables whose rows differ (see :func:`store_rows`)."""
    from memdir import Write

    names = []
    for how in ("service", "bulk"):
        name = f"loadcheck-{how}-{random.randrange(1 << 30)}"
        svc.create_store(OWNER, name)
        names.append(name)
        shas: dict[str, str] = {}
        for i in range(sample):  # one file per commit, as the benchmark's create sample
            result = svc.write(OWNER, name, paths[i], content(i, 0), if_absent=True)
            shas[paths[i]] = result.results[0].sha256 or ""
        loader = MemdirLoader(svc, name, provenance, content)
        for steps in plan_history(len(paths), sample, total_versions, batch):
            changes = materialise(steps, paths, content)
            if how == "bulk":
                loader.add_commit(changes)
                continue
            ops = [
                Write(v.path, v.content, if_absent=True)
                if v.rev == 0
                else Write(v.path, v.content, if_match=shas[v.path])
                for v in changes
            ]
            for op in svc.commit(OWNER, name, ops, provenance).results:
                shas[op.path] = op.sha256 or ""
        if how == "bulk":
            loader.finish()
    a, b = (store_rows(svc, n) for n in names)
    for name in names:
        svc.delete_store(OWNER, name)
    return [f"{table}: {len(a[table])} rows by the service, {len(b[table])} by the loader"
            + ("" if len(a[table]) != len(b[table]) else " (contents differ)")
            for table in a if a[table] != b[table]]  # fmt: skip
