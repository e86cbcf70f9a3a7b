"""A regular expression compiled on first use, so importing the guard compiles nothing.

The guard's detectors hold dozens of patterns, and most never run in a process that screens
clean notes: each detector checks its necessary literals first (``://`` for links, a rule's
prefixes and required literals for secrets, a signal's gate words for injection), and only a
text that could match reaches the regex. :class:`LazyRegex` defers ``re.compile`` to that
first search; it matches exactly what ``re.compile(source, flags)`` matches (it *is* that
pattern once compiled), so it changes cost, never findings.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator, Mapping

__all__ = ["LazyRegex"]


class LazyRegex:
    """``re.compile(source, flags)``, compiled by the first call that needs it.

    Only the methods the detectors use are offered; each forwards to the compiled pattern
    with the same arguments and results.
    """

    __slots__ = ("_compiled", "flags", "source")

    def __init__(self, source: str, flags: int = 0) -> None:
        self.source = source
        self.flags = flags
        self._compiled: re.Pattern[str] | None = None

    @property
    def compiled(self) -> re.Pattern[str]:
        """The compiled pattern (compiled once, on the first access)."""
        compiled = self._compiled
        if compiled is None:
            compiled = self._compiled = re.compile(self.source, self.flags)
        return compiled

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled.groupindex

    def search(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.search(string, pos, endpos)

    def match(self, string: str, pos: int = 0, endpos: int = sys.maxsize) -> re.Match[str] | None:
        return self.compiled.match(string, pos, endpos)

    def fullmatch(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> re.Match[str] | None:
        return self.compiled.fullmatch(string, pos, endpos)

    def finditer(
        self, string: str, pos: int = 0, endpos: int = sys.maxsize
    ) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string, pos, endpos)

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled yet"
        return f"LazyRegex({self.source!r}, {self.flags!r}; {state})"
