"""The generic JSONL form: what ``transcripts export`` writes and any tool can produce.

One JSON object per line. A ``transcript`` line starts a session; the ``event`` lines after it
are its events, in order, until the next ``transcript`` line::

    {"type": "transcript", "version": 1, "format": "generic", "session_id": "run-42",
     "project": "acme", "agent": "ci-bot", "outcome": "failure", "score": 0.0}
    {"type": "event", "kind": "message", "role": "user", "text": "Fix the build", "ts": "..."}
    {"type": "event", "kind": "tool_call", "name": "bash", "call_id": "c1",
     "input": {"cmd": "make"}}
    {"type": "event", "kind": "tool_result", "call_id": "c1", "output": "make: *** Error 2",
     "is_error": true, "exit_code": 2}

Transcript fields: ``session_id`` (default: the file name, then ``<name>#2``, ...), ``format``
(the format the session was first recorded in; default ``generic``) — together the key that
makes re-import a no-op — ``parent_session_id``, the scope labels ``project`` / ``user`` /
``agent`` / ``task``, ``labels`` (free tags), ``outcome`` (``success`` / ``failure`` /
``unknown``), ``score``, ``started_at`` / ``ended_at`` (ISO 8601), ``meta`` (an object),
``redactions`` (secrets already redacted upstream). ``id`` is informational (ids are per store).

Event fields: ``kind`` (``message``, ``tool_call``, ``tool_result``, ``thinking``, ``usage``),
``key`` (stable identity within the session; default ``e<position>``), ``role``, ``text``,
``ts``, ``name``, ``call_id``, ``input`` (any JSON), ``output``, ``is_error``, ``exit_code``,
``duration_ms``, ``usage`` (object of integers), ``model``, ``message_id``, ``raw`` (the
source record, any JSON). ``is_error`` rule: the field itself; absent means false for a
tool result. Event lines before any ``transcript`` line form a session named after the file.
A line with a wrong field type is skipped and reported; the rest imports.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Final, cast

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import EnvelopeError, apply_envelope, dumps
from memdir.transcripts.model import EVENT_KINDS, Event, Transcript, TranscriptInfo, parse_time
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["FORMAT_VERSION", "GenericImporter", "export_lines"]

FORMAT_VERSION: Final = 1
_STRINGS: Final = ("role", "text", "name", "call_id", "output", "model", "message_id")


class GenericImporter:
    name = "generic"
    description = "memdir's generic JSONL: a transcript line, then its event lines"

    def detect(self, sample: Sample) -> float:
        first = sample.records[0] if sample.records else None
        if sample.shape not in ("jsonl", "json-object") or not isinstance(first, dict):
            return 0.0
        if first.get("type") == "transcript" and ("version" in first or "session_id" in first):
            return 1.0
        if first.get("type") == "event" and first.get("kind") in EVENT_KINDS:
            return 0.9
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        builder: TranscriptBuilder | None = None
        broken = False  # the current transcript line was refused: skip its events
        headers = 0
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            if not isinstance(value, dict):
                ctx.skip(source, record.line, "not a JSON object; skipped")
                continue
            kind = value.get("type")
            if kind == "transcript":
                if builder is not None:
                    yield builder.build()
                headers += 1
                builder, broken = self._header(source, record.line, value, headers, ctx), False
                if builder is None:
                    broken = True
                else:
                    builder.transcript.redactions += ctx.last_redactions
                continue
            if kind != "event":
                ctx.skip(
                    source, record.line, f"'type' must be 'transcript' or 'event': {kind!r:.40}"
                )
                continue
            if broken:
                ctx.skip(source, record.line, "event of a refused transcript line; skipped")
                continue
            if builder is None:
                headers += 1
                builder = TranscriptBuilder("generic", source.stem, origin=source.name,
                                            line=record.line)  # fmt: skip
            try:
                event, key = _event(value, len(builder.events))
            except EnvelopeError as exc:
                ctx.skip(source, record.line, f"{exc}; skipped")
                continue
            builder.add(event, key)
            builder.transcript.redactions += ctx.last_redactions
        if builder is not None:
            yield builder.build()

    @staticmethod
    def _header(
        source: Source, line: int, value: dict[str, Any], ordinal: int, ctx: ParseContext
    ) -> TranscriptBuilder | None:
        default = source.stem if ordinal == 1 else f"{source.stem}#{ordinal}"
        session = value.get("session_id", default)
        fmt = value.get("format", "generic")
        if not isinstance(session, str) or not session or not isinstance(fmt, str) or not fmt:
            ctx.skip(source, line, "'session_id' and 'format' must be non-empty strings; the "
                     "transcript is skipped")  # fmt: skip
            return None
        version = value.get("version", FORMAT_VERSION)
        if version != FORMAT_VERSION or isinstance(version, bool):
            ctx.warn(source, line, f"generic format version {version!r:.40} is unknown (this "
                     f"memdir reads version {FORMAT_VERSION}); read as version "
                     f"{FORMAT_VERSION} — check the result")  # fmt: skip
        builder = TranscriptBuilder(fmt, session, origin=source.name, line=line)
        try:
            apply_envelope(builder, value)
            meta = value.get("meta")
            if meta is not None and not isinstance(meta, dict):
                raise EnvelopeError("'meta' must be an object")
            builder.transcript.meta.update(meta or {})
            redactions = value.get("redactions", 0)
            if not isinstance(redactions, int) or isinstance(redactions, bool) or redactions < 0:
                raise EnvelopeError("'redactions' must be a non-negative integer")
            builder.transcript.redactions = redactions
        except EnvelopeError as exc:
            ctx.skip(source, line, f"{exc}; the transcript is skipped")
            return None
        return builder


def _event(value: Mapping[str, Any], position: int) -> tuple[Event, str]:
    kind = value.get("kind")
    if kind not in EVENT_KINDS:
        raise EnvelopeError(f"'kind' must be one of {', '.join(EVENT_KINDS)}: {kind!r:.40}")
    fields: dict[str, Any] = {}
    for name in _STRINGS:
        item = value.get(name)
        if item is not None and not isinstance(item, str):
            raise EnvelopeError(f"{name!r} must be a string")
        fields[name] = item
    key = value.get("key", f"e{position}")
    if not isinstance(key, str) or not key:
        raise EnvelopeError("'key' must be a non-empty string")
    event = Event(kind=kind, **fields)
    event.input = value.get("input")
    if value.get("ts") is not None:
        event.ts = parse_time(value["ts"])
        if event.ts is None:
            raise EnvelopeError(f"'ts' is not an ISO 8601 time: {value['ts']!r:.40}")
    event.is_error = _typed(value, "is_error", bool)
    if kind == "tool_result" and event.is_error is None:
        event.is_error = False
    event.exit_code = _typed(value, "exit_code", int)
    duration = value.get("duration_ms")
    if duration is not None:
        if isinstance(duration, bool) or not isinstance(duration, int | float):
            raise EnvelopeError("'duration_ms' must be a number")
        if not math.isfinite(duration) or duration < 0:
            raise EnvelopeError("'duration_ms' must be finite and not negative")
        event.duration_ms = float(duration)
    usage = value.get("usage")
    if usage is not None:
        if not isinstance(usage, dict) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in usage.values()
        ):
            raise EnvelopeError("'usage' must be an object of integers")
        event.usage = usage
    if "raw" in value and value["raw"] is not None:
        event.raw = dumps(value["raw"])
    return event, key


def _typed(value: Mapping[str, Any], name: str, kind: type) -> Any:
    item: Any = value.get(name)
    if item is None:
        return None
    if not isinstance(item, kind) or (kind is int and isinstance(item, bool)):
        raise EnvelopeError(f"{name!r} must be {'a boolean' if kind is bool else 'an integer'}")
    if kind is int and not -(2**31) <= cast(int, item) < 2**31:
        raise EnvelopeError(f"{name!r} is out of range")
    return item


# --- export ---------------------------------------------------------------------------------


def _time(value: dt.datetime | None) -> str | None:
    return None if value is None else value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def header_line(info: TranscriptInfo, meta: Mapping[str, Any]) -> str:
    header: dict[str, Any] = {
        "type": "transcript",
        "version": FORMAT_VERSION,
        "id": info.id,
        "format": info.format,
        "session_id": info.session_id,
        "parent_session_id": info.parent_session,
        "project": info.project,
        "user": info.user,
        "agent": info.agent,
        "task": info.task,
        "labels": list(info.labels) or None,
        "outcome": info.outcome,
        "score": info.score,
        "started_at": _time(info.started_at),
        "ended_at": _time(info.ended_at),
        "redactions": info.redactions or None,
        "meta": dict(meta) or None,
    }
    return dumps({k: v for k, v in header.items() if v is not None})


def event_line(event: Event) -> str:
    out: dict[str, Any] = {"type": "event"}
    for name, value in event.normalised().items():
        if name == "ts":
            out["ts"] = _time(value)
        elif name == "raw":
            out["raw"] = json.loads(value)
        else:
            out[name] = value
    return dumps(out)


def export_lines(
    info: TranscriptInfo, meta: Mapping[str, Any], events: Iterable[Event]
) -> Iterator[str]:
    """The generic JSONL of one transcript, line by line (without newlines)."""
    yield header_line(info, meta)
    for event in events:
        yield event_line(event)
