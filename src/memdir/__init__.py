"""memdir: a versioned, permissioned memory store for fleets of AI agents.

Open a database and call the service as a principal::

    import memdir

    mem = memdir.open("sqlite:///./.memdir/memdir.db", create=True)
    mem.create_store(memdir.OWNER, "default", exist_ok=True)
    result = mem.write(memdir.OWNER, "default", "/org/rules.md", "# Rules\n", if_absent=True)
    view = mem.read(memdir.OWNER, "default", "/org/rules.md")

or reach a server (or a local database, in-process) with the SDK, ``memdir.Client`` and
``memdir.AsyncClient`` (see ``docs/sdk.md``). The service, the database and the SDK are
imported on first use (:func:`__getattr__`), so ``import memdir`` (and so every
``import memdir.X``) loads only the error classes and the plain data types: a CLI verb or an
SDK client pays for SQLAlchemy, the dream engine or httpx2 only when it uses them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memdir.core.errors import (
    BackendError,
    Conflict,
    ContentTooLarge,
    EditConflict,
    Forbidden,
    IdempotencyMismatch,
    InvalidContent,
    InvalidInput,
    InvalidPath,
    LimitExceeded,
    MemdirError,
    NoChange,
    NotFound,
    PathConflict,
    PreconditionFailed,
    PreconditionRequired,
    Proposed,
    ScreeningRefused,
    Unauthenticated,
)
from memdir.core.model import (
    OWNER,
    CommitInfo,
    CommitResult,
    Delete,
    Entry,
    FileView,
    GrepMatch,
    Insert,
    Operation,
    OpResult,
    Principal,
    Provenance,
    Rename,
    SearchHit,
    StoreInfo,
    StrReplace,
    TokenScope,
    VersionInfo,
    Write,
)

if TYPE_CHECKING:
    from memdir.sdk import AsyncClient, Client
    from memdir.service import MemoryService
    from memdir.storage.database import Database

__all__ = [
    "OWNER",
    "AsyncClient",
    "BackendError",
    "Client",
    "CommitInfo",
    "CommitResult",
    "Conflict",
    "ContentTooLarge",
    "Database",
    "Delete",
    "EditConflict",
    "Entry",
    "FileView",
    "Forbidden",
    "GrepMatch",
    "IdempotencyMismatch",
    "Insert",
    "InvalidContent",
    "InvalidInput",
    "InvalidPath",
    "LimitExceeded",
    "MemdirError",
    "MemoryService",
    "NoChange",
    "NotFound",
    "OpResult",
    "Operation",
    "PathConflict",
    "PreconditionFailed",
    "PreconditionRequired",
    "Principal",
    "Proposed",
    "Provenance",
    "Rename",
    "ScreeningRefused",
    "SearchHit",
    "StoreInfo",
    "StrReplace",
    "TokenScope",
    "Unauthenticated",
    "VersionInfo",
    "Write",
    "open",
]

__version__ = "0.1.0"

_LAZY = {
    "Client": "memdir.sdk",
    "AsyncClient": "memdir.sdk",
    "MemoryService": "memdir.service",
    "Database": "memdir.storage.database",
}


def __getattr__(name: str) -> Any:
    """The SDK clients, the service and the database, imported on first access: the SDK
    needs httpx2, the service SQLAlchemy and the dream engine; a caller of neither loads none."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memdir' has no attribute {name!r}")


def open(url: str, *, create: bool = False, max_file_bytes: int | None = None) -> MemoryService:
    """Open (or with ``create=True`` create and migrate) a database and return its service."""
    from memdir.core.content import DEFAULT_MAX_BYTES
    from memdir.service import MemoryService
    from memdir.storage.database import Database

    database = Database(url, create=create)
    return MemoryService(database, max_file_bytes=max_file_bytes or DEFAULT_MAX_BYTES)
