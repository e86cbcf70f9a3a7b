"""The normalised transcript: one agent session as ordered events, whatever format it came in.

Pure data, no I/O. Every importer produces :class:`Transcript` values; storage, the CLI, the
generic export and (later) dreaming consume them.

A transcript is identified in a store by ``(format, session_id)``: importing the same session
again is a no-op, and a grown session gains only the events whose ``key`` it does not hold
yet. ``key`` is an event's stable identity within its transcript, derived by the importer from
the source (a line's ``uuid`` and block index, a message's position, a call id), never from
import order, so re-reading a file yields the same keys.

Events (``kind``):

=============  ===========================================================================
``message``    ``role`` user / assistant / system, ``text``
``tool_call``  ``name``, ``call_id``, ``input`` (a JSON value: the parsed arguments)
``tool_result`` ``call_id`` (linked to its call), ``name`` (the call's), ``output``,
               ``is_error``, ``exit_code`` and ``duration_ms`` where known
``thinking``   ``text`` (model reasoning, or its summary)
``usage``      ``usage``: token counts (``input_tokens``, ``output_tokens``, cache counts)
=============  ===========================================================================

Every event may carry ``ts`` (aware UTC datetime), ``model`` and ``message_id`` (the source's
id of the model message it belongs to), and ``raw``: the source record it came from as
canonical JSON text — on the *first* event made from that record only (later events of the
same record leave it None rather than repeat it).

Scope labels (``project``, ``user``, ``agent``, ``task``) decide who may read a transcript:
each names a directory (``/projects/P``, ``/users/U``, ``/agents/A``, ``/tasks/T``) and a
reader needs ``read`` on every one; with none set, only administrators read it. ``labels`` are
free tags with no access meaning.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field
from typing import Any, Final, Literal

__all__ = [
    "EVENT_KINDS",
    "MAX_KEY_CHARS",
    "OUTCOMES",
    "ROLES",
    "SCOPE_LABELS",
    "Event",
    "ImportReport",
    "ImportedTranscript",
    "Labels",
    "Problem",
    "Transcript",
    "TranscriptInfo",
    "TranscriptView",
    "bounded_key",
    "parse_time",
    "scope_paths",
]

EVENT_KINDS: Final = ("message", "tool_call", "tool_result", "thinking", "usage")
ROLES: Final = ("user", "assistant", "system")
OUTCOMES: Final = ("success", "failure", "unknown")
Outcome = Literal["success", "failure", "unknown"]

#: Scope label -> the directory prefix whose ``read`` right it requires.
SCOPE_LABELS: Final = {
    "project": "/projects/",
    "user": "/users/",
    "agent": "/agents/",
    "task": "/tasks/",
}

#: Keys longer than this are stored as ``h:`` + their sha256 (index entries stay small).
MAX_KEY_CHARS: Final = 200


@dataclass(slots=True)
class Event:
    """One thing that happened in a session (see the module docstring for the kinds)."""

    kind: str
    key: str = ""
    role: str | None = None
    text: str | None = None
    ts: dt.datetime | None = None
    name: str | None = None
    call_id: str | None = None
    input: Any = None
    output: str | None = None
    is_error: bool | None = None
    exit_code: int | None = None
    duration_ms: float | None = None
    usage: dict[str, int] | None = None
    model: str | None = None
    message_id: str | None = None
    raw: str | None = None

    def normalised(self) -> dict[str, Any]:
        """The event as a plain dict without None fields (comparisons, export)."""
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out


@dataclass(frozen=True)
class Labels:
    """Scope labels given by the caller of an import; they override the source's."""

    project: str | None = None
    user: str | None = None
    agent: str | None = None
    task: str | None = None
    tags: tuple[str, ...] = ()


@dataclass
class Transcript:
    """One session: its header and ordered events, as an importer produced it."""

    format: str
    session_id: str
    events: list[Event] = field(default_factory=list)
    parent_session: str | None = None
    project: str | None = None
    user: str | None = None
    agent: str | None = None
    task: str | None = None
    labels: tuple[str, ...] = ()
    outcome: Outcome = "unknown"
    score: float | None = None
    started_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    redactions: int = 0
    #: Where it came from, for reports: the file and the line its first record starts on.
    origin: str = ""
    line: int | None = None

    def scopes(self) -> dict[str, str]:
        return _scopes(self.project, self.user, self.agent, self.task)


