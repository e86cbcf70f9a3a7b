"""The hot path's SQL, as driver text: what a read by path and its read record run.

Plain strings with ``?`` placeholders (``Dialect.sql`` adapts them), importable without
SQLAlchemy, so the service (:meth:`memdir.storage.database.Database.read_current`,
:func:`memdir.storage.meta.record_reads`) and the CLI's read fast path
(:mod:`memdir.cli.fast`) run the very same statements.
"""

from __future__ import annotations

from typing import Final

__all__ = ["READ_CURRENT", "READ_CURRENT_NO_POLICY", "RECORD_READ", "TIME_FORMAT"]

#: A store, its live file at a path, the file's content and the policy file's sha256.
#: Parameters: path, policy path, store name.
READ_CURRENT: Final = (
    "SELECT s.id, s.archived_at, p.sha256, h.path, h.file_id, h.version, h.sha256, h.size, "
    "h.revision, h.updated_at, b.content FROM stores s "
    "LEFT JOIN heads h ON h.store_id = s.id AND h.path = ? "
    "LEFT JOIN blobs b ON b.store_id = s.id AND b.sha256 = h.sha256 "
    "LEFT JOIN heads p ON p.store_id = s.id AND p.path = ? "
    "WHERE s.name = ?"
)
#: The same without the policy lookup, for callers that need no policy (the database owner).
#: Parameters: path, store name.
READ_CURRENT_NO_POLICY: Final = (
    "SELECT s.id, s.archived_at, NULL, h.path, h.file_id, h.version, h.sha256, h.size, "
    "h.revision, h.updated_at, b.content FROM stores s "
    "LEFT JOIN heads h ON h.store_id = s.id AND h.path = ? "
    "LEFT JOIN blobs b ON b.store_id = s.id AND b.sha256 = h.sha256 "
    "WHERE s.name = ?"
)
#: Upsert a file's last read time, keeping the later one; a file deleted since is skipped.
#: Parameters: read time, file id, store id.
RECORD_READ: Final = (
    "INSERT INTO file_reads (file_id, store_id, read_at) "
    "SELECT f.id, f.store_id, ? FROM files f WHERE f.id = ? AND f.store_id = ? "
    "ON CONFLICT (file_id) DO UPDATE SET read_at = excluded.read_at "
    "WHERE excluded.read_at > file_reads.read_at"
)
#: How SQLAlchemy's SQLite ``DateTime`` stores a time (UTC, naive).
TIME_FORMAT: Final = "%Y-%m-%d %H:%M:%S.%f"
