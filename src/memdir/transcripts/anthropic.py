"""Anthropic Messages API message lists: ``[{"role", "content"}]`` with content blocks.

Accepted shapes: a bare JSON array of messages (one session, named after the file); an
envelope ``{"messages": [...], "system", "session_id", "model", "metadata", ...}``; a JSON array
or JSONL of envelopes (one session each, named by ``session_id`` / ``id`` or ``<file>#<n>``);
JSONL of messages (one session). Envelope metadata (scope labels, outcome, score, times) is
read as documented in :func:`~memdir.transcripts.common.apply_envelope`.

Blocks: ``text`` -> messages; ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` -> tool
calls; ``tool_result`` / ``mcp_tool_result`` -> tool results linked by ``tool_use_id``;
``web_search_tool_result`` (and other ``*_tool_result`` blocks) -> results of their server
tool call; ``thinking`` / ``redacted_thinking`` -> thinking. An assistant message with ``id``
and ``usage`` (an API response) gives a ``usage`` event. The ``system`` prompt is a system
message.

``is_error`` rule: the block's ``is_error`` (absent = false); a server tool result whose
content is an error object (``type`` ending in ``_error``) is an error.
Event keys: ``m<message index>:<block index>`` within the session.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import (
    EnvelopeError,
    apply_envelope,
    as_str,
    blocks_text,
    dumps,
    exit_code_in,
    usage_of,
)
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Record, Sample, Source, iter_records

__all__ = ["AnthropicImporter"]

_BLOCKS = (
    "text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document",
    "server_tool_use", "web_search_tool_result", "mcp_tool_use", "mcp_tool_result",
)  # fmt: skip


#: Content blocks only the Anthropic Messages format has.
_BLOCK_HINT = re.compile(r'"type"\s*:\s*"(?:tool_use|tool_result|thinking|redacted_thinking)"')


def _anthropic_message(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("role") not in ("user", "assistant"):
        return False
    content = value.get("content")
    if isinstance(content, str):
        return "tool_calls" not in value
    return isinstance(content, list) and all(
        isinstance(b, dict) and b.get("type") in _BLOCKS for b in content[:8]
    )


class AnthropicImporter:
    name = "anthropic-messages"
    description = "Anthropic Messages API message lists, bare or in an envelope with metadata"

    def detect(self, sample: Sample) -> float:
        records = [r for r in sample.records if isinstance(r, dict)]
        if not records:
            return 0.0
        first = records[0]
        messages = first.get("messages") if "messages" in first else None
        if messages is not None:
            ok = isinstance(messages, list) and all(_anthropic_message(m) for m in messages[:8])
            listy = any(isinstance(m, dict) and isinstance(m.get("content"), list)
                        for m in messages[:8]) if isinstance(messages, list) else False  # fmt: skip
            if not ok or not messages:
                return 0.0
            return 0.8 if listy or "system" in first else 0.55
        if all(_anthropic_message(r) for r in records):
            if any(isinstance(r.get("content"), list) for r in records):
                return 0.8
            # Plain-text messages fit other chat formats too; Anthropic content blocks further
            # on in the head (a truncated file's last, partial element included) decide it.
            return 0.8 if _BLOCK_HINT.search(sample.text) else 0.55
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        bare: TranscriptBuilder | None = None
        ordinal = 0
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            if isinstance(value, dict) and "messages" in value:
                ordinal += 1
                built = self._envelope(source, record, value, ordinal, shape == "json-object", ctx)
                if built is not None:
                    yield built
                continue
            if isinstance(value, dict) and "role" in value:
                if bare is None:
                    bare = TranscriptBuilder(self.name, source.stem, origin=source.name,
                                             line=record.line)  # fmt: skip
                bare.transcript.redactions += ctx.last_redactions
                _message(bare, value, f"m{record.index}", ctx, source, record.line)
                continue
            ctx.skip(source, record.line, "neither a message nor an envelope with 'messages'")
        if bare is not None:
            yield bare.build()

    def _envelope(
        self, source: Source, record: Record, value: dict[str, Any], ordinal: int,
        single: bool, ctx: ParseContext,
    ) -> Transcript | None:  # fmt: skip
        session = as_str(value.get("session_id")) or as_str(value.get("id"))
        if session is None:
            session = source.stem if single else f"{source.stem}#{ordinal}"
        builder = TranscriptBuilder(self.name, session, origin=source.name, line=record.line)
        builder.transcript.redactions += ctx.last_redactions
        try:
            apply_envelope(builder, value)
        except EnvelopeError as exc:
            ctx.skip(source, record.line, f"{exc}; the session is skipped")
            return None
        messages = value.get("messages")
        if not isinstance(messages, list):
            ctx.skip(source, record.line, "'messages' is not a list; the session is skipped")
            return None
        builder.set_meta("model", as_str(value.get("model")))
        system = blocks_text(value.get("system"))
        if system is not None:
            builder.add(Event("message", role="system", text=system), "system")
        for index, message in enumerate(messages):
            _message(builder, message, f"m{index}", ctx, source, record.line)
        return builder.build()


def _message(
    builder: TranscriptBuilder, message: Any, key: str, ctx: ParseContext, source: Source, line: int
) -> None:
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant", "system"):
        ctx.skip(source, line, f"message {key[1:]} is not a {{role, content}} object; skipped")
        return
    role = message["role"]
    ts = parse_time(message.get("timestamp") or message.get("created_at"))
    model = as_str(message.get("model"))
    message_id = as_str(message.get("id"))
    raw: str | None = dumps(message)
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    for index, block in enumerate(blocks):
        event = _block(builder, block, role, ts)
        if event is None:
            continue
        event.raw, raw = raw, None
        if role == "assistant":
            event.model, event.message_id = model, message_id
        builder.add(event, f"{key}:{index}")
    usage = usage_of(message.get("usage")) if role == "assistant" else None
    if usage is not None:
        builder.add(Event("usage", ts=ts, usage=usage, model=model, message_id=message_id,
                          raw=raw), f"{key}:usage")  # fmt: skip


def _block(builder: TranscriptBuilder, block: Any, role: str, ts: Any) -> Event | None:
    if isinstance(block, str):
        return Event("message", role=role, text=block, ts=ts)
    if not isinstance(block, Mapping):
        return None
    kind = as_str(block.get("type")) or ""
    if kind in ("tool_use", "server_tool_use", "mcp_tool_use"):
        return Event("tool_call", name=as_str(block.get("name")), call_id=as_str(block.get("id")),
                     input=block.get("input"), ts=ts)  # fmt: skip
    if kind in ("tool_result", "mcp_tool_result"):
        output = blocks_text(block.get("content"))
        return Event("tool_result", call_id=as_str(block.get("tool_use_id")),
                     output=output if output is not None else "",
                     is_error=block.get("is_error") is True, exit_code=exit_code_in(output),
                     ts=ts)  # fmt: skip
    if kind.endswith("_tool_result"):
        content = block.get("content")
        error = isinstance(content, dict) and str(content.get("type", "")).endswith("_error")
        text = blocks_text(content) if not error else None
        return Event("tool_result", call_id=as_str(block.get("tool_use_id")),
                     output=text if text is not None else dumps(content), is_error=error,
                     ts=ts)  # fmt: skip
    if kind == "thinking":
        return Event("thinking", text=as_str(block.get("thinking")) or "", ts=ts)
    if kind == "redacted_thinking":
        return Event("thinking", text="[redacted thinking]", ts=ts)
    text = blocks_text([block])
    return None if text is None else Event("message", role=role, text=text, ts=ts)
