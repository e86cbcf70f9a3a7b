"""The one exception tree of memdir.

Every error a caller can act on is a subclass of :class:`MemdirError`. Each class has a stable
``type`` string (the ``error.type`` of the REST envelope and of ``--json`` CLI output) and carries
``details``: the values that explain the failure (the path received, the current sha256, ...).

Surfaces map errors to their own vocabulary (HTTP status, CLI exit code, MCP tool error) by
class, walking the MRO, at the edge — never by matching message text. The table the edges keep::

    MemdirError                    500 / exit 1
      InvalidInput                 400 / exit 2    bad path, bad argument, malformed frontmatter
        InvalidPath                400 / exit 2
        InvalidContent             422 / exit 1    not UTF-8, malformed frontmatter
        ContentTooLarge            413 / exit 1
          LimitExceeded            413 / exit 2    too many operations, request body too big
      Conflict                     409 / exit 1    the request does not fit the current state
        PathConflict               409 / exit 1    file vs directory, rename onto an existing file
        EditConflict               409 / exit 1    str_replace text absent or not unique; bad line
        IdempotencyMismatch        409 / exit 1    a key reused for a different request
        RevisionChanged            409 / exit 3    a proposal changed since the reviewer saw it
        NoChange                   409 / exit 1    a change leaving content and path as they are
      PreconditionFailed           412 / exit 3    if_match / if_absent did not hold
      PreconditionRequired         428 / exit 3    full overwrite without a precondition
      NotFound                     404 / exit 5    no such file, version, store, commit
      Forbidden                    403 / exit 4    read right but not the action; archived store
      Unauthenticated              401 / exit 4
      Proposed                     202 / exit 6    not applied: queued for review as a proposal
      ScreeningRefused             422 / exit 7    the write screening refused the content
      BackendError                 503 / exit 1    database unreachable or schema behind

Messages say what was wrong, the value received, and what to do next, in one line, because the
reader is often a model.
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BackendError",
    "Conflict",
    "ContentTooLarge",
    "EditConflict",
    "Forbidden",
    "IdempotencyMismatch",
    "InvalidContent",
    "InvalidInput",
    "InvalidPath",
    "LimitExceeded",
    "MemdirError",
    "NoChange",
    "NotFound",
    "PathConflict",
    "PreconditionFailed",
    "PreconditionRequired",
    "Proposed",
    "RevisionChanged",
    "ScreeningRefused",
    "Unauthenticated",
]


class MemdirError(Exception):
    """Base of every error memdir raises on purpose.

    ``message`` is a single line for people and models; ``details`` holds JSON-serialisable
    values (never secrets, never content the caller may not read).
    """

    type: ClassVar[str] = "error"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details

    def to_dict(self) -> dict[str, Any]:
        """The error envelope's inner object: ``{"type", "message", **details}``."""
        return {"type": self.type, "message": self.message, **self.details}


class InvalidInput(MemdirError):
    """The request itself is malformed, whatever the store holds."""

    type = "invalid_input"


class InvalidPath(InvalidInput):
    """A memory path broke one of the path rules (see :mod:`memdir.core.paths`)."""

    type = "invalid_path"


class InvalidContent(InvalidInput):
    """Content is not UTF-8 text, or its YAML frontmatter is malformed."""

    type = "invalid_content"


class ContentTooLarge(InvalidInput):
    """Content is over the configured size limit (bytes of UTF-8)."""

    type = "content_too_large"


class LimitExceeded(ContentTooLarge):
    """A request is over a configured limit other than a file's size: operations in a commit or
    proposal, bytes of a request body or of a transcript upload. ``details`` has ``limit``
    and, when known, the value received."""

    type = "limit_exceeded"


class Conflict(MemdirError):
    """The request is well formed but does not fit the current state of the store."""

    type = "conflict"


class RevisionChanged(Conflict):
    """An accept named a proposal revision that is no longer current (``details['revision']``
    is the current one): the proposal was rebased or screened again since it was reviewed."""

    type = "revision_changed"


class PathConflict(Conflict):
    """A path would be a file and a directory at once, or a rename target exists."""

    type = "path_conflict"


class EditConflict(Conflict):
    """An edit cannot apply: the old text is absent or not unique, or a line is out of range."""

    type = "edit_conflict"


class IdempotencyMismatch(Conflict):
    """An idempotency key was reused for a request that differs from its first use."""

    type = "idempotency_mismatch"


class NoChange(Conflict):
    """The change would leave the file's content and path exactly as they are.

    One rule for every verb (write, edit, rename, revert, commit operations): a change must
    change something, so no empty version is ever made. Decided after the precondition, so a
    stale ``if_match`` still fails as :class:`PreconditionFailed`.
    """

    type = "no_change"


class PreconditionFailed(MemdirError):
    """``if_match`` or ``if_absent`` did not hold; ``details['current_sha256']`` says what does.

    Raised even when the current content equals what the caller wanted to write: two clients
    can compute the same new content from the same old one, and only one of them changed it.
    """

    type = "precondition_failed"


class PreconditionRequired(MemdirError):
    """A full overwrite of an existing file was asked for without ``if_match``."""

    type = "precondition_required"


class NotFound(MemdirError):
    """No such file, version, store or commit — or the caller may not know it exists."""

    type = "not_found"


class Forbidden(MemdirError):
    """The caller may read the target but not perform the action (or the store is archived)."""

    type = "forbidden"


class Unauthenticated(MemdirError):
    """No valid credentials were presented."""

    type = "unauthenticated"


class Proposed(MemdirError):
    """The change was not applied: it waits in the review queue as ``details['proposal']``.

    An exception rather than a return value so that code which assumed its write landed
    cannot go on as if it had.
    """

    type = "proposed"


class ScreeningRefused(MemdirError):
    """Write screening refused the content; ``details['findings']`` says what and where."""

    type = "screening_refused"


class BackendError(MemdirError):
    """The database cannot be used: unreachable, locked for too long, or its schema is behind."""

    type = "backend_error"
