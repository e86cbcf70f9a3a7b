"""Settings, read once per entry point and passed down.

Precedence: explicit arguments > ``MEMDIR_*`` environment variables > the config file >
defaults. The config file is TOML, ``$MEMDIR_CONFIG`` or ``./.memdir/config.toml`` if it
exists, with the same keys as :class:`Settings` (``db``, ``store``, ``max_file_bytes``).

``sqlite_synchronous`` is folded into a SQLite ``db`` URL as its ``synchronous`` query option
(the one place the storage layer reads it), so every entry point that opens ``Settings.db``
— and ``memdir serve``'s workers, which get ``MEMDIR_DB`` — runs at the same durability level.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, TypedDict

from memdir.core.content import DEFAULT_MAX_BYTES
from memdir.core.errors import InvalidInput
from memdir.core.limits import (
    DEFAULT_MAX_COMMIT_OPERATIONS,
    DEFAULT_MAX_TRANSCRIPT_BYTES,
    default_max_request_bytes,
)

__all__ = ["DEFAULT_DB", "ENV_VARS", "ServiceLimits", "Settings"]

DEFAULT_DB = "sqlite:///./.memdir/memdir.db"

#: Every environment variable memdir reads, and the setting it feeds.
ENV_VARS = {
    "MEMDIR_DB": "db",
    "MEMDIR_STORE": "store",
    "MEMDIR_MAX_FILE_BYTES": "max_file_bytes",
    "MEMDIR_TOKEN": "token",
    "MEMDIR_POOL_SIZE": "pool_size",
    "MEMDIR_SQLITE_SYNCHRONOUS": "sqlite_synchronous",
    "MEMDIR_MAX_COMMIT_OPERATIONS": "max_commit_operations",
    "MEMDIR_MAX_REQUEST_BYTES": "max_request_bytes",
    "MEMDIR_MAX_TRANSCRIPT_BYTES": "max_transcript_bytes",
    "MEMDIR_TASK_EXPIRY_DAYS": "task_expiry_days",
}
#: Settings that are positive whole numbers.
_COUNTS = (
    "max_file_bytes",
    "pool_size",
    "max_commit_operations",
    "max_request_bytes",
    "max_transcript_bytes",
)


class ServiceLimits(TypedDict):
    """The limits a :class:`~memdir.service.MemoryService` is built with."""

    max_file_bytes: int
    max_commit_operations: int
    max_transcript_bytes: int
    task_expiry_days: int


@dataclass(frozen=True, repr=False)
class Settings:
    """Where and how memdir runs.

    ``db``: database URL (``sqlite:///PATH`` or ``postgresql://...``).
    ``store``: the store commands act on when none is named.
    ``max_file_bytes``: the largest content accepted, in UTF-8 bytes.
    ``token``: a bearer token identifying the principal that acts (never logged).
    ``pool_size``: database connections kept per process (PostgreSQL; SQLite needs few).
    ``sqlite_synchronous``: ``normal`` or ``full`` for a SQLite database (None: the URL's
    ``synchronous`` query option, else ``normal``); ignored for PostgreSQL, whose durability
    is the server's ``synchronous_commit``.
    ``max_commit_operations``: the most operations one commit or proposal may hold.
    ``max_request_bytes``: the largest REST request body (None: 10 MiB, or 4 ×
    ``max_file_bytes`` + 64 KiB if larger; see :attr:`request_limit`); transcript uploads
    have their own limit.
    ``max_transcript_bytes``: the largest transcript upload or imported file, in bytes.
    ``task_expiry_days``: files under ``/tasks/`` that name no ``expires`` expire this many
    days after their last change (hidden from context, search, grep and listings, never
    deleted); 0 keeps them. See docs/context.md.
    """

    db: str = DEFAULT_DB
    store: str = "default"
    max_file_bytes: int = DEFAULT_MAX_BYTES
    token: str | None = None
    pool_size: int = 5
    sqlite_synchronous: str | None = None
    max_commit_operations: int = DEFAULT_MAX_COMMIT_OPERATIONS
    max_request_bytes: int | None = None
    max_transcript_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES
    task_expiry_days: int = 30

    @property
    def request_limit(self) -> int:
        """The REST request body limit in bytes (``max_request_bytes`` or its default)."""
        if self.max_request_bytes is not None:
            return self.max_request_bytes
        return default_max_request_bytes(self.max_file_bytes)

    def service_limits(self) -> ServiceLimits:
        """The keyword arguments of :class:`~memdir.service.MemoryService` these settings set."""
        return {
            "max_file_bytes": self.max_file_bytes,
            "max_commit_operations": self.max_commit_operations,
            "max_transcript_bytes": self.max_transcript_bytes,
            "task_expiry_days": self.task_expiry_days,
        }

    def __repr__(self) -> str:  # keep the token out of logs and tracebacks
        token = "***" if self.token else None
        return (
            f"Settings(db={self.db!r}, store={self.store!r}, "
            f"max_file_bytes={self.max_file_bytes}, token={token}, pool_size={self.pool_size}, "
            f"sqlite_synchronous={self.sqlite_synchronous!r})"
        )

    @classmethod
    def load(
        cls,
        overrides: Mapping[str, Any] | None = None,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Resolve settings: ``overrides`` (None values ignored) > environment > file > defaults."""
        env = os.environ if environ is None else environ
        settings = cls()
        config_path = Path(env.get("MEMDIR_CONFIG", "./.memdir/config.toml"))
        if config_path.is_file():
            settings = replace(settings, **_coerce(_read_toml(config_path), str(config_path)))
        from_env = {key: env[var] for var, key in ENV_VARS.items() if env.get(var)}
        settings = replace(settings, **_coerce(from_env, "the environment"))
        given = {k: v for k, v in (overrides or {}).items() if v is not None}
        return _fold_synchronous(replace(settings, **_coerce(given, "the arguments")))


def _fold_synchronous(settings: Settings) -> Settings:
    """Put ``sqlite_synchronous`` into a SQLite URL's query; a URL saying otherwise is refused."""
    mode = settings.sqlite_synchronous
    if mode is None or not settings.db.startswith("sqlite"):
        return settings
    import sqlalchemy as sa

    try:
        url = sa.make_url(settings.db)
    except sa.exc.ArgumentError:
        return settings  # opening the database reports the malformed URL
    given = url.query.get("synchronous")
    if given is None:
        url = url.update_query_dict({"synchronous": mode})
        return replace(settings, db=url.render_as_string(hide_password=False))
    if not isinstance(given, str) or given.lower() != mode:
        raise InvalidInput(
            f"the database URL says synchronous={given!r} but sqlite_synchronous is {mode!r}; "
            "set one of them",
            synchronous=str(given),
            sqlite_synchronous=mode,
        )
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read the config file {path}: {exc}", path=str(path)) from None


def _coerce(values: Mapping[str, Any], source: str) -> dict[str, Any]:
    known = {f.name: f.type for f in fields(Settings)}
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key not in known:
            raise InvalidInput(
                f"unknown setting {key!r} in {source}; known: {', '.join(sorted(known))}"
            )
        if key in _COUNTS:
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise InvalidInput(
                    f"{key} in {source} must be a whole number, received {value!r}"
                ) from None
            if value < 1:
                raise InvalidInput(f"{key} in {source} must be positive")
        if key == "task_expiry_days":
            try:
                value = int(value)
            except (TypeError, ValueError):
                raise InvalidInput(
                    f"task_expiry_days in {source} must be a whole number of days (0: never), "
                    f"received {value!r}"
                ) from None
            if value < 0:
                raise InvalidInput(f"task_expiry_days in {source} must be 0 or more")
        if key == "sqlite_synchronous":
            from memdir.storage.sqlite import SYNCHRONOUS

            value = str(value).strip().lower()
            if value not in SYNCHRONOUS:
                raise InvalidInput(
                    f"sqlite_synchronous in {source} must be one of {', '.join(SYNCHRONOUS)}, "
                    f"received {values[key]!r}"
                )
        out[key] = value
    return out
