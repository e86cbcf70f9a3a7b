"""The CLI's read fast path: ``memdir read PATH`` on a SQLite file without the service.

An agent reads memory far more often than it changes it, and a CLI call pays for its imports
every time: the service brings SQLAlchemy and the dream engine, ten times what the read costs.
For the common case — the current version of a file, a local SQLite database, the owner or a
``--as`` principal — :func:`read_current` answers with the driver alone (``sqlite3``), through
the same decisions the service makes:

- the same statement (:data:`memdir.storage.statements.READ_CURRENT`) and schema check;
- the same access decision (:class:`memdir.access.Access` over the store's compiled policy);
- the same expiry (:func:`memdir.core.expiry.expired_at`) and line slicing;
- the same read record (:data:`memdir.storage.statements.RECORD_READ`), written when the
  verb ends, as the service's read log does when it closes.

Anything else — a PostgreSQL or unusual URL, a token, another version, a missing or unreadable
file, an unknown store or principal, an old schema, any error at all — returns None and the
verb takes the service's path, which gives every error its one wording. The fast path only
ever answers successes, so it cannot answer differently from the service.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.core.errors import MemdirError

if TYPE_CHECKING:
    from memdir.cli.app import App
    from memdir.core.model import FileView, Principal

__all__ = ["head_revision", "read_current", "sqlite_file"]

_log = logging.getLogger("memdir.reads")
_URL = re.compile(r"^sqlite:///(?P<path>[^?#%~]+)(?:\?synchronous=(?P<sync>normal|full))?$")
_MIGRATIONS = Path(__file__).resolve().parent.parent / "storage" / "migrations" / "versions"
#: The driver's busy timeout, as the service's engine sets it (``memdir.storage.sqlite``).
_BUSY_TIMEOUT_MS = 60_000


def sqlite_file(url: str) -> tuple[Path, str] | None:
    """The file and ``synchronous`` level of a plain ``sqlite:///PATH`` URL (None: any other
    URL, which the service parses, checks and words the errors of)."""
    match = _URL.match(url)
    if match is None or match["path"] in (":memory:", ""):
        return None
    return Path(match["path"]), match["sync"] or "normal"


def head_revision() -> str:
    """The schema revision this memdir needs: its newest migration's (``0008_*.py`` → 0008),
    equal to :data:`memdir.storage.schema.HEAD_REVISION` (a test checks it) without importing
    SQLAlchemy."""
    return max(p.name[:4] for p in _MIGRATIONS.glob("[0-9][0-9][0-9][0-9]_*.py"))


def read_current(app: App, path: str, lines: tuple[int, int | None] | None) -> FileView | None:
    """The current version of ``path`` as ``memdir read`` shows it, or None: take the
    service's path (see the module docstring)."""
    located = None if app.settings.token else sqlite_file(app.settings.db)
    if located is None or not located[0].is_file():
        return None
    try:
        connection = sqlite3.connect(
            located[0], timeout=_BUSY_TIMEOUT_MS / 1000, isolation_level=None
        )
    except sqlite3.Error:
        return None
    try:
        found = _read(connection, app, path, lines)
        if found is not None:
            view, store_id = found
            _record_read(connection, located[1], store_id, view.file_id)
        return None if found is None else found[0]
    except (MemdirError, sqlite3.Error):
        return None
    finally:
        connection.close()


