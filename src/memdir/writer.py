"""The commit engine: applies operations inside one writer transaction.

:class:`CommitWriter` is the only code that mutates the live tree. For every operation it reads
the current head inside the transaction, decides the precondition (:mod:`memdir.core.edits`),
computes the new content, then changes the head by compare-and-swap on its sha256, appends an
immutable version row and updates the search index — all in the caller's transaction, so a
commit of several operations applies whole or not at all.

Invariants it keeps:

- a path is a file or a directory, never both (checked against ancestors and descendants);
- a file's version numbers are 1, 2, 3, ... and continue across renames and re-creation;
- every version row names the commit, and so the store revision, that made it;
- the search index holds exactly the live files, with their current path and content;
- every primitive that changes a path first checks the principal's ``write`` right on it —
  which needs ``read`` first (:meth:`~memdir.access.Access.require`) — so no operation, rename
  and revert included, can move content into or out of a scope the caller may not write, and
  a path the caller may not read answers NotFound before any of its state (existence, sha256,
  content, line counts) is looked at or reported;
- a change changes something: an operation that would leave its file's content and path as
  they are raises :class:`~memdir.core.errors.NoChange` (after its precondition), so no empty
  version is ever made;
- errors name only paths the caller may read (a hidden blocker of the file/dir rule is not
  named);
- the policy file (``/.memdir/policy.yaml``) only ever holds a valid policy.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memdir.access import missing
from memdir.core.content import check_content, sha256_hex
from memdir.core.edits import apply_insert, apply_str_replace, check_precondition
from memdir.core.errors import Conflict, NoChange, PathConflict, PreconditionFailed
from memdir.core.frontmatter import describe, parse_frontmatter
from memdir.core.model import (
    Delete,
    Insert,
    Operation,
    OpResult,
    Rename,
    StrReplace,
    Write,
)
from memdir.core.paths import ancestors, validate_path
from memdir.core.policy import POLICY_PATH, parse_policy
from memdir.storage.meta import delete_meta, put_meta
from memdir.storage.repository import Repository, Row

if TYPE_CHECKING:
    from memdir.access import Access

__all__ = ["CommitWriter", "creates"]


def creates(op: Operation, path: str) -> bool:
    """Whether ``op`` may put a new file at ``path``: a write without ``if_match``, or the
    target of a rename. Decided from the request alone, never from the store's state."""
    if isinstance(op, Write):
        return op.if_match is None
    return isinstance(op, Rename) and path == op.new_path


