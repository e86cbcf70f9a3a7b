"""The commit runner, store lookup and access shared by the service's modules.

:meth:`ServiceBase._run` is the only way memdir writes: one writer transaction whose first
statement increments the store's revision counter (taking its lock), then the idempotency
check, the commit row with its provenance, the operations through a
:class:`~memdir.writer.CommitWriter` (which checks the ``write`` right on every path it
touches), and the stored result. Any exception rolls the whole transaction back, so a commit
applies completely or not at all.

:meth:`ServiceBase.idempotent` gives mutations that make no commit (stores, principals, tokens,
proposal reviews) the same ``Idempotency-Key`` behaviour through the ``idempotency_keys``
table: the key is reserved (same principal, same key) before the mutation runs and the result
recorded after it; a repeat returns the recorded result, a key reused for another request is an
:class:`IdempotencyMismatch`, and a failed attempt releases the key. A reservation left by an
attempt that died half-way is taken over after :data:`IN_FLIGHT_SECONDS`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import secrets
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import sqlalchemy as sa

from memdir.access import DATABASE, Access, PolicyCache, database_check
from memdir.core.content import DEFAULT_MAX_BYTES
from memdir.core.errors import (
    Conflict,
    Forbidden,
    IdempotencyMismatch,
    InvalidContent,
    NoChange,
    NotFound,
)
from memdir.core.frontmatter import parse_frontmatter
from memdir.core.limits import (
    DEFAULT_MAX_COMMIT_OPERATIONS,
    DEFAULT_MAX_TRANSCRIPT_BYTES,
    check_operations,
)
from memdir.core.model import CommitResult, Operation, OpResult, Principal, Provenance
from memdir.core.policy import Decision, Policy
from memdir.reads import ReadLog
from memdir.rows import utcnow
from memdir.screening import Screen, Screened, default_screen, screen_operations
from memdir.storage.database import Database
from memdir.storage.meta import expired_paths
from memdir.storage.repository import DirectoryCounts, Repository, Row
from memdir.storage.schema import idempotency_keys
from memdir.writer import CommitWriter

__all__ = ["DEFAULT_TASK_EXPIRY_DAYS", "IN_FLIGHT_SECONDS", "ServiceBase", "unknown_store"]

#: Days after its last change a file under /tasks/ expires when it names no ``expires``
#: (``expires: never`` keeps it); 0 keeps task files forever. Setting ``task_expiry_days``.
DEFAULT_TASK_EXPIRY_DAYS = 30

T = TypeVar("T")

#: How long a reserved key whose attempt has not finished refuses a repeat (Conflict) before
#: the repeat may take it over (the first attempt is presumed dead).
IN_FLIGHT_SECONDS = 60


class _Replay(Exception):
    """Internal: an idempotency key matched; carries the first attempt's result."""

    def __init__(self, result: CommitResult) -> None:
        self.result = result


