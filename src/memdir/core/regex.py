"""User-supplied regular expressions: linear-time matching on RE2, and literals to narrow a scan.

Grep patterns are written in Python's syntax (the documented dialect) and run on RE2
(``google-re2``), whose automaton takes time linear in the text for every pattern, so no input
can stall a server the way ``(a+)+$`` stalls a backtracking engine. :func:`compile_grep`
translates the few spellings whose meaning differs (``\\Z``, Unicode ``\\w`` / ``\\d`` /
``\\s``, ``\\uXXXX``) and refuses what RE2 has no linear algorithm for — backreferences,
lookahead and lookbehind, atomic groups, possessive quantifiers, conditionals, verbose mode —
with an error that names the construct, the pattern received and what to do instead.
Known differences that stay: ``\\b`` / ``\\B`` and ``\\W`` / ``\\D`` / ``\\S`` inside a class
are ASCII, and repetition counts stop at 1000.

To avoid running a pattern over every file, :func:`required_literals` finds substrings that
any match must contain — runs of literal characters in the pattern's top-level sequence — so
the database can prefilter with an index (PostgreSQL's trigram index) or a cheap substring
test. Alternation, optional or repeated groups and classes end a run; when nothing certain
can be found the result is empty and the caller scans everything. Never wrong, sometimes
unhelpful.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from memdir.core.errors import InvalidInput

__all__ = ["GrepPattern", "compile_grep", "re2_regexp", "required_literals"]

import re._constants as _const  # type: ignore[import-not-found]  # re's own parser (3.11+)
import re._parser as _parser  # type: ignore[import-not-found]

_LITERAL: Any = _const.LITERAL
_SUBPATTERN: Any = _const.SUBPATTERN
_MAX_REPEAT: Any = _const.MAX_REPEAT
_MIN_REPEAT: Any = _const.MIN_REPEAT
_AT: Any = _const.AT

#: RE2's memory budget for one compiled pattern (a larger program is refused, not run).
RE2_MAX_MEM = 32 << 20


def re2_regexp(regex: str, *, anchor: str = "none", ignore_case: bool = False) -> tuple[Any, Any]:
    """RE2's compiled ``regex`` and the anchor to match it with (``none``, ``start``, ``both``).

    Raises ``ValueError`` with RE2's message when RE2 refuses the pattern. The raw binding
    is used: matching bytes through it costs a fraction of the wrapper's per-call overhead.
    """
    from re2 import Options, _re2  # type: ignore[import-untyped]

    options = Options()
    options.log_errors = False
    options.never_capture = True
    options.case_sensitive = not ignore_case
    options.max_mem = RE2_MAX_MEM
    compiled = _re2.RE2(regex.encode(), options)
    if not compiled.ok():
        raise ValueError(compiled.error())
    anchors = _re2.RE2.Anchor
    chosen = {
        "none": anchors.UNANCHORED,
        "start": anchors.ANCHOR_START,
        "both": anchors.ANCHOR_BOTH,
    }
    return compiled, chosen[anchor]


_UNICODE_OUTSIDE = {
    "w": r"[\p{L}\p{N}_]",
    "W": r"[^\p{L}\p{N}_]",
    "d": r"\p{Nd}",
    "D": r"\P{Nd}",
    "s": r"[\t\n\v\f\r \x{1c}-\x{1f}\x{85}\p{Z}]",
    "S": r"[^\t\n\v\f\r \x{1c}-\x{1f}\x{85}\p{Z}]",
}
_UNICODE_INSIDE = {
    "w": r"\p{L}\p{N}_",
    "d": r"\p{Nd}",
    "s": r"\t\n\v\f\r \x{1c}-\x{1f}\x{85}\p{Z}",
}
_INLINE_FLAGS = re.compile(r"\(\?[aiLmsux-]+[:)]")
#: What RE2 refuses, by how it is spelled, with what to write instead.
_UNSUPPORTED = (
    (re.compile(r"\\[1-9]|\(\?P="), "backreferences (\\1, (?P=name))",
     "match the repeated text literally, or grep for it and compare the lines"),
    (re.compile(r"\(\?<?[=!]"), "lookahead and lookbehind ((?=, (?!, (?<=, (?<!)",
     "match the surrounding text too, or grep twice and combine the results"),
    (re.compile(r"\(\?>|[*+?}]\+"), "atomic groups and possessive quantifiers ((?>, *+, ++)",
     "drop them: every RE2 match already runs in linear time"),
    (re.compile(r"\(\?\("), "conditional groups ((?(1)...))", "use an alternation (a|b)"),
    (re.compile(r"\(\?[a-zA-Z]*x"), "verbose mode ((?x))", "remove the spaces and comments"),
)  # fmt: skip
_OTHER_LINE_BREAKS = re.compile("[\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")


def _translate(pattern: str) -> tuple[str, bool]:
    """Python-syntax ``pattern`` in RE2's syntax, and whether it anchors to the whole text."""
    out: list[str] = []
    whole_text = False
    in_class = False
    i = 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\" and i + 1 < len(pattern):
            nxt = pattern[i + 1]
            table = _UNICODE_INSIDE if in_class else _UNICODE_OUTSIDE
            if nxt in table:
                out.append(table[nxt])
            elif nxt in "AZz" and not in_class:
                out.append(r"\A" if nxt == "A" else r"\z")
                whole_text = True
            elif nxt in "uU" and re.fullmatch(
                "[0-9a-fA-F]{4}" if nxt == "u" else "[0-9a-fA-F]{8}",
                pattern[i + 2 : i + (6 if nxt == "u" else 10)],
            ):
                digits = pattern[i + 2 : i + (6 if nxt == "u" else 10)]
                out.append(r"\x{" + digits + "}")
                i += len(digits)
            else:
                out.append(ch + nxt)
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
        elif ch == "[":
            in_class = True
            out.append(ch)
            i += 1
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):  # a leading ] is a member
                out.append(r"\]")
                i += 1
            continue
        else:
            out.append(ch)
        i += 1
    return "".join(out), whole_text


