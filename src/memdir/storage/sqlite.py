"""SQLite specifics: connection set-up, writer serialisation, the FTS5 index, online backup.

- WAL journal, foreign keys on, a busy timeout, and ``synchronous`` from the URL's query
  (``sqlite:///PATH?synchronous=full``; see :data:`SYNCHRONOUS`): ``normal`` (the default) is
  durable against process crashes — a killed process loses nothing it committed — but a power
  loss or OS crash may drop the last transactions (never corrupt the file); ``full`` syncs the
  WAL at every commit, so a commit that returned survives a power loss too, at a cost per
  commit measured by ``benchmarks/store.py --synchronous``.
- The driver's own transaction handling is turned off; memdir emits ``BEGIN IMMEDIATE`` for
  writers, so there is exactly one writer per database file and it holds the lock from its
  first statement — a read-then-write inside a transaction cannot be overtaken — and plain
  ``BEGIN`` for readers, which in WAL mode never block and are never blocked.
- Full-text search is one FTS5 table per store, ``search_fts_<store id>(path, body)``, whose
  rowid is the file id, kept in sync in the writing transaction. One table per store keeps
  each store's index scans — and so search time — independent of every other store.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from memdir.core.errors import InvalidInput
from memdir.core.ranges import PathRange
from memdir.search.fts5 import TOKENIZER, compile_match, compile_term
from memdir.search.query import Query
from memdir.search.rank import BODY_WEIGHT, PATH_WEIGHT, top
from memdir.storage.statements import TIME_FORMAT

__all__ = ["SYNCHRONOUS", "SQLiteDialect", "create_fts_table", "fts_table", "fts_tables"]

#: The durability levels memdir offers (``PRAGMA synchronous``), the first the default.
SYNCHRONOUS = ("normal", "full")

_FTS_TABLE = re.compile(r"^search_fts_[0-9]+$")


def fts_table(store_id: int) -> str:
    """The name of a store's FTS5 table (the id is an integer: nothing to quote)."""
    return f"search_fts_{int(store_id)}"


def create_fts_table(cursor: Any, store_id: int) -> None:
    """(Re)create a store's empty FTS5 table on a DB-API cursor."""
    table = fts_table(store_id)
    cursor.execute(f"DROP TABLE IF EXISTS {table}")
    cursor.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(path, body, tokenize = '{TOKENIZER}')")


def fts_tables(conn: Connection) -> list[str]:
    """Every store's FTS5 table (not their shadow tables)."""
    names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'").scalars()
    return sorted(str(n) for n in names if _FTS_TABLE.match(str(n)))


def _cursor(conn: Connection) -> Any:
    return conn.connection.driver_connection.cursor()  # type: ignore[union-attr]


def _range_sql(column: str, ranges: Sequence[PathRange] | None) -> tuple[str, list[str]]:
    """`` AND (...)`` keeping ``column`` in ``ranges`` (nothing for None), and its values."""
    if ranges is None:
        return "", []
    clauses: list[str] = []
    params: list[str] = []
    for r in ranges:
        if r.exact is None:
            clauses.append(f"({column} >= ? AND {column} < ?)")
            params += [r.lo, r.hi]
        else:
            clauses.append(f"({column} = ? OR ({column} >= ? AND {column} < ?))")
            params += [r.exact, r.lo, r.hi]
    return " AND (" + (" OR ".join(clauses) or "0") + ")", params


BUSY_TIMEOUT_MS = 60_000


