"""Result and error strings of the MCP tools: pure functions, no I/O.

The six memory-tool commands answer with the strings of the reference implementation of
Claude's memory tool (``memory_20250818``, ``BetaLocalFilesystemMemoryTool`` in the ``anthropic``
SDK), so an agent trained on it reads familiar results. What memdir adds (the sha256 a ``view``
reports, proposals, preconditions, screening) is phrased in the same one-line, actionable style.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from memdir.core.errors import MemdirError

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
    "multiple_occurrences",
    "no_match",
    "not_found",
    "not_found_short",
    "overwritten",
    "precondition_failed",
    "proposed",
    "renamed",
    "replaced",
    "screening_refused",
]

MAX_LINES = 999_999
_WIDTH = len(str(MAX_LINES))


class Refusal(Exception):
    """A tool call that fails with exactly this text (an ``isError`` result).

    ``cause``: the memdir error the text stands for, when there is one (its type and details
    go into the result's ``_meta``).
    """

    def __init__(self, text: str, cause: MemdirError | None = None) -> None:
        super().__init__(text)
        self.text = text
        self.cause = cause


# --- results ------------------------------------------------------------------------------


def format_size(size: int) -> str:
    """Sizes as the reference prints them: ``0B``, ``512B``, ``1.5K``, ``2M``."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**index)
    return f"{int(value)}{units[index]}" if value == int(value) else f"{value:.1f}{units[index]}"


def _join(directory: str, relative: str) -> str:
    return directory.rstrip("/") + "/" + relative


def directory_view(path: str, files: Iterable[tuple[str, int]]) -> str:
    """A directory listing: children and grandchildren, directories with a trailing ``/``.

    ``files`` are (path relative to the directory, size) of every readable file beneath it.
    Hidden names (starting with ``.``) are left out, as the reference does; a directory's size
    is the total size of the visible files beneath it.
    """
    total = 0
    items: dict[tuple[str, ...], list[Any]] = {}  # parts -> [size, is_dir]
    for relative, size in files:
        parts = tuple(relative.split("/"))
        if any(part.startswith(".") for part in parts):
            continue
        total += size
        for depth in range(1, min(len(parts), 2) + 1):
            key = parts[:depth]
            is_dir = depth < len(parts)
            item = items.setdefault(key, [0, is_dir])
            item[0] += size
    lines = [f"{format_size(total)}\t{path}"]
    for parts in sorted(items):
        size, is_dir = items[parts]
        lines.append(f"{format_size(size)}\t{_join(path, '/'.join(parts))}{'/' if is_dir else ''}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


def file_view(
    path: str, content: str, sha256: str, version: int, view_range: Sequence[int] | None
) -> str:
    """Line-numbered content (the reference's format), then the sha256 for ``if_match``."""
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise Refusal(f"File {path} exceeds maximum line limit of 999,999 lines.")
    shown, first = lines, 1
    if view_range is not None:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        shown, first = lines[start:end], start + 1
    numbered = [f"{str(i + first).rjust(_WIDTH)}\t{line}" for i, line in enumerate(shown)]
    return (
        f"Here's the content of {path} with line numbers:\n"
        + "\n".join(numbered)
        + f"\n\nsha256: {sha256} (version {version})"
    )


def created(path: str) -> str:
    return f"File created successfully at: {path}"


def overwritten(path: str) -> str:
    return f"The file {path} has been overwritten."


def replaced(new_content: str | None, changed_line_index: int) -> str:
    """The ``str_replace`` result: the edit and a snippet of lines around it."""
    head = "The memory file has been edited."
    if new_content is None:
        return head
    lines = new_content.split("\n")
    start = max(0, changed_line_index - 2)
    end = min(len(lines), changed_line_index + 3)
    snippet = [f"{str(n).rjust(_WIDTH)}\t{lines[n - 1]}" for n in range(start + 1, end + 1)]
    return f"{head} Here is the snippet showing the change (with line numbers):\n" + "\n".join(
        snippet
    )


def edited(path: str) -> str:
    return f"The file {path} has been edited."


def deleted(path: str) -> str:
    return f"Successfully deleted {path}"


def renamed(old_path: str, new_path: str) -> str:
    return f"Successfully renamed {old_path} to {new_path}"


# --- errors the reference has -------------------------------------------------------------


def not_found(path: str) -> str:
    return f"The path {path} does not exist. Please provide a valid path."


def not_found_short(path: str) -> str:
    """The reference's wording for ``delete`` and ``rename``."""
    return f"The path {path} does not exist"


def already_exists(path: str, current_sha256: str | None) -> str:
    hint = (
        f"; to rewrite it pass if_match={current_sha256}, or edit it with str_replace"
        if current_sha256
        else ""
    )
    return f"File {path} already exists{hint}"


def no_match(old_str: str, path: str) -> str:
    return f"No replacement was performed, old_str `{old_str}` did not appear verbatim in {path}."


def multiple_occurrences(old_str: str, lines: Iterable[int]) -> str:
    return (
        f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in lines: "
        f"{', '.join(map(str, lines))}. Please ensure it is unique"
    )


def insert_out_of_range(line: int, count: int) -> str:
    return f"Invalid `insert_line` parameter: {line}. It should be within the range [0, {count}]."


def destination_exists(new_path: str) -> str:
    return f"The destination {new_path} already exists"


def cannot_touch_root(verb: str, path: str) -> str:
    return f"Cannot {verb} the {path} directory itself"


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
