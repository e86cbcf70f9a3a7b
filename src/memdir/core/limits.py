"""Bounds on what one request may ask for, and the checks every path into the store shares.

Limits (defaults; each is a setting, see ``docs/configuration.md``):

- a file's content: ``max_file_bytes`` (100 kB, :data:`memdir.core.content.DEFAULT_MAX_BYTES`);
- operations in one commit or proposal: ``max_commit_operations``
  (:data:`DEFAULT_MAX_COMMIT_OPERATIONS`) — a commit holds its store's write lock while it
  runs, so its length bounds how long every other writer waits;
- a REST request body: ``max_request_bytes`` (:func:`default_max_request_bytes`);
- a transcript upload: ``max_transcript_bytes`` (:data:`DEFAULT_MAX_TRANSCRIPT_BYTES`).

Integers a caller passes (versions, revisions, limits, line numbers) are whole numbers within
64 bits (:data:`MAX_INT64`): both databases store 64-bit integers, and a larger value is invalid
input, not a database error. :func:`check_operations` is the one check of an operation list —
field types, sha256 syntax, sizes, count — that commits and proposals (every path into the
review queue) run before anything else.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from memdir.core.errors import ContentTooLarge, InvalidInput, LimitExceeded
from memdir.core.model import Delete, Insert, Operation, Rename, StrReplace, Write
from memdir.core.paths import validate_path

__all__ = [
    "DEFAULT_MAX_COMMIT_OPERATIONS",
    "DEFAULT_MAX_TRANSCRIPT_BYTES",
    "MAX_INT64",
    "check_if_match",
    "check_int",
    "check_operation",
    "check_operations",
    "default_max_request_bytes",
]

MAX_INT64 = 2**63 - 1
DEFAULT_MAX_COMMIT_OPERATIONS = 1000
DEFAULT_MAX_TRANSCRIPT_BYTES = 64 << 20

_SHA256 = re.compile(r"[0-9a-f]{64}\Z")
#: The text fields of each operation kind (checked for type and size).
_TEXT_FIELDS: dict[type[Any], tuple[str, ...]] = {
    Write: ("path", "content"),
    StrReplace: ("path", "old", "new"),
    Insert: ("path", "text"),
    Delete: ("path",),
    Rename: ("path", "new_path"),
}


def default_max_request_bytes(max_file_bytes: int) -> int:
    """A REST body may carry several files of the largest size, JSON-escaped: 10 MiB, or
    4 × ``max_file_bytes`` + 64 KiB when that is larger."""
    return max(10 << 20, 4 * max_file_bytes + (64 << 10))


def check_int(name: str, value: Any, *, minimum: int = 0, maximum: int = MAX_INT64) -> int:
    """``value`` if it is a whole number in ``[minimum, maximum]``, else :class:`InvalidInput`.

    ``bool`` is refused though Python counts it as an int: ``true`` is not a version.
    """
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidInput(f"{name} must be a whole number, received {_shown(value)}", field=name)
    if not minimum <= value <= maximum:
        raise InvalidInput(
            f"{name} must be from {minimum} to {maximum}, received {_shown(value)}",
            field=name,
            minimum=minimum,
            maximum=maximum,
        )
    return value


_HEX = frozenset("0123456789abcdef")


def check_if_match(value: Any, name: str = "if_match") -> str | None:
    """None, or a sha256 (64 lowercase hex digits) as ``read`` reports it."""
    if value is None:
        return None
    if isinstance(value, str) and 0 < len(value) < 64 and all(c in _HEX for c in value):
        raise InvalidInput(
            f"{name} must be a sha256, all 64 hex digits; received a prefix of {len(value)} "
            f"({_shown(value)}), which names no version: the whole value is what `read --json` "
            "and every write's result show",
            field=name,
        )
    if not isinstance(value, str) or not _SHA256.match(value):
        raise InvalidInput(
            f"{name} must be a sha256 (64 lowercase hex digits, as `read --json` shows), "
            f"received {_shown(value)}",
            field=name,
        )
    return value


def check_operation(op: Any, index: int = 1) -> Operation:
    """Check one operation's field types, paths and ``if_match``; ``index`` (1-based) names
    it in messages."""
    fields = _TEXT_FIELDS.get(type(op))
    if fields is None:
        raise InvalidInput(
            f"operation {index}: expected write, str_replace, insert, delete or rename, "
            f"received {type(op).__name__}",
            operation=index,
        )
    for name in fields:
        value = getattr(op, name)
        if not isinstance(value, str):
            raise InvalidInput(
                f"operation {index} ({op.op}): {name} must be text, received {_shown(value)}",
                operation=index,
                field=name,
            )
    validate_path(op.path)
    if isinstance(op, Rename):
        validate_path(op.new_path)
    check_if_match(op.if_match, f"operation {index} ({op.op}): if_match")
    if isinstance(op, Write) and not isinstance(op.if_absent, bool):
        raise InvalidInput(
            f"operation {index} (write): if_absent must be true or false, received "
            f"{_shown(op.if_absent)}",
            operation=index,
            field="if_absent",
        )
    if isinstance(op, Insert):
        check_int(f"operation {index} (insert): line", op.line, minimum=-MAX_INT64)
    checked: Operation = op
    return checked


def check_operations(
    operations: Sequence[Operation], *, max_bytes: int, max_operations: int, what: str = "commit"
) -> None:
    """The one check of an operation list, before any state is read.

    Field types and sha256 syntax (:func:`check_operation`), the count (``max_operations``:
    :class:`LimitExceeded`) and every text an operation carries within ``max_bytes``
    (:class:`ContentTooLarge`) — the limits of a write, so nothing larger enters the queue.
    """
    if not operations:
        raise InvalidInput(f"a {what} needs at least one operation")
    if len(operations) > max_operations:
        raise LimitExceeded(
            f"a {what} has {len(operations)} operations, over the limit of {max_operations}; "
            "split it into several (MEMDIR_MAX_COMMIT_OPERATIONS raises the limit)",
            size=len(operations),
            limit=max_operations,
        )
    for index, op in enumerate(operations, 1):
        check_operation(op, index)
        for name in _TEXT_FIELDS[type(op)][1:]:
            size = len(getattr(op, name).encode("utf-8", "surrogatepass"))
            if size > max_bytes:
                raise ContentTooLarge(
                    f"operation {index} ({op.op}): {name} is {size} bytes, over the limit of "
                    f"{max_bytes}; split it into several files or raise the limit "
                    "(MEMDIR_MAX_FILE_BYTES)",
                    operation=index,
                    size=size,
                    limit=max_bytes,
                )


def _shown(value: Any) -> str:
    """A received value for a message: short, one line."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INT64:
        return f"a {len(str(abs(value)))}-digit number"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
