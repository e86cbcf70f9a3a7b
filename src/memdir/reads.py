"""Last-read times, recorded cheaply: in memory first, flushed to ``file_reads`` in batches.

A read by path, a context (for the core files it shows whole) and a search (for its hits)
record ``(store, file) → now`` in a dict under a lock — no statement, no version. The dict is
written in one transaction when it holds :data:`FLUSH_FILES` files or :data:`FLUSH_SECONDS`
have passed since the last flush (checked on the next record), and when the service closes.
A process that dies loses at most that window of read times, which only feeds the stale
report ("not read in N days") and the recency order of context; nothing else depends on it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Iterable
from typing import Final

from memdir.storage.database import Database
from memdir.storage.meta import record_reads

__all__ = ["FLUSH_FILES", "FLUSH_SECONDS", "ReadLog"]

FLUSH_FILES: Final = 2000
FLUSH_SECONDS: Final = 10.0
_log = logging.getLogger(__name__)


class ReadLog:
    """Pending read times for one database (thread-safe)."""

    def __init__(self, database: Database) -> None:
        self._db = database
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, int], dt.datetime] = {}
        self._last_flush = time.monotonic()
        self.flushes = 0

    def record(self, store_id: int, file_ids: Iterable[int]) -> None:
        """Note that these files were read now (flushing when the batch is due)."""
        now = dt.datetime.now(dt.UTC)
        with self._lock:
            for file_id in file_ids:
                self._pending[(store_id, file_id)] = now
            due = (
                len(self._pending) >= FLUSH_FILES
                or time.monotonic() - self._last_flush >= FLUSH_SECONDS
            )
        if due:
            self.flush()

    def flush(self) -> int:
        """Write the pending read times in one transaction; returns the files written."""
        with self._lock:
            batch, self._pending = self._pending, {}
            self._last_flush = time.monotonic()
        if not batch:
            return 0
        try:
            with self._db.write() as repo:
                written = record_reads(repo, batch)
        except Exception:  # a read must never fail because its bookkeeping could not be saved
            _log.warning("could not record %d read times", len(batch), exc_info=True)
            return 0
        self.flushes += 1
        return written
