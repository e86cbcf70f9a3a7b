"""OpenAI Chat Completions message lists, bare or wrapped — including τ-bench result files.

Accepted shapes: a bare JSON array (or JSONL) of messages — one session named after the file;
an envelope ``{"messages": [...], "session_id", "metadata", ...}``; a JSON array or JSONL of
envelopes, one session each. A *result file* wraps each conversation with its outcome, as
τ-bench does: ``[{"task_id", "trial", "reward", "info", "traj": [messages]}]`` — one session per
element, named ``<file>/task-<task_id>/trial-<trial>``, ``reward`` as the outcome score
(>= 1 success, else failure), ``task_id`` / ``trial`` / ``info`` kept as metadata.

Messages: ``system`` / ``developer`` -> system messages; ``user`` and ``assistant`` text ->
messages; ``reasoning_content`` -> thinking; each of an assistant's ``tool_calls`` (and a
legacy ``function_call``) -> a tool call, its ``arguments`` parsed as JSON; ``role: "tool"``
(and legacy ``role: "function"``) -> a tool result linked by ``tool_call_id``.

``is_error`` rule (Chat Completions has no error flag): a tool result is an error when its
content starts with ``Error: `` — the convention of τ-bench and of most agent frameworks built
on this API — unless the message itself carries a boolean ``is_error``, which wins.
Event keys: ``m<message index>:<part>`` within the session.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import (
    EnvelopeError,
    apply_envelope,
    as_str,
    blocks_text,
    dumps,
    parse_arguments,
    starts_with_error,
    usage_of,
)
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Record, Sample, Source, iter_records

__all__ = ["OpenAIChatImporter"]

_ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
_WRAPPERS: Final = ("messages", "traj", "trajectory", "conversation")


def _chat_message(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("role") not in _ROLES:
        return False
    content = value.get("content")
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") in ("text", "image_url", "input_audio", "refusal",
                                                   "file")
        for p in content[:8]
    )  # fmt: skip


def _distinctive(messages: list[Any]) -> bool:
    """Something only Chat Completions has: tool calls, tool/system roles, null content."""
    return any(
        isinstance(m, dict)
        and (m.get("role") in ("tool", "function", "system", "developer") or "tool_calls" in m
             or m.get("content") is None)
        for m in messages
    )  # fmt: skip


def _wrapped(value: Mapping[str, Any]) -> list[Any] | None:
    for key in _WRAPPERS:
        messages = value.get(key)
        if isinstance(messages, list):
            return messages
    return None


class OpenAIChatImporter:
    name = "openai-chat"
    description = "OpenAI Chat Completions message lists and result files such as τ-bench's"

    def detect(self, sample: Sample) -> float:
        records = [r for r in sample.records if isinstance(r, dict)]
        if not records:
            return 0.0
        first = records[0]
        messages = _wrapped(first)
        if messages is not None:
            if not messages or not all(_chat_message(m) for m in messages[:8]):
                return 0.0
            if "traj" in first and ("reward" in first or "task_id" in first):
                return 0.95
            return 0.85 if _distinctive(messages) else 0.6
        if all(_chat_message(r) for r in records):
            return 0.85 if _distinctive(records) else 0.6
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        bare: TranscriptBuilder | None = None
        ordinal = 0
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            if isinstance(value, dict) and _wrapped(value) is not None:
                ordinal += 1
                built = self._envelope(source, record, value, ordinal, shape, ctx)
                if built is not None:
                    yield built
                continue
            if isinstance(value, dict) and "role" in value:
                if bare is None:
                    bare = TranscriptBuilder(self.name, source.stem, origin=source.name,
                                             line=record.line)  # fmt: skip
                bare.transcript.redactions += ctx.last_redactions
                _message(bare, value, record.index, ctx, source, record.line)
                continue
            ctx.skip(source, record.line, "neither a chat message nor an envelope of messages")
        if bare is not None:
            yield bare.build()

    def _envelope(
        self, source: Source, record: Record, value: dict[str, Any], ordinal: int, shape: str,
        ctx: ParseContext,
    ) -> Transcript | None:  # fmt: skip
        session = as_str(value.get("session_id")) or as_str(value.get("id"))
        if session is None and "task_id" in value:
            trial = value.get("trial")
            session = f"{source.stem}/task-{_label(value['task_id'])}" + (
                f"/trial-{_label(trial)}" if trial is not None else ""
            )
        if session is None:
            session = source.stem if shape == "json-object" else f"{source.stem}#{ordinal}"
        builder = TranscriptBuilder(self.name, session, origin=source.name, line=record.line)
        builder.transcript.redactions += ctx.last_redactions
        try:
            apply_envelope(builder, value)
        except EnvelopeError as exc:
            ctx.skip(source, record.line, f"{exc}; the session is skipped")
            return None
        for key in ("task_id", "trial", "info", "model"):
            builder.set_meta(key, value.get(key))
        for index, message in enumerate(_wrapped(value) or []):
            _message(builder, message, index, ctx, source, record.line)
        usage = usage_of(value.get("usage"))
        if usage is not None:
            builder.add(Event("usage", usage=usage, model=as_str(value.get("model"))), "usage")
        return builder.build()


def _label(value: Any) -> str:
    return value if isinstance(value, str) else dumps(value)


def _message(
    builder: TranscriptBuilder, message: Any, index: int, ctx: ParseContext, source: Source,
    line: int,
) -> None:  # fmt: skip
    if not isinstance(message, dict) or message.get("role") not in _ROLES:
        ctx.skip(source, line, f"message {index} is not a chat message (role, content); skipped")
        return
    key = f"m{index}"
    ts = parse_time(message.get("timestamp") or message.get("created_at"))
    if message["role"] in ("tool", "function"):
        events = [(_result(message, ts), f"{key}:result")]
    else:
        events = _turn(message, key, ts)
    if not events:  # an empty message: nothing to keep
        ctx.ignored += 1
        return
    raw: str | None = dumps(message)
    for event, event_key in events:
        event.raw, raw = raw, None
        builder.add(event, event_key)


def _result(message: Mapping[str, Any], ts: Any) -> Event:
    """A ``tool`` (or legacy ``function``) message: the is_error rule is applied here."""
    output = blocks_text(message.get("content"))
    output = output if output is not None else ""
    flag = message.get("is_error")
    is_error = flag if isinstance(flag, bool) else starts_with_error(output)
    return Event("tool_result", call_id=as_str(message.get("tool_call_id")),
                 name=as_str(message.get("name")), output=output, is_error=is_error,
                 ts=ts)  # fmt: skip


def _turn(message: Mapping[str, Any], key: str, ts: Any) -> list[tuple[Event, str]]:
    """A system, user or assistant message: reasoning, text, then its tool calls."""
    role = "system" if message["role"] == "developer" else message["role"]
    model = as_str(message.get("model"))
    events: list[tuple[Event, str]] = []
    reasoning = as_str(message.get("reasoning_content"))
    if reasoning:
        events.append((Event("thinking", text=reasoning, ts=ts, model=model), f"{key}:think"))
    text = blocks_text(message.get("content"))
    if text is None and isinstance(message.get("refusal"), str):
        text = message["refusal"]
    if text:
        event = Event("message", role=role, text=text, ts=ts,
                      model=model if role == "assistant" else None)  # fmt: skip
        events.append((event, f"{key}:text"))
    events.extend(_calls(message, key, ts, model))
    return events


def _calls(
    message: Mapping[str, Any], key: str, ts: Any, model: str | None
) -> list[tuple[Event, str]]:
    out: list[tuple[Event, str]] = []
    calls = message.get("tool_calls")
    for position, call in enumerate(calls if isinstance(calls, list) else []):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        out.append((Event("tool_call", name=as_str(function.get("name")),
                          call_id=as_str(call.get("id")),
                          input=parse_arguments(function.get("arguments")), ts=ts, model=model),
                    f"{key}:call{position}"))  # fmt: skip
    legacy = message.get("function_call")
    if isinstance(legacy, dict):
        out.append((Event("tool_call", name=as_str(legacy.get("name")),
                          input=parse_arguments(legacy.get("arguments")), ts=ts, model=model),
                    f"{key}:call"))  # fmt: skip
    return out
