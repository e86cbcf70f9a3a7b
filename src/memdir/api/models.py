"""Request bodies and the few response shapes that are the REST surface's own.

Resources (files, versions, commits, proposals, ...) are returned in the shape of the service's
own dataclasses (``memdir.core.model`` and friends), so the OpenAPI document is generated from
the same definitions the Python API returns and cannot drift from them.
"""

from __future__ import annotations

from typing import Annotated, Any, Generic, Literal, TypeVar, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from memdir.core.limits import MAX_INT64
from memdir.core.model import SOURCE_KINDS, canonical_operation

__all__ = [
    "ChangesPage",
    "CommitBody",
    "DiffView",
    "InsertBody",
    "MoveBody",
    "OperationModel",
    "Page",
    "PolicyBody",
    "PolicyView",
    "PrincipalBody",
    "ProposeBody",
    "ProvenanceFields",
    "RebaseBody",
    "RedactBody",
    "RevertFileBody",
    "ReviewBody",
    "StoreBody",
    "StrReplaceBody",
    "TokenBody",
    "TranscriptImportSummary",
]

T = TypeVar("T")


def _text(value: str) -> str:
    """memdir stores text: no NUL, no lone surrogates (neither encodes for every backend)."""
    if "\x00" in value:
        raise ValueError("text must not contain NUL (U+0000)")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text must be valid Unicode (a lone surrogate was sent)") from None
    return value


def _json_text(value: Any) -> Any:
    """The same rule for every string inside a JSON value (keys included)."""
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        for key, item in value.items():
            _text(str(key))
            _json_text(item)
    elif isinstance(value, list):
        for item in value:
            _json_text(item)
    return value


Text = Annotated[str, AfterValidator(_text)]
JsonValue = Annotated[Any, AfterValidator(_json_text)]

SourceKind = Literal["user-stated", "tool-result", "agent-inferred", "dream", "import"]
assert set(get_args(SourceKind)) == set(SOURCE_KINDS)
Action = Literal["read", "propose", "write", "admin"]
ALL_ACTIONS: tuple[Action, ...] = ("read", "propose", "write", "admin")
Sha256 = Annotated[
    Text | None,
    Field(description="Only apply if the file's current sha256 is this (else 412)."),
]


class Page(BaseModel, Generic[T]):
    """One page of a list. Pass ``next_cursor`` back as ``cursor`` for the next page; it is
    null on the last page."""

    items: list[T]
    next_cursor: str | None = None


class ChangesPage(BaseModel, Generic[T]):
    """Commits after a revision, oldest first, filtered by what the caller may read.

    ``next_after`` is the revision to ask from next (it moves past commits the caller may not
    see too); ``revision`` is the store's revision when the page was read; ``next_cursor`` is
    ``next_after`` as text while more commits are waiting, else null."""

    items: list[T]
    next_after: int
    revision: int
    next_cursor: str | None = None


class ProvenanceFields(BaseModel):
    """Provenance of a change; each field may also come as a header (``X-Memdir-Session``,
    ``X-Memdir-Transcript``, ``X-Memdir-Reason``, ``X-Memdir-Source-Kind``), the body winning."""

    model_config = ConfigDict(extra="forbid")
    session: Text | None = Field(None, description="The agent session this change comes from.")
    transcript: Text | None = Field(None, description="A reference to the session transcript.")
    reason: Text | None = Field(None, description="Why the change is made (kept in history).")
    source_kind: SourceKind | None = Field(None, description="Where the knowledge comes from.")


class _MemoryToolNames(BaseModel):
    """Accepts the memory tool's argument names (``old_str``, ``insert_line``, ...) too."""

    @model_validator(mode="before")
    @classmethod
    def _canonical(cls, data: Any) -> Any:
        return canonical_operation(data) if isinstance(data, dict) else data


def _canonical_operations(value: Any) -> Any:
    if not isinstance(value, list):
        return value
    return [canonical_operation(v, i) if isinstance(v, dict) else v for i, v in enumerate(value, 1)]


class StrReplaceBody(_MemoryToolNames, ProvenanceFields):
    old: Text = Field(description="Exact text to replace; must occur exactly once.")
    new: Text = Field(description="The replacement text.")
    if_match: Sha256 = None


class InsertBody(_MemoryToolNames, ProvenanceFields):
    # No bound here: a line outside 0..line count is the service's edit_conflict (409), the
    # same answer every surface gives, not a request-shape error.
    line: int = Field(
        ge=-MAX_INT64, le=MAX_INT64, description="Insert after this line (0 = at the top)."
    )
    text: Text = Field(description="Text to insert as its own line(s).")
    if_match: Sha256 = None


class MoveBody(ProvenanceFields):
    new_path: Text = Field(description="Where the file goes; never overwrites a file there.")
    if_match: Sha256 = None


class RevertFileBody(ProvenanceFields):
    to_version: int = Field(ge=1, le=MAX_INT64, description="Put this version's content back.")


class RedactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(ge=1, le=MAX_INT64, description="The version whose content goes.")
    dry_run: bool = Field(False, description="Only list the versions that would be redacted.")