def _read(
    connection: sqlite3.Connection, app: App, path: str, lines: tuple[int, int | None] | None
) -> tuple[FileView, int] | None:
    from dataclasses import replace

    from memdir.core.edits import line_slice
    from memdir.core.expiry import expired_at
    from memdir.core.limits import MAX_INT64, check_int
    from memdir.core.model import FileView
    from memdir.core.paths import validate_path

    connection.execute(f"PRAGMA busy_timeout={_BUSY_TIMEOUT_MS}")
    if not _schema_current(connection):
        return None
    principal = _principal(connection, app.as_principal)
    if principal is None:
        return None
    validate_path(path)
    if lines is not None:
        check_int("first line", lines[0], minimum=-MAX_INT64)
        if lines[1] is not None:
            check_int("last line", lines[1], minimum=-MAX_INT64)
    from memdir.storage.statements import READ_CURRENT, READ_CURRENT_NO_POLICY

    if principal.is_owner:
        row = connection.execute(READ_CURRENT_NO_POLICY, (path, app.store)).fetchone()
    else:  # the policy (and its YAML parser) is loaded only for a caller it binds
        from memdir.core.policy import POLICY_PATH

        row = connection.execute(READ_CURRENT, (path, POLICY_PATH, app.store)).fetchone()
    if row is None or row[3] is None:
        return None
    if not principal.is_owner and not _readable(connection, principal, row[0], row[2], path):
        return None
    updated_at = dt.datetime.fromisoformat(row[9]).replace(tzinfo=dt.UTC)
    view = FileView(
        path=row[3], content=row[10], sha256=row[6], version=row[5], size=row[7],
        file_id=row[4], revision=row[8], updated_at=updated_at,
    )  # fmt: skip
    now = dt.datetime.now(dt.UTC)
    expired = expired_at(view.path, view.content, updated_at, app.settings.task_expiry_days, now)
    if expired is not None:
        view = replace(view, expired_at=expired)
    if lines is not None:
        view = replace(view, content=line_slice(view.content, lines[0], lines[1]))
    return view, int(row[0])


def _schema_current(connection: sqlite3.Connection) -> bool:
    try:
        row = connection.execute("SELECT version_num FROM alembic_version").fetchone()
    except sqlite3.OperationalError:  # no such table: not migrated
        return False
    return row is not None and row[0] == head_revision()


def _principal(connection: sqlite3.Connection, as_principal: str | None) -> Principal | None:
    """Who acts: the owner, or the registered ``--as`` principal (None: unknown — the
    service says so)."""
    import json

    from memdir.core.model import OWNER, Principal

    if as_principal is None:
        return OWNER
    parsed = Principal.parse(as_principal)
    if parsed.is_owner:
        return parsed
    row = connection.execute(
        'SELECT id, "groups", projects, tasks, acts_for FROM principals WHERE id = ?',
        (parsed.id,),
    ).fetchone()
    if row is None:
        return None
    return Principal(
        id=row[0], groups=frozenset(json.loads(row[1])), projects=tuple(json.loads(row[2])),
        tasks=tuple(json.loads(row[3])), acts_for=row[4], scope=None,
    )  # fmt: skip


def _readable(
    connection: sqlite3.Connection,
    principal: Principal,
    store_id: int,
    policy_sha: str | None,
    path: str,
) -> bool:
    """The service's read decision: the store's policy (or the built-in default) compiled and
    asked by :class:`memdir.access.Access`."""
    from memdir.access import Access, PolicyCache

    def load() -> str:
        row = connection.execute(
            "SELECT content FROM blobs WHERE store_id = ? AND sha256 = ?",
            (store_id, policy_sha or ""),
        ).fetchone()
        return "" if row is None else str(row[0])

    policy = PolicyCache().get_by_sha(policy_sha, load)
    return Access(principal, policy).can_read(path)


def _record_read(
    connection: sqlite3.Connection, synchronous: str, store_id: int, file_id: int
) -> None:
    """Record the read as the service's read log does (a failure is logged, never raised:
    a read must not fail because its bookkeeping could not be saved)."""
    from memdir.storage.statements import RECORD_READ, TIME_FORMAT

    when: Any = dt.datetime.now(dt.UTC).strftime(TIME_FORMAT)
    try:
        connection.execute(f"PRAGMA synchronous={synchronous.upper()}")
        connection.execute("PRAGMA foreign_keys=ON")
        connection.execute("BEGIN IMMEDIATE")
        try:
            connection.execute(RECORD_READ, (when, file_id, store_id))
            connection.execute("COMMIT")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
    except sqlite3.Error:
        _log.warning("could not record 1 read times", exc_info=True)