@dataclass
class CommitWriter:
    """Applies operations for one commit (one store, one revision) in one transaction."""

    repo: Repository
    store_id: int
    commit_id: str
    revision: int
    now: dt.datetime
    max_bytes: int
    access: Access
    #: screening findings allowed by policy, recorded on the versions of these paths
    findings: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    #: version rows of this commit, written after the commit row (see ServiceBase._run)
    pending: list[dict[str, Any]] = field(default_factory=list)
    #: the newest version number given to each file in this commit
    last_number: dict[int, int] = field(default_factory=dict)
    #: the commit's provenance source kind, kept in ``file_meta`` beside the writer
    source_kind: str | None = None

    def latest_number(self, file_id: int) -> int:
        """A file's newest version number, counting versions this commit has not written yet."""
        if file_id in self.last_number:
            return self.last_number[file_id]
        rows = self.repo.file_versions(file_id, limit=1)
        return int(rows[0].number) if rows else 0

    # --- operations -----------------------------------------------------------------------

    def apply(self, op: Operation) -> OpResult:
        """Apply one operation against the current state inside the transaction."""
        if isinstance(op, Write):
            return self._write(op)
        if isinstance(op, StrReplace):
            head = self._existing(op.path, op.if_match)
            old = self._content(head)
            return self.modify(head, apply_str_replace(op.path, old, op.old, op.new), op.op)
        if isinstance(op, Insert):
            head = self._existing(op.path, op.if_match)
            old = self._content(head)
            return self.modify(head, apply_insert(op.path, old, op.line, op.text), op.op)
        if isinstance(op, Delete):
            return self.delete(self._existing(op.path, op.if_match), op.op)
        return self.move(self._existing(op.path, op.if_match), op.new_path, op.op)

    def _write(self, op: Write) -> OpResult:
        validate_path(op.path)
        # before any state is looked at or reported; needs read too
        self.access.require("write", op.path, new=creates(op, op.path))
        head = self.repo.head(self.store_id, op.path)
        check_precondition(
            op.path,
            None if head is None else head.sha256,
            if_match=op.if_match,
            if_absent=op.if_absent,
            full_overwrite=True,
        )
        if head is None:
            return self.create(op.path, op.content, op.op)
        return self.modify(head, op.content, op.op)

    def _existing(self, path: str, if_match: str | None) -> Row:
        validate_path(path)
        self.access.require("write", path)  # before any state is looked at; needs read too
        head = self.repo.head(self.store_id, path)
        if head is None:
            raise missing(path)
        check_precondition(
            path, head.sha256, if_match=if_match, if_absent=False, full_overwrite=False
        )
        return head

    def _content(self, head: Row) -> str:
        content = self.repo.blob(self.store_id, head.sha256)
        if content is None:  # heads always point at a stored blob; this is corruption
            raise Conflict(f"the content of {head.path} is missing from the database")
        return content

    # --- primitives (also used by revert) -------------------------------------------------

    def check_free(self, path: str) -> None:
        """Refuse to put a file at ``path`` if it is taken or would break the file/dir rule."""
        validate_path(path)
        self.access.require("write", path, new=True)
        if self.repo.head(self.store_id, path) is not None:
            raise PathConflict(f"{path} already exists; choose another path", path=path)
        blocker = self.repo.first_file_among(self.store_id, ancestors(path))
        if blocker is not None:
            if not self.access.can_read(blocker):  # a hidden file is not named
                raise PathConflict(
                    f"cannot create {path}: a directory above it is a file", path=path
                )
            raise PathConflict(
                f"cannot create {path}: {blocker} is a file, so it cannot be a directory",
                path=path,
                file=blocker,
            )
        below = self.repo.first_under(self.store_id, path)
        if below is not None:
            if not self.access.can_read(below):
                raise PathConflict(
                    f"cannot create {path}: it is a directory", path=path, holds=None
                )
            raise PathConflict(
                f"cannot create {path}: it is a directory (it holds {below})",
                path=path,
                holds=below,
            )

    def _prepare(self, path: str, content: str) -> tuple[str, int]:
        size = check_content(content, self.max_bytes)
        if content.startswith("---"):
            parse_frontmatter(content)
        if path == POLICY_PATH:
            parse_policy(content)  # a malformed policy is refused whole; the old one stays
        sha = sha256_hex(content)
        self.repo.put_blob(self.store_id, sha, content, size)
        return sha, size

    def _version(
        self,
        file_id: int,
        number: int,
        operation: str,
        path: str,
        sha: str | None,
        size: int,
        op: str,
        old_path: str | None = None,
    ) -> OpResult:
        self.pending.append(
            dict(
                store_id=self.store_id,
                file_id=file_id,
                number=number,
                commit_id=self.commit_id,
                revision=self.revision,
                operation=operation,
                path=path,
                old_path=old_path,
                sha256=sha,
                size=size,
                findings=self.findings.get(path) or None,
            )
        )
        self.last_number[file_id] = number
        return OpResult(
            op=op,
            path=path,
            file_id=file_id,
            version=number,
            operation=operation,
            sha256=sha,
            size=size,
            old_path=old_path,
        )

    def _head_values(self, number: int, sha: str, size: int) -> dict[str, Any]:
        return {
            "version": number,
            "sha256": sha,
            "size": size,
            "revision": self.revision,
            "updated_at": self.now,
        }

    def create(
        self, path: str, content: str, op: str, *, file_id: int | None = None, number: int = 1
    ) -> OpResult:
        """Create a live file (a new one, or a deleted ``file_id`` coming back as ``number``)."""
        self.check_free(path)
        sha, size = self._prepare(path, content)
        if file_id is None:
            file_id = self.repo.new_file(self.store_id, self.revision)
        self.repo.insert_head(
            store_id=self.store_id,
            path=path,
            file_id=file_id,
            **self._head_values(number, sha, size),
        )
        self.repo.index_file(file_id, path, content, store_id=self.store_id, new=True)
        self._describe(file_id, path, content)
        return self._version(file_id, number, "created", path, sha, size, op)

    def modify(self, head: Row, content: str, op: str) -> OpResult:
        """Replace a live file's content, compare-and-swap on the sha256 just read.

        Content equal to the current content is :class:`NoChange` (no empty version).
        """
        self.access.require("write", head.path)
        sha, size = self._prepare(head.path, content)  # valid content first, then the rule
        if sha == head.sha256:
            raise NoChange(
                f"nothing to change: this {op} leaves {head.path} exactly as it is; a change "
                "must change the content or the path",
                path=head.path,
                op=op,
            )
        number = head.version + 1
        values = self._head_values(number, sha, size)
        if not self.repo.cas_update_head(self.store_id, head.path, head.sha256, **values):
            raise self._lost_race(head.path)
        self.repo.index_file(head.file_id, head.path, content, store_id=self.store_id)
        self._describe(head.file_id, head.path, content)
        return self._version(head.file_id, number, "modified", head.path, sha, size, op)

    def delete(self, head: Row, op: str) -> OpResult:
        self.access.require("write", head.path)
        if not self.repo.delete_head(self.store_id, head.path, head.sha256):
            raise self._lost_race(head.path)
        self.repo.unindex_file(head.file_id, store_id=self.store_id)
        delete_meta(self.repo, head.file_id)
        return self._version(head.file_id, head.version + 1, "deleted", head.path, None, 0, op)

    def move(self, head: Row, new_path: str, op: str) -> OpResult:
        validate_path(new_path)
        self.access.require("write", head.path)
        self.access.require("write", new_path, new=True)
        if new_path == head.path:
            raise NoChange(
                f"nothing to change: renaming {head.path} onto itself leaves it as it is; give "
                "another path",
                path=head.path,
                op=op,
            )
        if self.repo.head(self.store_id, new_path) is not None:
            raise PathConflict(
                f"cannot rename {head.path} to {new_path}: {new_path} already exists; "
                "delete it first or choose another name",
                path=head.path,
                new_path=new_path,
            )
        if not self.repo.delete_head(self.store_id, head.path, head.sha256):
            raise self._lost_race(head.path)
        self.check_free(new_path)
        number = head.version + 1
        self.repo.insert_head(
            store_id=self.store_id,
            path=new_path,
            file_id=head.file_id,
            **self._head_values(number, head.sha256, head.size),
        )
        content = self._content(head)
        self.repo.index_file(head.file_id, new_path, content, store_id=self.store_id)
        self._describe(head.file_id, new_path, content)
        return self._version(
            head.file_id,
            number,
            "renamed",
            new_path,
            head.sha256,
            head.size,
            op,
            old_path=head.path,
        )

    def _describe(self, file_id: int, path: str, content: str) -> None:
        """The file's ``file_meta`` row for its new version (durations count from now)."""
        described = describe(path, content, self.now)
        put_meta(self.repo, self.store_id, file_id, described, self.access.principal.id,
                 self.source_kind)  # fmt: skip

    def _lost_race(self, path: str) -> PreconditionFailed:
        current = self.repo.head(self.store_id, path)
        sha = None if current is None else current.sha256
        return PreconditionFailed(
            f"{path} changed while this commit ran (now sha256 {sha}); re-read and retry",
            path=path,
            current_sha256=sha,
        )