@dataclass(frozen=True)
class Problem:
    """A record skipped, or a transcript not stored, and why (``line`` is 1-based)."""

    file: str
    line: int | None
    reason: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ImportedTranscript:
    """What one import did to one transcript: ``new``, ``grown`` or ``unchanged``."""

    id: str
    format: str
    session_id: str
    status: str
    events_added: int


@dataclass
class ImportReport:
    """The summary of an import (``sessions`` counts every transcript read, stored or not)."""

    files: int = 0
    bytes: int = 0
    sessions: int = 0
    new: int = 0
    grown: int = 0
    unchanged: int = 0
    events: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    redactions: int = 0
    redactions_by_rule: dict[str, int] = field(default_factory=dict)
    ignored_records: int = 0
    skipped: list[Problem] = field(default_factory=list)
    failed: list[Problem] = field(default_factory=list)
    transcripts: list[ImportedTranscript] = field(default_factory=list)
    #: imported anyway, but worth checking (e.g. an unknown generic format version)
    warnings: list[Problem] = field(default_factory=list)

    @property
    def skipped_records(self) -> int:
        return len(self.skipped)


@dataclass(frozen=True)
class TranscriptInfo:
    """A stored transcript's header and counts (what ``list`` shows)."""

    id: str
    format: str
    session_id: str
    parent_session: str | None
    project: str | None
    user: str | None
    agent: str | None
    task: str | None
    labels: tuple[str, ...]
    outcome: str
    score: float | None
    started_at: dt.datetime | None
    ended_at: dt.datetime | None
    events: int
    tool_calls: int
    tool_errors: int
    redactions: int
    imported_at: dt.datetime
    updated_at: dt.datetime
    imported_by: str

    def scopes(self) -> dict[str, str]:
        return _scopes(self.project, self.user, self.agent, self.task)


@dataclass(frozen=True)
class TranscriptView:
    """A transcript with its events, its parent's id and its sub-agents' ids (readable ones)."""

    info: TranscriptInfo
    meta: dict[str, Any]
    events: list[Event]
    parent: str | None = None
    children: tuple[str, ...] = ()

    def normalised(self) -> dict[str, Any]:
        """The record without storage bookkeeping (ids, import times): for comparisons."""
        info = self.info
        return {
            "format": info.format,
            "session_id": info.session_id,
            "parent_session": info.parent_session,
            "project": info.project,
            "user": info.user,
            "agent": info.agent,
            "task": info.task,
            "labels": list(info.labels),
            "outcome": info.outcome,
            "score": info.score,
            "started_at": info.started_at,
            "ended_at": info.ended_at,
            "tool_calls": info.tool_calls,
            "tool_errors": info.tool_errors,
            "redactions": info.redactions,
            "meta": self.meta,
            "events": [e.normalised() for e in self.events],
        }


def _scopes(
    project: str | None, user: str | None, agent: str | None, task: str | None
) -> dict[str, str]:
    values = {"project": project, "user": user, "agent": agent, "task": task}
    return {k: v for k, v in values.items() if v is not None}


def scope_paths(scopes: dict[str, str]) -> list[str]:
    """The directories a reader must be able to read: ``{"project": "p"}`` -> ``/projects/p``."""
    return [SCOPE_LABELS[kind] + value for kind, value in scopes.items()]


def bounded_key(key: str) -> str:
    """``key`` itself, or ``h:<sha256>`` when it is longer than :data:`MAX_KEY_CHARS`."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()
    return "h:" + digest


def parse_time(value: Any) -> dt.datetime | None:
    """An aware UTC datetime from ISO 8601 text, or epoch seconds / ms / ns; None if invalid.

    Numbers are read by magnitude: above 1e17 nanoseconds, above 1e14 microseconds, above 1e11
    milliseconds, else seconds. Naive ISO times are taken as UTC.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        number = float(value)
        for limit, scale in ((1e17, 1e9), (1e14, 1e6), (1e11, 1e3)):
            if abs(number) > limit:
                number /= scale
                break
        try:
            return dt.datetime.fromtimestamp(number, dt.UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str) or not 8 <= len(value) <= 64:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=dt.UTC)
    try:
        return parsed.astimezone(dt.UTC)
    except (OverflowError, ValueError):
        return None
