"""The review queue at fleet scale: filtered, sorted, keyset-paged listings of proposals, each
with a title in words and its impact, and the changes an accepted proposal applied.

:meth:`ReviewQueueMixin.proposal_queue` is what the web queue and ``memdir proposals list``
page through. Invariants and reasons:

- **Keyset paging in SQL.** Rows are read in the order asked for — impact (sessions affected,
  then id), time (created, then id) or scope (first path, then id) — strictly after the
  cursor's key, in batches, until a page of *visible* proposals is found. A page costs the
  rows up to it, never a full listing sliced: 10,000 proposals page like 100.
- **Visibility is the one rule** (:func:`memdir.proposals.visible`), applied to each row
  before it counts towards a page; filters never reveal what the viewer may not see (a
  filter by run or miner only narrows the rows already visible).
- **Statistics are untrusted JSON**: an agent may attach anything. Impact keys are read in
  SQL only when they are JSON numbers (anything else counts as 0), so a malformed value can
  neither fail the query nor reorder the queue by text.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import sqlalchemy as sa

from memdir.access import Access
from memdir.core.errors import InvalidInput, NotFound
from memdir.core.limits import check_int
from memdir.core.model import Principal
from memdir.core.ranges import readable_ranges
from memdir.dreams import DreamRun, DreamsMixin, _recorded_scopes, _run_view, _store_scopes
from memdir.proposals import ORIGINS, STATUSES, Proposal, _proposal, sources_readable, visible
from memdir.storage.repository import Repository, in_ranges
from memdir.storage.schema import impact_sql, proposals, versions

__all__ = [
    "SORTS",
    "AppliedChange",
    "ProposalPage",
    "QueueFilter",
    "ReviewQueueMixin",
    "cursor_after",
    "impact_of",
    "proposal_title",
]

#: The orders the queue can be read in; ``impact`` is the default.
SORTS: Final = ("impact", "time", "scope")

#: The most a title's headline runs to, in characters (cut at a word).
TITLE_CHARS: Final = 110


@dataclass(frozen=True)
class QueueFilter:
    """What narrows the queue (None: any). ``scope`` is a path prefix one of the proposal's
    paths must start with; ``miner`` the dream miner its statistics name."""

    status: str | None = "open"
    origin: str | None = None
    miner: str | None = None
    run: str | None = None
    scope: str | None = None
    author: str | None = None

    def check(self) -> None:
        if self.status is not None and self.status not in STATUSES:
            raise InvalidInput(
                f"unknown status {self.status[:40]!r}; use all, {', '.join(STATUSES)}"
            )
        if self.origin is not None and self.origin not in ORIGINS:
            raise InvalidInput(f"unknown origin {self.origin[:40]!r}; use {', '.join(ORIGINS)}")
        if self.scope is not None and not self.scope.startswith("/"):
            raise InvalidInput(f"a scope is a path prefix starting with '/', received "
                               f"{self.scope[:80]!r}")  # fmt: skip


@dataclass(frozen=True)
class ProposalPage:
    """One page of the queue; ``next_cursor`` (None on the last page) reads the next."""

    items: list[Proposal]
    next_cursor: str | None


@dataclass(frozen=True)
class AppliedChange:
    """What an accepted proposal's commit did to one path: the text before (None: the file did
    not exist) and after (None: deleted), or ``redacted`` when a version was redacted since."""

    path: str
    operation: str
    version: int
    before: str | None
    after: str | None
    redacted: bool = False


# --- titles and impact ----------------------------------------------------------------------


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def impact_of(statistics: Any) -> dict[str, float]:
    """The impact figures a statistics value carries: ``sessions`` (affected),
    ``sessions_selected``, ``prevalence`` and ``lift`` (the outcome lift, under ``lift`` or
    ``outcome_lift``), each only when it is a number."""
    if not isinstance(statistics, Mapping):
        return {}
    out: dict[str, float] = {}
    for key, names in (
        ("sessions", ("sessions",)), ("sessions_selected", ("sessions_selected",)),
        ("prevalence", ("prevalence",)), ("lift", ("lift", "outcome_lift")),
    ):  # fmt: skip
        for name in names:
            number = _number(statistics.get(name))
            if number is None and isinstance(statistics.get(name), Mapping):
                number = _number(statistics[name].get("value"))
            if number is not None:
                out[key] = number
                break
    return out


def _headline(text: str) -> str:
    """A text's first heading (or first sentence), on one line, cut at a word."""
    lines = [line.strip() for line in text.splitlines()]
    in_front = bool(lines) and lines[0] == "---"
    chosen = ""
    for index, line in enumerate(lines):
        if in_front:
            if index > 0 and line == "---":
                in_front = False
            continue
        if line.startswith("#"):
            chosen = line.lstrip("#").strip()
            break
        if line and not chosen:
            chosen = line
    chosen = " ".join(chosen.split())
    if "." in chosen[:TITLE_CHARS] and not chosen.startswith("#"):
        first = chosen.split(". ", 1)[0]
        chosen = first if len(first) >= 12 else chosen
    if len(chosen) > TITLE_CHARS:
        chosen = chosen[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"
    return chosen


def _verb(op: Mapping[str, Any]) -> str:
    kind = op.get("op")
    if kind == "write":
        return "Add" if op.get("base_sha256") is None and op.get("if_absent") else "Rewrite"
    return {"str_replace": "Edit", "insert": "Extend", "delete": "Delete",
            "rename": "Rename"}.get(str(kind), "Change")  # fmt: skip


def proposal_title(proposal: Proposal) -> str:
    """What the proposal would change, in words: its first operation's verb and path, and a
    headline — the heading of the text it writes, else its rationale's first sentence."""
    ops = [op for op in proposal.operations if isinstance(op, Mapping)]
    if not ops:
        return _headline(proposal.rationale or "") or "(no operations)"
    first = ops[0]
    where = str(first.get("path", "?"))
    if first.get("op") == "rename":
        where += f" to {first.get('new_path')}"
    action = f"{_verb(first)} {where}"
    if len(ops) > 1:
        others = {str(op.get("path")) for op in ops[1:]} - {str(first.get("path"))}
        action += f" (+{len(ops) - 1} more operation{'s' if len(ops) > 2 else ''}" + (
            f" on {len(others)} other path{'s' if len(others) > 1 else ''})" if others else ")"
        )
    text = ""
    if first.get("op") == "write":
        text = _headline(str(first.get("content") or ""))
    elif first.get("op") in ("str_replace", "insert"):
        text = _headline(str(first.get("new") or first.get("text") or ""))
    text = text or _headline(proposal.rationale or "")
    return f"{action}: {text}" if text else action


# --- SQL keys -------------------------------------------------------------------------------


def _json_text(dialect: str, column: Any, key: str | int) -> Any:
    if dialect == "postgresql":
        return column.op("->>")(key)
    return sa.func.json_extract(column, f"$[{key}]" if isinstance(key, int) else f"$.{key}")


def _sort_key(dialect: str, sort: str) -> tuple[Any, bool]:
    """(the SQL expression a sort orders by, whether it descends)."""
    c = proposals.c
    if sort == "impact":
        return sa.literal_column(impact_sql(dialect), sa.Float), True
    if sort == "time":
        return c.created_at, True
    return sa.func.coalesce(_json_text(dialect, c.paths, 0), ""), False


def _encode(sort: str, key: Any, pid: str) -> str:
    value = key.isoformat() if isinstance(key, dt.datetime) else key
    raw = json.dumps([sort, value, pid], separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def _decode(sort: str, cursor: str) -> tuple[Any, str]:
    bad = InvalidInput(
        f"invalid cursor {cursor[:80]!r} for sort {sort}: pass back a next_cursor as given, "
        "with the same sort"
    )
    try:
        data = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:
        raise bad from None
    if not (isinstance(data, list) and len(data) == 3 and data[0] == sort):
        raise bad
    key, pid = data[1], data[2]
    if not isinstance(pid, str):
        raise bad
    if sort == "time":
        try:
            key = dt.datetime.fromisoformat(str(key))
        except ValueError:
            raise bad from None
    elif (sort == "impact" and (isinstance(key, bool) or not isinstance(key, int | float))) or (
        sort == "scope" and not isinstance(key, str)
    ):
        raise bad
    return key, pid


def cursor_after(proposal: Proposal, sort: str) -> str:
    """The cursor of a queue in ``sort`` order that reads on from just after ``proposal``
    (its key as the SQL computes it: a non-number ``sessions`` counts as 0)."""
    if sort == "impact":
        stats = proposal.statistics if isinstance(proposal.statistics, Mapping) else {}
        key: Any = _number(stats.get("sessions")) or 0.0
    elif sort == "time":
        key = proposal.created_at
    else:
        key = proposal.paths[0] if proposal.paths else ""
    return _encode(sort, key, proposal.id)


class ReviewQueueMixin(DreamsMixin):
    """The queue as reviewers page through it, and what an accepted proposal applied."""

    def proposal_queue(
        self,
        principal: Principal,
        store: str,
        where: QueueFilter | None = None,
        *,
        sort: str = "impact",
        limit: int = 50,
        cursor: str | None = None,
    ) -> ProposalPage:
        """Proposals the caller may see, filtered by ``where``, in ``sort`` order, ``limit``
        a page (listing summaries, as :meth:`list_proposals` returns them)."""
        where = where or QueueFilter()
        where.check()
        check_int("limit", limit, minimum=1, maximum=1000)
        if sort not in SORTS:
            raise InvalidInput(f"unknown sort {sort[:40]!r}; use {', '.join(SORTS)}")
        after = _decode(sort, cursor) if cursor else None
        items: list[Proposal] = []
        keys: list[Any] = []
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            access = self._access(repo, srow.id, principal)
            dialect = repo.conn.dialect.name
            key, descending = _sort_key(dialect, sort)
            query = self._queue_query(srow.id, where, dialect).add_columns(key.label("sort_key"))
            narrowing = _first_path_readable(dialect, access)
            if narrowing is not None:
                query = query.where(narrowing)
            order = (key.desc(), proposals.c.id.desc()) if descending else (key, proposals.c.id)
            window = limit + 1  # grows when hidden rows leave a batch short
            while len(items) <= limit:
                page_query = query
                if after is not None:
                    page_query = page_query.where(_beyond(key, after, descending))
                batch = repo.conn.execute(page_query.order_by(*order).limit(window)).all()
                for found in batch:
                    after = (found.sort_key, found.id)
                    if not visible(found, access) or not _in_scope(found.paths, where.scope):
                        continue
                    items.append(_proposal(found, srow.name, access, repo, summary=True))
                    keys.append(found.sort_key)
                    if len(items) > limit:
                        break
                if len(batch) < window:
                    break
                window = min(window * 4, 4000)
        more = len(items) > limit
        items, keys = items[:limit], keys[:limit]
        next_cursor = _encode(sort, keys[-1], items[-1].id) if more and items else None
        return ProposalPage(items, next_cursor)

    @staticmethod
    def _queue_query(store_id: int, where: QueueFilter, dialect: str) -> sa.Select[Any]:
        c = proposals.c
        query = sa.select(proposals).where(c.store_id == store_id)
        for column, value in ((c.status, where.status), (c.origin, where.origin),
                              (c.run_id, where.run), (c.author, where.author)):  # fmt: skip
            if value is not None:
                query = query.where(column == value)
        if where.miner is not None:
            query = query.where(_json_text(dialect, c.statistics, "miner") == where.miner)
        return query

    def dream_runs_of(
        self, principal: Principal, store: str, run_ids: Sequence[str]
    ) -> dict[str, DreamRun]:
        """The runs among ``run_ids`` the caller may see (``get_dream_run``'s rule), read in
        one snapshot: a queue page shows the summary of each run it groups by."""
        out: dict[str, DreamRun] = {}
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            access = self._access(repo, srow.id, principal)
            store_scopes: list[dict[str, str]] | None = None  # read once per page, if needed
            decided: dict[int, bool] = {}
            for run_id in dict.fromkeys(run_ids):
                try:
                    row = self._run_row(repo, srow.id, principal, run_id)
                except NotFound:
                    continue
                scopes = _recorded_scopes(row)  # as get_dream_run decides what is withheld
                if scopes is None:
                    if store_scopes is None:
                        store_scopes = _store_scopes(repo, srow.id)
                    scopes = store_scopes
                # runs falling back to the store's labels share one list: decide it once
                key = id(scopes) if scopes is store_scopes else None
                readable = decided.get(key) if key is not None else None
                if readable is None:
                    readable = sources_readable(access, scopes)
                    if key is not None:
                        decided[key] = readable
                out[run_id] = _run_view(row, srow.name, () if readable else scopes, access)
        return out

    def applied_changes(
        self, principal: Principal, store: str, proposal_id: str
    ) -> list[AppliedChange]:
        """For an accepted proposal, what its commit changed on each path the caller may read
        (the version before and the version it made); empty for any other proposal."""
        with self.db.read() as repo:
            srow = self._store_row(repo, store)
            access = self._access(repo, srow.id, principal)
            prop = self._proposal_row(repo, srow.id, access, proposal_id)
            if prop.status != "accepted" or not prop.commit_id:
                return []
            out = []
            for v in repo.commit_versions([prop.commit_id]):
                if not access.can_read(v.path):
                    continue
                out.append(_applied(repo, srow.id, v))
            return out


def _first_path_readable(dialect: str, access: Access) -> Any:
    """A necessary condition of :func:`memdir.proposals.visible`, decided once per request in
    SQL (None: none needed): a proposal the caller did not author is visible only if it may
    read every path, so its first path lies in the caller's read bound. The rule itself still
    decides every row that passes; this only spares it the rows that cannot."""
    ranges = readable_ranges("/", access.read_prefixes())
    if ranges is None:
        return None
    first = _json_text(dialect, proposals.c.paths, 0)
    if dialect == "postgresql":
        first = first.collate("C")  # the bound's key ranges are in binary order
    clauses = [first.is_(None), proposals.c.author == access.principal.id]
    if ranges:
        clauses.append(in_ranges(first, ranges))
    return sa.or_(*clauses)


def _beyond(key: Any, after: tuple[Any, str], descending: bool) -> Any:
    """Rows strictly after ``after`` (its sort key and id) in the queue's order: one row-value
    comparison, which both databases answer as a range of the (key, id) index."""
    value, pid = after
    pair, bound = sa.tuple_(key, proposals.c.id), sa.tuple_(sa.literal(value), sa.literal(pid))
    return pair < bound if descending else pair > bound


def _in_scope(paths: Sequence[str], scope: str | None) -> bool:
    return scope is None or any(str(p).startswith(scope) for p in paths or ())


def _applied(repo: Repository, store_id: int, v: Any) -> AppliedChange:
    previous = repo.conn.execute(
        sa.select(versions.c.sha256, versions.c.redacted_at).where(
            versions.c.file_id == v.file_id, versions.c.number == v.number - 1
        )
    ).first()
    redacted = v.redacted_at is not None or (previous is not None and
                                             previous.redacted_at is not None)  # fmt: skip
    before = None
    if previous is not None and previous.sha256:
        before = repo.blob(store_id, previous.sha256)
    after = repo.blob(store_id, v.sha256) if v.sha256 else None
    return AppliedChange(v.path, v.operation, v.number, before, after, redacted)
