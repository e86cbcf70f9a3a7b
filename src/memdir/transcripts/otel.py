"""OpenTelemetry GenAI spans exported as OTLP JSON (``{"resourceSpans": [...]}``).

Accepted: one OTLP JSON document, or JSONL of them (the collector's file exporter). Spans are
grouped into sessions by ``gen_ai.conversation.id``; spans without one join the conversation
of their trace, else form a session named by the trace id. Within a session spans are read in
start-time order:

- inference spans (``gen_ai.operation.name`` ``chat`` / ``text_completion`` /
  ``generate_content``): ``gen_ai.system_instructions``, ``gen_ai.input.messages`` and
  ``gen_ai.output.messages`` (JSON, as attributes or on a span event), or the older per-message
  span events (``gen_ai.user.message``, ``gen_ai.choice``, ...) -> messages, tool calls
  (``tool_call`` parts), tool results (``tool_call_response`` parts), thinking (``reasoning``);
  ``gen_ai.usage.*`` -> a usage event; ``gen_ai.response.model`` -> the model. Inputs repeat
  the history on every call: a message already recorded (same role and parts, same
  occurrence) is not recorded again.
- ``execute_tool`` spans: a tool call (``gen_ai.tool.name``, ``gen_ai.tool.call.id``,
  ``gen_ai.tool.call.arguments``) unless the model's output already recorded it, and its
  result (``gen_ai.tool.call.result``) with the span's duration.
- ``invoke_agent`` / ``create_agent``: ``gen_ai.agent.name`` / ``gen_ai.agent.id`` as metadata.

``is_error`` rule: the ``execute_tool`` span's status is ERROR (code 2) or it has an
``error.type`` attribute. Event keys are ``<span id>:<part>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import as_str, blocks_text, dumps, parse_arguments
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["OTelImporter", "attributes"]

_INFERENCE: Final = ("chat", "text_completion", "generate_content")
_MESSAGE_EVENTS: Final = {
    "gen_ai.system.message": "system",
    "gen_ai.user.message": "user",
    "gen_ai.assistant.message": "assistant",
    "gen_ai.tool.message": "tool",
    "gen_ai.choice": "assistant",
}


def _any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` as a plain value."""
    if not isinstance(value, Mapping):
        return None
    for key in ("stringValue", "boolValue", "doubleValue"):
        if key in value:
            return value[key]
    if "intValue" in value:
        try:
            return int(value["intValue"])
        except (TypeError, ValueError):
            return None
    if "arrayValue" in value:
        items = value["arrayValue"].get("values") if isinstance(value["arrayValue"], dict) else None
        return [_any_value(v) for v in items] if isinstance(items, list) else []
    if "kvlistValue" in value:
        kv = value["kvlistValue"]
        return attributes(kv.get("values") if isinstance(kv, dict) else None)
    return None


def attributes(items: Any) -> dict[str, Any]:
    """OTLP ``[{"key", "value": AnyValue}]`` as a dict."""
    out: dict[str, Any] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and isinstance(item.get("key"), str):
            out[item["key"]] = _any_value(item.get("value"))
    return out


def _json(value: Any) -> Any:
    if isinstance(value, str) and value[:1] in ("[", "{"):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


class _Span:
    __slots__ = ("attrs", "end", "events", "index", "name", "raw", "span_id", "start", "status",
                 "trace_id")  # fmt: skip

    def __init__(self, span: Mapping[str, Any], index: int, raw: str) -> None:
        self.attrs = attributes(span.get("attributes"))
        self.name = as_str(span.get("name")) or ""
        self.trace_id = as_str(span.get("traceId")) or ""
        self.span_id = as_str(span.get("spanId")) or f"span{index}"
        self.start = parse_time(_nanos(span.get("startTimeUnixNano")))
        self.end = parse_time(_nanos(span.get("endTimeUnixNano")))
        status = span.get("status")
        self.status = status if isinstance(status, Mapping) else {}
        events = span.get("events")
        self.events = (
            [e for e in events if isinstance(e, Mapping)] if isinstance(events, list) else []
        )
        self.index = index
        self.raw = raw

    @property
    def operation(self) -> str:
        op = as_str(self.attrs.get("gen_ai.operation.name"))
        return op or self.name.split(" ", 1)[0]

    @property
    def failed(self) -> bool:
        code = self.status.get("code")
        return code in (2, "2", "STATUS_CODE_ERROR", "ERROR") or "error.type" in self.attrs


def _nanos(value: Any) -> Any:
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


