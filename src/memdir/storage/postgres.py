"""PostgreSQL specifics: connection pool, the ``tsvector`` index, upserts.

- psycopg 3; the pool is sized by the caller (``pool_size``), connections are checked before
  use (``pool_pre_ping``) so a restarted server costs one retry, not an error (the hot read
  path's own per-thread connections recover the same way: see ``Database.read_current``).
  Connecting gives up after :data:`CONNECT_TIMEOUT_S` seconds unless the URL's
  ``connect_timeout`` says otherwise, so an unreachable server is an error, not a hang.
- Committers to one store serialise on the store's counter row (``UPDATE ... RETURNING``),
  which keeps revisions gap-free across any number of servers; READ COMMITTED then gives each
  later statement of the transaction the latest committed heads, so compare-and-swap is exact.
- Full-text search is a ``search_index`` table (file id, store, path, body) with a generated,
  weighted ``tsvector`` column and a GIN index, kept in sync in the writing transaction.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from memdir.core.errors import InvalidInput
from memdir.core.ranges import PathRange
from memdir.search.query import Query
from memdir.search.tsquery import compile_tsquery

__all__ = ["CONNECT_TIMEOUT_S", "PostgresDialect"]

#: Seconds a connection attempt may take (libpq ``connect_timeout``) when the URL sets none.
CONNECT_TIMEOUT_S = 5


def _range_sql(column: str, ranges: Sequence[PathRange] | None) -> tuple[str, dict[str, Any]]:
    """`` AND (...)`` keeping ``column`` in ``ranges`` (nothing for None), and its values."""
    if ranges is None:
        return "", {}
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for i, r in enumerate(ranges):
        params[f"lo{i}"], params[f"hi{i}"] = r.lo, r.hi
        clause = f"({column} >= :lo{i} AND {column} < :hi{i})"
        if r.exact is not None:
            params[f"ex{i}"] = r.exact
            clause = f"({column} = :ex{i} OR {clause})"
        clauses.append(clause)
    return " AND (" + (" OR ".join(clauses) or "false") + ")", params


class PostgresDialect:
    """The PostgreSQL half of the storage port (see :class:`memdir.storage.database.Dialect`)."""

    name = "postgresql"

    def __init__(self) -> None:
        self._sql_cache: dict[str, str] = {}

    def engine_kwargs(self, url: sa.URL) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"pool_pre_ping": True, "max_overflow": 10}
        if "connect_timeout" not in url.query:  # connect_args would override the URL's
            kwargs["connect_args"] = {"connect_timeout": CONNECT_TIMEOUT_S}
        return kwargs

    def prepare_url(self, url: sa.URL, *, create: bool) -> sa.URL:
        return url

    def database_exists(self, url: sa.URL) -> bool:
        return True  # connecting tells; errors surface as BackendError

    def configure(self, engine: Engine) -> None:
        return None

    def sql(self, text: str) -> str:
        """psycopg takes %s placeholders (fixed SQL holds no literal ? or %)."""
        found = self._sql_cache.get(text)
        if found is None:
            found = self._sql_cache[text] = text.replace("?", "%s")
        return found

    def encode_time(self, value: dt.datetime | None) -> dt.datetime | None:
        return value

    def decode_time(self, value: Any) -> Any:
        return value

    def encode_json(self, value: Any) -> Any:
        if value is None:
            return None
        from psycopg.types.json import Json

        return Json(value)

    def create_index(self, conn: Connection, store_id: int) -> None:
        return None  # one search_index table, filtered by store_id

    def drop_index(self, conn: Connection, store_id: int) -> None:
        conn.execute(sa.text("DELETE FROM search_index WHERE store_id = :s"), {"s": store_id})

    def index_file(
        self, conn: Connection, store_id: int, file_id: int, path: str, content: str, *, new: bool
    ) -> None:
        params = {"file_id": file_id, "path": path, "body": content}
        if not new:
            conn.execute(
                sa.text(
                    "UPDATE search_index SET path = :path, body = :body WHERE file_id = :file_id"
                ),
                params,
            )
            return
        conn.execute(
            sa.text(
                "INSERT INTO search_index (file_id, store_id, path, body) "
                "SELECT :file_id, store_id, :path, :body FROM files WHERE id = :file_id "
                "ON CONFLICT (file_id) DO UPDATE SET path = EXCLUDED.path, body = EXCLUDED.body"
            ),
            params,
        )

    def unindex_file(self, conn: Connection, store_id: int, file_id: int) -> None:
        conn.execute(sa.text("DELETE FROM search_index WHERE file_id = :f"), {"f": file_id})

    def indexed_files(self, conn: Connection) -> list[tuple[int, str]]:
        rows = conn.execute(sa.text("SELECT file_id, path FROM search_index")).all()
        return [(int(r[0]), str(r[1])) for r in rows]

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

        ``ts_rank`` (normalisation 0) is a function of one document and the query, so the
        order of readable files is the same whatever else the index holds; the window of
        ranked rows grows until ``limit`` readable ones are found or the matches run out.
        """
        compiled = compile_tsquery(query)
        if compiled is None:
            return []
        tsquery, params = compiled
        where, range_params = _range_sql("s.path", ranges)
        params.update(range_params, store_id=store_id)
        sql = (
            f"WITH q AS (SELECT {tsquery} AS tsq) "
            "SELECT s.file_id, s.path FROM search_index s, q "
            f"WHERE s.store_id = :store_id AND s.tsv @@ q.tsq {where} "
            "ORDER BY ts_rank(s.tsv, q.tsq) DESC, s.path LIMIT :window"  # ties: by path
        )
        window = limit
        while True:
            rows = conn.execute(sa.text(sql), {**params, "window": window}).all()
            hits = [(int(r[0]), str(r[1])) for r in rows if readable is None or readable(r[1])]
            if len(hits) >= limit or len(rows) < window:
                break
            window *= 4
        hits = hits[:limit]
        if not hits:
            return []
        details = conn.execute(
            sa.text(
                f"WITH q AS (SELECT {tsquery} AS tsq) "
                "SELECT s.file_id, ts_headline('english', s.body, q.tsq, "
                "'StartSel=[,StopSel=],MaxWords=24,MinWords=8,MaxFragments=1'), "
                "h.sha256, h.version FROM search_index s JOIN heads h ON h.file_id = s.file_id, "
                "q WHERE s.file_id = ANY(:ids)"
            ),
            {**compiled[1], "ids": [fid for fid, _ in hits]},
        ).all()
        by_id = {int(r[0]): (str(r[1]), str(r[2]), int(r[3])) for r in details}
        return [(path, *by_id[fid]) for fid, path in hits if fid in by_id]

    def grep_candidates(
        self,
        conn: Connection,
        store_id: int,
        ranges: Sequence[PathRange] | None,
        literals: Sequence[str],
        ignore_case: bool,
    ) -> Iterator[sa.Row[Any]]:
        """(path, content) of live files in ``ranges`` containing every literal.

        ``LIKE`` / ``ILIKE`` with escaped literals, served by the ``pg_trgm`` GIN index on
        ``search_index.body`` when a literal has three or more characters.
        """
        where, params = _range_sql("path", ranges)
        params["store_id"] = store_id
        operator = "ILIKE" if ignore_case else "LIKE"
        for index, literal in enumerate(literals):
            escaped = literal.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where += f" AND body {operator} :lit{index}"
            params[f"lit{index}"] = f"%{escaped}%"
        sql = (
            "SELECT path, body AS content FROM search_index "
            f"WHERE store_id = :store_id {where} ORDER BY path"
        )
        yield from conn.execute(sa.text(sql), params)

    def insert_ignore(self, table: sa.Table) -> Any:
        from sqlalchemy.dialects.postgresql import insert

        return insert(table).on_conflict_do_nothing()

    def backup(self, engine: Engine, destination: Path) -> None:
        raise InvalidInput(
            "memdir backup is for SQLite databases; back up PostgreSQL with pg_dump "
            "(see docs/operations.md)"
        )
