"""The public API is explicit: memdir.__all__ is pinned here, and every name resolves."""

from __future__ import annotations

import memdir

EXPECTED = {
    "OWNER", "AsyncClient", "BackendError", "Client", "CommitInfo", "CommitResult", "Conflict",
    "ContentTooLarge", "Database", "Delete", "EditConflict", "Entry", "FileView", "Forbidden",
    "GrepMatch", "IdempotencyMismatch", "Insert", "InvalidContent", "InvalidInput", "InvalidPath",
    "LimitExceeded",
    "MemdirError", "MemoryService", "NoChange", "NotFound", "OpResult", "Operation", "PathConflict",
    "PreconditionFailed", "PreconditionRequired", "Principal", "Proposed", "Provenance", "Rename",
    "ScreeningRefused", "SearchHit", "StoreInfo", "StrReplace", "TokenScope", "Unauthenticated",
    "VersionInfo", "Write", "open",
}  # fmt: skip


def test_all_is_pinned() -> None:
    assert set(memdir.__all__) == EXPECTED


def test_every_exported_name_resolves() -> None:
    for name in memdir.__all__:
        assert getattr(memdir, name) is not None


def test_errors_share_one_root() -> None:
    for name in memdir.__all__:
        value = getattr(memdir, name)
        if isinstance(value, type) and issubclass(value, Exception):
            assert issubclass(value, memdir.MemdirError), name


def test_the_sdk_is_imported_lazily() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memdir; assert 'httpx2' not in sys.modules, 'import memdir imported httpx2'; "
        "memdir.Client; assert 'memdir.sdk' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
