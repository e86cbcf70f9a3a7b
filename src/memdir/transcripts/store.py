"""The queries over the ``transcripts`` and ``transcript_events`` tables (one transaction).

Like :class:`memdir.storage.repository.Repository`, which it wraps, it decides nothing: access
and validation are the service's. Event rows are appended with one ``executemany`` on the
driver cursor (fixed SQL, portable placeholders); reads and the filtered list are SQLAlchemy
Core. JSON values (input, usage, labels, meta) are stored as canonical JSON text.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

import sqlalchemy as sa

from memdir.storage.repository import Repository
from memdir.storage.schema import transcript_events, transcripts
from memdir.transcripts.common import dumps
from memdir.transcripts.model import Event, TranscriptInfo

__all__ = [
    "ListFilter",
    "TranscriptRow",
    "TranscriptRows",
    "event_from_row",
    "info_from_row",
]

_EVENT_COLUMNS: Final = (
    "transcript_id", "seq", "key", "kind", "role", "ts", "name", "call_id", "text", "input",
    "is_error", "exit_code", "duration_ms", "usage", "model", "message_id", "raw",
)  # fmt: skip
_INSERT_EVENTS: Final = (
    f"INSERT INTO transcript_events ({', '.join(_EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' for _ in _EVENT_COLUMNS)})"
)


_COLUMNS: Final = (
    "id", "store_id", "format", "session_id", "parent_session", "project", "user", "agent",
    "task", "labels", "outcome", "score", "started_at", "ended_at", "events", "tool_calls",
    "tool_errors", "redactions", "meta", "imported_at", "updated_at", "imported_by",
)  # fmt: skip
_TIMES: Final = frozenset({"started_at", "ended_at", "imported_at", "updated_at"})
# "user" is a reserved word in PostgreSQL: quoted in the fixed SQL.
_SELECT: Final = "SELECT " + ", ".join(f'"{c}"' for c in _COLUMNS) + " FROM transcripts"
_INSERT: Final = (
    "INSERT INTO transcripts (" + ", ".join(f'"{c}"' for c in _COLUMNS) + ") VALUES ("
    + ", ".join("?" for _ in _COLUMNS) + ")"
)  # fmt: skip


class TranscriptRow(NamedTuple):
    id: str
    store_id: int
    format: str
    session_id: str
    parent_session: str | None
    project: str | None
    user: str | None
    agent: str | None
    task: str | None
    labels: str
    outcome: str
    score: float | None
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    events: int
    tool_calls: int
    tool_errors: int
    redactions: int
    meta: str
    imported_at: dt.datetime
    updated_at: dt.datetime
    imported_by: str


def _dumps(value: Any) -> str:
    return dumps(value)


def _aware(value: dt.datetime | None) -> dt.datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=dt.UTC)


class ListFilter:
    """What ``transcripts list`` narrows by (every field optional)."""

    def __init__(
        self,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        agent: str | None = None,
        project: str | None = None,
        user: str | None = None,
        task: str | None = None,
        outcome: str | None = None,
        has_errors: bool | None = None,
        format: str | None = None,
        session_id: str | None = None,
    ) -> None:
        self.since, self.until = since, until
        self.agent, self.project, self.user, self.task = agent, project, user, task
        self.outcome, self.has_errors, self.format = outcome, has_errors, format
        self.session_id = session_id


def readable_clause(names: dict[str, frozenset[str] | None], unlabelled: bool) -> Any:
    """A WHERE clause keeping the transcripts whose every label is among ``names`` for its
    kind (None: any name), plus unlabelled ones when ``unlabelled``. Names with a ``/`` or
    empty are kept for the per-row decision (:func:`memdir.core.ranges.label_names`)."""
    c = transcripts.c
    clauses: list[Any] = []
    for kind, allowed in names.items():
        if allowed is None:
            continue
        column = c[kind]
        clauses.append(sa.or_(column.is_(None), column.in_(sorted(allowed)),
                              column.like("%/%"), column == ""))  # fmt: skip
    if not unlabelled:
        clauses.append(sa.not_(sa.and_(*(c[k].is_(None) for k in names))))
    return sa.and_(*clauses) if clauses else None


class TranscriptRows:
    """Transcript queries inside the transaction of ``repo``."""

    def __init__(self, repo: Repository) -> None:
        self.repo = repo
        self.conn = repo.conn
        self._cursor: Any = None  # the driver cursor of this transaction, once fixed SQL ran

    def _raw(self, sql: str, params: Sequence[Any] = ()) -> Any:
        self._cursor = self.repo.raw(sql, params)
        return self._cursor

    # --- reads ----------------------------------------------------------------------------

    def find(self, store_id: int, format: str, session_id: str) -> TranscriptRow | None:
        """The transcript of (format, session id), by fixed SQL (it runs once per import)."""
        row = self._raw(
            f"{_SELECT} WHERE store_id = ? AND format = ? AND session_id = ?",
            (store_id, format, session_id),
        ).fetchone()
        if row is None:
            return None
        decode = self.repo.dialect.decode_time
        return TranscriptRow(
            *(decode(v) if c in _TIMES else v for c, v in zip(_COLUMNS, row, strict=True))
        )

    def store_open(self, store_id: int) -> bool | None:
        """True if the store exists and is not archived, False if archived, None if gone."""
        row = self._raw("SELECT archived_at FROM stores WHERE id = ?", (store_id,)).fetchone()
        return None if row is None else row[0] is None

    def by_id(self, store_id: int, transcript_id: str) -> Any:
        return self.conn.execute(
            sa.select(transcripts).where(
                transcripts.c.store_id == store_id, transcripts.c.id == transcript_id
            )
        ).first()

    def by_prefix(self, store_id: int, prefix: str, limit: int = 2) -> Sequence[Any]:
        return self.conn.execute(
            sa.select(transcripts)
            .where(transcripts.c.store_id == store_id, transcripts.c.id.startswith(prefix))
            .limit(limit)
        ).all()

    def children(self, store_id: int, format: str, session_id: str) -> Sequence[Any]:
        return self.conn.execute(
            sa.select(transcripts)
            .where(
                transcripts.c.store_id == store_id,
                transcripts.c.format == format,
                transcripts.c.parent_session == session_id,
            )
            .order_by(transcripts.c.session_id)
        ).all()

    def event_keys(self, transcript_id: str) -> set[str]:
        rows = self._raw(
            "SELECT key FROM transcript_events WHERE transcript_id = ?", (transcript_id,)
        ).fetchall()
        return {str(r[0]) for r in rows}

    def events(self, transcript_id: str) -> Iterator[Any]:
        """The events in order (streamed)."""
        yield from self.conn.execute(
            sa.select(transcript_events)
            .where(transcript_events.c.transcript_id == transcript_id)
            .order_by(transcript_events.c.seq)
        )

    def page(
        self,
        store_id: int,
        where: ListFilter,
        after: tuple[dt.datetime | None, str] | None,
        limit: int,
        readable: Any = None,
    ) -> Sequence[Any]:
        """Transcripts newest first by ``started_at`` (undated last), then id, after ``after``
        (the (started_at, id) of the last row of the previous page); ``readable``: a WHERE
        clause narrowing to the rows the caller may read (:func:`readable_clause`)."""
        c = transcripts.c
        query = sa.select(transcripts).where(c.store_id == store_id)
        if readable is not None:
            query = query.where(readable)
        for column, value in (
            (c.agent, where.agent), (c.project, where.project), (c.user, where.user),
            (c.task, where.task), (c.outcome, where.outcome), (c.format, where.format),
            (c.session_id, where.session_id),
        ):  # fmt: skip
            if value is not None:
                query = query.where(column == value)
        if where.since is not None:
            query = query.where(sa.func.coalesce(c.ended_at, c.started_at) >= where.since)
        if where.until is not None:
            query = query.where(c.started_at < where.until)
        if where.has_errors is not None:
            query = query.where(c.tool_errors > 0 if where.has_errors else c.tool_errors == 0)
        if after is not None:
            started, last_id = after
            if started is None:
                query = query.where(c.started_at.is_(None), c.id > last_id)
            else:
                query = query.where(
                    sa.or_(
                        c.started_at < started,
                        sa.and_(c.started_at == started, c.id > last_id),
                        c.started_at.is_(None),
                    )
                )
        query = query.order_by(c.started_at.is_(None), c.started_at.desc(), c.id).limit(limit)
        return self.conn.execute(query).all()

    # --- writes ---------------------------------------------------------------------------

    def insert(self, values: dict[str, Any]) -> None:
        """A new transcript row (``values`` has every column)."""
        encode = self.repo.dialect.encode_time
        self._raw(_INSERT, tuple(encode(values[c]) if c in _TIMES else values[c] for c in _COLUMNS))

    def update(self, transcript_id: str, values: dict[str, Any]) -> None:
        self.conn.execute(
            sa.update(transcripts).where(transcripts.c.id == transcript_id).values(**values)
        )

    def append_events(self, transcript_id: str, first_seq: int, events: Sequence[Event]) -> None:
        """Insert ``events`` with seq ``first_seq``, ``first_seq + 1``, ... in one round trip."""
        if not events:
            return
        encode = self.repo.dialect.encode_time
        rows = [
            (
                transcript_id, first_seq + i, e.key, e.kind, e.role, encode(e.ts), e.name,
                e.call_id, e.output if e.kind == "tool_result" else e.text,
                None if e.input is None else _dumps(e.input), e.is_error, e.exit_code,
                e.duration_ms, None if e.usage is None else _dumps(e.usage), e.model,
                e.message_id, e.raw,
            )
            for i, e in enumerate(events)
        ]  # fmt: skip
        cursor = self._cursor
        if cursor is None:  # no fixed SQL ran yet: one statement gets the driver cursor
            cursor = self._raw("SELECT 1")
            cursor.fetchall()
        cursor.executemany(self.repo.dialect.sql(_INSERT_EVENTS), rows)

    def delete(self, transcript_id: str) -> None:
        self.conn.execute(
            sa.delete(transcript_events).where(transcript_events.c.transcript_id == transcript_id)
        )
        self.conn.execute(sa.delete(transcripts).where(transcripts.c.id == transcript_id))


def info_from_row(row: Any) -> TranscriptInfo:
    return TranscriptInfo(
        id=row.id,
        format=row.format,
        session_id=row.session_id,
        parent_session=row.parent_session,
        project=row.project,
        user=row.user,
        agent=row.agent,
        task=row.task,
        labels=tuple(json.loads(row.labels)),
        outcome=row.outcome,
        score=row.score,
        started_at=_aware(row.started_at),
        ended_at=_aware(row.ended_at),
        events=row.events,
        tool_calls=row.tool_calls,
        tool_errors=row.tool_errors,
        redactions=row.redactions,
        imported_at=_aware(row.imported_at) or row.imported_at,
        updated_at=_aware(row.updated_at) or row.updated_at,
        imported_by=row.imported_by,
    )


def event_from_row(row: Any) -> Event:
    """An event from a row of ``transcript_events`` with every column in table order (the
    rows of ``select(transcript_events)``; ``raw`` may be selected as NULL).

    Unpacked by position: reading sixteen attributes of a SQLAlchemy row by name costs more
    than the query (the dream reads every event of every session it mines).
    """
    (_, _, key, kind, role, ts, name, call_id, text, input_, is_error, exit_code, duration_ms,
     usage, model, message_id, raw) = row  # fmt: skip
    result = kind == "tool_result"
    return Event(
        kind=kind,
        key=key,
        role=role,
        text=None if result else text,
        ts=ts if ts is None or ts.tzinfo is not None else ts.replace(tzinfo=dt.UTC),
        name=name,
        call_id=call_id,
        input=None if input_ is None else json.loads(input_),
        output=text if result else None,
        is_error=None if is_error is None else bool(is_error),
        exit_code=exit_code,
        duration_ms=duration_ms,
        usage=None if usage is None else json.loads(usage),
        model=model,
        message_id=message_id,
        raw=raw,
    )
