"""The one exception tree of memdir.

Every error a caller can act on is a subclass of :class:`MemdirError`. Each class has a stable
``type`` string (the ``error.type`` of the REST envelope and of ``--json`` CLI output) and carries
``details``: the values that explain the failure (the path received, the current sha256, ...).

Surfaces map errors to their own vocabulary by class, never by matching message text: each class
carries its ``http_status`` and CLI ``exit_code`` (subclasses inherit unless they say otherwise),
and an MCP tool error carries ``type`` in ``_meta["memdir/error"]``. This is the one table every
edge reads (the README's exit-code line is checked against it by a test)::

    MemdirError                    500 / exit 1
      InvalidInput                 400 / exit 2    bad path, bad argument, malformed frontmatter
        InvalidPath                400 / exit 2
        InvalidContent             422 / exit 2    not UTF-8, malformed frontmatter
        ContentTooLarge            413 / exit 2
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

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, ClassVar, Final

__all__ = [
    "HINTS",
    "NEUTRAL_WORDS",
    "SURFACE_WORDS",
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
    http_status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.statement = message
        self.hint = hint if hint in HINTS else None
        self.details: dict[str, Any] = details
        self.message = self.say(NEUTRAL_WORDS)

    def say(
        self, words: Mapping[str, str], store: str = "{store}", shown: str | None = None
    ) -> str:
        """The one-line message in a surface's words: the statement, then the next step.

        ``words`` maps each hint of :data:`HINTS` to that surface's phrase (``{path}`` is the
        error's ``path`` detail, ``{store}`` the store the surface addressed). The statement
        never names a command of one surface; the hint is where a CLI user reads
        ``--if-match`` and a model reads its tool's argument. ``shown``: the path as the
        surface names it (a tool path under ``/memories``), put in place of the ``path``
        detail wherever the statement says it.
        """
        path = self.details.get("path")
        statement = self.statement
        if shown is not None and isinstance(path, str) and path and path != shown:
            statement = statement.replace(path, shown)
        phrase = words.get(self.hint) if self.hint is not None else None
        if phrase is None:
            return statement
        named = shown if shown is not None else path if isinstance(path, str) else ""
        said = phrase.format(path=named, store=store)
        return f"{statement}; {said}"

    def to_dict(
        self, words: Mapping[str, str] | None = None, store: str = "{store}"
    ) -> dict[str, Any]:
        """The error envelope's inner object: ``{"type", "message", **details}`` (and ``hint``,
        the next step's key, when there is one)."""
        message = self.message if words is None else self.say(words, store)
        hint = {} if self.hint is None else {"hint": self.hint}
        return {"type": self.type, "message": message, **self.details, **hint}


#: The next steps a message may end with, by key. Each surface says them in its own words.
HINTS: Final = frozenset({"find", "if_match", "list_parent", "placeable"})

#: Each surface's words for the next steps of :data:`HINTS` (see :meth:`MemdirError.say`).
#: ``python`` is the library's (and every log's) wording; ``cli`` names memdir's commands and
#: flags; ``rest`` names routes and headers; ``mcp`` names the tools and arguments a model has;
#: ``memory_tool`` is Claude's memory tool (six commands under ``/memories``, the adapter).
SURFACE_WORDS: Final[Mapping[str, Mapping[str, str]]] = MappingProxyType(
    {
        "python": {
            "find": "list its directory or search for it",
            "if_match": "pass if_match with the sha256 you read, or make an edit instead",
            "list_parent": "list its parent directory",
            "placeable": "create it under a directory you can list",
        },
        "cli": {
            "find": "list files with `memdir ls` or search with `memdir search`",
            "if_match": "pass --if-match with the sha256 from `memdir read {path} --json`, "
            "or use `memdir edit`",
            "list_parent": "list the parent with `memdir ls`",
            "placeable": "create it under a directory you can list with `memdir ls`",
        },
        "rest": {
            "find": "list with GET /v1/stores/{store}/tree or search with "
            "GET /v1/stores/{store}/search",
            "if_match": "send If-Match with the ETag (sha256) from GET, or POST :str_replace",
            "list_parent": "list the parent with GET /v1/stores/{store}/tree",
            "placeable": "create it under a directory GET /v1/stores/{store}/tree lists",
        },
        "mcp": {
            "find": "view its directory or use the search tool",
            "if_match": "pass if_match with the sha256 that view shows, or use str_replace",
            "list_parent": "view the parent directory",
            "placeable": "create it under a directory view lists",
        },
        "memory_tool": {
            "find": "view /memories to see the files there",
            "if_match": "view the file again and retry the change",
            "list_parent": "view the parent directory",
            "placeable": "create it in a directory under /memories that view lists",
        },
    }
)
NEUTRAL_WORDS: Final = SURFACE_WORDS["python"]


