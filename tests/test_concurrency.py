"""Concurrent writers through the Python API: compare-and-swap loses no update.

Eight processes (spawned, each with its own engine) increment one counter file 200 times each
by read-modify-write with ``if_match``, retrying on a failed precondition. Every increment must
land exactly once: the final value is 1600, the file has 1 + 1600 versions, and the store's
revisions are gap-free. Runs on every backend.
"""

from __future__ import annotations

import multiprocessing
import queue
import time

import pytest

from helpers import STORE, assert_consistent, increment_worker
from memdir import OWNER, MemoryService

pytestmark = pytest.mark.slow

PROCESSES = 8
INCREMENTS = 200
COUNTER = "/counters/shared.md"


def test_concurrent_increments_lose_no_update(svc: MemoryService, backend: str) -> None:
    svc.write(OWNER, STORE, COUNTER, "0", if_absent=True)
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(PROCESSES)
    results = ctx.Queue()
    workers = [
        ctx.Process(
            target=increment_worker,
            args=(backend, STORE, COUNTER, INCREMENTS, barrier, results, index),
            daemon=True,
        )
        for index in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    reports: dict[int, tuple[str, object]] = {}
    deadline = time.monotonic() + 300
    try:
        while len(reports) < PROCESSES:
            try:
                index, status, detail = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                pytest.fail(f"workers did not finish in time; reports so far: {reports}")
            reports[index] = (status, detail)
    finally:
        for worker in workers:
            worker.join(timeout=30)
            if worker.is_alive():
                worker.kill()
                worker.join()
    errors = {i: d for i, (s, d) in reports.items() if s != "ok"}
    assert not errors, errors
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]

    total = PROCESSES * INCREMENTS
    view = svc.read(OWNER, STORE, COUNTER)
    assert view.content == str(total)
    assert view.version == total + 1
    history = svc.file_history(OWNER, STORE, COUNTER)
    assert len(history) == total + 1
    assert [v.operation for v in history].count("created") == 1
    assert [v.operation for v in history].count("modified") == total
    # each version holds the previous value plus one, in version order
    ordered = sorted(history, key=lambda v: v.version)
    assert [svc.read(OWNER, STORE, COUNTER, version=v.version).content for v in ordered[-5:]] == [
        str(total - 4 + i) for i in range(5)
    ]
    commits = svc.history(OWNER, STORE, limit=total + 10)
    assert sorted(c.revision for c in commits) == list(range(1, total + 2))
    assert svc.store_info(OWNER, STORE).revision == total + 1
    assert [v.revision for v in ordered] == list(range(1, total + 2))
    assert_consistent(svc)
    retries = sum(int(str(d)) for s, d in reports.values())
    print(f"{backend.split(':')[0]}: {total} increments, {retries} retries on a stale if_match")
