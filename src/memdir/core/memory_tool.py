"""Claude's memory tool, written once: its answers, its errors and its rules. Pure, no I/O.

The memory tool (``memory_20250818``) has six commands — ``view``, ``create``, ``str_replace``,
``insert``, ``delete``, ``rename`` — and a reference implementation,
``BetaLocalFilesystemMemoryTool`` in the ``anthropic`` SDK, whose strings models are trained on.
memdir answers them on two surfaces: the MCP server's memory tools (:mod:`memdir.mcp`) and the
Anthropic adapter (:mod:`memdir.integrations.anthropic`). Both compose every answer from this
module, so the same operation reads the same on either (``tests/test_memory_tool_differential.py``
compares them, and both against the reference).

Each surface gathers the facts (is there a file at the path, files beneath it, the file's
content) through its own client; the decisions on those facts are here:

- :func:`plan_replace` and :func:`plan_insert` — the new content of an edit, or the reference's
  refusal (text not present, present more than once, line out of range);
- :func:`rename_refusal` — the reference's order for ``rename``: the root cannot move; an
  existing destination (a file, a directory, the root) is refused before the source is looked
  at; a missing source; and a directory never moves into itself (the reference crashes there);
- :func:`delete_refusal` — the root cannot be deleted; a path with nothing there does not exist.

Where memory is not a file system the rules say so once: a directory is the files beneath it
(it exists while it holds one; its size is theirs), and the root always exists.

A refusal is a :class:`Refusal` carrying the exact text; each surface turns it into its own
error (an ``isError`` MCP result, the SDK's ``ToolError``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal

from memdir.core.errors import MemdirError
from memdir.core.limits import MAX_INT64, check_int
from memdir.core.model import Operation, StrReplace, Write

__all__ = [
    "MAX_LINES",
    "ROOT",
    "Kind",
    "Refusal",
    "already_exists",
    "cannot_touch_root",
    "created",
    "delete_refusal",
    "deleted",
    "destination_exists",
    "directory_view",
    "edited",
    "escapes_root",
    "file_view",
    "format_size",
    "insert_operation",
    "insert_out_of_range",
    "into_itself",
    "kept_changing",
    "multiple_occurrences",
    "no_match",
    "not_a_file",
    "not_found",
    "not_found_short",
    "occurrence_lines",
    "outside_root",
    "plan_insert",
    "plan_replace",
    "relative_path",
    "rename_refusal",
    "renamed",
    "replace_operation",
    "replaced",
    "too_many_lines",
]

#: The directory the memory tool works in; every path a model sends starts with it.
ROOT = "/memories"
#: The longest file ``view`` shows (the reference's limit).
MAX_LINES = 999_999
_WIDTH = len(str(MAX_LINES))

#: What a path names: a file, a directory (files beneath it, or the root), or nothing.
Kind = Literal["file", "directory"] | None


class Refusal(Exception):
    """A command refused with exactly ``text`` (the surface's error result).

    ``cause``: the memdir error the text stands for, when there is one (the MCP result carries
    its type and details in ``_meta``).
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
    """A directory listing: children and grandchildren, by name, directories with a ``/``.

    ``files`` are (path relative to the directory, size) of every readable file beneath it.
    Hidden names (starting with ``.``) are left out, as the reference does; a directory's size
    is the total size of the visible files beneath it (memory has no blocks).
    """
    total = 0
    items: dict[tuple[str, ...], list[Any]] = {}  # parts -> [size, is_dir]
    for relative, size in files:
        parts = tuple(relative.split("/"))
        if any(part.startswith(".") for part in parts):
            continue
        total += size
        for depth in range(1, min(len(parts), 2) + 1):
            item = items.setdefault(parts[:depth], [0, depth < len(parts)])
            item[0] += size
    lines = [f"{format_size(total)}\t{path}"]
    for parts in sorted(items):
        size, is_dir = items[parts]
        lines.append(f"{format_size(size)}\t{_join(path, '/'.join(parts))}{'/' if is_dir else ''}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


def file_view(path: str, content: str, view_range: Sequence[int] | None) -> str:
    """Line-numbered content, the lines of ``view_range`` ([start, end], 1-based, end -1 = the
    last line) or all; a file over :data:`MAX_LINES` lines is refused, as the reference does."""
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise Refusal(too_many_lines(path))
    shown, first = lines, 1
    if view_range and len(view_range) == 2:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        shown, first = lines[start:end], start + 1
    numbered = [f"{str(i + first).rjust(_WIDTH)}\t{line}" for i, line in enumerate(shown)]
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def created(path: str) -> str:
    return f"File created successfully at: {path}"


def replaced(new_content: str | None, changed_line_index: int) -> str:
    """The ``str_replace`` result: the edit and the lines around it (two each side) in the new
    content; without the content (it could not be read back) the first sentence alone."""
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
    """The ``insert`` result."""
    return f"The file {path} has been edited."


def deleted(path: str) -> str:
    return f"Successfully deleted {path}"


def renamed(old_path: str, new_path: str) -> str:
    return f"Successfully renamed {old_path} to {new_path}"


# --- errors the reference has -------------------------------------------------------------


def outside_root(path: object) -> str:
    return f"Path must start with /memories, got: {path}"


def escapes_root(path: str) -> str:
    return f"Path {path} would escape /memories directory"


def not_found(path: str) -> str:
    """``view``, ``str_replace`` and ``insert`` on nothing."""
    return f"The path {path} does not exist. Please provide a valid path."


def not_found_short(path: str) -> str:
    """The reference's wording for ``delete`` and ``rename``."""
    return f"The path {path} does not exist"


def not_a_file(path: str) -> str:
    """``str_replace`` or ``insert`` on a directory."""
    return f"The path {path} is not a file."


def too_many_lines(path: str) -> str:
    return f"File {path} exceeds maximum line limit of 999,999 lines."


def already_exists(path: str) -> str:
    return f"File {path} already exists"


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


def cannot_touch_root(verb: str, root: str = ROOT) -> str:
    """``delete`` or ``rename`` of the root, named as the surface names its root."""
    return f"Cannot {verb} the {root} directory itself"


# --- memdir's own wording, in the same style ------------------------------------------------


def into_itself(old_path: str, new_path: str) -> str:
    """A directory renamed to a path beneath itself (the reference crashes with ``OSError``)."""
    return f"Cannot move the directory {old_path} into itself ({new_path})"


def kept_changing(path: str) -> str:
    """An edit whose file another writer changed on every attempt."""
    return f"{path} kept changing while being edited; view it and retry"


# --- the rules ------------------------------------------------------------------------------


def relative_path(path: object) -> str:
    """A memory-tool path below ``/memories``: ``/a/b`` (``/`` for the root itself), with
    ``.`` and ``..`` resolved as the reference resolves them — refused outside ``/memories``
    and when ``..`` would climb above it."""
    if not isinstance(path, str) or not (path == ROOT or path.startswith(ROOT + "/")):
        raise Refusal(outside_root(path))
    parts: list[str] = []
    for segment in path[len(ROOT) :].split("/"):
        if segment == "..":
            if not parts:
                raise Refusal(escapes_root(path))
            parts.pop()
        elif segment not in ("", "."):
            parts.append(segment)
    return "/" + "/".join(parts)


def occurrence_lines(content: str, old: str) -> list[int]:
    """The 1-based line of each occurrence of ``old`` (overlapping ones too, as the reference
    counts them for its message)."""
    found, start = [], 0
    while (position := content.find(old, start)) != -1:
        found.append(content[:position].count("\n") + 1)
        start = position + 1
    return found


def plan_replace(path: str, content: str, old: str, new: str) -> tuple[str, int]:
    """``str_replace`` on ``content``: (the new content, the 0-based line of the change), or
    the reference's refusal when ``old`` is absent or occurs more than once."""
    lines = occurrence_lines(content, old)
    if not lines:
        raise Refusal(no_match(old, path))
    if len(lines) > 1:
        raise Refusal(multiple_occurrences(old, lines))
    position = content.find(old)
    return content[:position] + new + content[position + len(old) :], lines[0] - 1


def replace_operation(target: str, old: str, new: str, planned: str, sha256: str) -> Operation:
    """The store change of a planned ``str_replace`` on the version ``sha256`` of ``target``
    (compare-and-swap on it): the whole ``planned`` content when ``old`` is empty (it occurs
    once only in an empty file, and the store's own ``str_replace`` wants text to find), else
    the replacement itself, so history shows a ``str_replace``. A replacement that changes
    nothing (``old`` equal to ``new``) is the store's to refuse, as on every surface."""
    if old == "":
        return Write(target, planned, if_match=sha256)
    return StrReplace(target, old, new, if_match=sha256)


def insert_operation(target: str, planned: str, sha256: str) -> Operation:
    """The store change of a planned ``insert``: the new content, compare-and-swap on the
    version it was planned from (the store's own ``insert`` counts lines differently)."""
    return Write(target, planned, if_match=sha256)


def plan_insert(path: str, content: str, line: int, text: str) -> str:
    """``insert`` on ``content``: ``text`` (its trailing newlines dropped) as the line after
    ``line`` (0 = the top), the result ending in a newline. Lines split on LF only, a CR kept
    in its line (so CRLF files keep their endings), without the empty tail a final newline
    leaves — the reference's counting, whose range the refusal names. A line number beyond
    64 bits is invalid input before it is out of range, as everywhere in memdir."""
    check_int("insert_line", line, minimum=-MAX_INT64 - 1)
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    if line < 0 or line > len(lines):
        raise Refusal(insert_out_of_range(line, len(lines)))
    lines.insert(line, text.rstrip("\n"))
    joined = "\n".join(lines)
    return joined if joined.endswith("\n") else joined + "\n"


def rename_refusal(
    old_path: str,
    new_path: str,
    *,
    source: Kind,
    destination: Kind,
    source_is_root: bool,
    into_source: bool,
    onto_itself: bool = False,
    root: str = ROOT,
) -> str | None:
    """Why ``rename old_path new_path`` is refused, or None when it may go ahead.

    The reference's order: the root never moves; a destination that exists — a file, a
    directory with files beneath it, or the root (``destination``) — is refused before the
    source is looked at; then a missing source. ``into_source`` (the destination lies beneath
    the source): a directory cannot move into itself. A file may, in memory: once it has moved
    its old path is free to be the new file's directory. ``onto_itself`` (both name the same
    path): a change that changes nothing, which the store refuses as it does on every surface.
    """
    if source_is_root:
        return cannot_touch_root("rename", root)
    if onto_itself and source is not None:
        return None
    if destination is not None:
        return destination_exists(new_path)
    if source is None:
        return not_found_short(old_path)
    if source == "directory" and into_source:
        return into_itself(old_path, new_path)
    return None


def delete_refusal(path: str, *, target: Kind, is_root: bool, root: str = ROOT) -> str | None:
    """Why ``delete path`` is refused (the root; nothing there), or None."""
    if is_root:
        return cannot_touch_root("delete", root)
    if target is None:
        return not_found_short(path)
    return None
