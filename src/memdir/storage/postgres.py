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
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from memdir.core.errors import InvalidInput
from memdir.search.query import Query
from memdir.search.tsquery import compile_tsquery

__all__ = ["CONNECT_TIMEOUT_S", "PostgresDialect"]

#: Seconds a connection attempt may take (libpq ``connect_timeout``) when the URL sets none.
CONNECT_TIMEOUT_S = 5


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

    def index_file(
        self, conn: Connection, file_id: int, path: str, content: str, *, new: bool
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

    def unindex_file(self, conn: Connection, file_id: int) -> None:
        conn.execute(sa.text("DELETE FROM search_index WHERE file_id = :f"), {"f": file_id})

    def indexed_files(self, conn: Connection) -> list[tuple[int, str]]:
        rows = conn.execute(sa.text("SELECT file_id, path FROM search_index")).all()
        return [(int(r[0]), str(r[1])) for r in rows]

    def search(
        self,
        conn: Connection,
        store_id: int,
        query: Query,
        lo: str,
        hi: str | None,
        limit: int,
    ) -> Sequence[sa.Row[Any]]:
        """Rank live files matching ``query`` in ``[lo, hi)``; snippets for the top rows only."""
        compiled = compile_tsquery(query)
        if compiled is None:
            return []
        tsquery, params = compiled
        path_filter = "AND s.path >= :lo AND s.path < :hi" if hi is not None else ""
        sql = (
            f"WITH q AS (SELECT {tsquery} AS tsq), top AS ("
            "SELECT s.file_id, s.body, ts_rank(s.tsv, q.tsq) AS score, q.tsq "
            "FROM search_index s, q "
            f"WHERE s.store_id = :store_id AND s.tsv @@ q.tsq {path_filter} "
            "ORDER BY score DESC, s.path LIMIT :limit) "  # ties: by path, stable
            "SELECT h.path, top.score, "
            "ts_headline('english', top.body, top.tsq, "
            "'StartSel=[,StopSel=],MaxWords=24,MinWords=8,MaxFragments=1') AS snippet, "
            "h.sha256, h.version FROM top JOIN heads h ON h.file_id = top.file_id "
            "ORDER BY top.score DESC, h.path"
        )
        params.update(store_id=store_id, lo=lo, hi=hi, limit=limit)
        return conn.execute(sa.text(sql), params).all()

    def grep_candidates(
        self,
        conn: Connection,
        store_id: int,
        lo: str,
        hi: str | None,
        literals: Sequence[str],
        ignore_case: bool,
    ) -> Iterator[sa.Row[Any]]:
        """(path, content) of live files in ``[lo, hi)`` containing every literal.

        ``LIKE`` / ``ILIKE`` with escaped literals, served by the ``pg_trgm`` GIN index on
        ``search_index.body`` when a literal has three or more characters.
        """
        where = ["store_id = :store_id"]
        params: dict[str, Any] = {"store_id": store_id}
        if hi is not None:
            where.append("path >= :lo AND path < :hi")
            params.update(lo=lo, hi=hi)
        operator = "ILIKE" if ignore_case else "LIKE"
        for index, literal in enumerate(literals):
            escaped = literal.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
            where.append(f"body {operator} :lit{index}")
            params[f"lit{index}"] = f"%{escaped}%"
        sql = (
            "SELECT path, body AS content FROM search_index "
            f"WHERE {' AND '.join(where)} ORDER BY path"
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
