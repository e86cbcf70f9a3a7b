"""Queries over ``file_meta`` and ``file_reads`` (context, expiry, the stale report).

Functions over an open :class:`~memdir.storage.repository.Repository` (one transaction). The
writer's upsert is fixed SQL on the driver cursor, like the other statements every write runs;
``ON CONFLICT`` is the same on SQLite (3.24+) and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, NamedTuple

from memdir.core.frontmatter import Described
from memdir.core.paths import descendant_range
from memdir.core.ranges import PathRange, readable_ranges
from memdir.storage.repository import Repository
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


def expired_paths(
    repo: Repository,
    store_id: int,
    now: dt.datetime,
    task_expiry_days: int,
    prefixes: Sequence[str] | None = None,
) -> dict[str, dt.datetime]:
    """Live paths expired at ``now`` (within the readable ``prefixes``), with their moment
    of expiry: their ``expires`` has come, or they lie under /tasks/, say nothing (neither a
    time nor ``never``) and are older than the task scopes' default lifetime. Two queries,
    each following an index (an OR of the two would scan every live file): the
    ``(store_id, expires_at)`` index for a moment that has come, the /tasks/ key range of
    ``heads`` for the task default (which needs ``expires_at`` NULL: the two are disjoint)."""
    ranges = readable_ranges("/", prefixes)
    if ranges == []:
        return {}
    where, values = _ranges_sql(ranges)
    enc = repo.dialect.encode_time
    decode = repo.dialect.decode_time
    out: dict[str, dt.datetime] = {}
    rows = repo.raw(
        "SELECT h.path, m.expires_at FROM file_meta m JOIN heads h ON h.file_id = m.file_id "
        f"WHERE m.store_id = ? AND m.expires_at <= ?{where}",
        (store_id, enc(now), *values),
    ).fetchall()
    for path, expires in rows:
        out[str(path)] = _aware(decode(expires))
    cutoff = _task_cutoff(now, task_expiry_days)
    if cutoff is None:
        return out
    lo, hi = descendant_range(TASKS.rstrip("/"))
    rows = repo.raw(
        "SELECT h.path, h.updated_at FROM heads h LEFT JOIN file_meta m ON m.file_id = h.file_id "
        "WHERE h.store_id = ? AND h.path >= ? AND h.path < ? AND h.updated_at <= ? "
        f"AND m.expires_at IS NULL AND (m.no_expiry IS NULL OR NOT m.no_expiry){where}",
        (store_id, lo, hi, enc(cutoff), *values),
    ).fetchall()
    for path, updated in rows:
        out[str(path)] = _aware(decode(updated) + dt.timedelta(days=task_expiry_days))
    return out


def _ranges_sql(ranges: Sequence[PathRange] | None) -> tuple[str, list[str]]:
    """`` AND (...)`` keeping ``h.path`` in ``ranges`` (nothing for None), and its values."""
    if ranges is None:
        return "", []
    clauses: list[str] = []
    values: list[str] = []
    for r in ranges:
        clauses.append(
            "(h.path >= ? AND h.path < ?)"
            if r.exact is None
            else "(h.path = ? OR (h.path >= ? AND h.path < ?))"
        )
        values += [r.lo, r.hi] if r.exact is None else [r.exact, r.lo, r.hi]
    return " AND (" + " OR ".join(clauses) + ")", values


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
    rows = [(enc(when), file_id, store_id) for (store_id, file_id), when in sorted(reads.items())]
    # one batched statement on the driver cursor: a flush costs one round of the batch, not
    # a Python-level call per file, so the read that triggers it is not the one that pays
    cursor = repo.conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
    cursor.executemany(repo.dialect.sql(RECORD_READ), rows)
    return len(reads)
