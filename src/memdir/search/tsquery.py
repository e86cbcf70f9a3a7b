"""Compile a :class:`~memdir.search.query.Query` into a PostgreSQL ``tsquery`` expression.

Each term becomes its own bound parameter inside ``phraseto_tsquery`` (words and phrases) or
``to_tsquery`` with ``:*`` (prefixes; prefix terms are ``\\w+`` words, so they cannot carry
tsquery syntax), OR-ed together with ``||``. User text is only ever a bound value.
"""

from __future__ import annotations

from typing import Any

from memdir.search.query import Query

__all__ = ["CONFIG", "compile_tsquery"]

#: The text search configuration: English stemming and stop words, like the SQLite index.
CONFIG = "english"


def compile_tsquery(query: Query) -> tuple[str, dict[str, Any]] | None:
    """SQL for the tsquery and its parameters, or None for a query with no terms."""
    if query.empty:
        return None
    parts: list[str] = []
    params: dict[str, Any] = {}
    for index, term in enumerate(query.terms):
        name = f"q{index}"
        if term.prefix:
            parts.append(f"to_tsquery('{CONFIG}', :{name})")
            params[name] = term.words[0] + ":*"
        else:
            parts.append(f"phraseto_tsquery('{CONFIG}', :{name})")
            params[name] = " ".join(term.words)
    return "(" + " || ".join(parts) + ")", params
