"""What a regular expression needs to match: literals to narrow a scan before it runs.

Grep runs Python's ``re`` (one regex dialect on every backend). To avoid running it over every
file, :func:`required_literals` finds substrings that any match must contain — runs of literal
characters in the pattern's top-level sequence — so the database can prefilter with an index
(PostgreSQL's trigram index) or a cheap substring test. Alternation, optional or repeated
groups and classes end a run; when nothing certain can be found the result is empty and the
caller scans everything. Never wrong, sometimes unhelpful.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["required_literals"]

import re._constants as _const  # type: ignore[import-not-found]  # re's own parser (3.11+)
import re._parser as _parser  # type: ignore[import-not-found]

_LITERAL: Any = _const.LITERAL
_SUBPATTERN: Any = _const.SUBPATTERN
_MAX_REPEAT: Any = _const.MAX_REPEAT
_MIN_REPEAT: Any = _const.MIN_REPEAT
_AT: Any = _const.AT


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
