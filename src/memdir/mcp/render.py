"""Result and error strings of the MCP tools: pure functions, no I/O.

The six memory-tool commands answer with the strings of the reference implementation of
Claude's memory tool (``memory_20250818``, ``BetaLocalFilesystemMemoryTool`` in the ``anthropic``
SDK), written once in :mod:`memdir.core.memory_tool` (the Anthropic adapter uses the same
module) and re-exported here. What only MCP has — the sha256 a ``view`` reports for
``if_match``, the hint to pass it, an overwrite, proposals, preconditions, screening — is
phrased here in the same one-line, actionable style.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memdir.core import memory_tool as text
from memdir.core.memory_tool import (
    MAX_LINES,
    Refusal,
    cannot_touch_root,
    created,
    deleted,
    destination_exists,
    directory_view,
    edited,
    format_size,
    insert_out_of_range,
    into_itself,
    multiple_occurrences,
    no_match,
    not_a_file,
    not_found,
    not_found_short,
    renamed,
    replaced,
)

__all__ = [
    "MAX_LINES",
    "Refusal",
    "already_exists",
    "cannot_touch_root",
    "created",
    "deleted",
    "destination_exists",
    "directory_view",
    "edited",
    "file_view",
    "format_size",
    "insert_out_of_range",
    "into_itself",
    "multiple_occurrences",
    "no_match",
    "not_a_file",
    "not_found",
    "not_found_short",
    "overwritten",
    "precondition_failed",
    "proposed",
    "renamed",
    "replaced",
    "screening_refused",
]


def file_view(
    path: str, content: str, sha256: str, version: int, view_range: Sequence[int] | None
) -> str:
    """Line-numbered content (the reference's format), then the sha256 for ``if_match``."""
    return text.file_view(path, content, view_range) + f"\n\nsha256: {sha256} (version {version})"


def overwritten(path: str) -> str:
    """``create`` with ``if_match``: the file rewritten."""
    return f"The file {path} has been overwritten."


def already_exists(path: str, current_sha256: str | None) -> str:
    """The reference's refusal, with how MCP can rewrite the file (``if_match``)."""
    hint = (
        f"; to rewrite it pass if_match={current_sha256}, or edit it with str_replace"
        if current_sha256
        else ""
    )
    return text.already_exists(path) + hint


# --- memdir's own outcomes ----------------------------------------------------------------


def proposed(proposal: str, reason: str | None) -> str:
    why = f" ({reason})" if reason else ""
    return (
        f"Not applied yet: the change awaits review as proposal {proposal}{why}. A reviewer "
        "will accept or reject it; do not retry it, and do not assume memory holds it yet."
    )


def precondition_failed(path: str, expected: str | None, current: str | None) -> str:
    if current is None:
        return (
            f"Precondition failed: {path} does not exist (if_match expected sha256 {expected}); "
            "view the file again (or its directory), and create it without if_match if it "
            "should exist."
        )
    return (
        f"Precondition failed: {path} has changed; its current sha256 is {current} (if_match "
        f"was {expected}). View the file again and redo your change against what it says now."
    )


def screening_refused(message: str, findings: Sequence[dict[str, Any]]) -> str:
    rules = sorted({str(f.get("rule")) for f in findings if f.get("action") == "reject"})
    named = f" [rules: {', '.join(rules)}]" if rules else ""
    return message[:1].upper() + message[1:] + named
