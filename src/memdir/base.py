"""The commit runner and store lookup shared by the service's modules.

:meth:`ServiceBase._run` is the only way memdir writes: one writer transaction whose first
statement increments the store's revision counter (taking its lock), then the idempotency
check, the commit row with its provenance, the operations through a
:class:`~memdir.writer.CommitWriter`, and the stored result. Any exception rolls the whole
transaction back, so a commit applies completely or not at all.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from memdir.core.content import DEFAULT_MAX_BYTES
from memdir.core.errors import Forbidden, IdempotencyMismatch, InvalidInput, NotFound
from memdir.core.model import CommitResult, OpResult, Principal, Provenance
from memdir.rows import utcnow
from memdir.storage.database import Database
from memdir.storage.repository import Repository, Row
from memdir.writer import CommitWriter

__all__ = ["ServiceBase"]


class _Replay(Exception):
    """Internal: an idempotency key matched; carries the first attempt's result."""

    def __init__(self, result: CommitResult) -> None:
        self.result = result


class ServiceBase:
    """State every service module shares: the database and the content size limit.

    ``max_file_bytes`` bounds every file's content (UTF-8 bytes). The service holds no
    per-request state and is safe to share between threads.
    """

    def __init__(self, database: Database, *, max_file_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.db = database
        self.max_file_bytes = max_file_bytes

    def _store_row(self, repo: Repository, name: str) -> Row:
        row = repo.store(name)
        if row is None:
            raise NotFound(
                f"unknown store {name!r}; list stores with `memdir store list` or create it "
                f"with `memdir store create {name}`",
                store=name,
            )
        return row

    def _run(
        self,
        principal: Principal,
        store: str,
        provenance: Provenance | None,
        request: Any,
        apply: Callable[[CommitWriter], Sequence[OpResult]],
    ) -> CommitResult:
        """Run ``apply`` as one commit: lock the store, check idempotency, record provenance."""
        provenance = provenance or Provenance()
        request_hash = _request_hash(request)
        try:
            with self.db.write() as repo:
                row = self._store_row(repo, store)
                if row.archived_at is not None:
                    raise Forbidden(
                        f"store {store!r} is archived and read-only for good; write to "
                        "another store",
                        store=store,
                    )
                revision = repo.bump_revision(row.id)  # takes the store's write lock
                key = provenance.idempotency_key
                if key is not None:
                    self._check_replay(repo, row.id, principal, key, request_hash)
                now = utcnow()
                commit_id = uuid.uuid4().hex
                repo.insert_commit(
                    id=commit_id,
                    store_id=row.id,
                    revision=revision,
                    actor=principal.id,
                    created_at=now,
                    session=provenance.session,
                    transcript=provenance.transcript,
                    reason=provenance.reason,
                    source_kind=provenance.source_kind,
                    idempotency_key=key,
                    request_hash=request_hash if key is not None else None,
                )
                writer = CommitWriter(repo, row.id, commit_id, revision, now, self.max_file_bytes)
                results = tuple(apply(writer))
                if not results:
                    raise InvalidInput("nothing to commit: the change leaves every file as it is")
                result = CommitResult(commit_id, revision, results, now)
                repo.set_commit_result(commit_id, json.dumps(result.to_dict()))
                return result
        except _Replay as replay:
            return replay.result

    def _check_replay(
        self, repo: Repository, store_id: int, principal: Principal, key: str, request_hash: str
    ) -> None:
        previous = repo.commit_by_key(store_id, principal.id, key)
        if previous is None:
            return
        if previous.request_hash != request_hash:
            raise IdempotencyMismatch(
                f"idempotency key {key!r} was already used for a different request; use a "
                "new key for a new change",
                idempotency_key=key,
            )
        # Leaving the transaction by exception rolls back the revision increment.
        raise _Replay(CommitResult.from_dict(json.loads(previous.result), replayed=True))


def _request_hash(request: Any) -> str:
    payload = json.dumps(request, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()
