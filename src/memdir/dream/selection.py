"""Which transcripts a dream run reads, and the queries that stream them.

A selection is the run's filters (time window on the sessions, agent, project, outcome, a
limit) plus an *arrival window* on ``transcripts.updated_at``: at most the run's start (so
transcripts imported while the run goes do not join it, and a resumed run sees the same set),
and, for ``--since-last``, after the previous finished run of the same principal started (what
arrived or grew since). Transcripts are visited in id order, so a checkpoint is just the last id
done. Access is the service's: these queries return candidates; the run skips the ones its
principal may not read, before counting them.

Events are loaded for a page of transcripts in one query, without the ``raw`` source records
(mining does not need them), so reading stays cheap and memory per page bounded.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from memdir.core.errors import InvalidInput
from memdir.storage.repository import Repository
from memdir.storage.schema import transcript_events, transcripts
from memdir.transcripts.model import OUTCOMES, Event
from memdir.transcripts.store import event_from_row

__all__ = ["Selection", "load_events", "select_page"]

_EVENT_COLUMNS = [c for c in transcript_events.c if c.name != "raw"]


def _iso(value: dt.datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _time(value: Any) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


@dataclass(frozen=True)
class Selection:
    """The filters of a run (all optional) and its arrival window (set by the run)."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    agent: str | None = None
    project: str | None = None
    outcome: str | None = None
    limit: int | None = None
    arrived_after: dt.datetime | None = None
    arrived_until: dt.datetime | None = None

    def __post_init__(self) -> None:
        if self.outcome is not None and self.outcome not in OUTCOMES:
            raise InvalidInput(
                f"outcome must be one of {', '.join(OUTCOMES)}, received {self.outcome!r}"
            )
        if self.limit is not None and self.limit < 1:
            raise InvalidInput(f"limit must be at least 1, received {self.limit}")
        if self.since and self.until and self.since >= self.until:
            raise InvalidInput(
                f"--since {self.since.isoformat()} is not before --until {self.until.isoformat()}"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "since": _iso(self.since),
            "until": _iso(self.until),
            "agent": self.agent,
            "project": self.project,
            "outcome": self.outcome,
            "limit": self.limit,
            "arrived_after": _iso(self.arrived_after),
            "arrived_until": _iso(self.arrived_until),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Selection:
        return cls(
            since=_time(data.get("since")),
            until=_time(data.get("until")),
            agent=data.get("agent"),
            project=data.get("project"),
            outcome=data.get("outcome"),
            limit=data.get("limit"),
            arrived_after=_time(data.get("arrived_after")),
            arrived_until=_time(data.get("arrived_until")),
        )


def select_page(
    repo: Repository, store_id: int, selection: Selection, after_id: str | None, size: int
) -> Sequence[Any]:
    """The next ``size`` candidate transcript rows (header only) after ``after_id``, by id."""
    c = transcripts.c
    query = sa.select(transcripts).where(c.store_id == store_id)
    for column, value in (
        (c.agent, selection.agent),
        (c.project, selection.project),
        (c.outcome, selection.outcome),
    ):
        if value is not None:
            query = query.where(column == value)
    if selection.since is not None:
        query = query.where(sa.func.coalesce(c.ended_at, c.started_at) >= selection.since)
    if selection.until is not None:
        query = query.where(c.started_at < selection.until)
    if selection.arrived_after is not None:
        query = query.where(c.updated_at > selection.arrived_after)
    if selection.arrived_until is not None:
        query = query.where(c.updated_at <= selection.arrived_until)
    if after_id is not None:
        query = query.where(c.id > after_id)
    return repo.conn.execute(query.order_by(c.id).limit(size)).all()


def load_events(repo: Repository, transcript_ids: Sequence[str]) -> dict[str, list[Event]]:
    """The events of these transcripts, in order, in one query (``raw`` left out)."""
    out: dict[str, list[Event]] = {tid: [] for tid in transcript_ids}
    if not transcript_ids:
        return out
    e = transcript_events.c
    query = (
        sa.select(*_EVENT_COLUMNS, sa.null().label("raw"))
        .where(e.transcript_id.in_(list(transcript_ids)))
        .order_by(e.transcript_id, e.seq)
    )
    for row in repo.conn.execute(query):
        out[row[0]].append(event_from_row(row))
    return out
