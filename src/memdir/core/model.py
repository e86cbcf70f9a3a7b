"""Plain data shared by every layer: principals, provenance, operations and results.

All are frozen dataclasses: values, not handles. Times are timezone-aware UTC datetimes.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal

from memdir.core.errors import InvalidInput

__all__ = [
    "OPERATION_ALIASES",
    "OWNER",
    "SOURCE_KINDS",
    "ChangeBatch",
    "ChangeEvent",
    "CommitInfo",
    "CommitResult",
    "Delete",
    "Entry",
    "FileView",
    "GrepMatch",
    "Insert",
    "OpResult",
    "Operation",
    "Principal",
    "Provenance",
    "Rename",
    "SearchHit",
    "StoreInfo",
    "StrReplace",
    "TokenScope",
    "VersionInfo",
    "Write",
    "canonical_operation",
    "validate_store_name",
]

SOURCE_KINDS = ("user-stated", "tool-result", "agent-inferred", "dream", "import")
_PRINCIPAL_RE = re.compile(r"^(agent|user|service):[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}$")
_STORE_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")


@dataclass(frozen=True)
class TokenScope:
    """How a token narrows its principal: only these path globs, only these actions.

    Narrowing never widens: a request must pass both the policy and the token's scope.
    """

    paths: tuple[str, ...] = ("/**",)
    actions: frozenset[str] = frozenset({"read", "propose", "write", "admin"})


@dataclass(frozen=True)
class Principal:
    """Who acts. ``id`` is ``kind:name`` (``agent:ci-bot``, ``user:ana``, ``service:x``).

    The database owner (a local process with direct database access) is the special principal
    ``owner``. The actor of every commit is the principal the service was called with.
    ``groups``, ``projects``, ``tasks`` and ``acts_for`` (the user an agent works for) feed the
    policy's ``who`` and path templates; ``scope`` is set when the principal authenticated with
    a narrowed token.
    """

    id: str
    groups: frozenset[str] = frozenset()
    projects: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    acts_for: str | None = None
    scope: TokenScope | None = None

    @property
    def kind(self) -> str:
        return self.id.split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split(":", 1)[-1]

    @property
    def is_owner(self) -> bool:
        return self.id == "owner"

    @property
    def cache_key(self) -> tuple[object, ...]:
        """What policy evaluation depends on (the token scope is checked separately)."""
        return (self.id, self.groups, self.projects, self.tasks, self.acts_for)

    @classmethod
    def parse(cls, value: str) -> Principal:
        """Validate a principal id, refusing anything but ``owner`` and ``kind:name``."""
        if value == "owner" or _PRINCIPAL_RE.match(value):
            return cls(value)
        raise InvalidInput(
            f"invalid principal {value!r}: use agent:NAME, user:NAME or service:NAME "
            "(letters, digits and . _ @ + -)",
            principal=value,
        )


OWNER = Principal("owner")


def validate_store_name(name: str) -> str:
    """Store names: lowercase letters, digits, ``.``, ``_``, ``-``; 1-63 characters."""
    if not _STORE_RE.match(name):
        raise InvalidInput(
            f"invalid store name {name!r}: use 1-63 lowercase letters, digits, '.', '_' or "
            "'-', starting with a letter or digit",
            store=name,
        )
    return name


@dataclass(frozen=True)
class Provenance:
    """What the caller says about a change, beside the actor the service knows.

    ``idempotency_key``: a repeated key (same store, same actor) returns the first attempt's
    result instead of applying the change again.
    """

    session: str | None = None
    transcript: str | None = None
    reason: str | None = None
    source_kind: str | None = None
    idempotency_key: str | None = None

    def __post_init__(self) -> None:
        if self.source_kind is not None and self.source_kind not in SOURCE_KINDS:
            raise InvalidInput(
                f"invalid source kind {self.source_kind!r}: use one of {', '.join(SOURCE_KINDS)}",
                source_kind=self.source_kind,
            )
        for name in ("session", "transcript", "reason", "idempotency_key"):
            value = getattr(self, name)
            if value is not None and len(value) > 4000:
                raise InvalidInput(f"{name} is {len(value)} characters, over the limit of 4000")


# --- operations -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Write:
    """Create or fully overwrite. Existing files need ``if_match``; ``if_absent`` = create only."""

    path: str
    content: str
    if_match: str | None = None
    if_absent: bool = False
    op: Literal["write"] = "write"


@dataclass(frozen=True)
class StrReplace:
    """Replace the single occurrence of ``old`` by ``new`` in the current content."""

    path: str
    old: str
    new: str
    if_match: str | None = None
    op: Literal["str_replace"] = "str_replace"


@dataclass(frozen=True)
class Insert:
    """Insert ``text`` after line ``line`` (0 = at the top) of the current content."""

    path: str
    line: int
    text: str
    if_match: str | None = None
    op: Literal["insert"] = "insert"


@dataclass(frozen=True)
class Delete:
    path: str
    if_match: str | None = None
    op: Literal["delete"] = "delete"


@dataclass(frozen=True)
class Rename:
    """Move a file; its id and version numbering follow it. Never overwrites ``new_path``."""

    path: str
    new_path: str
    if_match: str | None = None
    op: Literal["rename"] = "rename"


Operation = Write | StrReplace | Insert | Delete | Rename


#: The memory tool's argument names (Claude's ``memory_20250818``, memdir's MCP tools) and the
#: memdir field each stands for. Every surface that takes operations as JSON (CLI ``commit``,
#: REST commits and proposals, MCP ``propose``) accepts either spelling, one per field.
OPERATION_ALIASES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "command": "op",
        "file_text": "content",
        "old_str": "old",
        "new_str": "new",
        "insert_line": "line",
        "insert_text": "text",
        "old_path": "path",
    }
)


def canonical_operation(data: Mapping[str, Any], index: int = 1) -> dict[str, Any]:
    """``data`` with memory-tool argument names renamed to memdir's (:data:`OPERATION_ALIASES`).

    Both spellings of one field in one operation is :class:`InvalidInput`: which one is meant
    cannot be guessed, and silently preferring one would lose the other.
    """
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = OPERATION_ALIASES.get(key, key) if isinstance(key, str) else key
        if name in out:
            raise InvalidInput(
                f"operation {index}: {key!r} and {name!r} are two names for one field; send one",
                operation=index,
            )
        out[name] = value
    return out


def operation_from_dict(data: dict[str, Any], index: int = 1) -> Operation:
    """Build an operation from its JSON form (``{"op": "write", "path": ..., ...}``).

    Memory-tool argument names are accepted too (:data:`OPERATION_ALIASES`). Unknown or missing
    fields and fields of the wrong type are :class:`InvalidInput` naming the operation
    (``index``, 1-based, in a list) and the field — the checks REST's request models make, so
    every surface refuses the same operations the same way.
    """
    data = canonical_operation(data, index)
    kinds: dict[str, type[Any]] = {
        "write": Write,
        "create": Write,
        "str_replace": StrReplace,
        "insert": Insert,
        "delete": Delete,
        "rename": Rename,
    }
    kind = data.get("op")
    if not isinstance(kind, str) or kind not in kinds:
        said = "has no 'op' field" if kind is None else f"has an unknown op {kind!r}"
        raise InvalidInput(
            f'operation {index} {said}: set "op" to one of {", ".join(kinds)}',
            operation=index,
        )
    fields = {k: v for k, v in data.items() if k != "op"}
    cls = kinds[kind]
    known = {f.name: f for f in dataclasses.fields(cls) if f.name != "op"}
    if kind == "create":
        known.pop("if_absent")
        known.pop("if_match")
    unknown = sorted(str(k) for k in fields if k not in known)
    required = [n for n, f in known.items() if f.default is dataclasses.MISSING]
    absent = [n for n in required if n not in fields]
    if unknown or absent:
        problem = f"unknown fields {unknown}" if unknown else f"missing fields {absent}"
        raise InvalidInput(
            f"operation {index} ({kind}): {problem}; it takes {', '.join(required)} (required) and "
            f"{', '.join(n for n in known if n not in required) or 'nothing else'}",
            operation=index,
        )
    if kind == "create":
        fields["if_absent"] = True
    from memdir.core.limits import check_operation  # limits builds on this module

    op: Operation = check_operation(cls(**fields), index)
    return op


# --- results ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StoreInfo:
    name: str
    revision: int
    created_at: dt.datetime
    archived_at: dt.datetime | None
    files: int = 0


@dataclass(frozen=True)
class FileView:
    """One file at one version. ``version`` counts per file, across renames.

    ``expired_at``: when the file expired (its frontmatter ``expires``, or the task scopes'
    default lifetime), if it has; an expired file is hidden from listings and search but is
    still read by path, with this saying so."""

    path: str
    content: str
    sha256: str
    version: int
    size: int
    file_id: int
    revision: int
    updated_at: dt.datetime
    expired_at: dt.datetime | None = None


@dataclass(frozen=True)
class Entry:
    """A line of a tree listing: a file, or a directory summarised by its file count."""

    path: str
    kind: Literal["file", "dir"]
    size: int = 0
    sha256: str | None = None
    version: int | None = None
    files: int = 0


@dataclass(frozen=True)
class OpResult:
    """What one operation of a commit did."""

    op: str
    path: str
    file_id: int
    version: int
    operation: str  # created | modified | renamed | deleted
    sha256: str | None
    size: int
    old_path: str | None = None


@dataclass(frozen=True)
class CommitResult:
    """The result of a commit. ``replayed`` is true when an idempotency key matched."""

    commit: str
    revision: int
    results: tuple[OpResult, ...]
    created_at: dt.datetime
    replayed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "commit": self.commit,
            "revision": self.revision,
            "created_at": self.created_at.isoformat(),
            "replayed": self.replayed,
            "results": [r.__dict__ for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], *, replayed: bool = False) -> CommitResult:
        return cls(
            commit=data["commit"],
            revision=data["revision"],
            results=tuple(OpResult(**r) for r in data["results"]),
            created_at=dt.datetime.fromisoformat(data["created_at"]),
            replayed=replayed,
        )


@dataclass(frozen=True)
class CommitInfo:
    """A commit and its provenance, as history shows it."""

    id: str
    revision: int
    actor: str
    created_at: dt.datetime
    session: str | None
    transcript: str | None
    reason: str | None
    source_kind: str | None
    changes: tuple[VersionInfo, ...] = field(default_factory=tuple)
    proposal: str | None = None


@dataclass(frozen=True)
class VersionInfo:
    """One version of one file (``sha256`` None: a deletion, or a redacted version)."""

    file_id: int
    version: int
    operation: str
    path: str
    sha256: str | None
    size: int
    commit: str
    revision: int
    actor: str
    created_at: dt.datetime
    old_path: str | None = None
    redacted: bool = False
    reason: str | None = None
    session: str | None = None
    source_kind: str | None = None
    #: screening findings the store's policy allowed, recorded with this version
    findings: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class GrepMatch:
    path: str
    line: int
    text: str
    before: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


@dataclass(frozen=True)
class SearchHit:
    """One search result. ``rank`` is its 1-based position; no relevance number is given,
    since any such number would be a function of the collection, not of this file alone."""

    path: str
    rank: int
    snippet: str
    sha256: str
    version: int


@dataclass(frozen=True)
class ChangeEvent:
    """One commit as the change feed shows it: only the changes the reader may see."""

    revision: int
    commit: str
    actor: str
    created_at: dt.datetime
    changes: tuple[VersionInfo, ...]
    proposal: str | None = None


@dataclass(frozen=True)
class ChangeBatch:
    """Events after a revision, and the revision to ask from next (``next_after``).

    ``next_after`` moves past commits the reader may not see as well, so a follower never
    re-reads them — and learns nothing from them but that the revision counter moved.
    """

    events: tuple[ChangeEvent, ...]
    next_after: int
    revision: int