class ServiceBase:
    """State every service module shares: the database and the content size limit.

    ``max_file_bytes`` bounds every file's content (UTF-8 bytes) and every text an operation
    carries, in commits and proposals alike; ``max_commit_operations`` the operations of one
    commit or proposal; ``max_transcript_bytes`` one transcript file (see
    :mod:`memdir.core.limits`). The service holds no per-request state and is safe to share
    between threads.
    """

    def __init__(
        self,
        database: Database,
        *,
        max_file_bytes: int = DEFAULT_MAX_BYTES,
        max_commit_operations: int = DEFAULT_MAX_COMMIT_OPERATIONS,
        max_transcript_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES,
        screen: Screen | None = None,
        task_expiry_days: int = DEFAULT_TASK_EXPIRY_DAYS,
    ) -> None:
        self.db = database
        self.task_expiry_days = task_expiry_days
        self.reads = ReadLog(database)
        self.max_file_bytes = max_file_bytes
        self.max_commit_operations = max_commit_operations
        self.max_transcript_bytes = max_transcript_bytes
        self._policies = PolicyCache()
        self._dir_counts = DirectoryCounts()
        self._screen = default_screen if screen is None else screen  # guard loaded on first use

    def close(self) -> None:
        """Flush pending read times and close the database."""
        self.reads.flush()
        self.db.close()

    # --- expiry: the one decision (docs/context.md) -----------------------------------------

    def _expired(
        self, repo: Repository, store_id: int, access: Access, now: dt.datetime | None = None
    ) -> dict[str, dt.datetime]:
        """Paths in the caller's readable ranges that are expired at ``now``, with when: their
        ``expires`` has come, or they lie under /tasks/, name no ``expires`` and were last
        changed more than ``task_expiry_days`` ago. Listings, search, grep and context leave
        them out unless asked (:meth:`_hidden`); reads by path still serve them."""
        return expired_paths(
            repo, store_id, now or utcnow(), self.task_expiry_days, access.read_prefixes()
        )

    def _hidden(
        self, repo: Repository, store_id: int, access: Access, include_expired: bool
    ) -> dict[str, dt.datetime]:
        """The paths a listing leaves out: the expired ones, unless ``include_expired``."""
        return {} if include_expired else self._expired(repo, store_id, access)

    def _access(self, repo: Repository, store_id: int, principal: Principal) -> Access:
        """The principal's rights in a store (the owner skips loading the policy)."""
        if principal.is_owner:
            return Access(principal, None)
        return Access(principal, self._policies.get(repo, store_id))

    def _policy(self, repo: Repository, store_id: int) -> Policy:
        return self._policies.get(repo, store_id).policy

    def _check_operations(self, operations: Sequence[Operation], what: str = "commit") -> None:
        """The limits of a write, for every list of operations (commit or proposal)."""
        check_operations(
            operations,
            max_bytes=self.max_file_bytes,
            max_operations=self.max_commit_operations,
            what=what,
        )

    def _screen_ops(
        self,
        operations: Sequence[Operation],
        provenance: Provenance | None,
        *,
        rationale: str | None = None,
        evidence: Any = None,
    ) -> list[Screened]:
        """Screen every text of a change a later reader sees (:func:`screen_operations`)."""
        return screen_operations(
            operations, provenance, self._screen, rationale=rationale, evidence=evidence
        )

    @staticmethod
    def _protected(repo: Repository, store_id: int, access: Access, path: str) -> bool:
        """A live file whose frontmatter says ``protected: true``, for a non-admin caller.

        Frontmatter that no longer parses (stored before anchors and deep nesting were
        refused) counts as protected: whether it is cannot be known, so changes get review.
        """
        head = repo.head(store_id, path)
        if head is None or access.allowed("admin", path):
            return False
        content = repo.blob(store_id, head.sha256) or ""
        if not content.startswith("---"):
            return False
        try:
            return parse_frontmatter(content).protected
        except InvalidContent:  # stored before its YAML was refused (anchors): review it
            return True

    @staticmethod
    def _writable_store(row: Row) -> None:
        if row.archived_at is not None:
            raise Forbidden(
                f"store {row.name!r} is archived and read-only for good; write to another store",
                store=row.name,
            )

    @staticmethod
    def _is_admin(principal: Principal, resource: str = DATABASE) -> bool:
        """Database-wide administration of ``resource``: the owner, or a member of the
        ``admins`` group whose token (if narrowed) allows ``admin`` on ``resource``
        (:func:`memdir.access.database_check`, the one decision)."""
        return database_check(principal, "admin", resource).allowed

    def admin_decision(
        self, principal: Principal, resource: str = DATABASE, action: str = "admin"
    ) -> Decision:
        """The decision on a database-wide resource, with its rule and reason."""
        return database_check(principal, action, resource)

    def require_admin(self, principal: Principal, resource: str, what: str) -> None:
        """Refuse (Forbidden) unless ``principal`` administers ``resource``; ``what`` says what
        was asked ("create tokens") in the refusal."""
        decision = database_check(principal, "admin", resource)
        if not decision.allowed:
            raise Forbidden(
                f"{principal.id} may not {what}: {decision.reason}; use a token of a member of "
                "the 'admins' group that allows admin on " + resource,
                principal=principal.id,
                action="admin",
                path=resource,
                rule=decision.rule,
            )

    def _require_admin(
        self, principal: Principal, resource: str = DATABASE, what: str = "administer the database"
    ) -> None:
        """Refuse anyone but an administrator of ``resource`` (see :meth:`_is_admin`)."""
        self.require_admin(principal, resource, what)

    def authorize(
        self, principal: Principal, store: str, action: str, paths: Sequence[str]
    ) -> None:
        """Raise NotFound (unreadable) or Forbidden unless ``principal`` may now do ``action``
        on every path of ``store``: what a replayed result needs (see :meth:`idempotent`)."""
        with self.db.read() as repo:
            access = self._access(repo, self._store_row(repo, store).id, principal)
            for path in paths:
                access.require(action, path)

    @staticmethod
    def _authorize_replay(access: Access, result: CommitResult) -> None:
        """A recorded commit is replayed only to a caller who may still do what it did: write
        every path it touched (``admin`` for a purge), so a key never outlives a right."""
        for op in result.results:
            action = "admin" if op.op == "purge" else "write"
            for path in (op.path, op.old_path):
                if path:
                    access.require(action, path)

    def _store_row(self, repo: Repository, name: str) -> Row:
        row = repo.store(name)
        if row is None:
            raise unknown_store(name)
        return row

    def _run(
        self,
        principal: Principal,
        store: str,
        provenance: Provenance | None,
        request: Any,
        apply: Callable[[CommitWriter], Sequence[OpResult]],
        *,
        proposal_id: str | None = None,
    ) -> CommitResult:
        """Run ``apply`` as one commit: lock the store, check idempotency, record provenance.

        ``proposal_id`` links the commit to the proposal it applies.
        """
        provenance = provenance or Provenance()
        request_hash = _request_hash(request)
        try:
            with self.db.write() as repo:
                row = self._store_row(repo, store)
                self._writable_store(row)
                revision = repo.bump_revision(row.id)  # takes the store's write lock
                if revision is None:  # deleted or archived while this waited for the lock
                    self._writable_store(self._store_row(repo, store))
                    raise unknown_store(store)
                access = self._access(repo, row.id, principal)
                key = provenance.idempotency_key
                if key is not None:
                    self._check_replay(repo, row.id, access, key, request_hash)
                now = utcnow()
                commit_id = new_commit_id()
                writer = CommitWriter(
                    repo, row.id, commit_id, revision, now, self.max_file_bytes, access
                )
                writer.source_kind = provenance.source_kind
                results = tuple(apply(writer))
                if not results:
                    raise NoChange(
                        "nothing to commit: the change leaves every file as it is; a change "
                        "must change some file's content or path"
                    )
                result = CommitResult(commit_id, revision, results, now)
                # The commit row goes in complete (with its result), then its versions.
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
                    result=json.dumps(result.to_dict()),
                    proposal_id=proposal_id,
                )
                if writer.pending:
                    repo.insert_versions(writer.pending)
                return result
        except _Replay as replay:
            return replay.result

    def _check_replay(
        self, repo: Repository, store_id: int, access: Access, key: str, request_hash: str
    ) -> None:
        """Raise :class:`_Replay` for a repeated key, after checking the caller's rights now."""
        previous = repo.commit_by_key(store_id, access.principal.id, key)
        if previous is None:
            return
        if previous.request_hash != request_hash:
            raise IdempotencyMismatch(
                f"idempotency key {key!r} was already used for a different request; use a "
                "new key for a new change",
                idempotency_key=key,
            )
        result = CommitResult.from_dict(json.loads(previous.result), replayed=True)
        self._authorize_replay(access, result)
        # Leaving the transaction by exception rolls back the revision increment.
        raise _Replay(result)

    def idempotent(
        self,
        principal: Principal,
        key: str | None,
        request: Any,
        run: Callable[[], T],
        dump: Callable[[T], Any],
        load: Callable[[Any], T],
        *,
        authorize: Callable[[T], None],
    ) -> tuple[T, bool]:
        """``run()`` once per (principal, ``key``): returns (result, replayed).

        ``request`` (JSON) identifies what was asked; ``dump``/``load`` turn the result into
        JSON and back for the record (leave secrets out of ``dump``). Without a key, ``run()``
        runs as it is. A repeat of the same request returns ``load(recorded)`` and
        ``replayed=True`` without running — only after ``authorize(recorded)`` passed, which
        raises (NotFound, Forbidden) when the caller may no longer do what the first attempt
        did, so a replay never answers a request the caller could not make now; another
        request with the key raises IdempotencyMismatch; a repeat while the first attempt
        still runs raises Conflict.
        """
        if key is None:
            return run(), False
        key_hash = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
        where = (
            idempotency_keys.c.principal == principal.id,
            idempotency_keys.c.key_hash == key_hash,
        )
        request_hash = _request_hash(request)
        recorded = self._reserve(principal, key, key_hash, where, request_hash)
        if recorded is not None:
            value = load(json.loads(recorded))
            authorize(value)
            return value, True
        try:
            value = run()
        except BaseException:
            with self.db.write() as repo:  # a failed attempt does not consume the key
                repo.conn.execute(
                    sa.delete(idempotency_keys).where(*where, idempotency_keys.c.result.is_(None))
                )
            raise
        with self.db.write() as repo:
            repo.conn.execute(
                sa.update(idempotency_keys).where(*where).values(result=json.dumps(dump(value)))
            )
        return value, False

    def _reserve(
        self,
        principal: Principal,
        key: str,
        key_hash: str,
        where: tuple[Any, ...],
        request_hash: str,
    ) -> str | None:
        """Reserve the key for this attempt, or return the first attempt's recorded result."""
        now = utcnow()
        with self.db.write() as repo:
            row = repo.conn.execute(sa.select(idempotency_keys).where(*where)).first()
            if row is None:
                repo.conn.execute(
                    sa.insert(idempotency_keys).values(
                        principal=principal.id, key_hash=key_hash, key=key,
                        request_hash=request_hash, result=None, created_at=now,
                    )
                )  # fmt: skip
                return None
            if row.request_hash != request_hash:
                raise IdempotencyMismatch(
                    f"idempotency key {key!r} was already used for a different request; use a "
                    "new key for a new change",
                    idempotency_key=key,
                )
            if row.result is not None:
                return str(row.result)
            started = row.created_at if row.created_at.tzinfo else row.created_at.replace(
                tzinfo=dt.UTC
            )  # fmt: skip
            if now - started < dt.timedelta(seconds=IN_FLIGHT_SECONDS):
                raise Conflict(
                    f"a request with idempotency key {key!r} is still being processed; retry "
                    "in a few seconds to get its result",
                    idempotency_key=key,
                )
            repo.conn.execute(sa.update(idempotency_keys).where(*where).values(created_at=now))
            return None


def new_commit_id() -> str:
    """32 random hex characters, unique across servers.

    Random rather than time-ordered so that, as with git, a short prefix (6-12 characters)
    names one commit: time-ordered ids made commits of the same second share long prefixes.
    """
    return secrets.token_hex(16)


def unknown_store(name: str) -> NotFound:
    return NotFound(
        f"unknown store {name!r}; list stores with `memdir store list` or create it "
        f"with `memdir store create {name}`",
        store=name,
    )


def _request_hash(request: Any) -> str:
    payload = json.dumps(request, sort_keys=True, ensure_ascii=False)
    # surrogatepass: a lone surrogate must reach validation and be refused there as invalid
    # input, not fail here while hashing the request.
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()
