"""Compile a :class:`~memdir.search.query.Query` into an SQLite FTS5 ``MATCH`` expression.

Every token is emitted as an FTS5 string (``"..."``, with ``"`` doubled), so no user text is
ever parsed as FTS5 syntax; terms are joined with ``OR``; ranking is :mod:`memdir.search.rank`'s.
"""

from __future__ import annotations

from memdir.search.query import Query, Term

__all__ = ["TOKENIZER", "compile_match", "compile_term"]

#: The tokenizer of the index: Porter stemming over Unicode word splitting, accents folded.
TOKENIZER = "porter unicode61 remove_diacritics 2"


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def compile_term(term: Term) -> str:
    """The MATCH string of one term (a quoted phrase, ``*`` for a prefix)."""
    body = _quote(" ".join(term.words))
    return body + "*" if term.prefix else body


def compile_match(query: Query) -> str | None:
    """The MATCH string for ``query`` (``None`` for a query with no terms: match nothing)."""
    if query.empty:
        return None
    return " OR ".join(compile_term(t) for t in query.terms)
