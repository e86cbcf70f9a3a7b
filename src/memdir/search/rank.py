"""Ranking of search matches: BM25 whose statistics come from the readable matches alone.

A ranking may depend only on what the caller may read, so the corpus statistics of BM25 —
the number of documents, each term's document frequency and the average length — are taken
over the matching files the caller may read (under the searched directory), never over the
index: a document in another store or behind a deny rule changes no order. The formula is
BM25 with the always-positive IDF ``ln(1 + (N - n + 0.5) / (n + 0.5))``, ``k1 = 1.2``,
``b = 0.75``, lengths in bytes (path and content).

Two passes keep the cost near the index's own: every readable match is scored with each
matching term counted once (membership comes from the index at no cost), then the best
:data:`CANDIDATES` (at least three times the limit) are scored again with their real term
frequencies, weighted 0.5 in the path and 1.0 in the body, and the statistics of the first
pass. Ties go by path, so the order is total and the same on every run; the numbers never
leave the service (callers see rank positions).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence

__all__ = ["BODY_WEIGHT", "CANDIDATES", "PATH_WEIGHT", "top"]

K1 = 1.2
B = 0.75
PATH_WEIGHT = 0.5
BODY_WEIGHT = 1.0
CANDIDATES = 30


def top(
    lengths: Mapping[int, int],
    paths: Mapping[int, str],
    having: Sequence[set[int]],
    limit: int,
    frequencies: Callable[[list[int]], Mapping[int, Sequence[float]]],
) -> list[int]:
    """The ids of the best ``limit`` readable matches, best first.

    ``lengths`` and ``paths`` hold every readable match (by file id), ``having[i]`` the
    readable files containing term ``i``; ``frequencies(ids)`` returns the weighted term
    frequencies of those files, one per term, and is asked about readable files only.
    """
    total = len(lengths)
    if not total:
        return []
    idf = [math.log(1.0 + (total - len(s) + 0.5) / (len(s) + 0.5)) for s in having]
    average = sum(lengths.values()) / total or 1.0
    weight: dict[int, float] = dict.fromkeys(lengths, 0.0)
    for i, files in enumerate(having):
        for file_id in files:
            weight[file_id] += idf[i]

    def norm(file_id: int) -> float:
        return K1 * (1.0 - B + B * lengths[file_id] / average)

    def first(file_id: int) -> tuple[float, str]:
        return -(K1 + 1.0) * weight[file_id] / (1.0 + norm(file_id)), paths[file_id]

    candidates = heapq.nsmallest(max(CANDIDATES, 3 * limit), lengths, key=first)
    tf = frequencies(candidates)

    def second(file_id: int) -> tuple[float, str]:
        n = norm(file_id)
        score = sum(idf[i] * f * (K1 + 1.0) / (f + n) for i, f in enumerate(tf[file_id]) if f > 0)
        return -score, paths[file_id]

    return sorted(candidates, key=second)[:limit]
