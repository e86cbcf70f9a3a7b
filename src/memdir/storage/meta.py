"""Queries over ``file_meta`` and ``file_reads`` (context, expiry, the stale report).

Functions over an open :class:`~memdir.storage.repository.Repository` (one transaction). The
writer's upsert is fixed SQL on the driver cursor, like the other statements every write runs;
``ON CONFLICT`` is the same on SQLite (3.24+) and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa

from memdir.core.frontmatter import Described
from memdir.core.paths import descendant_range
from memdir.core.ranges import readable_ranges
from memdir.storage.repository import Repository, in_ranges
from memdir.storage.schema import file_meta, heads
from memdir.storage.statements import RECORD_READ

__all__ = [
    "TASKS",
    "ContextRow",
    "context_rows",
    "delete_meta",
    "expired_paths",
    "put_meta",
    "record_reads",
]

#: The task scopes' root, whose files expire by default (``task_expiry_days``).
TASKS = "/tasks/"

_PUT = (
    "INSERT INTO file_meta (file_id, store_id, summary, name, core, skill, expires_at, "
    "no_expiry, review_after, verify, actor, source_kind) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (file_id) DO UPDATE SET "
    "store_id = excluded.store_id, summary = excluded.summary, name = excluded.name, "
    "core = excluded.core, skill = excluded.skill, expires_at = excluded.expires_at, "
    "no_expiry = excluded.no_expiry, review_after = excluded.review_after, "
    "verify = excluded.verify, actor = excluded.actor, source_kind = excluded.source_kind"
)


def put_meta(
    repo: Repository,
    store_id: int,
    file_id: int,
    described: Described,
    actor: str,
    source_kind: str | None,
) -> None:
    """Record what a file's new current version says (one statement, in the commit)."""
    enc = repo.dialect.encode_time
    d = described
    repo.raw(
        _PUT,
        (file_id, store_id, d.summary, d.name, d.core, d.skill, enc(d.expires_at),
         d.no_expiry, enc(d.review_after), d.verify, actor, source_kind),
    )  # fmt: skip


def delete_meta(repo: Repository, file_id: int) -> None:
    repo.raw("DELETE FROM file_meta WHERE file_id = ?", (file_id,))


def _task_cutoff(now: dt.datetime, task_expiry_days: int) -> dt.datetime | None:
    return None if task_expiry_days <= 0 else now - dt.timedelta(days=task_expiry_days)


def _expired_clause(now: dt.datetime, task_expiry_days: int) -> Any:
    """Rows of heads ⟕ file_meta that are expired at ``now``: their ``expires_at`` has come,
    or they lie under /tasks/, say nothing (neither a time nor ``never``) and are older than
    the task scopes' default lifetime."""
    clause = file_meta.c.expires_at <= now
    cutoff = _task_cutoff(now, task_expiry_days)
    if cutoff is not None:
        lo, hi = descendant_range(TASKS.rstrip("/"))
        task_default = sa.and_(
            heads.c.path >= lo,
            heads.c.path < hi,
            sa.func.coalesce(file_meta.c.no_expiry, False).is_(False),
            file_meta.c.expires_at.is_(None),
            heads.c.updated_at <= cutoff,
        )
        clause = sa.or_(clause, task_default)
    return clause


def _joined() -> Any:
    return heads.outerjoin(file_meta, file_meta.c.file_id == heads.c.file_id)


def expired_paths(
    repo: Repository,
    store_id: int,
    now: dt.datetime,
    task_expiry_days: int,
    prefixes: Sequence[str] | None = None,
) -> dict[str, dt.datetime]:
    """Live paths expired at ``now`` (within the readable ``prefixes``), with their moment
    of expiry. Served by the ``(store_id, expires_at)`` index and the /tasks/ key range."""
    ranges = readable_ranges("/", prefixes)
    if ranges == []:
        return {}
    query = (
        sa.select(heads.c.path, file_meta.c.expires_at, heads.c.updated_at)
        .select_from(_joined())
        .where(heads.c.store_id == store_id, _expired_clause(now, task_expiry_days))
    )
    if ranges is not None:
        query = query.where(in_ranges(heads.c.path, ranges))
    decode = repo.dialect.decode_time
    out: dict[str, dt.datetime] = {}
    for path, expires, updated in repo.conn.execute(query):
        when = decode(expires) if expires is not None else None
        if when is None:
            when = decode(updated) + dt.timedelta(days=task_expiry_days)
        out[str(path)] = _aware(when)
    return out


def _aware(value: dt.datetime) -> dt.datetime:
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


_CONTEXT_SQL = (
    "SELECT h.path, h.file_id, h.sha256, h.updated_at, m.summary, m.name, m.core, m.skill, "
    "m.expires_at, m.no_expiry, m.review_after, m.verify, m.actor, m.source_kind, r.read_at "
    "FROM heads h LEFT JOIN file_meta m ON m.file_id = h.file_id "
    "LEFT JOIN file_reads r ON r.file_id = h.file_id WHERE h.store_id = ?"
)


class ContextRow(NamedTuple):
    """One live file for context and the stale report (times decoded, aware UTC)."""

    path: str
    file_id: int
    sha256: str
    updated_at: dt.datetime
    summary: str | None
    name: str | None
    core: bool
    skill: bool
    expires_at: dt.datetime | None
    no_expiry: bool
    review_after: dt.datetime | None
    verify: str | None
    actor: str | None
    source_kind: str | None
    read_at: dt.datetime | None


def context_rows(
    repo: Repository, store_id: int, prefixes: Sequence[str] | None
) -> list[ContextRow]:
    """Every live file in the readable ``prefixes`` with its metadata and last read, in path
    order; no content. Fixed SQL on the driver cursor: this is the one query context runs
    over every readable file, and Core row processing would cost more than the query."""
    ranges = readable_ranges("/", prefixes)
    if ranges == []:
        return []
    sql, params = _CONTEXT_SQL, list[Any]([store_id])
    if ranges is not None:
        clauses = []
        for r in ranges:
            clauses.append("(h.path >= ? AND h.path < ?)")
            params += [r.lo, r.hi]
            if r.exact is not None:
                clauses.append("h.path = ?")
                params.append(r.exact)
        sql += " AND (" + " OR ".join(clauses) + ")"
    rows = repo.raw(sql + " ORDER BY h.path", params).fetchall()
    decode = repo.dialect.decode_time

    def when(value: Any) -> dt.datetime | None:
        return None if value is None else _aware(decode(value))

    return [
        ContextRow(r[0], r[1], r[2], _aware(decode(r[3])), r[4], r[5], bool(r[6]), bool(r[7]),
                   when(r[8]), bool(r[9]), when(r[10]), r[11], r[12], r[13], when(r[14]))
        for r in rows
    ]  # fmt: skip


def record_reads(repo: Repository, reads: dict[tuple[int, int], dt.datetime]) -> int:
    """Upsert ``(store_id, file_id) → read time`` (keeping the later time); files deleted
    since are skipped. Returns the rows written."""
    if not reads:
        return 0
    enc = repo.dialect.encode_time
    for (store_id, file_id), when in sorted(reads.items()):
        repo.raw(RECORD_READ, (enc(when), file_id, store_id))
    return len(reads)
