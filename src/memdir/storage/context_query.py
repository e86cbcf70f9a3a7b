"""Context's queries, decided in SQL: readability by key ranges, expiry, filters and order.

:class:`ContextQuery` serves :meth:`memdir.context.ContextMixin.context` for one caller's
:class:`~memdir.core.ranges.ReadScope`. Invariants and reasons:

- **Key ranges, not rows.** Every statement restricts ``heads.path`` to the caller's bound
  ranges written as ``(store_id = ? AND path >= ? AND path < ?) OR ...``, which both engines
  serve from the ``(store_id, path)`` key (SQLite's multi-index OR), so a store's unreadable
  files cost nothing. A row under the caller's *whole* prefixes is readable by construction;
  a row between whole and bound is flagged (``decided`` false) and the policy decides it.
- **Counts without joins.** The closing line needs every readable file counted by scope kind:
  one GROUP BY over the path key, the expired files (served by the ``expires_at`` index and
  the ``/tasks/`` range) subtracted in Python.
- **Streamed in the assembly's order.** Core files (``file_meta (store_id, core, skill)``
  index), then skills, then the index part one scope kind at a time, each ordered by scope
  name, search rank, recent use (the later of change and read) and path — exactly
  :meth:`memdir.core.context.Item.order_key` (binary path order on both dialects, times in a
  fixed-width encoding on SQLite). The assembly stops drawing when the budget is full, so
  the kinds after it are never queried.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from memdir.core.paths import descendant_range, is_under
from memdir.core.ranges import RESERVED, PathRange, ReadScope, readable_ranges
from memdir.storage.repository import Repository

__all__ = ["UNRANKED", "ContextFile", "ContextQuery", "ExpiredFile"]

#: Scope roots whose second segment names the scope, with their rank in context's order
#: (:data:`memdir.core.context.SCOPE_ORDER`: task, agent, user, project, org, other).
_SCOPE_ROOTS = (("/tasks/", 0), ("/agents/", 1), ("/users/", 2), ("/projects/", 3))
#: The key range each scope kind's paths lie in (None: anywhere — the ``other`` kind).
_KIND_RANGES: tuple[tuple[str, str] | None, ...] = (
    ("/tasks/", "/tasks0"), ("/agents/", "/agents0"), ("/users/", "/users0"),
    ("/projects/", "/projects0"), ("/org", "/org0"), None,
)  # fmt: skip
#: Roots whose direct children are ``other`` but whose grandchildren name a scope.
_KIND_ROOTS = frozenset(r.rstrip("/") for r, _ in _SCOPE_ROOTS) | {"/"}
#: Search rank of a file the query did not rank (after every ranked one).
UNRANKED = 1_000_000_000
_TASKS = "/tasks"


class ContextFile(NamedTuple):
    """One live file as the stream yields it (times aware UTC)."""

    path: str
    file_id: int
    updated_at: dt.datetime
    used_at: dt.datetime
    summary: str | None
    name: str | None
    core: bool
    skill: bool
    review_after: dt.datetime | None
    verify: str | None
    source_kind: str | None
    content: str | None  # core files only
    expired_at: dt.datetime | None  # set only when the stream includes expired files
    decided: bool  # under the caller's whole prefixes (else the policy decides the path)


class ExpiredFile(NamedTuple):
    path: str
    kind: int  # scope rank
    decided: bool
    expired_at: dt.datetime


def _kind_rank(path: str) -> int:
    """The scope rank of ``path`` (:func:`memdir.core.context.scope_of`'s kind, as a rank)."""
    for root, rank in _SCOPE_ROOTS:
        if path.startswith(root) and "/" in path[len(root) :]:
            return rank
    return 4 if path == "/org" or path.startswith("/org/") else 5


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _clip(ranges: Sequence[PathRange], lo: str, hi: str) -> list[PathRange]:
    """``ranges`` intersected with ``[lo, hi)``."""
    out = []
    for r in ranges:
        a, b = max(r.lo, lo), min(r.hi, hi)
        exact = r.exact if r.exact is not None and lo <= r.exact < hi else None
        if a < b or exact is not None:
            out.append(PathRange(a, b if a < b else a, exact))
    return out


class ContextQuery:
    """The statements of one context request (see the module docstring)."""

    def __init__(
        self,
        repo: Repository,
        store_id: int,
        scope: ReadScope,
        *,
        now: dt.datetime,
        task_expiry_days: int,
        include_expired: bool,
        project: str | None = None,
        task: str | None = None,
        ranks: dict[str, int] | None = None,
    ) -> None:
        self.repo, self.store_id, self.scope = repo, store_id, scope
        self.now, self.days, self.include_expired = now, task_expiry_days, include_expired
        enc = repo.dialect.encode_time
        pos = "strpos" if repo.conn.dialect.name == "postgresql" else "instr"
        bound = readable_ranges("/", scope.bound)
        self.bound: list[PathRange] | None = bound
        self.empty = bound == []

        def under(root: str) -> str:
            return (f"(h.path >= '{root}' AND h.path < '{root[:-1]}0' AND "
                    f"{pos}(substr(h.path, {len(root) + 1}), '/') > 0)")  # fmt: skip

        org = "(h.path = '/org' OR (h.path >= '/org/' AND h.path < '/org0'))"
        self.kind = ("CASE " + " ".join(f"WHEN {under(r)} THEN {n}" for r, n in _SCOPE_ROOTS)
                     + f" WHEN {org} THEN 4 ELSE 5 END")  # fmt: skip
        self.scope_name = "CASE " + " ".join(
            f"WHEN {under(r)} THEN substr(h.path, {len(r) + 1}, "
            f"{pos}(substr(h.path, {len(r) + 1}), '/') - 1)" for r, _ in _SCOPE_ROOTS
        ) + " ELSE '' END"  # fmt: skip
        # memdir's own files never; the project / task filters
        lo, hi = descendant_range(RESERVED)
        filters = [f"NOT (h.path >= '{lo}' AND h.path < '{hi}')"]
        self.filter_params: list[Any] = []
        for root, value in (("/projects/", project), ("/tasks/", task)):
            if value is not None:
                a, b = descendant_range(root + value)
                filters.append(f"NOT ({under(root)} AND NOT (h.path >= ? AND h.path < ?))")
                self.filter_params += [a, b]
        self.filters = " AND ".join(filters)
        # whole: a CASE over the whole ranges (no index needed: it only labels rows)
        whole = scope.whole_ranges()
        self.whole_all = whole is None
        self.whole_params: list[Any] = []
        if whole is None:
            self.whole = "1"
        else:
            parts = []
            for r in whole:
                parts.append("(h.path >= ? AND h.path < ?)")
                self.whole_params += [r.lo, r.hi]
                if r.exact is not None:
                    parts.append("h.path = ?")
                    self.whole_params.append(r.exact)
            self.whole = f"CASE WHEN {' OR '.join(parts) or '1 = 0'} THEN 1 ELSE 0 END"
        # expired: its own time has come, or a /tasks/ file naming none is past the default
        self.expired = "(m.expires_at IS NOT NULL AND m.expires_at <= ?)"
        self.expired_params: list[Any] = [enc(now)]
        if task_expiry_days > 0:
            a, b = descendant_range(_TASKS)
            self.expired = (f"({self.expired} OR (h.path >= ? AND h.path < ? AND "
                            "m.expires_at IS NULL AND (m.no_expiry IS NULL OR NOT m.no_expiry) "
                            "AND h.updated_at <= ?))")  # fmt: skip
            self.expired_params += [a, b, enc(now - dt.timedelta(days=task_expiry_days))]
        ranked = sorted((ranks or {}).items(), key=lambda kv: kv[1])
        self.rank = ("CASE h.path " + " ".join("WHEN ? THEN ?" for _ in ranked)
                     + f" ELSE {UNRANKED} END") if ranked else "0"  # fmt: skip
        self.rank_params = [v for path, rank in ranked for v in (path, rank)]

    # --- pieces ------------------------------------------------------------------------

    def _keys(self, ranges: Sequence[PathRange] | None) -> tuple[str, list[Any]]:
        """``ranges`` as key-range disjuncts each naming the store (multi-index OR)."""
        if ranges is None:
            return "h.store_id = ?", [self.store_id]
        parts, params = [], []
        for r in ranges:
            if r.lo < r.hi:
                parts.append("(h.store_id = ? AND h.path >= ? AND h.path < ?)")
                params += [self.store_id, r.lo, r.hi]
            if r.exact is not None:
                parts.append("(h.store_id = ? AND h.path = ?)")
                params += [self.store_id, r.exact]
        return "(" + (" OR ".join(parts) or "1 = 0") + ")", params

    def _kind_ranges(self, kind: int) -> list[PathRange] | None:
        span = _KIND_RANGES[kind]
        if span is None:
            return self.bound
        base = self.bound if self.bound is not None else [PathRange("/", "0", None)]
        return _clip(base, *span)

    def _cursor(self, sql: str, params: Sequence[Any]) -> Any:
        # its own driver cursor: a stream outlives other statements of the transaction
        cursor = self.repo.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        cursor.execute(self.repo.dialect.sql(sql), params)
        return cursor

    # --- counts ------------------------------------------------------------------------

    def counts(self) -> dict[tuple[int, bool], int]:
        """Live files in the bound (expired included) by (scope rank, decided).

        A bound range whose files all share one scope kind and one whole-or-not answer is
        counted from the path key alone (``COUNT(*)`` over the range, no expression per row);
        the others are grouped by the kind and whole expressions."""
        if self.empty:
            return {}
        out: dict[tuple[int, bool], int] = {}
        grouped: list[PathRange] = []
        exacts: list[str] = []
        for r in self.bound if self.bound is not None else [PathRange("/", "0", None)]:
            if r.exact is not None:
                exacts.append(r.exact)
            p = r.exact
            kind = None if p is None or p in _KIND_ROOTS else _kind_rank(p + "/x")
            whole = None if p is None else self._whole_of(p)
            if kind is None or whole is None or r.lo >= r.hi:
                if r.lo < r.hi:
                    grouped.append(PathRange(r.lo, r.hi, None))
                continue
            sql = (
                f"SELECT COUNT(*) FROM heads h WHERE {self._keys([PathRange(r.lo, r.hi, None)])[0]}"
            )
            sql += f" AND {self.filters}"
            (n,) = self._cursor(sql, [self.store_id, r.lo, r.hi, *self.filter_params]).fetchone()
            if n:
                out[(kind, whole)] = out.get((kind, whole), 0) + int(n)
        if grouped:
            keys, key_params = self._keys(grouped)
            sql = (f"SELECT {self.kind}, {self.whole}, COUNT(*) FROM heads h WHERE {keys} AND "
                   f"{self.filters} GROUP BY 1, 2")  # fmt: skip
            rows = self._cursor(sql, [*self.whole_params, *key_params, *self.filter_params])
            for kind, whole, n in rows.fetchall():
                out[(int(kind), bool(whole))] = out.get((int(kind), bool(whole)), 0) + int(n)
        if exacts:
            keys, key_params = self._keys([PathRange("", "", e) for e in exacts])
            sql = (f"SELECT h.path, {self.kind}, {self.whole} FROM heads h WHERE {keys} AND "
                   f"{self.filters}")  # fmt: skip
            rows = self._cursor(sql, [*self.whole_params, *key_params, *self.filter_params])
            for _path, kind, whole in rows.fetchall():
                out[(int(kind), bool(whole))] = out.get((int(kind), bool(whole)), 0) + 1
        return out

    def _whole_of(self, prefix: str) -> bool | None:
        """Are all paths strictly under ``prefix`` under the whole prefixes (True), none of
        them (False), or some (None)?"""
        whole = self.scope.whole
        if whole is None:
            return True
        if is_under(prefix, RESERVED) or is_under(RESERVED, prefix):
            return None
        if any(is_under(prefix, w) for w in whole):
            return True
        if not any(is_under(w, prefix) for w in whole):
            return False
        return None

    def undecided(self) -> list[str]:
        """Paths in the bound but outside the whole prefixes (the policy decides each)."""
        if self.empty or self.whole_all:
            return []
        keys, key_params = self._keys(self.bound)
        sql = (f"SELECT h.path FROM heads h WHERE {keys} AND {self.filters} AND "
               f"{self.whole} = 0")  # fmt: skip
        rows = self._cursor(sql, [*key_params, *self.filter_params, *self.whole_params])
        return [str(p) for (p,) in rows.fetchall()]

    def expired_files(self) -> list[ExpiredFile]:
        """The expired files in the bound: by the ``expires_at`` index, and the /tasks/ range
        for the task scopes' default lifetime."""
        if self.empty:
            return []
        enc, decode = self.repo.dialect.encode_time, self.repo.dialect.decode_time
        head = (f"SELECT h.path, {self.kind}, {self.whole}, m.expires_at, h.updated_at "
                "FROM file_meta m JOIN heads h ON h.file_id = m.file_id")  # fmt: skip
        sql = f"{head} WHERE m.store_id = ? AND m.expires_at <= ? AND {self.filters}"
        params: list[Any] = [*self.whole_params, self.store_id, enc(self.now),
                             *self.filter_params]  # fmt: skip
        rows = list(self._cursor(sql, params).fetchall())
        if self.days > 0:
            tasks = readable_ranges(_TASKS, self.scope.bound)
            if tasks != []:
                every = [PathRange(*descendant_range(_TASKS), None)]
                keys, key_params = self._keys(tasks if tasks is not None else every)
                cutoff = enc(self.now - dt.timedelta(days=self.days))
                sql = (f"SELECT h.path, {self.kind}, {self.whole}, m.expires_at, h.updated_at "
                       "FROM heads h LEFT JOIN file_meta m ON m.file_id = h.file_id WHERE "
                       f"{keys} AND m.expires_at IS NULL AND (m.no_expiry IS NULL OR NOT "
                       f"m.no_expiry) AND h.updated_at <= ? AND {self.filters}")  # fmt: skip
                rows += self._cursor(sql, [*self.whole_params, *key_params, cutoff,
                                           *self.filter_params]).fetchall()  # fmt: skip
        out = []
        days = dt.timedelta(days=self.days)
        bound = self.bound
        for path, kind, whole, expires, updated in rows:
            if bound is not None and not any(r.holds(path) for r in bound):
                continue
            when = decode(expires) if expires is not None else decode(updated) + days
            out.append(ExpiredFile(str(path), int(kind), bool(whole), _aware(when)))
        return out

    # --- the stream --------------------------------------------------------------------

    def rows(self) -> Iterator[ContextFile]:
        """Core files, skills, then the index part kind by kind, in the assembly's order."""
        if self.empty:
            return
        # core files and skills are found by the file_meta (store_id, core, skill) index;
        # the bound is then a filter on the few rows found, not the driving key range
        keys, key_params = self._keys(self.bound)
        keys = keys.replace("h.store_id = ?", "m.store_id = ?")
        yield from self._stream(f"m.store_id = ? AND m.core = TRUE AND {keys}",
                                [self.store_id, *key_params], content=True)  # fmt: skip
        yield from self._stream(
            f"m.store_id = ? AND m.core = FALSE AND m.skill = TRUE AND {keys} AND "
            "m.name IS NOT NULL AND m.name <> ''", [self.store_id, *key_params]
        )  # fmt: skip
        for kind in range(len(_KIND_RANGES)):
            ranges = self._kind_ranges(kind)
            if ranges == []:
                continue
            keys, key_params = self._keys(ranges)
            yield from self._stream(
                f"{keys} AND {self.kind} = {kind} AND (m.core IS NULL OR NOT m.core) AND NOT "
                "(m.skill IS NOT NULL AND m.skill AND m.name IS NOT NULL AND m.name <> '')",
                key_params,
            )  # fmt: skip

    def _stream(
        self, where: str, params: Sequence[Any], *, content: bool = False
    ) -> Iterator[ContextFile]:
        used = ("CASE WHEN r.read_at IS NULL OR r.read_at < h.updated_at THEN h.updated_at "
                "ELSE r.read_at END")  # fmt: skip
        sql = (
            f"SELECT h.path, h.file_id, h.updated_at, {used} AS used, m.summary, m.name, "
            "m.core, m.skill, m.review_after, m.verify, m.source_kind, "
            f"{'b.content' if content else 'NULL'}, m.expires_at, "
            f"CASE WHEN {self.expired} THEN 1 ELSE 0 END, {self.whole}, "
            f"{self.kind} AS srank, {self.scope_name} AS sname, {self.rank} AS qrank "
            "FROM heads h LEFT JOIN file_meta m ON m.file_id = h.file_id "
            "LEFT JOIN file_reads r ON r.file_id = h.file_id "
            + (
                "LEFT JOIN blobs b ON b.store_id = h.store_id AND b.sha256 = h.sha256 "
                if content
                else ""
            )
            + f"WHERE {where} AND {self.filters}"
        )
        all_params = [*self.expired_params, *self.whole_params, *self.rank_params, *params,
                      *self.filter_params]  # fmt: skip
        if not self.include_expired:
            sql += f" AND NOT {self.expired}"
            all_params += self.expired_params
        sql += " ORDER BY srank, sname, qrank, used DESC, h.path"
        cursor = self._cursor(sql, all_params)
        decode = self.repo.dialect.decode_time
        days = dt.timedelta(days=self.days)
        while True:
            batch = cursor.fetchmany(64)
            if not batch:
                return
            for r in batch:
                updated = _aware(decode(r[2]))
                expired_at = None
                if r[13]:
                    expires = None if r[12] is None else _aware(decode(r[12]))
                    expired_at = expires if expires is not None else updated + days
                yield ContextFile(
                    str(r[0]), int(r[1]), updated, _aware(decode(r[3])), r[4], r[5],
                    bool(r[6]), bool(r[7]), None if r[8] is None else _aware(decode(r[8])),
                    r[9], r[10], r[11], expired_at, bool(r[14]),
                )  # fmt: skip
