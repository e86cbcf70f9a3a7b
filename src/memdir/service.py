"""The one entry point every surface calls.

``MemoryService`` methods take the acting :class:`~memdir.core.model.Principal` first: the
actor of every commit is that principal, never a name the caller typed. The flow of a write is
principal → (policy, next layer) → guard → CAS → commit → event; this module owns it, the core
decides, the storage stores.

Reads run in one reader snapshot; writes in one writer transaction whose first statement
increments the store's revision counter (taking its lock), so a commit's operations see one
consistent state and either all apply or none does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any

from memdir.access import STORES, Access, database_check, missing
from memdir.backtests import BacktestsMixin
from memdir.base import unknown_store
from memdir.context import ContextMixin
from memdir.core.edits import line_slice
from memdir.core.errors import Conflict, NotFound, Proposed
from memdir.core.globs import compile_glob, literal_prefix
from memdir.core.limits import MAX_INT64, check_int
from memdir.core.model import (
    CommitResult,
    Delete,
    Entry,
    FileView,
    Insert,
    Operation,
    OpResult,
    Principal,
    Provenance,
    Rename,
    SearchHit,
    StoreInfo,
    StrReplace,
    Write,
    validate_store_name,
)
from memdir.core.paths import descendant_range, is_under, normalize_prefix, validate_path
from memdir.core.policy import POLICY_PATH, RESERVED_PREFIX
from memdir.directory import DirectoryMixin
from memdir.dreams import DreamsMixin
from memdir.governance import GovernanceMixin
from memdir.history import HistoryMixin
from memdir.principals import PrincipalsMixin
from memdir.proposals import ProposalsMixin, operation_paths
from memdir.review_queue import ReviewQueueMixin
from memdir.rows import aware, entry, utcnow, view
from memdir.screening import verdict
from memdir.storage.repository import DirectoryCounts, Repository, Row
from memdir.transcripts.service import TranscriptsMixin
from memdir.writer import CommitWriter, creates

__all__ = ["MemoryService"]


class _NeedsReview(Exception):
    """Internal: the change must become a proposal (leaves the commit transaction)."""

    def __init__(self, origin: str, reason: str, findings: Sequence[dict[str, Any]]) -> None:
        self.origin = origin
        self.reason = reason
        self.findings = list(findings)


class MemoryService(
    ReviewQueueMixin,
    BacktestsMixin,
    ContextMixin,
    DreamsMixin,
    HistoryMixin,
    ProposalsMixin,
    PrincipalsMixin,
    GovernanceMixin,
    TranscriptsMixin,
    DirectoryMixin,
):
    """Store operations over one database, for any principal.

    Construct with ``MemoryService(Database(url), max_file_bytes=...)``; see
    :class:`~memdir.base.ServiceBase`.
    """

    # --- stores ---------------------------------------------------------------------------

    def create_store(self, principal: Principal, name: str, *, exist_ok: bool = False) -> StoreInfo:
        self.require_admin(principal, STORES, "create stores")
        validate_store_name(name)
        with self.db.write() as repo:
            # The insert finds a store created concurrently (by another server) too.
            exists = repo.store(name) is not None or repo.create_store(name, utcnow()) is None
            if exists and not exist_ok:
                raise Conflict(f"store {name!r} already exists", store=name)
            return self._store_info(repo, name)

    def list_stores(self, principal: Principal) -> list[StoreInfo]:
        """The stores the principal may read a file in, by name; a database administrator
        (``read`` on ``/.memdir/db/stores``) sees every store. ``files`` counts the live files
        the principal may read, for administrators too (a deny rule binds them as well).

        A store is not listed merely because its policy would let the caller read somewhere:
        under the default policy everyone reads ``/org/``, which would show every store's name
        to everyone."""
        every = database_check(principal, "read", STORES).allowed
        with self.db.read() as repo:
            found = [self._visible_store(repo, r, principal, every) for r in repo.stores()]
            return [info for info in found if info is not None]

    def store_info(self, principal: Principal, name: str) -> StoreInfo:
        """One store as :meth:`list_stores` shows it; unknown if the principal may read
        nothing in it (the same error as a store that does not exist)."""
        every = database_check(principal, "read", STORES).allowed
        with self.db.read() as repo:
            info = self._visible_store(repo, self._store_row(repo, name), principal, every)
            if info is None:
                raise unknown_store(name)
            return info

    def _visible_store(
        self, repo: Repository, row: Row, principal: Principal, every: bool
    ) -> StoreInfo | None:
        """The store as ``principal`` may see it, or None when it may read no file there
        (and is not an administrator, who sees every store)."""
        access = self._access(repo, row.id, principal)
        files = sum(1 for h in repo.heads_under(row.id, "/") if access.can_read(h.path))
        if not files and not every:
            return None
        return StoreInfo(
            name=row.name,
            revision=row.revision,
            created_at=aware(row.created_at),
            archived_at=aware(row.archived_at) if row.archived_at else None,
            files=files,
        )

    def archive_store(self, principal: Principal, name: str) -> StoreInfo:
        """Make a store read-only for good (there is no unarchive)."""
        self.require_admin(principal, STORES, "archive stores")
        with self.db.write() as repo:
            row = self._store_row(repo, name)
            if row.archived_at is None:
                repo.archive_store(row.id, utcnow())
            return self._store_info(repo, name)

    def delete_store(self, principal: Principal, name: str) -> None:
        """Delete a store and everything in it: files, versions, commits, proposals."""
        self.require_admin(principal, STORES, "delete stores")
        with self.db.write() as repo:
            store_id = self._store_row(repo, name).id
            if not repo.lock_store(store_id):  # waits for commits in flight to finish
                raise unknown_store(name)
            repo.delete_store(store_id)

    def _store_info(self, repo: Repository, name: str) -> StoreInfo:
        row = self._store_row(repo, name)
        return StoreInfo(
            name=row.name,
            revision=row.revision,
            created_at=aware(row.created_at),
            archived_at=aware(row.archived_at) if row.archived_at else None,
            files=repo.count_heads(row.id),
        )

    # --- writes ---------------------------------------------------------------------------

    def commit(
        self,
        principal: Principal,
        store: str,
        operations: Sequence[Operation],
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Apply ``operations`` atomically, each against its own precondition.

        All apply or none does. With ``provenance.idempotency_key``, a repeat of the same
        request by the same principal returns the first result (``replayed=True``); the same
        key with a different request is an :class:`IdempotencyMismatch`.
        """
        self._check_operations(operations)
        request = ["commit", [asdict(op) for op in operations]]
        found = self._screen_ops(operations, provenance)

        def apply(writer: CommitWriter) -> list[OpResult]:
            screened = verdict(found, self._policy(writer.repo, writer.store_id)) if found else None
            findings = list(screened.findings) if screened else []
            reason = self._review_reason(writer, operations)
            if reason is not None:
                raise _NeedsReview("agent", reason, findings)
            if screened is not None and screened.quarantine:
                first = next(f for f in findings if f["action"] == "quarantine")
                why = f"write screening quarantined it ({first['rule']}: {first['reason']})"
                raise _NeedsReview("quarantine", why, findings)
            if screened is not None:
                writer.findings = screened.allowed_by_path()
            return [writer.apply(op) for op in operations]

        try:
            return self._run(principal, store, provenance, request, apply)
        except _NeedsReview as review:
            # A repeated key queues nothing more: it answers with the proposal queued first.
            key = provenance.idempotency_key if provenance is not None else None
            needs: _NeedsReview = review

            def queue() -> str:
                return self._queue(principal, store, operations, provenance, needs)

            # authorize: the rights were checked just now, by the attempt that needs review.
            pid, _ = self.idempotent(
                principal, key, ["queued", store, request], queue, str, str,
                authorize=lambda _pid: None,
            )  # fmt: skip
            raise Proposed(
                f"not applied: {review.reason}; it waits for review as proposal {pid} "
                f"(`memdir proposals show {pid}`)",
                proposal=pid,
                reason=review.reason,
                findings=review.findings,
            ) from None

    def _review_reason(self, writer: CommitWriter, operations: Sequence[Operation]) -> str | None:
        """Why these operations need review (propose-only rights, protected files), or None.

        Raises NotFound / Forbidden for a path the principal may neither write nor propose to.
        """
        access = writer.access
        if access.policy is None:
            return None  # the database owner
        reason = None
        for op in operations:
            for path in operation_paths(op):
                validate_path(path)  # a bad path is invalid input, not a path without rights
                # no read, no change of any kind: not even a proposal reveals what is there
                access.require_read(path, new=creates(op, path))
                if access.allowed("write", path):
                    if reason is None and self._protected(
                        writer.repo, writer.store_id, access, path
                    ):
                        reason = f"{path} is protected: changes to it need review"
                elif access.allowed("propose", path):
                    reason = reason or f"{access.principal.id} may only propose changes to {path}"
                else:
                    access.require("write", path)
        return reason

    def _queue(
        self,
        principal: Principal,
        store: str,
        operations: Sequence[Operation],
        provenance: Provenance | None,
        review: _NeedsReview,
    ) -> str:
        """Record a change that needs review as a proposal (no store revision is taken)."""
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            self._writable_store(row)
            return self._insert_proposal(
                repo, row.id, principal, operations, origin=review.origin,
                findings=review.findings or None, provenance=provenance,
            )  # fmt: skip

    def write(
        self,
        principal: Principal,
        store: str,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Create (``if_absent``) or overwrite (``if_match``) a file."""
        op = Write(path, content, if_match=if_match, if_absent=if_absent)
        return self.commit(principal, store, [op], provenance)

    def str_replace(
        self,
        principal: Principal,
        store: str,
        path: str,
        old: str,
        new: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = StrReplace(path, old, new, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    def insert(
        self,
        principal: Principal,
        store: str,
        path: str,
        line: int,
        text: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = Insert(path, line, text, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    def delete(
        self,
        principal: Principal,
        store: str,
        path: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        return self.commit(principal, store, [Delete(path, if_match=if_match)], provenance)

    def rename(
        self,
        principal: Principal,
        store: str,
        path: str,
        new_path: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = Rename(path, new_path, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    # --- reads ----------------------------------------------------------------------------
    # Every read filters by the caller's read right; what it may not read is reported exactly
    # as what does not exist (no leaks through counts, snippets or errors).

    def read(
        self,
        principal: Principal,
        store: str,
        path: str,
        *,
        version: int | None = None,
        lines: tuple[int, int | None] | None = None,
    ) -> FileView:
        """A file at its current version, or at ``version``; ``lines`` = (first, last|None)."""
        validate_path(path)
        if version is not None:
            check_int("version", version, minimum=-MAX_INT64)
        if lines is not None:
            check_int("first line", lines[0], minimum=-MAX_INT64)
            if lines[1] is not None:
                check_int("last line", lines[1], minimum=-MAX_INT64)
        if version is None:
            found = self._read_current(principal, store, path)
        else:
            with self.db.read() as repo:
                row = self._store_row(repo, store)
                access = self._access(repo, row.id, principal)
                found = self._read(repo, row.id, access, path, version)
        expired = self.expired_at(found.path, found.content, found.updated_at)
        if expired is not None:
            found = FileView(**{**asdict(found), "expired_at": expired})
        if lines is not None:
            content = line_slice(found.content, lines[0], lines[1])
            found = FileView(**{**asdict(found), "content": content})
        return found

    def _read_current(self, principal: Principal, store: str, path: str) -> FileView:
        """The hot path: one statement for store, file and policy (see Database.read_current)."""
        row = self.db.read_current(store, path, None if principal.is_owner else POLICY_PATH)
        if row is None:
            with self.db.read() as repo:
                self._store_row(repo, store)  # raises the unknown-store error
            raise missing(path)
        store_id, _archived, policy_sha = row[0], row[1], row[2]
        if not principal.is_owner:
            policy = self._policies.get_by_sha(
                policy_sha, lambda: self._load_blob(store_id, policy_sha or "")
            )
            Access(principal, policy).require_read(path)
        if row[3] is None:
            raise missing(path)
        self.reads.record(store_id, (row[4],))
        decode = self.db.dialect.decode_time
        return FileView(
            path=row[3],
            content=row[10],
            sha256=row[6],
            version=row[5],
            size=row[7],
            file_id=row[4],
            revision=row[8],
            updated_at=aware(decode(row[9])),
        )

    def _load_blob(self, store_id: int, sha256: str) -> str:
        with self.db.read() as repo:
            return repo.blob(store_id, sha256) or ""

    def iter_files(self, principal: Principal, store: str, prefix: str = "/") -> Iterator[FileView]:
        """Every readable live file under ``prefix`` with its content, in path order."""
        directory = normalize_prefix(prefix)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            prefixes = access.read_prefixes()
            for head in repo.heads_under(row.id, directory, with_content=True, prefixes=prefixes):
                if access.can_read(head.path):
                    yield view(head, head.content)

    def ls(
        self,
        principal: Principal,
        store: str,
        prefix: str = "/",
        *,
        depth: int | None = 1,
        include_expired: bool = False,
    ) -> list[Entry]:
        """The readable tree under ``prefix``: files, and directories with their file count.

        ``depth`` 1 lists the immediate children; None lists every file recursively. Expired
        files are left out (and not counted) unless ``include_expired``; naming one as the
        prefix lists it.
        """
        directory = normalize_prefix(prefix)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            if directory != "/":
                single = repo.head(row.id, directory)
                if single is not None and access.can_read(directory):
                    return [entry(single)]
            prefixes = access.read_prefixes()
            hidden = self._hidden(repo, row.id, access, include_expired)
            if depth is not None and access.reads_everything():
                entries = _skip_tree(repo, row, directory, depth, access, hidden, self._dir_counts)
            else:
                readable = (
                    h
                    for h in repo.heads_under(row.id, directory, prefixes=prefixes)
                    if access.can_read(h.path) and h.path not in hidden
                )
                entries = self._tree(readable, directory, depth)
        if not entries and directory != "/":
            raise NotFound(f"{directory} does not exist", hint="list_parent", path=directory)
        return entries

    @staticmethod
    def _tree(rows: Iterator[Row], directory: str, depth: int | None) -> list[Entry]:
        base = 0 if directory == "/" else directory.count("/")
        dirs: dict[str, int] = {}
        out: list[Entry] = []
        for head in rows:
            parts = head.path.split("/")
            if depth is None or len(parts) - 1 - base <= depth:
                out.append(entry(head))
            else:
                name = "/".join(parts[: base + 1 + depth])
                dirs[name] = dirs.get(name, 0) + 1
        out.extend(Entry(path=p, kind="dir", files=n) for p, n in dirs.items())
        return sorted(out, key=lambda e: e.path)

    def glob(
        self, principal: Principal, store: str, pattern: str, *, include_expired: bool = False
    ) -> list[str]:
        """Readable live files matching a glob (``*``, ``?``, ``[...]``, ``**`` for any depth).

        Only readable paths reach the pattern (the access check runs first), and the scan
        covers only the key ranges the caller may read; the matcher is linear in the path.
        Expired files are left out unless ``include_expired``.
        """
        matcher = compile_glob(pattern)
        start = literal_prefix(pattern)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            prefixes = access.read_prefixes()
            hidden = self._hidden(repo, row.id, access, include_expired)
            return [
                h.path
                for h in repo.heads_under(row.id, start, prefixes=prefixes)
                if access.can_read(h.path) and h.path not in hidden and matcher.match(h.path)
            ]

    def search(
        self,
        principal: Principal,
        store: str,
        query: str,
        *,
        prefix: str = "/",
        limit: int = 10,
        include_expired: bool = False,
    ) -> list[SearchHit]:
        """Ranked full-text search over readable current content (any-term, stemmed).

        Unreadable files are dropped before ranking, and the ranking's statistics come from
        the readable matches alone (:mod:`memdir.search.rank`), so neither the results nor
        their order depend on what the caller cannot see; hits carry rank positions only.
        A caller that may read every file of the store (:meth:`Access.reads_everything`, and
        every file under ``/.memdir/`` the store holds) is ranked by the index itself (SQLite:
        FTS5's ``bm25()``), whose statistics then span only files it may read.
        Expired files are dropped the same way unless ``include_expired``. Records a read of
        each hit (:mod:`memdir.reads`).
        """
        from memdir.search.query import parse_query

        directory = normalize_prefix(prefix)
        check_int("limit", limit, minimum=1)
        parsed = parse_query(query)
        if parsed.empty:
            return []
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            whole = access.policy is None or (  # the owner reads /.memdir/ too
                access.reads_everything()
                and all(access.can_read(h.path) for h in repo.heads_under(row.id, RESERVED_PREFIX))
            )
            hidden = self._hidden(repo, row.id, access, include_expired)
            readable: Callable[[str], bool] | None = None if whole else access.can_read
            if hidden:  # expired files: filtered, so ranked over the rest like any caller's
                readable = _without(readable, hidden)
            prefixes = None if whole else access.read_prefixes()
            rows = repo.search(row.id, parsed, directory, limit, readable, prefixes)
            if rows:
                self._record_hits(repo, row.id, [path for path, *_ in rows])
        return [
            SearchHit(path=path, rank=index + 1, snippet=snippet, sha256=sha, version=version)
            for index, (path, snippet, sha, version) in enumerate(rows)
        ]


def _skip_tree(
    repo: Repository,
    store: Row,
    directory: str,
    depth: int,
    access: Access,
    hidden: Mapping[str, object],
    counts: DirectoryCounts,
) -> list[Entry]:
    """What :meth:`MemoryService._tree` makes of the readable files under ``directory``, in
    O(entries) probes rather than a scan of every file beneath it, for a caller that may read
    every file outside ``/.memdir/`` (:meth:`Access.reads_everything`).

    One indexed probe finds the next file; a file within ``depth`` is an entry, otherwise its
    directory at ``depth`` is, with its files counted in the key's index (less the ``hidden``
    ones beneath it; :class:`DirectoryCounts` keeps the count for the store's revision) and
    the probe skipping past its key range. Anything under ``/.memdir/``
    is still decided path by path (``can_read``), as is every file entry.
    """
    store_id = int(store.id)
    lo, hi = descendant_range(directory)
    base = 0 if directory == "/" else directory.count("/")
    out: list[Entry] = []
    start, inclusive = lo, True
    while (head := repo.next_head(store_id, start, hi, inclusive=inclusive)) is not None:
        parts = head.path.split("/")
        if len(parts) - 1 - base <= depth:
            if access.can_read(head.path) and head.path not in hidden:
                out.append(entry(head))
            start, inclusive = head.path, False
            continue
        name = "/".join(parts[: base + 1 + depth])
        below = name + "/"
        if access.policy is None or not (
            is_under(name, RESERVED_PREFIX) or is_under(RESERVED_PREFIX, name)
        ):
            files = counts.count(repo, store, name) - sum(1 for p in hidden if p.startswith(below))
        else:
            files = sum(
                1
                for h in repo.heads_under(store_id, name)
                if access.can_read(h.path) and h.path not in hidden
            )
        if files:
            out.append(Entry(path=name, kind="dir", files=files))
        start, inclusive = descendant_range(name)[1], True
    return sorted(out, key=lambda e: e.path)


def _without(
    readable: Callable[[str], bool] | None, hidden: Mapping[str, object]
) -> Callable[[str], bool]:
    """``readable`` (None: everything) less the ``hidden`` paths."""
    if readable is None:
        return lambda path: path not in hidden
    check = readable
    return lambda path: path not in hidden and check(path)