class SQLiteDialect:
    """The SQLite half of the storage port (see :class:`memdir.storage.database.Dialect`)."""

    name = "sqlite"

    def __init__(self) -> None:
        self.synchronous = SYNCHRONOUS[0]

    def engine_kwargs(self, url: sa.URL) -> dict[str, Any]:
        return {"connect_args": {"timeout": BUSY_TIMEOUT_MS / 1000, "check_same_thread": False}}

    def prepare_url(self, url: sa.URL, *, create: bool) -> sa.URL:
        """Take memdir's ``synchronous`` option out of the URL (the driver does not know it)
        and create the database's parent directory when creating a file database."""
        value = url.query.get("synchronous", SYNCHRONOUS[0])
        if not isinstance(value, str) or value.lower() not in SYNCHRONOUS:
            raise InvalidInput(
                f"synchronous={value!r} in the database URL is not a durability level memdir "
                f"offers; use one of {', '.join(SYNCHRONOUS)} (see docs/configuration.md)",
                synchronous=str(value),
            )
        self.synchronous = value.lower()
        database = url.database
        if create and database and database != ":memory:":
            Path(database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
        return url.difference_update_query(["synchronous"])

    def database_exists(self, url: sa.URL) -> bool:
        database = url.database
        return not database or database == ":memory:" or Path(database).expanduser().exists()

    def configure(self, engine: Engine) -> None:
        synchronous = self.synchronous.upper()

        @sa.event.listens_for(engine, "connect")
        def _connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None  # memdir emits BEGIN itself
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
            cursor.close()

        @sa.event.listens_for(engine, "begin")
        def _begin(conn: Connection) -> None:
            write = conn.get_execution_options().get("memdir_write", False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    # --- full-text index ------------------------------------------------------------------

    def create_index(self, conn: Connection, store_id: int) -> None:
        """A store's FTS5 table (a leftover of a deleted store with the same id goes first)."""
        create_fts_table(_cursor(conn), store_id)

    def drop_index(self, conn: Connection, store_id: int) -> None:
        _cursor(conn).execute(f"DROP TABLE IF EXISTS {fts_table(store_id)}")

    def index_file(
        self, conn: Connection, store_id: int, file_id: int, path: str, content: str, *, new: bool
    ) -> None:
        cursor = _cursor(conn)
        table = fts_table(store_id)
        if new:
            cursor.execute(
                f"INSERT INTO {table} (rowid, path, body) VALUES (?, ?, ?)",
                (file_id, path, content),
            )
        else:
            cursor.execute(
                f"UPDATE {table} SET path = ?, body = ? WHERE rowid = ?", (path, content, file_id)
            )

    def unindex_file(self, conn: Connection, store_id: int, file_id: int) -> None:
        _cursor(conn).execute(f"DELETE FROM {fts_table(store_id)} WHERE rowid = ?", (file_id,))

    # --- values on the driver path (as SQLAlchemy stores them) ----------------------------

    def sql(self, text: str) -> str:
        return text  # sqlite3 takes ? placeholders

    def encode_time(self, value: dt.datetime | None) -> str | None:
        """SQLAlchemy's SQLite DateTime format, in UTC."""
        if value is None:
            return None
        return value.astimezone(dt.UTC).strftime(TIME_FORMAT)

    def decode_time(self, value: Any) -> Any:
        if isinstance(value, str):
            return dt.datetime.fromisoformat(value).replace(tzinfo=dt.UTC)
        return value

    def encode_json(self, value: Any) -> Any:
        return None if value is None else json.dumps(value)

    def indexed_files(self, conn: Connection) -> list[tuple[int, str]]:
        """(file id, path) of every indexed row, for consistency checks."""
        out: list[tuple[int, str]] = []
        for table in fts_tables(conn):
            rows = conn.exec_driver_sql(f"SELECT rowid, path FROM {table}").all()
            out += [(int(r[0]), str(r[1])) for r in rows]
        return out

    def search(
        self,
        conn: Connection,
        store_id: int,
        query: Query,
        ranges: Sequence[PathRange] | None,
        limit: int,
        readable: Callable[[str], bool] | None,
    ) -> list[tuple[str, str, str, int]]:
        """The best ``limit`` readable matches: (path, snippet, sha256, version), best first.

        BM25 is computed here over the readable matches only (see :mod:`memdir.search.rank`):
        FTS5's own ``bm25()`` takes its statistics from the whole table, so the order would
        depend on documents the caller cannot read. Each term's MATCH gives the files that
        contain it; their heads are read once (unreadable ones dropped); the candidates' term
        frequencies come from ``highlight()`` with a one-character opening marker and an
        empty closing one, exactly that many characters longer than the column.
        """
        if readable is None:
            return self._search_whole(conn, store_id, query, ranges, limit)
        table = fts_table(store_id)
        cursor = _cursor(conn)
        terms = [compile_term(t) for t in query.terms]
        having: list[set[int]] = []
        for term in terms:
            rows = cursor.execute(f"SELECT rowid FROM {table} WHERE {table} MATCH ?", (term,))
            having.append({int(r[0]) for r in rows})
        matched = set().union(*having)
        if not matched:
            return []
        where, params = _range_sql("path", ranges)
        heads = cursor.execute(
            "SELECT file_id, path, size FROM heads WHERE store_id = ? "
            f"AND file_id IN (SELECT value FROM json_each(?)) {where}",
            (store_id, json.dumps(sorted(matched)), *params),
        ).fetchall()
        paths = {int(h[0]): str(h[1]) for h in heads if readable is None or readable(h[1])}
        lengths = {int(h[0]): int(h[2]) + len(h[1]) for h in heads if int(h[0]) in paths}
        having = [files & paths.keys() for files in having]

        def frequencies(candidates: list[int]) -> dict[int, list[float]]:
            ids = json.dumps(candidates)
            tf: dict[int, list[float]] = {fid: [0.0] * len(terms) for fid in candidates}
            for index, term in enumerate(terms):
                rows = cursor.execute(
                    f"SELECT rowid, length(highlight({table}, 0, char(1), '')) - length(path), "
                    f"length(highlight({table}, 1, char(1), '')) - length(body) FROM {table} "
                    f"WHERE {table} MATCH ? AND rowid IN (SELECT value FROM json_each(?))",
                    (term, ids),
                )
                for row in rows:
                    tf[int(row[0])][index] = PATH_WEIGHT * row[1] + BODY_WEIGHT * row[2]
            return tf

        best = top(lengths, paths, having, limit, frequencies)
        return self._results(conn, table, query, best)

    def _search_whole(
        self,
        conn: Connection,
        store_id: int,
        query: Query,
        ranges: Sequence[PathRange] | None,
        limit: int,
    ) -> list[tuple[str, str, str, int]]:
        """The fast path, for a caller that may read every file of the store (``readable``
        None: the service passes it only then): FTS5's own ``bm25()`` with the same column
        weights, ranked in the index. Its statistics span the store's table, every document
        of which this caller may read, so nothing it cannot see moves a result. Ties by path.
        """
        match = compile_match(query)
        if match is None:
            return []
        table = fts_table(store_id)
        where, params = _range_sql("h.path", ranges)
        # Ranked in a subquery, so snippet() runs for the ``limit`` rows returned only.
        rows = _cursor(conn).execute(
            f"SELECT h.path, snippet({table}, 1, '[', ']', '…', 24), h.sha256, h.version "
            f"FROM (SELECT {table}.rowid AS rid, h.path AS path, "
            f"bm25({table}, {PATH_WEIGHT}, {BODY_WEIGHT}) AS score "
            f"FROM {table} CROSS JOIN heads h ON h.file_id = {table}.rowid "
            f"WHERE {table} MATCH ? AND h.store_id = ? {where} "
            f"ORDER BY score, h.path LIMIT ?) AS top "
            f"JOIN {table} ON {table}.rowid = top.rid JOIN heads h ON h.file_id = top.rid "
            f"WHERE {table} MATCH ? ORDER BY top.score, top.path",
            (match, store_id, *params, limit, match),
        )
        return [(str(r[0]), str(r[1]), str(r[2]), int(r[3])) for r in rows]

    def _results(
        self, conn: Connection, table: str, query: Query, file_ids: list[int]
    ) -> list[tuple[str, str, str, int]]:
        """(path, snippet, sha256, version) of ``file_ids``, in that order."""
        match = compile_match(query)
        if match is None or not file_ids:
            return []
        rows = _cursor(conn).execute(
            f"SELECT h.file_id, h.path, snippet({table}, 1, '[', ']', '…', 24), h.sha256, "
            f"h.version FROM {table} CROSS JOIN heads h ON h.file_id = {table}.rowid "
            f"WHERE {table} MATCH ? AND {table}.rowid IN (SELECT value FROM json_each(?))",
            (match, json.dumps(file_ids)),
        )
        found = {int(r[0]): (str(r[1]), str(r[2]), str(r[3]), int(r[4])) for r in rows}
        return [found[fid] for fid in file_ids if fid in found]

    def grep_candidates(
        self,
        conn: Connection,
        store_id: int,
        ranges: Sequence[PathRange] | None,
        literals: Sequence[str],
        ignore_case: bool,
    ) -> Iterator[sa.Row[Any]]:
        """(path, content) of live files in ``ranges`` containing every literal.

        ``instr`` is an exact substring test; with ``ignore_case`` the literals are lowercase
        ASCII and ``lower()`` (ASCII folding in SQLite) is applied to the content.
        """
        where, range_params = _range_sql("h.path", ranges)
        params: list[Any] = [store_id, *range_params]
        haystack = "lower(b.content)" if ignore_case else "b.content"
        for literal in literals:
            where += f" AND instr({haystack}, ?) > 0"
            params.append(literal)
        sql = (
            "SELECT h.path, b.content FROM heads h JOIN blobs b "
            "ON b.store_id = h.store_id AND b.sha256 = h.sha256 "
            f"WHERE h.store_id = ? {where} ORDER BY h.path"
        )
        yield from conn.exec_driver_sql(sql, tuple(params))

    # --- misc -----------------------------------------------------------------------------

    def insert_ignore(self, table: sa.Table) -> Any:
        from sqlalchemy.dialects.sqlite import insert

        return insert(table).on_conflict_do_nothing()

    def backup(self, engine: Engine, destination: Path) -> None:
        """Online backup through SQLite's backup API: consistent while writers continue."""
        destination.parent.mkdir(parents=True, exist_ok=True)
        raw = engine.raw_connection()
        try:
            source = raw.driver_connection
            assert isinstance(source, sqlite3.Connection)
            target = sqlite3.connect(str(destination))
            try:
                source.backup(target)
            finally:
                target.close()
        finally:
            raw.close()
