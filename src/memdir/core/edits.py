"""Pure text edits and precondition decisions.

These functions compute new content from current content; they never touch storage. The
service calls them inside the write transaction, against the content it has just read, which
is what makes ``str_replace`` and ``insert`` free of lost updates without a client-side hash.
"""

from __future__ import annotations

import difflib

from memdir.core.errors import EditConflict, PreconditionFailed, PreconditionRequired

__all__ = [
    "apply_insert",
    "apply_str_replace",
    "check_precondition",
    "line_slice",
    "numbered",
    "unified_diff",
]


def _line_of(content: str, index: int) -> int:
    return content.count("\n", 0, index) + 1


def apply_str_replace(path: str, content: str, old: str, new: str) -> str:
    """Replace the single occurrence of ``old`` in ``content`` by ``new``.

    ``old`` must occur exactly once; when it occurs more than once the error lists the line
    numbers so the caller can widen ``old`` with surrounding text.
    """
    if old == "":
        raise EditConflict(
            f"str_replace on {path}: the old text is empty; give the exact text to replace",
            path=path,
        )
    first = content.find(old)
    if first < 0:
        raise EditConflict(
            f"str_replace on {path}: the old text was not found verbatim; read the file "
            "and copy the exact text, whitespace included",
            path=path,
        )
    starts = [first]
    position = content.find(old, first + 1)
    while position >= 0:
        starts.append(position)
        position = content.find(old, position + 1)
    if len(starts) > 1:
        lines = sorted({_line_of(content, s) for s in starts})
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise EditConflict(
            f"str_replace on {path}: the old text occurs {len(starts)} times, on lines "
            f"{shown}; include more surrounding text so it is unique",
            path=path,
            lines=lines,
        )
    return content[:first] + new + content[first + len(old) :]


def apply_insert(path: str, content: str, line: int, text: str) -> str:
    """Insert ``text`` after line ``line`` (0 inserts at the top).

    Lines are counted as :meth:`str.splitlines` counts them. The inserted text is given its
    own line(s): a newline is added after it if missing, and before it if the file's last
    line has none.
    """
    lines = content.splitlines(keepends=True)
    if line < 0 or line > len(lines):
        raise EditConflict(
            f"insert into {path}: line {line} is out of range; the file has {len(lines)} "
            f"lines, so use 0..{len(lines)}",
            path=path,
            line=line,
            lines=len(lines),
        )
    insertion = text if text.endswith("\n") else text + "\n"
    if line == len(lines) and lines and not lines[-1].endswith(("\n", "\r")):
        insertion = "\n" + insertion
    return "".join(lines[:line]) + insertion + "".join(lines[line:])


def check_precondition(
    path: str,
    current_sha256: str | None,
    *,
    if_match: str | None,
    if_absent: bool,
    full_overwrite: bool,
) -> None:
    """Decide a write's precondition against the current state.

    ``current_sha256`` is None when the file does not exist. A failed precondition always
    fails, even if the write would be a no-op: only the hash the caller saw counts.
    """
    if if_absent and current_sha256 is not None:
        raise PreconditionFailed(
            f"{path} already exists (sha256 {current_sha256}); to change it, pass "
            "if_match with that sha256",
            path=path,
            current_sha256=current_sha256,
        )
    if if_match is not None and if_match != current_sha256:
        state = "does not exist" if current_sha256 is None else f"has sha256 {current_sha256}"
        raise PreconditionFailed(
            f"{path} changed: expected sha256 {if_match} but it {state}; re-read it, "
            "re-apply your change and retry with the new sha256",
            path=path,
            expected_sha256=if_match,
            current_sha256=current_sha256,
        )
    if full_overwrite and current_sha256 is not None and if_match is None and not if_absent:
        raise PreconditionRequired(
            f"{path} exists and a full overwrite needs the sha256 of the content it replaces",
            hint="if_match",
            path=path,
            current_sha256=current_sha256,
        )


def line_slice(content: str, start: int, end: int | None) -> str:
    """Lines ``start``..``end`` (1-based, inclusive; ``end`` None = to the end)."""
    lines = content.splitlines(keepends=True)
    if start < 1 or (end is not None and end < start):
        raise EditConflict(f"line range {start}-{end} is not valid; use START-END, 1-based")
    return "".join(lines[start - 1 : end])


def numbered(content: str, first_line: int = 1) -> str:
    """A line-numbered view: each line prefixed by its number right-aligned to 6, then a tab."""
    return "".join(
        f"{i:6d}\t{line if line.endswith(chr(10)) else line + chr(10)}"
        for i, line in enumerate(content.splitlines(), start=first_line)
    )


def _lines(text: str) -> list[str]:
    """Lines as ``patch`` sees them: split on ``\\n`` only (``str.splitlines`` also splits on
    ``\\r``, form feeds and U+2028, which patch keeps inside a line)."""
    parts = text.split("\n")
    lines = [part + "\n" for part in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def unified_diff(
    a: str,
    b: str,
    a_label: str,
    b_label: str,
    context: int = 3,
    a_date: str = "",
    b_date: str = "",
) -> str:
    """A unified diff of two texts (empty string when they are equal) that ``patch`` and
    ``git apply`` accept.

    ``a_date``/``b_date`` follow the labels after a tab, where patch tools expect a
    timestamp and ignore whatever is there (memdir puts the version). A last line without a
    newline is followed by ``\\ No newline at end of file``, as GNU
    diff writes it; without the marker the next line would run on (``-b+c``) and the hunk
    would be malformed.
    """
    out: list[str] = []
    for line in difflib.unified_diff(
        _lines(a),
        _lines(b),
        fromfile=a_label,
        tofile=b_label,
        fromfiledate=a_date,
        tofiledate=b_date,
        n=context,
    ):
        if line.endswith("\n"):
            out.append(line)
        else:  # only a text's last line lacks one; header lines always end with "\n"
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
