"""Glob patterns over memory paths.

``*`` matches within one segment, ``?`` one character of a segment, ``[abc]`` / ``[!abc]`` a
character class, and a ``**`` segment any number of segments (zero included). Patterns are
``/``-rooted like paths; a pattern without a leading ``/`` is taken from the root.
"""

from __future__ import annotations

import functools
import re

from memdir.core.errors import InvalidInput

__all__ = ["compile_glob", "literal_prefix"]


def _segment(segment: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(segment):
        ch = segment[i]
        if ch == "*":
            out.append("[^/]*")
        elif ch == "?":
            out.append("[^/]")
        elif ch == "[":
            end = segment.find("]", i + 2)
            if end < 0:
                out.append(re.escape(ch))
            else:
                body = segment[i + 1 : end]
                negate = body.startswith("!")
                body = body[1:] if negate else body
                out.append("[" + ("^" if negate else "") + body.replace("\\", "\\\\") + "]")
                i = end
        else:
            out.append(re.escape(ch))
        i += 1
    return "".join(out)


def _rooted(pattern: str) -> str:
    if not pattern:
        raise InvalidInput("empty glob pattern; try '/**/*.md'")
    return pattern if pattern.startswith("/") else "/" + pattern


@functools.lru_cache(maxsize=16384)
def compile_glob(pattern: str) -> re.Pattern[str]:
    """Compile a glob into a regular expression matching whole paths (cached)."""
    segments = _rooted(pattern)[1:].split("/")
    regex = ""
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment == "**":
            regex += "(?:/[^/]+)*" if last else "(?:/[^/]+)*?"
        else:
            regex += "/" + _segment(segment)
    try:
        return re.compile(regex + r"\Z")
    except re.error as exc:
        raise InvalidInput(f"invalid glob {pattern!r}: {exc}", pattern=pattern) from None


def literal_prefix(pattern: str) -> str:
    """The longest directory prefix without wildcards, to narrow the scan (``/`` at worst)."""
    segments = _rooted(pattern)[1:].split("/")
    literal: list[str] = []
    for segment in segments[:-1]:
        if any(c in segment for c in "*?["):
            break
        literal.append(segment)
    return "/" + "/".join(literal) if literal else "/"
