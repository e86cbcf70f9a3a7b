"""Opening a database: engine, dialect, schema check, transactions.

:class:`Database` is the storage port the service uses. It owns the SQLAlchemy engine and a
:class:`Dialect` (the few operations that differ between SQLite and PostgreSQL) and hands out
transactions as :class:`~memdir.storage.repository.Repository` objects:

- :meth:`Database.write` — a writer transaction (``BEGIN IMMEDIATE`` on SQLite; on PostgreSQL
  the store's counter row lock taken first by the service serialises committers per store);
- :meth:`Database.read` — a reader transaction with a consistent snapshot.

Opening never migrates implicitly except when asked to create (``memdir init``), so a CLI call
costs one cheap version check, not an Alembic import.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from memdir.core.errors import BackendError, Conflict, InvalidInput
from memdir.storage.schema import HEAD_REVISION
from memdir.storage.statements import READ_CURRENT, READ_CURRENT_NO_POLICY

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from memdir.core.ranges import PathRange
    from memdir.search.query import Query
    from memdir.storage.repository import Repository

__all__ = ["Database", "Dialect", "normalize_url"]


class Dialect(Protocol):
    """What differs between backends. Everything else is plain SQLAlchemy Core."""

    name: str

    def engine_kwargs(self, url: sa.URL) -> dict[str, Any]: ...
    def prepare_url(self, url: sa.URL, *, create: bool) -> sa.URL: ...
    def database_exists(self, url: sa.URL) -> bool: ...
    def configure(self, engine: Engine) -> None: ...
    def create_index(self, conn: Connection, store_id: int) -> None: ...
    def drop_index(self, conn: Connection, store_id: int) -> None: ...
    def index_file(
        self, conn: Connection, store_id: int, file_id: int, path: str, content: str, *, new: bool
    ) -> None: ...
    def sql(self, text: str) -> str: ...
    def encode_time(self, value: dt.datetime | None) -> Any: ...
    def decode_time(self, value: Any) -> Any: ...
    def encode_json(self, value: Any) -> Any: ...
    def unindex_file(self, conn: Connection, store_id: int, file_id: int) -> None: ...
    def indexed_files(self, conn: Connection) -> list[tuple[int, str]]: ...
    def search(
        self,
        conn: Connection,
        store_id: int,
        query: Query,
        ranges: Sequence[PathRange] | None,
        limit: int,
        readable: Callable[[str], bool] | None,
    ) -> list[tuple[str, str, str, int]]: ...
    def grep_candidates(
        self,
        conn: Connection,
        store_id: int,
        ranges: Sequence[PathRange] | None,
        literals: Sequence[str],
        ignore_case: bool,
    ) -> Iterator[sa.Row[Any]]: ...
    def insert_ignore(self, table: sa.Table) -> Any: ...
    def backup(self, engine: Engine, destination: Path) -> None: ...


def normalize_url(url: str) -> sa.URL:
    """Parse a database URL; ``postgresql://`` means psycopg 3."""
    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        raise InvalidInput(
            f"invalid database URL {url!r}: use sqlite:///PATH or postgresql://USER@HOST/DB",
            url=url,
        ) from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() not in ("sqlite", "postgresql"):
        raise InvalidInput(
            f"unsupported database {parsed.get_backend_name()!r} in {url!r}: memdir runs on "
            "sqlite:/// and postgresql://",
            url=url,
        )
    return parsed


def _dialect_for(url: sa.URL) -> Dialect:
    if url.get_backend_name() == "sqlite":
        from memdir.storage.sqlite import SQLiteDialect

        return SQLiteDialect()
    if importlib.util.find_spec("psycopg") is None:
        raise BackendError(
            f"{url.render_as_string(hide_password=True)} needs PostgreSQL's driver, psycopg, "
            "which memdir installs with its 'postgres' extra: pip install 'memdir[postgres]'",
            url=url.render_as_string(hide_password=True),
            extra="postgres",
        )
    from memdir.storage.postgres import PostgresDialect

    return PostgresDialect()


