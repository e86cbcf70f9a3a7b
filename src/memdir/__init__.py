"""memdir: a versioned, permissioned memory store for fleets of AI agents.

Open a database and call the service as a principal::

    import memdir

    mem = memdir.open("sqlite:///./.memdir/memdir.db", create=True)
    mem.create_store(memdir.OWNER, "default", exist_ok=True)
    result = mem.write(memdir.OWNER, "default", "/org/rules.md", "# Rules\n", if_absent=True)
    view = mem.read(memdir.OWNER, "default", "/org/rules.md")

or reach a server (or a local database, in-process) with the SDK, ``memdir.Client`` and
``memdir.AsyncClient`` (see ``docs/sdk.md``); they are imported on first use, so
``import memdir`` does not import its HTTP client (httpx2).
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
from memdir.service import MemoryService
from memdir.storage.database import Database

if TYPE_CHECKING:
    from memdir.sdk import AsyncClient, Client

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

_LAZY = {"Client": "memdir.sdk", "AsyncClient": "memdir.sdk"}


def __getattr__(name: str) -> Any:
    """The SDK clients, imported on first access (they need httpx2; the store does not)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'memdir' has no attribute {name!r}")


def open(url: str, *, create: bool = False, max_file_bytes: int | None = None) -> MemoryService:
    """Open (or with ``create=True`` create and migrate) a database and return its service."""
    from memdir.core.content import DEFAULT_MAX_BYTES

    database = Database(url, create=create)
    return MemoryService(database, max_file_bytes=max_file_bytes or DEFAULT_MAX_BYTES)