class InvalidInput(MemdirError):
    """The request itself is malformed, whatever the store holds."""

    type = "invalid_input"
    http_status = 400
    exit_code = 2


class InvalidPath(InvalidInput):
    """A memory path broke one of the path rules (see :mod:`memdir.core.paths`)."""

    type = "invalid_path"
    http_status = 400
    exit_code = 2


class InvalidContent(InvalidInput):
    """Content is not UTF-8 text, or its YAML frontmatter is malformed."""

    type = "invalid_content"
    http_status = 422
    exit_code = 2


class ContentTooLarge(InvalidInput):
    """Content is over the configured size limit (bytes of UTF-8)."""

    type = "content_too_large"
    http_status = 413
    exit_code = 2


class LimitExceeded(ContentTooLarge):
    """A request is over a configured limit other than a file's size: operations in a commit or
    proposal, bytes of a request body or of a transcript upload. ``details`` has ``limit``
    and, when known, the value received."""

    type = "limit_exceeded"
    http_status = 413
    exit_code = 2


class Conflict(MemdirError):
    """The request is well formed but does not fit the current state of the store."""

    type = "conflict"
    http_status = 409
    exit_code = 1


class RevisionChanged(Conflict):
    """An accept named a proposal revision that is no longer current (``details['revision']``
    is the current one): the proposal was rebased or screened again since it was reviewed."""

    type = "revision_changed"
    http_status = 409
    exit_code = 3


class PathConflict(Conflict):
    """A path would be a file and a directory at once, or a rename target exists."""

    type = "path_conflict"
    http_status = 409
    exit_code = 1


class EditConflict(Conflict):
    """An edit cannot apply: the old text is absent or not unique, or a line is out of range."""

    type = "edit_conflict"
    http_status = 409
    exit_code = 1


class IdempotencyMismatch(Conflict):
    """An idempotency key was reused for a request that differs from its first use."""

    type = "idempotency_mismatch"
    http_status = 409
    exit_code = 1


class NoChange(Conflict):
    """The change would leave the file's content and path exactly as they are.

    One rule for every verb (write, edit, rename, revert, commit operations): a change must
    change something, so no empty version is ever made. Decided after the precondition, so a
    stale ``if_match`` still fails as :class:`PreconditionFailed`.
    """

    type = "no_change"
    http_status = 409
    exit_code = 1


class PreconditionFailed(MemdirError):
    """``if_match`` or ``if_absent`` did not hold; ``details['current_sha256']`` says what does.

    Raised even when the current content equals what the caller wanted to write: two clients
    can compute the same new content from the same old one, and only one of them changed it.
    """

    type = "precondition_failed"
    http_status = 412
    exit_code = 3


class PreconditionRequired(MemdirError):
    """A full overwrite of an existing file was asked for without ``if_match``."""

    type = "precondition_required"
    http_status = 428
    exit_code = 3


class NotFound(MemdirError):
    """No such file, version, store or commit — or the caller may not know it exists."""

    type = "not_found"
    http_status = 404
    exit_code = 5


class Forbidden(MemdirError):
    """The caller may read the target but not perform the action (or the store is archived)."""

    type = "forbidden"
    http_status = 403
    exit_code = 4


class Unauthenticated(MemdirError):
    """No valid credentials were presented."""

    type = "unauthenticated"
    http_status = 401
    exit_code = 4


class Proposed(MemdirError):
    """The change was not applied: it waits in the review queue as ``details['proposal']``.

    An exception rather than a return value so that code which assumed its write landed
    cannot go on as if it had.
    """

    type = "proposed"
    http_status = 202
    exit_code = 6


class ScreeningRefused(MemdirError):
    """Write screening refused the content; ``details['findings']`` says what and where."""

    type = "screening_refused"
    http_status = 422
    exit_code = 7


class BackendError(MemdirError):
    """The database cannot be used: unreachable, locked for too long, or its schema is behind."""

    type = "backend_error"
    http_status = 503
    exit_code = 1
