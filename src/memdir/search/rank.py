"""Ranking of search matches: BM25 whose statistics come from the readable matches alone.

A ranking may depend only on what the caller may read, so the corpus statistics of BM25 —
the number of documents, each term's document frequency and the average length — are taken
over the matching files the caller may read (under the searched directory), never over the
index: a document in another store or behind a deny rule changes no order. The formula is
BM25 with the always-positive IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``, ``k1 = 1.2``,
``b = 0.75``, a term's frequency weighted 0.5 in the path and 1.0 in the body (the weights
the index used before), lengths in characters. Ties go by path, so the order is total and
the same on every run; the numbers never leave the service (callers see rank positions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

__all__ = ["BODY_WEIGHT", "PATH_WEIGHT", "Doc", "bm25_top"]

K1 = 1.2
B = 0.75
PATH_WEIGHT = 0.5
BODY_WEIGHT = 1.0


class Doc(NamedTuple):
    """One readable match: its weighted frequency of each query term, and its length."""

    file_id: int
    path: str
    length: int
    tf: tuple[float, ...]


def bm25_top(docs: Sequence[Doc], terms: int, limit: int) -> list[Doc]:
    """The best ``limit`` of ``docs`` by BM25 over ``docs`` themselves, best first."""
    if not docs:
        return []
    total = len(docs)
    average = sum(d.length for d in docs) / total or 1.0
    frequency = [sum(1 for d in docs if d.tf[i] > 0) for i in range(terms)]
    idf = [math.log(1.0 + (total - n + 0.5) / (n + 0.5)) for n in frequency]

    def score(doc: Doc) -> float:
        norm = K1 * (1.0 - B + B * doc.length / average)
        return sum(idf[i] * f * (K1 + 1.0) / (f + norm) for i, f in enumerate(doc.tf) if f > 0)

    ranked = sorted(docs, key=lambda d: (-score(d), d.path))
    return ranked[:limit]
