"""The queries the service runs inside one transaction.

A :class:`Repository` wraps one connection with an open transaction; it makes no decisions —
preconditions, path rules and edits are the service's and the core's. Most methods are
dialect-neutral SQLAlchemy Core. The few that every read and write runs (store, head, blob,
the compare-and-swap, version and commit rows) are fixed SQL on the driver cursor of the same
connection, inside the same transaction: building Core statements costs ~100 µs each, which
would dominate a write; the SQL is portable (``?`` becomes ``%s`` for psycopg) and values are
encoded as SQLAlchemy would store them (:meth:`Dialect.encode_time`). They return small
named tuples with the same attribute names as the Core rows.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from memdir.core.paths import descendant_range
from memdir.core.ranges import PathRange, readable_ranges
from memdir.search.query import Query
from memdir.storage.database import Dialect
from memdir.storage.schema import (
    blobs,
    commits,
    file_meta,
    file_reads,
    files,
    heads,
    proposals,
    stores,
    versions,
)

__all__ = ["HeadRow", "Repository", "StoreRow"]

_INT32 = 2**31  # the bound of a 32-bit integer column (versions.number)

Row = Any  # an sa.Row or one of the named tuples below: attribute access by column name


class StoreRow(NamedTuple):
    id: int
    name: str
    revision: int
    created_at: dt.datetime
    archived_at: dt.datetime | None


class HeadRow(NamedTuple):
    store_id: int
    path: str
    file_id: int
    version: int
    sha256: str
    size: int
    revision: int
    updated_at: dt.datetime


_HEAD_COLUMNS = "store_id, path, file_id, version, sha256, size, revision, updated_at"


def in_ranges(column: Any, ranges: Sequence[PathRange]) -> Any:
    """A WHERE clause: ``column`` lies in one of ``ranges`` (each a key range and a path)."""
    clauses = []
    for r in ranges:
        clause: Any = sa.and_(column >= r.lo, column < r.hi)
        if r.exact is not None:
            clause = sa.or_(column == r.exact, clause)
        clauses.append(clause)
    return sa.or_(*clauses) if clauses else sa.false()


class DirectoryCounts:
    """Live-file counts of directories, remembered per store revision (thread-safe).

    Every change to ``heads`` is made by a commit, which advances the store's revision in the
    same transaction; a count read in a snapshot at revision R therefore holds for every
    snapshot at R, on any server. Keys carry the store's id, creation time and revision, so
    neither a later revision nor a store created again under a reused id finds an old count.
    Repeated listings between writes then cost one probe per entry; the first after a write
    counts in the index again.
    """

    LIMIT = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[tuple[int, Any, int, str], int] = {}

    def count(self, repo: Repository, store: Any, directory: str) -> int:
        key = (int(store.id), store.created_at, int(store.revision), directory)
        with self._lock:
            found = self._counts.get(key)
        if found is not None:
            return found
        files = repo.count_under(int(store.id), directory)
        with self._lock:
            if len(self._counts) >= self.LIMIT:
                self._counts.clear()
            self._counts[key] = files
        return files


def _touching(store_id: int, ranges: Sequence[PathRange]) -> Any:
    """The ids of commits with a version whose path or old path lies in ``ranges``: one
    simple index range per term (``(store_id, path)``, the renames' ``(store_id, old_path)``),
    as an OR of them would make the planner read every version of the store."""
    parts: list[Any] = []
    for r in ranges:
        for column in (versions.c.path, versions.c.old_path):
            base = sa.select(versions.c.commit_id).where(versions.c.store_id == store_id)
            parts.append(base.where(column >= r.lo, column < r.hi))
            if r.exact is not None:
                parts.append(base.where(column == r.exact))
    return sa.union_all(*parts)


def _first_key(result: sa.CursorResult[Any]) -> Any:
    key = result.inserted_primary_key
    assert key is not None
    return key[0]


class Repository:
    """Queries over one transaction. See :mod:`memdir.storage.schema` for the invariants."""

    def __init__(self, conn: Connection, dialect: Dialect) -> None:
        self.conn = conn
        self.dialect = dialect
        self._cursor: Any = None

    def raw(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run fixed SQL (``?`` placeholders) on the driver cursor of this transaction."""
        cursor = self._cursor
        if cursor is None:
            cursor = self._cursor = self.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(self.dialect.sql(sql), params)
        return cursor

    def _head_row(self, row: Any) -> HeadRow | None:
        if row is None:
            return None
        return HeadRow(
            row[0], row[1], row[2], row[3], row[4], row[5], row[6], self.dialect.decode_time(row[7])
        )

    # --- stores ---------------------------------------------------------------------------

    def store(self, name: str) -> StoreRow | None:
        row = self.raw(
            "SELECT id, name, revision, created_at, archived_at FROM stores WHERE name = ?",
            (name,),
        ).fetchone()
        if row is None:
            return None
        decode = self.dialect.decode_time
        return StoreRow(row[0], row[1], row[2], decode(row[3]), decode(row[4]))

    def stores(self) -> Sequence[Row]:
        count = (
            sa.select(sa.func.count())
            .select_from(heads)
            .where(heads.c.store_id == stores.c.id)
            .scalar_subquery()
        )
        query = sa.select(stores, count.label("files")).order_by(stores.c.name)
        return self.conn.execute(query).all()

    def create_store(self, name: str, now: dt.datetime) -> int | None:
        """Insert a store and return its id; None when the name is taken, also by a concurrent
        transaction (PostgreSQL waits for it, then inserts nothing instead of failing)."""
        value = self.conn.execute(
            self.dialect.insert_ignore(stores)
            .values(name=name, revision=0, created_at=now)
            .returning(stores.c.id)
        ).scalar()
        if value is None:
            return None
        self.dialect.create_index(self.conn, int(value))
        return int(value)

    def archive_store(self, store_id: int, now: dt.datetime) -> None:
        self.conn.execute(sa.update(stores).where(stores.c.id == store_id).values(archived_at=now))

    def delete_store(self, store_id: int) -> None:
        self.dialect.drop_index(self.conn, store_id)
        for table in (file_meta, file_reads, heads, versions, commits, blobs, files, proposals):
            self.conn.execute(sa.delete(table).where(table.c.store_id == store_id))
        self.conn.execute(sa.delete(stores).where(stores.c.id == store_id))

    def bump_revision(self, store_id: int) -> int | None:
        """Increment the store's counter row and return the new revision.

        The UPDATE takes the row's write lock until the transaction ends: committers to one
        store are serialised and their revisions are gap-free. None when the store is gone or
        archived (by a transaction this one waited for).
        """
        row = self.raw(
            "UPDATE stores SET revision = revision + 1 WHERE id = ? AND archived_at IS NULL "
            "RETURNING revision",
            (store_id,),
        ).fetchone()
        return None if row is None else int(row[0])

    def lock_store(self, store_id: int) -> bool:
        """Take the store's write lock (its counter row) without changing the revision.

        For changes that are not commits (redaction, deleting the store) but must still not
        interleave with one. (On SQLite the writer transaction already holds the database's
        lock.) False when the store is gone.
        """
        cursor = self.raw("UPDATE stores SET revision = revision WHERE id = ?", (store_id,))
        return bool(cursor.rowcount == 1)

    # --- heads ----------------------------------------------------------------------------

    def head(self, store_id: int, path: str) -> HeadRow | None:
        return self._head_row(
            self.raw(
                f"SELECT {_HEAD_COLUMNS} FROM heads WHERE store_id = ? AND path = ?",
                (store_id, path),
            ).fetchone()
        )

    def head_by_file(self, file_id: int) -> HeadRow | None:
        return self._head_row(
            self.raw(f"SELECT {_HEAD_COLUMNS} FROM heads WHERE file_id = ?", (file_id,)).fetchone()
        )

    def first_file_among(self, store_id: int, paths: Sequence[str]) -> str | None:
        """The first of ``paths`` that is a live file (used to find a file ancestor)."""
        if not paths:
            return None
        row = self.conn.execute(
            sa.select(heads.c.path)
            .where(heads.c.store_id == store_id, heads.c.path.in_(paths))
            .order_by(heads.c.path)
            .limit(1)
        ).first()
        return None if row is None else str(row[0])

    def first_under(self, store_id: int, directory: str) -> str | None:
        """Some live file strictly under ``directory``, or None."""
        lo, hi = descendant_range(directory)
        row = self.conn.execute(
            sa.select(heads.c.path)
            .where(heads.c.store_id == store_id, heads.c.path >= lo, heads.c.path < hi)
            .limit(1)
        ).first()
        return None if row is None else str(row[0])

    def next_head(self, store_id: int, start: str, hi: str, *, inclusive: bool) -> HeadRow | None:
        """The first live file with ``start <= path < hi`` (``start < path`` unless
        ``inclusive``) in path order: one probe of the ``(store_id, path)`` key, so a listing
        can skip from one child of a directory to the next without reading what lies between.
        """
        op = ">=" if inclusive else ">"
        row = self.raw(
            f"SELECT {_HEAD_COLUMNS} FROM heads WHERE store_id = ? AND path {op} ? AND path < ? "
            "ORDER BY path LIMIT 1",
            (store_id, start, hi),
        ).fetchone()
        return self._head_row(row)

    def count_under(self, store_id: int, directory: str) -> int:
        """How many live files lie strictly under ``directory`` (counted in the key's index)."""
        lo, hi = descendant_range(directory)
        row = self.raw(
            "SELECT count(*) FROM heads WHERE store_id = ? AND path >= ? AND path < ?",
            (store_id, lo, hi),
        ).fetchone()
        return int(row[0])

    def heads_under(
        self,
        store_id: int,
        directory: str,
        *,
        with_content: bool = False,
        prefixes: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        """Live files strictly under ``directory`` in path order (streamed).

        ``prefixes`` (see :mod:`memdir.core.ranges`) restricts the scan to the key ranges a
        caller may read; None scans the whole directory.
        """
        ranges = readable_ranges(directory, prefixes)
        if ranges == []:
            return
        columns: list[Any] = [heads]
        query_from: Any = heads
        if with_content:
            columns.append(blobs.c.content)
            query_from = heads.join(
                blobs, (blobs.c.store_id == heads.c.store_id) & (blobs.c.sha256 == heads.c.sha256)
            )
        query = (
            sa.select(*columns)
            .select_from(query_from)
            .where(heads.c.store_id == store_id)
            .order_by(heads.c.path)
        )
        if ranges is not None:
            query = query.where(in_ranges(heads.c.path, ranges))
        yield from self.conn.execute(query)

    def grep_candidates(
        self,
        store_id: int,
        directory: str,
        literals: Sequence[str],
        ignore_case: bool,
        prefixes: Sequence[str] | None = None,
    ) -> Iterator[Row]:
        """Live files under ``directory`` (path, content) that contain every literal."""
        ranges = readable_ranges(directory, prefixes)
        if ranges == []:
            return
        yield from self.dialect.grep_candidates(self.conn, store_id, ranges, literals, ignore_case)

    def insert_head(
        self,
        store_id: int,
        path: str,
        file_id: int,
        version: int,
        sha256: str,
        size: int,
        revision: int,
        updated_at: dt.datetime,
    ) -> None:
        self.raw(
            f"INSERT INTO heads ({_HEAD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (store_id, path, file_id, version, sha256, size, revision,
             self.dialect.encode_time(updated_at)),
        )  # fmt: skip

    def cas_update_head(
        self,
        store_id: int,
        path: str,
        expected_sha256: str,
        *,
        version: int,
        sha256: str,
        size: int,
        revision: int,
        updated_at: dt.datetime,
    ) -> bool:
        """Compare-and-swap: update the head only if its sha256 is still ``expected_sha256``."""
        cursor = self.raw(
            "UPDATE heads SET version = ?, sha256 = ?, size = ?, revision = ?, updated_at = ? "
            "WHERE store_id = ? AND path = ? AND sha256 = ?",
            (version, sha256, size, revision, self.dialect.encode_time(updated_at),
             store_id, path, expected_sha256),
        )  # fmt: skip
        return bool(cursor.rowcount == 1)

    def delete_head(self, store_id: int, path: str, expected_sha256: str) -> bool:
        cursor = self.raw(
            "DELETE FROM heads WHERE store_id = ? AND path = ? AND sha256 = ?",
            (store_id, path, expected_sha256),
        )
        return bool(cursor.rowcount == 1)

    def count_heads(self, store_id: int) -> int:
        return int(
            self.conn.execute(
                sa.select(sa.func.count()).select_from(heads).where(heads.c.store_id == store_id)
            ).scalar_one()
        )

    # --- files, blobs, versions -----------------------------------------------------------

    def new_file(self, store_id: int, revision: int) -> int:
        result = self.conn.execute(
            sa.insert(files).values(store_id=store_id, created_revision=revision)
        )
        return int(_first_key(result))

    def put_blob(self, store_id: int, sha256: str, content: str, size: int) -> None:
        """Store content once per (store, sha256); a second put of the same content is a no-op."""
        self.raw(
            "INSERT INTO blobs (store_id, sha256, size, content) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (store_id, sha256) DO NOTHING",
            (store_id, sha256, size, content),
        )

    def blob(self, store_id: int, sha256: str) -> str | None:
        row = self.raw(
            "SELECT content FROM blobs WHERE store_id = ? AND sha256 = ?", (store_id, sha256)
        ).fetchone()
        return None if row is None else str(row[0])

    def delete_blob(self, store_id: int, sha256: str) -> None:
        self.conn.execute(
            sa.delete(blobs).where(blobs.c.store_id == store_id, blobs.c.sha256 == sha256)
        )

    def insert_versions(self, rows: Sequence[dict[str, Any]]) -> None:
        """Append version rows (dicts with every column but ``id``) in one round trip."""
        columns = (
            "store_id", "file_id", "number", "commit_id", "revision", "operation", "path",
            "old_path", "sha256", "size", "findings",
        )  # fmt: skip
        encode = self.dialect.encode_json
        params = [
            tuple(encode(r.get(c)) if c == "findings" else r.get(c) for c in columns) for r in rows
        ]
        sql = self.dialect.sql(
            f"INSERT INTO versions ({', '.join(columns)}) VALUES "
            f"({', '.join('?' for _ in columns)})"
        )
        if self._cursor is None:
            self.raw("SELECT 1")
        self._cursor.executemany(sql, params)

    def _versions_query(self) -> sa.Select[Any]:
        return sa.select(
            versions,
            commits.c.actor,
            commits.c.created_at,
            commits.c.reason,
            commits.c.session,
            commits.c.source_kind,
        ).join(commits, commits.c.id == versions.c.commit_id)

    def version(self, file_id: int, number: int) -> Row | None:
        """Version ``number`` of a file, or None. Version numbers are 32-bit in the schema: a
        larger (still 64-bit valid) number names no version, and PostgreSQL would refuse to
        compare it with the column."""
        if not -_INT32 <= number < _INT32:
            return None
        return self.conn.execute(
            self._versions_query().where(versions.c.file_id == file_id, versions.c.number == number)
        ).first()

    def last_file_at(self, store_id: int, path: str) -> int | None:
        """The file that most recently had a version at ``path`` (live or not)."""
        value = self.conn.execute(
            sa.select(versions.c.file_id)
            .where(versions.c.store_id == store_id, versions.c.path == path)
            .order_by(versions.c.id.desc())
            .limit(1)
        ).scalar()
        return None if value is None else int(value)

    def file_versions(self, file_id: int, limit: int | None = None) -> Sequence[Row]:
        query = (
            self._versions_query()
            .where(versions.c.file_id == file_id)
            .order_by(versions.c.number.desc())
        )
        if limit is not None:
            query = query.limit(limit)
        return self.conn.execute(query).all()

    def commit_versions(self, commit_ids: Sequence[str]) -> Sequence[Row]:
        if not commit_ids:
            return []
        return self.conn.execute(
            self._versions_query()
            .where(versions.c.commit_id.in_(commit_ids))
            .order_by(versions.c.id)
        ).all()

    def versions_with_sha(self, store_id: int, sha256: str) -> Sequence[Row]:
        return self.conn.execute(
            self._versions_query()
            .where(versions.c.store_id == store_id, versions.c.sha256 == sha256)
            .order_by(versions.c.id)
        ).all()

    def heads_with_sha(self, store_id: int, sha256: str) -> list[str]:
        return [
            str(p)
            for p in self.conn.execute(
                sa.select(heads.c.path).where(
                    heads.c.store_id == store_id, heads.c.sha256 == sha256
                )
            ).scalars()
        ]

    def redact_versions(
        self,
        store_id: int,
        sha256: str,
        version_ids: Sequence[int],
        actor: str,
        now: dt.datetime,
    ) -> int:
        """Remove content and sha256 from these versions (all holding ``sha256``); the blob
        goes too once no other version and no live file holds it."""
        result = self.conn.execute(
            sa.update(versions)
            .where(versions.c.id.in_(version_ids), versions.c.sha256 == sha256)
            .values(sha256=None, redacted_at=now, redacted_by=actor)
        )
        kept = self.conn.execute(
            sa.select(versions.c.id)
            .where(versions.c.store_id == store_id, versions.c.sha256 == sha256)
            .limit(1)
        ).first()
        if kept is None and not self.heads_with_sha(store_id, sha256):
            self.delete_blob(store_id, sha256)
        return int(result.rowcount)

    # --- commits --------------------------------------------------------------------------

    def insert_commit(self, **values: Any) -> None:
        """Insert a commit row; ``values`` has every column of ``commits``."""
        columns = (
            "id", "store_id", "revision", "actor", "created_at", "session", "transcript",
            "reason", "source_kind", "idempotency_key", "request_hash", "result", "proposal_id",
        )  # fmt: skip
        values["created_at"] = self.dialect.encode_time(values["created_at"])
        self.raw(
            f"INSERT INTO commits ({', '.join(columns)}) VALUES "
            f"({', '.join('?' for _ in columns)})",
            tuple(values.get(c) for c in columns),
        )

    def commit_by_key(self, store_id: int, actor: str, key: str) -> Row | None:
        return self.conn.execute(
            sa.select(commits).where(
                commits.c.store_id == store_id,
                commits.c.actor == actor,
                commits.c.idempotency_key == key,
            )
        ).first()

    def commits_by_prefix(self, store_id: int, prefix: str, limit: int = 2) -> Sequence[Row]:
        return self.conn.execute(
            sa.select(commits)
            .where(commits.c.store_id == store_id, commits.c.id.startswith(prefix))
            .limit(limit)
        ).all()

    def commits(
        self,
        store_id: int,
        *,
        actor: str | None = None,
        session: str | None = None,
        prefix: str | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        before_revision: int | None = None,
        limit: int = 50,
        prefixes: Sequence[str] | None = None,
    ) -> Sequence[Row]:
        """Commits newest first, filtered; ``prefix`` keeps commits touching a path under it,
        ``prefixes`` (the caller's readable ones) commits touching a path in their ranges."""
        narrow = prefix is not None and prefix != "/"
        # With a directory, the commits touching it drive the query (each found by its id):
        # the store's key would walk every commit newest first looking for them.
        store_key = (commits.c.store_id + 0) if narrow else commits.c.store_id
        query = sa.select(commits).where(store_key == store_id)
        if prefixes is not None:
            ranges = readable_ranges("/", prefixes)
            if ranges == []:
                return []
            if ranges is not None:
                query = query.where(commits.c.id.in_(_touching(store_id, ranges)))
        if actor is not None:
            query = query.where(commits.c.actor == actor)
        if session is not None:
            query = query.where(commits.c.session == session)
        if since is not None:
            query = query.where(commits.c.created_at >= since)
        if until is not None:
            query = query.where(commits.c.created_at < until)
        if before_revision is not None:
            query = query.where(commits.c.revision < before_revision)
        if narrow:
            assert prefix is not None
            touched = _touching(store_id, [PathRange(*descendant_range(prefix), prefix)])
            query = query.where(commits.c.id.in_(touched))
        query = query.order_by(commits.c.revision.desc()).limit(limit)
        return self.conn.execute(query).all()

    def commits_after(self, store_id: int, after: int, limit: int) -> Sequence[Row]:
        """Commits with a revision above ``after``, oldest first (the change feed)."""
        return self.conn.execute(
            sa.select(commits)
            .where(commits.c.store_id == store_id, commits.c.revision > after)
            .order_by(commits.c.revision)
            .limit(limit)
        ).all()

    # --- search ---------------------------------------------------------------------------

    def index_file(
        self, file_id: int, path: str, content: str, *, store_id: int, new: bool = False
    ) -> None:
        """Put a live file in its store's search index (``new``: it is not indexed yet)."""
        self.dialect.index_file(self.conn, store_id, file_id, path, content, new=new)

    def unindex_file(self, file_id: int, *, store_id: int) -> None:
        self.dialect.unindex_file(self.conn, store_id, file_id)

    def search(
        self,
        store_id: int,
        query: Query,
        directory: str,
        limit: int,
        readable: Callable[[str], bool] | None,
        prefixes: Sequence[str] | None = None,
    ) -> list[tuple[str, str, str, int]]:
        """The best ``limit`` matches ``readable`` accepts, as (path, snippet, sha256,
        version).

        Ranked over the readable matches only (see :mod:`memdir.search.rank`). ``readable``
        None means the caller may read every file of the store: the backend may then rank
        with its index's own statistics (SQLite's fast path, ``bm25()``).
        """
        ranges = readable_ranges(directory, prefixes)
        if ranges == []:
            return []
        return self.dialect.search(self.conn, store_id, query, ranges, limit, readable)