class OTelImporter:
    name = "otel-genai"
    description = "OpenTelemetry GenAI spans as OTLP JSON (one document or JSONL of them)"

    def detect(self, sample: Sample) -> float:
        first = sample.records[0] if sample.records else None
        if isinstance(first, dict) and "resourceSpans" in first:
            return 0.95
        if sample.shape == "json-object" and '"resourceSpans"' in sample.text[:4096]:
            return 0.9
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        spans: list[tuple[_Span, int]] = []
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            resources = value.get("resourceSpans") if isinstance(value, dict) else None
            if not isinstance(resources, list):
                ctx.skip(source, record.line, "not an OTLP JSON document (no resourceSpans)")
                continue
            for span in _spans(resources):
                spans.append((_Span(span, len(spans), dumps(span)), record.line))
        yield from self._sessions(source, spans)

    def _sessions(self, source: Source, spans: list[tuple[_Span, int]]) -> Iterator[Transcript]:
        by_trace: dict[str, str] = {}
        for span, _line in spans:
            conversation = as_str(span.attrs.get("gen_ai.conversation.id"))
            if conversation and span.trace_id:
                by_trace.setdefault(span.trace_id, conversation)
        groups: dict[str, list[tuple[_Span, int]]] = {}
        for span, line in spans:
            conversation = as_str(span.attrs.get("gen_ai.conversation.id"))
            key = conversation or by_trace.get(span.trace_id) or span.trace_id or source.stem
            groups.setdefault(key, []).append((span, line))
        for session, members in groups.items():
            members.sort(key=lambda m: (m[0].start is None, m[0].start or 0, m[0].index))
            builder = TranscriptBuilder(self.name, session, origin=source.name, line=members[0][1])
            state = _State(builder)
            for span, _line in members:
                state.span(span)
            if builder.events:
                yield builder.build()


def _spans(resources: list[Any]) -> Iterator[Mapping[str, Any]]:
    for resource in resources:
        scopes = resource.get("scopeSpans") if isinstance(resource, Mapping) else None
        for scope in scopes if isinstance(scopes, list) else []:
            spans = scope.get("spans") if isinstance(scope, Mapping) else None
            for span in spans if isinstance(spans, list) else []:
                if isinstance(span, Mapping):
                    yield span


