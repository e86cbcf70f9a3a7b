"""OpenAI Responses API items: ``message``, ``reasoning``, ``function_call`` /
``function_call_output`` (matched by ``call_id``), custom and built-in tool calls.

Accepted: a JSON array or JSONL of items; a response object (``{"object": "response",
"output": [...], "usage": ...}``, with its ``input`` if recorded); a list or JSONL of response
objects; an envelope ``{"session_id", "items" | "input"/"output", "metadata", ...}`` (session
metadata as for the other envelopes). One file is one session, named by the envelope's
``session_id`` or the file name. An item sent again (histories re-sent as ``input``) is kept
once: items are deduplicated by ``id``, or by their JSON when they have none.

``is_error`` rule (the API has no error flag on tool outputs): when the output reports an exit
code — Codex's JSON ``{"output", "metadata": {"exit_code"}}`` or a leading ``Exit code: N`` —
an exit code other than 0 is an error; otherwise an output starting with ``Error: `` is. A
built-in tool call (``web_search_call``, ``mcp_call``, ...) is an error when its ``status``
is ``failed`` or it carries an ``error``.

The item conversion is shared with the Codex CLI importer (:mod:`.codex`).
"""

from __future__ import annotations

import json
import re
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
from memdir.transcripts.model import Event, Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["ITEM_TYPES", "ResponsesImporter", "item_events", "tool_output"]

_CALLS: Final = ("function_call", "custom_tool_call", "local_shell_call")
_OUTPUTS: Final = ("function_call_output", "custom_tool_call_output", "local_shell_call_output",
                   "computer_call_output")  # fmt: skip
_BUILTIN: Final = ("web_search_call", "file_search_call", "computer_call", "code_interpreter_call",
                   "image_generation_call", "mcp_call")  # fmt: skip
#: Membership tests use tuples: a value from the input may be unhashable (a list).
ITEM_TYPES: Final = ("message", "reasoning", *_CALLS, *_OUTPUTS, *_BUILTIN)
_EXIT: Final = re.compile(r"^Exit code: (-?\d{1,9})")
_WALL: Final = re.compile(r"^Wall time: ([0-9.]{1,12}) seconds", re.M)


def tool_output(output: Any) -> tuple[str, int | None, float | None, bool]:
    """(text, exit code, duration ms, is_error) of a tool output, by the rule above."""
    exit_code: int | None = None
    duration: float | None = None
    text = output if isinstance(output, str) else blocks_text(output)
    if text is None:
        text = "" if output is None else dumps(output)
    if text.startswith("{") and '"metadata"' in text:
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("metadata"), dict):
            meta = parsed["metadata"]
            code = meta.get("exit_code")
            exit_code = code if isinstance(code, int) and not isinstance(code, bool) else None
            seconds = meta.get("duration_seconds")
            if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds >= 0:
                duration = float(seconds) * 1000.0
            if isinstance(parsed.get("output"), str):
                text = parsed["output"]
    match = _EXIT.match(text)
    if match:
        exit_code = int(match.group(1))
        wall = _WALL.search(text, 0, 200)
        if wall:
            try:
                duration = float(wall.group(1)) * 1000.0
            except ValueError:
                duration = None
    is_error = exit_code != 0 if exit_code is not None else starts_with_error(text)
    return text, exit_code, duration, is_error


def item_events(item: Mapping[str, Any], ts: Any, model: str | None) -> list[Event]:
    """The events of one item (empty for items that carry nothing to keep)."""
    kind = item.get("type", "message" if "role" in item else None)
    if kind == "message":
        role = as_str(item.get("role")) or "assistant"
        role = "system" if role == "developer" else role
        text = blocks_text(item.get("content"))
        if text is None:
            return []
        return [Event("message", role=role, text=text, ts=ts,
                      model=model if role == "assistant" else None)]  # fmt: skip
    if kind == "reasoning":
        text = blocks_text(item.get("summary")) or blocks_text(item.get("content"))
        return [] if text is None else [Event("thinking", text=text, ts=ts, model=model)]
    if kind in _CALLS:
        arguments = item.get("arguments", item.get("input", item.get("action")))
        name = as_str(item.get("name")) or ("local_shell" if kind == "local_shell_call" else None)
        return [
            Event(
                "tool_call",
                name=name,
                call_id=_call_id(item),
                ts=ts,
                model=model,
                input=parse_arguments(arguments) if kind == "function_call" else arguments,
            )
        ]
    if kind in _OUTPUTS:
        text, exit_code, duration, is_error = tool_output(item.get("output"))
        return [Event("tool_result", call_id=_call_id(item), output=text, is_error=is_error,
                      exit_code=exit_code, duration_ms=duration, ts=ts)]  # fmt: skip
    if kind in _BUILTIN:
        return _builtin(item, kind, ts, model)
    return []