# --- operations of a commit or proposal -----------------------------------------------------


class _Op(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: Text


class WriteOp(_Op):
    op: Literal["write"]
    content: Text
    if_match: Sha256 = None
    if_absent: bool = False


class CreateOp(_Op):
    op: Literal["create"]
    content: Text


class StrReplaceOp(_Op):
    op: Literal["str_replace"]
    old: Text
    new: Text
    if_match: Sha256 = None


class InsertOp(_Op):
    op: Literal["insert"]
    # outside 0..line count: the service's edit_conflict, as on every surface
    line: int = Field(ge=-MAX_INT64, le=MAX_INT64)
    text: Text
    if_match: Sha256 = None


class DeleteOp(_Op):
    op: Literal["delete"]
    if_match: Sha256 = None


class RenameOp(_Op):
    op: Literal["rename"]
    new_path: Text
    if_match: Sha256 = None


OperationModel = Annotated[
    WriteOp | CreateOp | StrReplaceOp | InsertOp | DeleteOp | RenameOp,
    Field(discriminator="op"),
]
# The memory tool's names (``command``, ``old_str``, ...) are accepted for memdir's, one per field.
Operations = Annotated[list[OperationModel], BeforeValidator(_canonical_operations)]


class CommitBody(ProvenanceFields):
    operations: Operations = Field(
        min_length=1,
        description="Applied atomically, in order: all or none. Each takes memdir's field "
        "names or the memory tool's (`command`, `old_str`, `new_str`, `file_text`, "
        "`insert_line`, `insert_text`, `old_path`).",
    )


class ProposeBody(ProvenanceFields):
    operations: Operations = Field(min_length=1)
    rationale: Text | None = Field(None, description="Why the change should be made.")
    evidence: JsonValue = Field(None, description="Evidence (JSON): transcript ids, excerpts.")
    statistics: JsonValue = Field(None, description="Statistics (JSON) backing the proposal.")


class ReviewBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    comment: Text | None = Field(None, description="A note for the record.")


class AcceptBody(ReviewBody):
    revision: str | None = Field(
        None,
        max_length=64,
        description="The proposal revision the reviewer saw (its `revision`); 409 if the "
        "proposal changed since. Without it, the proposal is accepted as it stands.",
    )


class RebaseBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Text | None = Field(
        None, description="New content (single-file proposals): the proposal becomes a write."
    )


# --- administration -------------------------------------------------------------------------


class StoreBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Text = Field(description="1-63 lowercase letters, digits, '.', '_' or '-'.")
    exist_ok: bool = Field(False, description="Succeed if the store already exists.")


class PrincipalBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: Text = Field(description="agent:NAME, user:NAME or service:NAME.")
    groups: list[Text] = Field(default_factory=list, description="'admins' is special.")
    projects: list[Text] = Field(default_factory=list)
    tasks: list[Text] = Field(default_factory=list)
    acts_for: Text | None = Field(None, description="The user an agent acts for (a name).")


class TokenBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    principal: Text = Field(description="The registered principal the token stands for.")
    name: Text | None = Field(None, description="A label to recognise the token by.")
    paths: list[Text] | None = Field(
        None, min_length=1,
        description="Path globs (default: every path, or those of the caller's narrowed token).",
    )  # fmt: skip
    actions: list[Action] | None = Field(
        None, min_length=1,
        description="Actions (default: all, or those of the caller's narrowed token).",
    )  # fmt: skip
    expires_in: int | None = Field(
        None, ge=1, le=10**10, description="Lifetime in seconds (none: no end)."
    )


class PolicyBody(ProvenanceFields):
    policy: Text = Field(description="The whole policy, YAML; a malformed one changes nothing.")


class PolicyView(BaseModel):
    policy: str
    default: bool = Field(description="True while the built-in default policy is in force.")


class DiffView(BaseModel):
    path: str
    a: int
    b: int | None
    diff: str = Field(description="A unified diff; empty when the versions are equal.")


class TranscriptProblem(BaseModel):
    """A record skipped, or a session not stored, and why (``line`` is 1-based)."""

    file: str
    line: int | None = None
    reason: str


class ImportedTranscriptModel(BaseModel):
    """What the import did to one transcript: ``new``, ``grown`` or ``unchanged``."""

    id: str
    format: str
    session_id: str
    status: Literal["new", "grown", "unchanged"]
    events_added: int


class TranscriptImportSummary(BaseModel):
    """The summary of a transcript import: sessions read, events added, secrets redacted,
    records skipped (with file, line and reason), sessions that could not be stored, and
    warnings about what was imported anyway (an unknown format version)."""

    files: int
    bytes: int
    sessions: int
    new: int
    grown: int
    unchanged: int
    events: int
    tool_calls: int
    tool_errors: int
    redactions: int
    redactions_by_rule: dict[str, int]
    ignored_records: int
    skipped_records: int
    skipped: list[TranscriptProblem]
    failed: list[TranscriptProblem]
    transcripts: list[ImportedTranscriptModel]
    warnings: list[TranscriptProblem] = Field(
        default_factory=list, description="Imported anyway, but worth checking."
    )