class _State:
    """One conversation being assembled: what was recorded, to avoid recording it twice."""

    def __init__(self, builder: TranscriptBuilder) -> None:
        self.builder = builder
        self.seen: dict[str, int] = {}
        self.calls: set[str] = set()
        self.results: set[str] = set()

    def span(self, span: _Span) -> None:
        op = span.operation
        raw: str | None = span.raw
        if op in ("invoke_agent", "create_agent"):
            self.builder.set_meta("agent_name", as_str(span.attrs.get("gen_ai.agent.name")))
            self.builder.set_meta("agent_id", as_str(span.attrs.get("gen_ai.agent.id")))
            return
        events: list[tuple[Event, str]] = []
        if op == "execute_tool":
            events = self._tool(span)
        elif op in _INFERENCE:
            events = self._inference(span)
        for event, key in events:
            event.raw, raw = raw, None
            self.builder.add(event, f"{span.span_id}:{key}")

    def _tool(self, span: _Span) -> list[tuple[Event, str]]:
        attrs = span.attrs
        call_id = as_str(attrs.get("gen_ai.tool.call.id"))
        name = as_str(attrs.get("gen_ai.tool.name"))
        out: list[tuple[Event, str]] = []
        if call_id is None or call_id not in self.calls:
            arguments = parse_arguments(attrs.get("gen_ai.tool.call.arguments"))
            out.append((Event("tool_call", name=name, call_id=call_id, input=arguments,
                              ts=span.start), "call"))  # fmt: skip
            if call_id:
                self.calls.add(call_id)
        result = attrs.get("gen_ai.tool.call.result")
        output = (
            result if isinstance(result, str) else (dumps(result) if result is not None else "")
        )
        if span.failed and not output:
            output = as_str(span.status.get("message")) or as_str(attrs.get("error.type")) or ""
        duration = None
        if span.start and span.end and span.end >= span.start:
            duration = (span.end - span.start).total_seconds() * 1000.0
        out.append(
            (
                Event(
                    "tool_result",
                    name=name,
                    call_id=call_id,
                    output=output,
                    is_error=span.failed,
                    duration_ms=duration,
                    ts=span.end,
                ),
                "result",
            )
        )
        if call_id:
            self.results.add(call_id)
        return out

    def _inference(self, span: _Span) -> list[tuple[Event, str]]:
        attrs = dict(span.attrs)
        for event in span.events:  # newer SDKs put the messages on a details event
            if event.get("name") == "gen_ai.client.inference.operation.details":
                attrs.update(attributes(event.get("attributes")))
        model = as_str(attrs.get("gen_ai.response.model")) or as_str(
            attrs.get("gen_ai.request.model")
        )
        inputs = _json(attrs.get("gen_ai.input.messages"))
        outputs = _json(attrs.get("gen_ai.output.messages"))
        if not isinstance(inputs, list) and not isinstance(outputs, list):
            inputs, outputs = _legacy_messages(span)
        out: list[tuple[Event, str]] = []
        system = _json(attrs.get("gen_ai.system_instructions"))
        if system is not None:
            inputs = [{"role": "system", "parts": system if isinstance(system, list) else
                       [{"type": "text", "content": system}]}, *(inputs or [])]  # fmt: skip
        out += self._messages(inputs, "in", span.start, None)
        out += self._messages(outputs, "out", span.end, model)
        usage = {
            name.removeprefix("gen_ai.usage."): value
            for name, value in attrs.items()
            if name.startswith("gen_ai.usage.") and isinstance(value, int)
            and not isinstance(value, bool)
        }  # fmt: skip
        if usage:
            out.append((Event("usage", usage=usage, model=model, ts=span.end), "usage"))
        return out

    def _messages(
        self, messages: Any, where: str, ts: Any, model: str | None
    ) -> list[tuple[Event, str]]:
        out: list[tuple[Event, str]] = []
        occurrences: dict[str, int] = {}
        for position, message in enumerate(messages if isinstance(messages, list) else []):
            if not isinstance(message, Mapping):
                continue
            identity = dumps([message.get("role"), message.get("parts", message.get("content"))])
            occurrence = occurrences.get(identity, 0)
            occurrences[identity] = occurrence + 1
            if occurrence < self.seen.get(identity, 0):
                continue  # already recorded from an earlier call's history
            self.seen[identity] = occurrence + 1
            out += self._parts(message, f"{where}{position}", ts, model)
        return out

    def _parts(
        self, message: Mapping[str, Any], key: str, ts: Any, model: str | None
    ) -> list[tuple[Event, str]]:
        role = as_str(message.get("role")) or "assistant"
        parts = message.get("parts")
        if not isinstance(parts, list):
            parts = [{"type": "text", "content": blocks_text(message.get("content")) or ""}]
        out: list[tuple[Event, str]] = []
        for index, part in enumerate(parts):
            if not isinstance(part, Mapping):
                continue
            kind = part.get("type")
            part_key = f"{key}:{index}"
            if kind == "tool_call":
                call_id = as_str(part.get("id"))
                if call_id and call_id in self.calls:
                    continue
                if call_id:
                    self.calls.add(call_id)
                out.append((Event("tool_call", name=as_str(part.get("name")), call_id=call_id,
                                  input=parse_arguments(part.get("arguments")), ts=ts,
                                  model=model), part_key))  # fmt: skip
            elif kind == "tool_call_response":
                call_id = as_str(part.get("id"))
                if call_id and call_id in self.results:
                    continue
                if call_id:
                    self.results.add(call_id)
                response = part.get("response", part.get("result"))
                output = response if isinstance(response, str) else dumps(response)
                out.append((Event("tool_result", call_id=call_id, output=output, is_error=False,
                                  ts=ts), part_key))  # fmt: skip
            elif kind == "reasoning":
                out.append((Event("thinking", text=as_str(part.get("content")) or "", ts=ts,
                                  model=model), part_key))  # fmt: skip
            else:
                text = as_str(part.get("content")) or blocks_text([part])
                if text is not None:
                    normal = "system" if role not in ("user", "assistant") else role
                    out.append((Event("message", role=normal, text=text, ts=ts,
                                      model=model if normal == "assistant" else None),
                                part_key))  # fmt: skip
        return out


def _legacy_messages(span: _Span) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages from the older per-message span events (``gen_ai.user.message``, ...)."""
    inputs: list[dict[str, Any]] = []
    outputs: list[dict[str, Any]] = []
    for event in span.events:
        role = _MESSAGE_EVENTS.get(str(event.get("name")))
        if role is None:
            continue
        attrs = attributes(event.get("attributes"))
        body = _json(attrs.get("content", attrs.get("message", attrs.get("gen_ai.event.content"))))
        if isinstance(body, Mapping) and "message" in body:
            body = body["message"]
        content = body.get("content") if isinstance(body, Mapping) else body
        parts: list[dict[str, Any]] = []
        text = blocks_text(content)
        if text is not None:
            parts.append({"type": "text", "content": text})
        if role == "tool":
            call_id = attrs.get("id") or (body.get("id") if isinstance(body, Mapping) else None)
            parts = [{"type": "tool_call_response", "id": call_id, "response": text or ""}]
        calls = body.get("tool_calls") if isinstance(body, Mapping) else None
        for call in calls if isinstance(calls, list) else []:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                parts.append({"type": "tool_call", "id": call.get("id"),
                              "name": function.get("name"),
                              "arguments": function.get("arguments")})  # fmt: skip
        message = {"role": "user" if role == "tool" else role, "parts": parts}
        (outputs if event.get("name") == "gen_ai.choice" else inputs).append(message)
    return inputs, outputs
