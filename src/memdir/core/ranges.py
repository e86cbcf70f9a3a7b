"""Key ranges of paths a caller may read, so listing queries touch only those.

A policy grants read through globs, and every path a glob matches is its literal directory
prefix or lies under it (:func:`memdir.core.globs.literal_prefix`). The union of those
prefixes over a principal's allow rules — intersected with its token's — bounds everything
it may read. Listing queries (tree, glob, grep, search, the commit log) are restricted to the
matching key ranges in SQL, so their cost follows what the caller may read rather than the
store's size; the exact per-path decision still runs on each row that comes back.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from memdir.core.paths import descendant_range, is_under

__all__ = [
    "RESERVED",
    "PathRange",
    "ReadScope",
    "intersect_prefixes",
    "label_names",
    "minimal_prefixes",
    "readable_ranges",
]

#: memdir's own configuration: admin-only, so never inside a :class:`ReadScope`'s ``whole``.
RESERVED = "/.memdir"


class PathRange(NamedTuple):
    """Paths in ``[lo, hi)``, plus the single path ``exact`` when it is not None."""

    lo: str
    hi: str
    exact: str | None

    def holds(self, path: str) -> bool:
        return path == self.exact or self.lo <= path < self.hi


def minimal_prefixes(prefixes: Iterable[str]) -> tuple[str, ...]:
    """The prefixes with any that lies under another dropped, sorted."""
    out: list[str] = []
    for prefix in sorted(set(prefixes)):
        if not any(is_under(prefix, kept) for kept in out):
            out.append(prefix)
    return tuple(out)


def intersect_prefixes(a: Sequence[str] | None, b: Sequence[str] | None) -> tuple[str, ...] | None:
    """Prefixes covering what both cover (None stands for everything)."""
    if a is None:
        return None if b is None else minimal_prefixes(b)
    if b is None:
        return minimal_prefixes(a)
    both = [p for p in a if any(is_under(p, q) for q in b)]
    both += [q for q in b if any(is_under(q, p) for p in a)]
    return minimal_prefixes(both)


def readable_ranges(directory: str, prefixes: Sequence[str] | None) -> list[PathRange] | None:
    """The key ranges of paths strictly under ``directory`` that ``prefixes`` may cover.

    None means no restriction at all (the root, unrestricted); an empty list means nothing
    can be readable there, so no query needs to run.
    """
    if prefixes is None:
        return None if directory == "/" else [PathRange(*descendant_range(directory), None)]
    out: list[PathRange] = []
    for prefix in minimal_prefixes(prefixes):
        if prefix == "/":
            return readable_ranges(directory, None)
        if directory != "/" and is_under(directory, prefix):
            return [PathRange(*descendant_range(directory), None)]
        if is_under(prefix, directory) and prefix != directory:
            out.append(PathRange(*descendant_range(prefix), prefix))
    return out


@dataclass(frozen=True)
class ReadScope:
    """A caller's read rights as key ranges, decided once per request.

    ``whole``: prefixes under which the caller may read every path outside
    :data:`RESERVED` (None: every path at all — the database owner). ``bound``: prefixes
    every readable path lies under (None: anywhere). A path under ``whole`` is readable, a
    path outside ``bound`` is not; only a path between the two needs the per-path decision.
    Listings put both into SQL as WHERE clauses over the path key, so the policy runs on the
    rows between them only.
    """

    whole: tuple[str, ...] | None
    bound: tuple[str, ...] | None

    def decided(self, path: str) -> bool | None:
        """True: readable; False: not; None: ask the policy for this path."""
        if self.whole is None:
            return True
        if not is_under(path, RESERVED) and any(is_under(path, p) for p in self.whole):
            return True
        if self.bound is not None and not any(is_under(path, p) for p in self.bound):
            return False
        return None

    def whole_ranges(self) -> list[PathRange] | None:
        """The key ranges of ``whole`` (None: everything; the caller excludes RESERVED)."""
        return None if self.whole is None else readable_ranges("/", self.whole) or []


def label_names(scope: ReadScope, root: str) -> frozenset[str] | None:
    """The names ``n`` a reader may possibly read ``root + n + "/*"`` for (a scope label such
    as project ``n`` under ``/projects/``), or None when any name may be readable.

    A name outside the set, without a ``/`` and not empty, is unreadable: the path lies under
    no bound prefix (the only bound prefixes it could lie under are the root's ancestors, which
    give None, or ``root + n`` and below, whose first segment is ``n``). A name in the set may
    still be unreadable; the per-path decision settles it. Listings of labelled records put
    the set into SQL as ``label IN (...)`` so the policy runs on candidate rows only.
    """
    directory = root.rstrip("/")
    if scope.whole is None or any(is_under(directory, w) for w in scope.whole):
        return None
    bound = scope.bound if scope.bound is not None else ("/",)
    if any(is_under(directory, b) for b in bound):
        return None
    names = {p[len(root) :].split("/", 1)[0] for p in (*scope.whole, *bound) if p.startswith(root)}
    return frozenset(n for n in names if n)
