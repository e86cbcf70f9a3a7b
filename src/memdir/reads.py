"""Last-read times, recorded cheaply: in memory first, flushed to ``file_reads`` in batches.

A read by path, a context (for the core files it shows whole) and a search (for its hits)
append ``(store, file, now)`` to an in-memory log — no lock, no statement, no version. The log
is written in one transaction (each file's latest time) when it holds :data:`FLUSH_FILES`
reads or :data:`FLUSH_SECONDS` have passed since the last flush (checked on the next record),
and when the service closes.
A process that dies loses at most that window of read times, which only feeds the stale
report ("not read in N days") and the recency order of context; nothing else depends on it.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections import deque
from collections.abc import Iterable
from typing import Final

from memdir.storage.database import Database
from memdir.storage.meta import record_reads

__all__ = ["FLUSH_FILES", "FLUSH_SECONDS", "ReadLog"]

FLUSH_FILES: Final = 2000
FLUSH_SECONDS: Final = 10.0
_log = logging.getLogger(__name__)


class ReadLog:
    """Pending read times for one database (thread-safe).

    A read appends ``(store, file, time)`` to a deque — atomic under the interpreter lock, so
    the read path takes no lock and makes no datetime; a flush drains the deque under its own
    lock (one flusher at a time) keeping each file's latest time. An append racing a drain
    lands either in this batch or in the next: no read time is lost.
    """

    def __init__(self, database: Database) -> None:
        self._db = database
        self._lock = threading.Lock()
        self._log: deque[tuple[int, int, float]] = deque()
        self._last_flush = time.monotonic()
        self.flushes = 0

    def record(self, store_id: int, file_ids: Iterable[int]) -> None:
        """Note that these files were read now (flushing when the batch is due)."""
        now = time.time()
        log = self._log
        for file_id in file_ids:
            log.append((store_id, file_id, now))
        due = len(log) >= FLUSH_FILES or time.monotonic() - self._last_flush >= FLUSH_SECONDS
        # never wait for a flush another read is making: these go in its batch or the next
        if due and self._lock.acquire(blocking=False):
            try:
                self._drain()
            finally:
                self._lock.release()

    def flush(self) -> int:
        """Write the pending read times in one transaction; returns the files written."""
        with self._lock:
            return self._drain()

    def _drain(self) -> int:
        """The flush itself; the caller holds ``_lock``."""
        batch: dict[tuple[int, int], float] = {}
        self._last_flush = time.monotonic()
        log = self._log
        while log:  # the only drainer (the lock): appends racing it land now or next time
            store_id, file_id, when = log.popleft()
            if when > batch.get((store_id, file_id), 0.0):
                batch[(store_id, file_id)] = when
        if not batch:
            return 0
        stamp = dt.datetime.fromtimestamp
        times = {key: stamp(when, dt.UTC) for key, when in batch.items()}
        try:
            with self._db.write() as repo:
                written = record_reads(repo, times)
        except Exception:  # a read must never fail because its bookkeeping could not be saved
            _log.warning("could not record %d read times", len(batch), exc_info=True)
            return 0
        self.flushes += 1
        return written