def _refusal(pattern: str, error: str) -> InvalidInput:
    try:
        re.compile(pattern)
    except (re.error, RecursionError, OverflowError) as exc:
        return InvalidInput(
            f"invalid regular expression {pattern!r}: {exc}; escape special characters with "
            "a backslash",
            pattern=pattern,
        )
    for spelled, what, instead in _UNSUPPORTED:
        if spelled.search(pattern):
            return InvalidInput(
                f"grep patterns run in linear time (RE2), which has no {what}; received "
                f"{pattern!r}: {instead}",
                pattern=pattern,
            )
    return InvalidInput(
        f"grep patterns run in linear time (RE2), which refuses {pattern!r}: {error}; "
        "simplify the pattern (repetition counts stop at 1000)",
        pattern=pattern,
    )


@dataclass(frozen=True)
class GrepPattern:
    """A grep pattern compiled for RE2: line matches, and a whole-text prefilter."""

    pattern: str
    ignore_case: bool
    _line: Any
    _anchor: Any
    _text: Any  # the pattern in multi-line mode (None when that could miss a line's match)

    def search(self, line: str) -> bool:
        """Does the pattern occur in this line?"""
        data = line.encode()
        return bool(self._line.Match(self._anchor, data, 0, len(data))[0][0] >= 0)

    def may_match(self, content: str) -> bool:
        """False only when no line of ``content`` can match (a cheap whole-text check).

        In multi-line mode every line match is a match of the whole text, when lines end in
        ``\\n`` only and the pattern does not anchor to the text's own start or end; matches
        across lines make it true more often, never less.
        """
        if self._text is None or _OTHER_LINE_BREAKS.search(content):
            return True
        data = content.encode()
        return bool(self._text.Match(self._anchor, data, 0, len(data))[0][0] >= 0)


def compile_grep(pattern: str, *, ignore_case: bool = False) -> GrepPattern:
    """Compile a Python-syntax pattern for RE2, or raise InvalidInput saying what to change."""
    translated, whole_text = _translate(pattern)
    try:
        line, anchor = re2_regexp(translated, ignore_case=ignore_case)
        text = None
        if not whole_text and not _INLINE_FLAGS.search(pattern):
            text, _ = re2_regexp("(?m)" + translated, ignore_case=ignore_case)
    except ValueError as exc:
        raise _refusal(pattern, str(exc)) from None
    return GrepPattern(pattern, ignore_case, line, anchor, text)


def _walk(items: Any, runs: list[str], current: list[str]) -> None:
    """Collect literal runs of a parsed sequence into ``runs`` (``current`` is the open run)."""
    for op, arg in items:
        if op is _LITERAL:
            current.append(chr(arg))
        elif op is _SUBPATTERN and not (arg[1] & re.IGNORECASE):
            _walk(arg[3], runs, current)  # a plain group is part of the sequence
        elif op in (_MAX_REPEAT, _MIN_REPEAT) and arg[0] >= 1:
            # the body occurs at least once, though not next to its neighbours
            _flush(runs, current)
            inner: list[str] = []
            _walk(arg[2], runs, inner)
            _flush(runs, inner)
        elif op is not _AT:  # anchors match no characters; anything else ends the run
            _flush(runs, current)


def _flush(runs: list[str], current: list[str]) -> None:
    if current:
        runs.append("".join(current))
        current.clear()


def required_literals(pattern: str, *, ignore_case: bool = False, min_length: int = 3) -> list[str]:
    """Substrings (at least ``min_length`` long) every match of ``pattern`` contains.

    With ``ignore_case`` the literals are lowercased and the caller must compare
    case-insensitively. Returns ``[]`` when the pattern is invalid or gives no certainty.
    """
    flags = re.IGNORECASE if ignore_case else 0
    try:
        parsed = _parser.parse(pattern, flags)
    except (re.error, RecursionError, OverflowError):
        return []
    if parsed.state.flags & (re.IGNORECASE | re.VERBOSE) and not ignore_case:
        return []  # inline (?i) or (?x): too subtle to narrow safely
    runs: list[str] = []
    current: list[str] = []
    _walk(list(parsed), runs, current)
    _flush(runs, current)
    out = [r.lower() if ignore_case else r for r in runs if len(r) >= min_length]
    return sorted(set(out), key=len, reverse=True)[:4]
