"""Glob patterns over memory paths, matched in time linear in the path.

``*`` matches within one segment, ``?`` one character of a segment, ``[abc]`` / ``[!abc]``
(or ``[^abc]``) a character class, and a ``**`` segment any number of segments (zero
included). Patterns are ``/``-rooted like paths; a pattern without a leading ``/`` is taken
from the root.

Globs come from callers (``glob``, token scopes) as well as from policies, so a pattern must
never cost more than its size times the path's: a pattern is parsed into pieces and compiled
to one regular expression in the subset both engines read the same way, then

- with at most one unbounded wildcard (one ``*`` run or one ``**`` segment — every policy
  template such as ``/projects/{project}/**``) it runs on Python's ``re``: a single choice
  point bounds the backtracking by len(path) × len(pattern), and the hot read path keeps
  ``re``'s speed;
- with more, it runs on RE2 (``google-re2``), whose automaton never backtracks.

Both compile the same expression, so the choice changes speed, never the answer.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Protocol

from memdir.core.errors import InvalidInput

__all__ = ["Glob", "compile_glob", "literal_prefix"]

_META = frozenset("\\.^$|?*+()[]{}")
_CLASS_META = frozenset("\\]^-[")


class Glob(Protocol):
    """A compiled glob: ``match(path)`` is true when the whole path matches."""

    pattern: str

    def match(self, path: str) -> bool: ...


def _escape(ch: str, meta: frozenset[str]) -> str:
    return "\\" + ch if ch in meta else ch


def _class(pattern: str, body: str) -> str:
    """A glob class body (without brackets) as a regex class both engines read alike."""
    negate = body[:1] in ("!", "^")
    body = body[1:] if negate else body
    if not body:
        raise InvalidInput(
            f"invalid glob {pattern!r}: an empty character class; write [ab] or [!ab]",
            pattern=pattern,
        )
    out: list[str] = []
    i = 0
    while i < len(body):
        if i + 2 < len(body) and body[i + 1] == "-":
            low, high = body[i], body[i + 2]
            if low > high:
                raise InvalidInput(
                    f"invalid glob {pattern!r}: the range {low}-{high} runs backwards; "
                    f"write {high}-{low}",
                    pattern=pattern,
                )
            out.append(_escape(low, _CLASS_META) + "-" + _escape(high, _CLASS_META))
            i += 3
        else:
            out.append(_escape(body[i], _CLASS_META))
            i += 1
    return "[" + ("^" if negate else "") + "".join(out) + "]"


def _segment(pattern: str, segment: str) -> tuple[str, int]:
    """The regex of one segment and its number of ``*`` runs (unbounded wildcards)."""
    out: list[str] = []
    stars = 0
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            while i + 1 < len(segment) and segment[i + 1] == "*":
                i += 1  # a run of stars is one star
            out.append("[^/]*")
            stars += 1
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[" and segment.find("]", i + 2) >= 0:
            end = segment.find("]", i + 2)
            out.append(_class(pattern, segment[i + 1 : end]))
            i = end
        else:
            out.append(_escape(ch, _META))
        i += 1
    return "".join(out), stars


def _rooted(pattern: str) -> str:
    if not pattern:
        raise InvalidInput("empty glob pattern; try '/**/*.md'")
    return pattern if pattern.startswith("/") else "/" + pattern


def _translate(pattern: str) -> tuple[str, int]:
    """The regex (without anchors) for a whole pattern and its count of unbounded wildcards."""
    regex: list[str] = []
    wildcards = 0
    previous = ""
    for segment in _rooted(pattern)[1:].split("/"):
        if segment == "**":
            if previous != "**":  # /**/** is /**
                regex.append("(?:/[^/]+)*")
                wildcards += 1
        else:
            body, stars = _segment(pattern, segment)
            regex.append("/" + body)
            wildcards += stars
        previous = segment
    return "".join(regex), wildcards


class _ReGlob:
    """At most one unbounded wildcard: Python's ``re`` (see the module docstring)."""

    __slots__ = ("_match", "pattern")

    def __init__(self, pattern: str, regex: str) -> None:
        self.pattern = pattern
        self._match = re.compile(regex + r"\Z").match

    def match(self, path: str) -> bool:
        return self._match(path) is not None


class _Re2Glob:
    """Several unbounded wildcards: RE2, linear in the path whatever the pattern."""

    __slots__ = ("_anchor", "_regexp", "pattern")

    def __init__(self, pattern: str, regex: str) -> None:
        from memdir.core.regex import re2_regexp

        self.pattern = pattern
        self._regexp: Any
        self._regexp, self._anchor = re2_regexp(regex, anchor="both")

    def match(self, path: str) -> bool:
        data = path.encode()
        return bool(self._regexp.Match(self._anchor, data, 0, len(data))[0][0] >= 0)


@functools.lru_cache(maxsize=16384)
def compile_glob(pattern: str) -> Glob:
    """Compile a glob into a matcher of whole paths (cached); InvalidInput when malformed."""
    regex, wildcards = _translate(pattern)
    if wildcards <= 1:
        return _ReGlob(pattern, regex)
    return _Re2Glob(pattern, regex)


def literal_prefix(pattern: str) -> str:
    """The longest directory prefix without wildcards, to narrow the scan (``/`` at worst).

    Every path the glob matches is this prefix or lies under it.
    """
    segments = _rooted(pattern)[1:].split("/")
    literal: list[str] = []
    for segment in segments[:-1]:
        if any(c in segment for c in "*?["):
            break
        literal.append(segment)
    return "/" + "/".join(literal) if literal else "/"
