"""The search query grammar, shared by every backend.

Agents search with natural-language questions, so plain words are *any-term* matches ranked by
the backend's relevance function (BM25 on SQLite), not an AND of every word. The grammar:

- ``"quoted phrase"`` — the words in that order;
- ``word*`` — any word starting with ``word``;
- anything else — words, split on non-word characters; a hyphenated or apostrophised word
  (``e-mail``, ``don't``) is a phrase of its parts, as the index tokenised it.

English stop words are dropped from plain words unless nothing else would remain. No input is
ever a syntax error: an unbalanced quote runs to the end, operators such as ``AND``, ``NEAR``,
``:``, ``^`` or ``-`` are just text. The backends receive a :class:`Query` and quote every
token themselves, so user text never reaches a query language unescaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["STOP_WORDS", "Query", "Term", "parse_query"]

_WORD = re.compile(r"\w+", re.UNICODE)

STOP_WORDS = frozenset(
    [
        "a",
        "about",
        "above",
        "after",
        "again",
        "against",
        "all",
        "am",
        "an",
        "and",
        "any",
        "are",
        "as",
        "at",
        "be",
        "because",
        "been",
        "before",
        "being",
        "below",
        "between",
        "both",
        "but",
        "by",
        "can",
        "could",
        "did",
        "do",
        "does",
        "doing",
        "down",
        "during",
        "each",
        "few",
        "for",
        "from",
        "further",
        "had",
        "has",
        "have",
        "having",
        "he",
        "her",
        "here",
        "hers",
        "herself",
        "him",
        "himself",
        "his",
        "how",
        "i",
        "if",
        "in",
        "into",
        "is",
        "it",
        "its",
        "itself",
        "just",
        "me",
        "more",
        "most",
        "my",
        "myself",
        "no",
        "nor",
        "not",
        "now",
        "of",
        "off",
        "on",
        "once",
        "only",
        "or",
        "other",
        "our",
        "ours",
        "ourselves",
        "out",
        "over",
        "own",
        "same",
        "she",
        "should",
        "so",
        "some",
        "such",
        "than",
        "that",
        "the",
        "their",
        "theirs",
        "them",
        "themselves",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "to",
        "too",
        "under",
        "until",
        "up",
        "very",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "while",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "would",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "s",
        "t",
        "d",
        "ll",
        "m",
        "re",
        "ve",
    ]
)


@dataclass(frozen=True)
class Term:
    """One match unit: a word, a phrase (several words in order) or a prefix."""

    words: tuple[str, ...]
    prefix: bool = False

    @property
    def is_phrase(self) -> bool:
        return len(self.words) > 1


@dataclass(frozen=True)
class Query:
    """A parsed query: any of ``terms`` may match; the backend ranks the matches."""

    terms: tuple[Term, ...]

    @property
    def empty(self) -> bool:
        return not self.terms


def _words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def parse_query(text: str) -> Query:
    """Parse user text into a :class:`Query`; never raises."""
    terms: list[Term] = []
    plain: list[Term] = []
    parts = text.split('"')
    for index, part in enumerate(parts):
        if index % 2 == 1:  # inside quotes (an unbalanced last quote runs to the end)
            words = _words(part)
            if words:
                terms.append(Term(tuple(words)))
            continue
        for chunk in part.split():
            prefix = chunk.endswith("*")
            words = _words(chunk)
            if not words:
                continue
            if prefix and len(words) == 1:
                terms.append(Term((words[0],), prefix=True))
            else:
                plain.append(Term(tuple(words)))
    content = [t for t in plain if t.is_phrase or t.words[0] not in STOP_WORDS]
    if not content and not terms:
        content = plain
    return Query(tuple(dict.fromkeys([*terms, *content])))
