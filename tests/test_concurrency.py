"""Concurrent writers through the Python API: compare-and-swap loses no update.

Eight processes (spawned, each with its own engine) increment one counter file 200 times each
by read-modify-write with ``if_match``, retrying on a failed precondition. Every increment must
land exactly once: the final value is 1600, the file has 1 + 1600 versions, and the store's
revisions are gap-free. Runs on every backend.

Then the changes that are not plain commits against a commit in flight (held open inside its
transaction by a pause hook): a redaction, deleting the store, and the reverse (a commit to a
store being deleted or archived), and servers creating the same store at once. On SQLite the
writer lock serialises all of them; on PostgreSQL each must take the store's row lock itself.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable

import pytest

from helpers import STORE, assert_consistent, increment_worker
from memdir import OWNER, Conflict, Forbidden, MemoryService, NotFound
from memdir.storage.repository import Repository
from memdir.writer import CommitWriter

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


class Paused:
    """Holds a call in a thread, inside its transaction, right after ``cls.method`` ran with
    arguments for which ``when`` is true; :meth:`race` runs another call meanwhile."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        cls: type,
        method: str,
        when: Callable[..., bool] = lambda *args: True,
    ) -> None:
        self.applied, self.release = threading.Event(), threading.Event()
        self.outcome: object = None
        original = getattr(cls, method)

        def pausing(*args: object) -> object:
            result = original(*args)
            if when(*args):
                self.applied.set()
                assert self.release.wait(30)
            return result

        monkeypatch.setattr(cls, method, pausing)

    def start(self, call: Callable[[], object]) -> None:
        def run() -> None:
            try:
                self.outcome = call()
            except Exception as exc:
                self.outcome = exc

        self.thread = threading.Thread(target=run)
        self.thread.start()
        assert self.applied.wait(30)

    def race(self, call: Callable[[], object]) -> object:
        """Run ``call`` in another thread while the first call is held; release; both end."""
        result: list[object] = []

        def run() -> None:
            try:
                result.append(call())
            except Exception as exc:
                result.append(exc)

        other = threading.Thread(target=run)
        other.start()
        other.join(0.5)  # time for a call that does not wait for the commit to finish first
        self.release.set()
        self.thread.join(30)
        other.join(30)
        assert not self.thread.is_alive() and not other.is_alive()
        return result[0]


def test_redaction_waits_for_a_commit_writing_the_same_content(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A redaction racing a commit that makes the secret current again must not remove the
    content that commit's head points to: it waits for the commit, then refuses."""
    secret = "api key: s3cr3t-value\n"
    first = svc.write(OWNER, STORE, "/a.md", secret, if_absent=True).results[0].sha256
    svc.write(OWNER, STORE, "/a.md", "cleaned\n", if_match=first)
    paused = Paused(monkeypatch, CommitWriter, "apply", lambda _, op: op.path == "/b.md")
    paused.start(lambda: svc.write(OWNER, STORE, "/b.md", secret, if_absent=True))
    outcome = paused.race(lambda: svc.redact(OWNER, STORE, "/a.md", 1))
    assert isinstance(outcome, Conflict), outcome
    assert not isinstance(paused.outcome, Exception), paused.outcome
    view = svc.read(OWNER, STORE, "/b.md")
    assert (view.content, view.sha256) == (secret, first)
    assert_consistent(svc)


def test_deleting_a_store_waits_for_a_commit_in_flight(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc.create_store(OWNER, "doomed")
    svc.write(OWNER, "doomed", "/a.md", "a", if_absent=True)
    paused = Paused(monkeypatch, CommitWriter, "apply", lambda _, op: op.path == "/b.md")
    paused.start(lambda: svc.write(OWNER, "doomed", "/b.md", "b", if_absent=True))
    outcome = paused.race(lambda: svc.delete_store(OWNER, "doomed"))
    assert outcome is None, outcome
    assert not isinstance(paused.outcome, Exception), paused.outcome
    assert [s.name for s in svc.list_stores(OWNER)] == [STORE]
    with svc.db.read() as repo:
        assert repo.dialect.indexed_files(repo.conn) == []
    assert_consistent(svc)


def test_a_commit_to_a_store_deleted_meanwhile_finds_no_store(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc.create_store(OWNER, "doomed")
    svc.write(OWNER, "doomed", "/a.md", "a", if_absent=True)
    paused = Paused(monkeypatch, Repository, "delete_store")
    paused.start(lambda: svc.delete_store(OWNER, "doomed"))
    outcome = paused.race(lambda: svc.write(OWNER, "doomed", "/b.md", "b", if_absent=True))
    assert isinstance(outcome, NotFound), outcome
    assert outcome.details["store"] == "doomed"
    assert paused.outcome is None, paused.outcome
    assert [s.name for s in svc.list_stores(OWNER)] == [STORE]
    assert_consistent(svc)


def test_a_commit_to_a_store_archived_meanwhile_is_forbidden(
    svc: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    svc.write(OWNER, STORE, "/a.md", "a", if_absent=True)
    paused = Paused(monkeypatch, Repository, "archive_store")
    paused.start(lambda: svc.archive_store(OWNER, STORE))
    outcome = paused.race(lambda: svc.write(OWNER, STORE, "/b.md", "b", if_absent=True))
    assert isinstance(outcome, Forbidden), outcome
    assert svc.store_info(OWNER, STORE).archived_at is not None
    assert svc.store_info(OWNER, STORE).revision == 1
    assert [e.path for e in svc.ls(OWNER, STORE)] == ["/a.md"]
    assert_consistent(svc)


def _ensure_store_concurrently(svc: MemoryService, name: str, threads: int) -> list[object]:
    """``threads`` threads create store ``name`` at once, half with ``exist_ok``."""
    barrier = threading.Barrier(threads)
    outcomes: list[object] = []

    def ensure(exist_ok: bool) -> None:
        barrier.wait(30)
        try:
            outcomes.append(svc.create_store(OWNER, name, exist_ok=exist_ok).name)
        except Exception as exc:
            outcomes.append(exc)

    workers = [threading.Thread(target=ensure, args=(i % 2 == 0,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    return outcomes


def test_concurrent_store_creation(svc: MemoryService) -> None:
    """Servers starting together may all ensure the same store exists: one creates it, the
    others find it (``exist_ok``) or are told it exists (:class:`Conflict`) — never a raw
    database error."""
    threads, rounds = 8, 6
    for round_ in range(rounds):
        name = f"shared-{round_}"
        outcomes = _ensure_store_concurrently(svc, name, threads)
        unexpected = [o for o in outcomes if not (o == name or isinstance(o, Conflict))]
        assert not unexpected, unexpected
        assert outcomes.count(name) >= threads // 2  # every exist_ok caller succeeded
    names = [s.name for s in svc.list_stores(OWNER)]
    assert names == sorted([STORE] + [f"shared-{r}" for r in range(rounds)])