class Database:
    """An open memdir database: one engine, one dialect. Safe to share between threads."""

    def __init__(self, url: str, *, create: bool = False, pool_size: int = 5) -> None:
        self.url = normalize_url(url)
        self.dialect = _dialect_for(self.url)
        engine_url = self.dialect.prepare_url(self.url, create=create)  # memdir's options out
        if not create and not self.dialect.database_exists(engine_url):
            raise BackendError(
                f"no memdir database at {self.url.render_as_string(hide_password=True)}; "
                "run `memdir init` to create one, or pass --db / MEMDIR_DB",
                url=self.url.render_as_string(hide_password=True),
            )
        kwargs = self.dialect.engine_kwargs(engine_url)
        if self.url.get_backend_name() == "postgresql":
            kwargs.setdefault("pool_size", pool_size)
        self.engine = sa.create_engine(engine_url, **kwargs)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._raw_connections: list[Any] = []
        self.dialect.configure(self.engine)
        if create:
            self.migrate()
        else:
            self.check_schema()

    @property
    def display_url(self) -> str:
        return self.url.render_as_string(hide_password=True)

    def schema_revision(self) -> str | None:
        """The Alembic revision stamped in the database (None before the first migration)."""
        try:
            with self.engine.connect() as conn:
                if not sa.inspect(conn).has_table("alembic_version"):
                    return None
                value = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()
                conn.rollback()
                return None if value is None else str(value)
        except sa.exc.OperationalError as exc:
            raise BackendError(
                f"cannot open the database {self.display_url}: {exc.orig}; check the URL and "
                "that the server is running",
                url=self.display_url,
            ) from None

    def check_schema(self) -> None:
        current = self.schema_revision()
        if current != HEAD_REVISION:
            raise BackendError(
                f"the database schema is at {current or 'nothing'} but this memdir needs "
                f"{HEAD_REVISION}; run `memdir migrate`",
                current=current,
                required=HEAD_REVISION,
            )

    def migrate(self) -> None:
        """Upgrade the schema to head (under a lock; see :mod:`memdir.storage.migrate`)."""
        from memdir.storage.migrate import upgrade

        upgrade(self)

    @contextmanager
    def write(self) -> Iterator[Repository]:
        """A writer transaction; commits on normal exit, rolls back on any exception.

        Database errors leave as memdir errors: a constraint violated by a concurrent writer
        (two first starts creating the same principal, say) as :class:`Conflict`, an
        unreachable or locked database as :class:`BackendError`.
        """
        from memdir.storage.repository import Repository

        with self._translated(), self._connect(write=True) as conn, conn.begin():
            yield Repository(conn, self.dialect)

    @contextmanager
    def read(self) -> Iterator[Repository]:
        """A reader transaction: one consistent snapshot, never blocking writers."""
        from memdir.storage.repository import Repository

        with self._translated(), self._connect(write=False) as conn, conn.begin():
            yield Repository(conn, self.dialect)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Map SQLAlchemy's and the driver's own errors (raw cursors raise the latter)."""
        dbapi = self.engine.dialect.dbapi
        integrity: tuple[type[BaseException], ...] = (sa.exc.IntegrityError,)
        operational: tuple[type[BaseException], ...] = (sa.exc.OperationalError,)
        if dbapi is not None:
            integrity += (dbapi.IntegrityError,)
            operational += (dbapi.OperationalError,)
        try:
            yield
        except integrity as exc:
            raise Conflict(
                "the change conflicts with another one made at the same time; retry it",
                reason=str(getattr(exc, "orig", exc)).splitlines()[0],
            ) from None
        except operational as exc:
            raise BackendError(
                f"the database {self.display_url} failed: "
                f"{str(getattr(exc, 'orig', exc)).splitlines()[0]}; retry, and check that it "
                "is reachable",
                url=self.display_url,
            ) from None

    @contextmanager
    def _connect(self, *, write: bool) -> Iterator[Connection]:
        try:
            conn = self.engine.connect().execution_options(memdir_write=write)
        except sa.exc.OperationalError as exc:
            raise BackendError(
                f"cannot connect to {self.display_url}: {exc.orig}", url=self.display_url
            ) from None
        with conn:
            yield conn

    def read_current(
        self, store: str, path: str, policy_path: str | None
    ) -> tuple[Any, ...] | None:
        """One statement for the hottest read: a store, a live file and the policy's sha256.

        Columns: store id, archived_at, policy sha256, then path, file_id, version, sha256,
        size, revision, updated_at, content of the file (all None when it does not exist).
        None when the store does not exist; with ``policy_path`` None the policy sha256 is not
        looked up (None). Runs on a per-thread autocommit driver connection:
        a single SELECT sees one committed snapshot, and skipping the pool checkout and
        BEGIN/COMMIT of a transaction makes a read several times cheaper.
        """
        with self._translated():
            return self._read_current(store, path, policy_path)

    def _read_current(
        self, store: str, path: str, policy_path: str | None
    ) -> tuple[Any, ...] | None:
        """Run the statement; a dead connection is discarded and the statement run once more.

        A database restart (or a dropped link) kills this thread's connection while the pool
        never sees it (``pool_pre_ping`` checks pool checkouts only). The statement only reads,
        so running it again on a fresh connection is safe; a second failure propagates (and is
        a 503 the client may retry). Any other error propagates at once.
        """
        connection = self._thread_connection()
        try:
            return self._select_current(connection, store, path, policy_path)
        except Exception as exc:
            if not self._is_dead(exc, connection):
                raise
            self._discard(connection)
        return self._select_current(self._thread_connection(), store, path, policy_path)

    def _select_current(
        self, connection: Any, store: str, path: str, policy_path: str | None
    ) -> tuple[Any, ...] | None:
        cursor = connection.cursor()
        try:
            if policy_path is None:
                cursor.execute(self.dialect.sql(READ_CURRENT_NO_POLICY), (path, store))
            else:
                cursor.execute(self.dialect.sql(READ_CURRENT), (path, policy_path, store))
            row = cursor.fetchone()
        finally:
            with suppress(Exception):  # a cursor of a dead connection may not close cleanly
                cursor.close()
        return None if row is None else tuple(row)

    def _thread_connection(self) -> Any:
        """This thread's autocommit driver connection, detached from the pool (opened once)."""
        connection = getattr(self._local, "connection", None)
        if connection is None:
            fairy = self.engine.raw_connection()
            connection = fairy.driver_connection
            fairy.detach()  # ours for this thread's life; closed by close() or _discard()
            if self.url.get_backend_name() == "postgresql":
                connection.autocommit = True  # type: ignore[union-attr]
            self._local.connection = connection
            with self._lock:
                self._raw_connections.append(connection)
        return connection

    def _is_dead(self, exc: Exception, connection: Any) -> bool:
        """Whether ``exc`` (a driver error) means ``connection`` can no longer be used."""
        dbapi = self.engine.dialect.dbapi
        if dbapi is None or not isinstance(exc, dbapi.Error):
            return False
        return bool(self.engine.dialect.is_disconnect(exc, connection, None))

    def _discard(self, connection: Any) -> None:
        """Forget and close this thread's connection; the next use opens a fresh one."""
        if getattr(self._local, "connection", None) is connection:
            self._local.connection = None
        with self._lock:
            if connection in self._raw_connections:
                self._raw_connections.remove(connection)
        with suppress(Exception):  # closing a dead connection is best effort
            connection.close()

    def backup(self, destination: Path) -> None:
        self.dialect.backup(self.engine, destination)

    def close(self) -> None:
        with self._lock:
            for connection in self._raw_connections:
                with suppress(Exception):  # closing is best effort
                    connection.close()
            self._raw_connections.clear()
        self._local = threading.local()
        self.engine.dispose()
