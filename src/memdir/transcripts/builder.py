"""Assembling one transcript from events, the same way for every importer.

:class:`TranscriptBuilder` keeps event keys unique (a repeated key gets ``#2``, ``#3``, ... in
order, so re-reading the same input gives the same keys), links each tool result to its call
(the latest call with its id — sources do reuse ids —, for the call's tool name and, when the
source gives none, the duration from the two timestamps) and
derives the session's start and end from event times when the source does not say.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from memdir.transcripts.model import Event, Outcome, Transcript, bounded_key

__all__ = ["TranscriptBuilder", "outcome_from_score"]


def outcome_from_score(score: float | None) -> Outcome:
    """``success`` for a score of 1 or more, ``failure`` below, ``unknown`` without one."""
    if score is None:
        return "unknown"
    return "success" if score >= 1.0 else "failure"


class TranscriptBuilder:
    """Collects one session's events; :meth:`build` returns the :class:`Transcript`."""

    def __init__(self, format: str, session_id: str, *, origin: str = "", line: int | None = None):
        self.transcript = Transcript(format=format, session_id=session_id, origin=origin, line=line)
        self._keys: dict[str, int] = {}
        self._calls: dict[str, Event] = {}

    @property
    def events(self) -> list[Event]:
        return self.transcript.events

    def add(self, event: Event, key: str) -> Event:
        """Append ``event`` under ``key`` (made unique within this transcript)."""
        key = bounded_key(key)
        seen = self._keys.get(key)
        if seen is None:
            self._keys[key] = 1
        else:
            self._keys[key] = seen + 1
            key = bounded_key(f"{key}#{seen + 1}")
        event.key = key
        if event.kind == "tool_call" and event.call_id:
            self._calls[event.call_id] = event  # ids get reused (τ-bench): the latest call
        elif event.kind == "tool_result" and event.call_id:
            call = self._calls.get(event.call_id)
            if call is not None:
                if event.name is None:
                    event.name = call.name
                if event.duration_ms is None and event.ts and call.ts and event.ts >= call.ts:
                    event.duration_ms = (event.ts - call.ts).total_seconds() * 1000.0
        self.transcript.events.append(event)
        return event

    def call(self, call_id: str | None) -> Event | None:
        """The tool call with this id, if one was added."""
        return None if call_id is None else self._calls.get(call_id)

    def set_meta(self, key: str, value: Any) -> None:
        """Set a metadata field once (the first value seen wins)."""
        if value is not None and key not in self.transcript.meta:
            self.transcript.meta[key] = value

    def build(self) -> Transcript:
        transcript = self.transcript
        times = [e.ts for e in transcript.events if e.ts is not None]
        if times:
            first, last = min(times), max(times)
            transcript.started_at = _earlier(transcript.started_at, first)
            transcript.ended_at = _later(transcript.ended_at, last)
        return transcript


def _earlier(a: dt.datetime | None, b: dt.datetime) -> dt.datetime:
    return b if a is None or b < a else a


def _later(a: dt.datetime | None, b: dt.datetime) -> dt.datetime:
    return b if a is None or b > a else a
