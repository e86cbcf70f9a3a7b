"""Consolidation of the store itself: near-duplicate, expired and review-due memory files.

A store-level miner (``mine_memory``): it reads the memory snapshot, not transcripts.

- **expired**: frontmatter ``expires`` at or before the run's time;
- **review-due**: frontmatter ``review_after`` at or before the run's time (and not expired);
- **duplicate**: files whose bodies (frontmatter removed, lowercased, whitespace collapsed)
  share at least :data:`DUPLICATE` of their word 3-shingles (Jaccard). Candidates are found
  through a bottom-k sketch (the :data:`SKETCH` smallest shingles of each file, compared as
  strings, so no hash seed matters) and then compared exactly; near-duplicates are grouped
  transitively. Files with fewer than :data:`MIN_SHINGLES` shingles are too short to judge.

Dates are ISO dates or datetimes (YAML may have parsed them already); a naive time is UTC; a
value that is no date is ignored. Key: ``reason|path|path...``. Subject: ``paths`` (sorted),
``reason`` (``duplicate``, ``expired``, ``review-due``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Final

from memdir.core.errors import InvalidContent
from memdir.core.frontmatter import parse_frontmatter, split_frontmatter
from memdir.dream.miners.base import MinerContext
from memdir.dream.model import MemoryFile, Signal
from memdir.transcripts.model import bounded_key

__all__ = ["DUPLICATE", "ConsolidationMiner", "as_time", "frontmatter_of", "jaccard"]

DUPLICATE: Final = 0.8
SKETCH: Final = 24
MIN_SHINGLES: Final = 5


def as_time(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from a frontmatter date value, or None."""
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
    if isinstance(value, str):
        try:
            parsed = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
    return None


def frontmatter_of(file: MemoryFile) -> dict[str, Any]:
    """The file's frontmatter mapping (given, else parsed; empty when malformed)."""
    if file.frontmatter:
        return file.frontmatter
    try:
        return parse_frontmatter(file.content).raw
    except InvalidContent:
        return {}


def _shingles(content: str) -> set[str]:
    try:
        _, body = split_frontmatter(content)
    except InvalidContent:
        body = content
    words = body.lower().split()
    return {" ".join(words[i : i + 3]) for i in range(max(0, len(words) - 2))}


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


class ConsolidationMiner:
    name: ClassVar[str] = "consolidation"

    def __init__(self, context: MinerContext) -> None:
        self.context = context

    def mine_memory(self, memory: Sequence[MemoryFile], now: dt.datetime) -> Iterator[Signal]:
        files = sorted(memory, key=lambda f: f.path)
        for file in files:
            meta = frontmatter_of(file)
            expires, review = as_time(meta.get("expires")), as_time(meta.get("review_after"))
            if expires is not None and expires <= now:
                yield self._signal("expired", [file.path], f"expired on {expires.date()}")
            elif review is not None and review <= now:
                yield self._signal("review-due", [file.path], f"review due since {review.date()}")
        for group in self._duplicates(files):
            yield self._signal("duplicate", group, "near-duplicate content")

    def _signal(self, reason: str, paths: list[str], detail: str) -> Signal:
        return Signal(
            miner=self.name,
            key=bounded_key("|".join([reason, *paths])),
            subject={"paths": paths, "reason": reason},
            title=f"{reason}: {', '.join(paths)} ({detail})",
        )

    def _duplicates(self, files: list[MemoryFile]) -> list[list[str]]:
        shingles = [_shingles(f.content) for f in files]
        index: dict[str, list[int]] = {}
        for position, found in enumerate(shingles):
            if len(found) >= MIN_SHINGLES:
                for shingle in sorted(found)[:SKETCH]:
                    index.setdefault(shingle, []).append(position)
        parent = list(range(len(files)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        pairs = sorted({(a, b) for ids in index.values() for a in ids for b in ids if a < b})
        for a, b in pairs:
            if root(a) != root(b) and jaccard(shingles[a], shingles[b]) >= DUPLICATE:
                parent[max(root(a), root(b))] = min(root(a), root(b))
        groups: dict[int, list[str]] = {}
        for position, file in enumerate(files):
            groups.setdefault(root(position), []).append(file.path)
        return [paths for _, paths in sorted(groups.items()) if len(paths) > 1]