def _call_id(item: Mapping[str, Any]) -> str | None:
    return as_str(item.get("call_id")) or as_str(item.get("id"))


def _builtin(item: Mapping[str, Any], kind: str, ts: Any, model: str | None) -> list[Event]:
    call_id = _call_id(item)
    name = as_str(item.get("name")) if kind == "mcp_call" else kind.removesuffix("_call")
    details = {k: v for k, v in item.items() if k not in ("type", "id", "status", "output",
                                                           "results", "error")}  # fmt: skip
    events = [Event("tool_call", name=name, call_id=call_id, input=details, ts=ts, model=model)]
    result = item.get("output", item.get("results"))
    error = item.get("error")
    failed = item.get("status") == "failed" or error is not None
    if result is not None or failed:
        text = blocks_text(result) if not isinstance(result, str) else result
        if text is None:
            text = dumps(result) if result is not None else (as_str(error) or dumps(error))
        events.append(Event("tool_result", call_id=call_id, name=name, output=text,
                            is_error=failed, ts=ts))  # fmt: skip
    return events


class ResponsesImporter:
    name = "openai-responses"
    description = "OpenAI Responses API items or response objects (JSON, JSONL)"

    def detect(self, sample: Sample) -> float:
        records = sample.records
        if sample.shape == "json-object" and records and isinstance(records[0], dict):
            first = records[0]
            if first.get("object") == "response" or _items(first.get("output")):
                return 0.85
            if _items(first.get("items")) or _items(first.get("input")):
                return 0.7
            return 0.0
        dicts = [r for r in records if isinstance(r, dict)]
        if not dicts or "payload" in dicts[0]:
            return 0.0
        typed = [r for r in dicts if r.get("type") in ITEM_TYPES]
        if typed and len(typed) == len(dicts) and any(r.get("type") != "message" for r in typed):
            return 0.8
        if typed and len(typed) == len(dicts):
            return 0.5
        if all(r.get("object") == "response" for r in dicts):
            return 0.85
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        builder = TranscriptBuilder(self.name, source.stem, origin=source.name)
        seen: set[str] = set()
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            builder.transcript.redactions += ctx.last_redactions
            if builder.transcript.line is None:
                builder.transcript.line = record.line
            if not isinstance(value, dict):
                ctx.skip(source, record.line, "not a JSON object; skipped")
                continue
            try:
                self._record(builder, value, record.line, seen, ctx, source)
            except EnvelopeError as exc:
                ctx.skip(source, record.line, f"{exc}; the session is skipped")
                return
        if builder.events:
            yield builder.build()

    def _record(
        self,
        builder: TranscriptBuilder,
        value: dict[str, Any],
        line: int,
        seen: set[str],
        ctx: ParseContext,
        source: Source,
    ) -> None:
        if value.get("type") in ITEM_TYPES or ("role" in value and "type" not in value):
            self._item(builder, value, f"line{line}", seen, None)
            return
        envelope = "items" in value or "input" in value or "output" in value
        if not envelope:
            ctx.skip(source, line, "neither a Responses item nor a response object; skipped")
            return
        apply_envelope(builder, value)
        session = value.get("session_id")
        if isinstance(session, str) and session:
            builder.transcript.session_id = session
        model = as_str(value.get("model"))
        builder.set_meta("model", model)
        base = as_str(value.get("id")) or f"line{line}"
        for part in ("input", "items", "output"):
            items = value.get(part)
            if isinstance(items, str) and part == "input":
                items = [{"type": "message", "role": "user", "content": items}]
            if not isinstance(items, list):
                continue
            for index, item in enumerate(items):
                if isinstance(item, dict):
                    self._item(builder, item, f"{base}:{part}{index}", seen, model)
        usage = usage_of(value.get("usage"))
        if usage is not None:
            event = Event("usage", usage=usage, model=model, message_id=as_str(value.get("id")))
            builder.add(event, f"{base}:usage")

    @staticmethod
    def _item(
        builder: TranscriptBuilder,
        item: dict[str, Any],
        key: str,
        seen: set[str],
        model: str | None,
    ) -> None:
        raw: str | None = dumps(item)
        identity = as_str(item.get("id")) or raw or ""
        if identity in seen:
            return
        seen.add(identity)
        item_id = as_str(item.get("id"))
        for index, event in enumerate(item_events(item, None, model)):
            event.raw, raw = raw, None
            event.message_id = event.message_id or (item_id if event.kind == "message" else None)
            builder.add(event, f"{item_id or key}:{index}")


def _items(value: Any) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(i, dict) and (i.get("type") in ITEM_TYPES or "role" in i) for i in value[:8]
        )
    )
