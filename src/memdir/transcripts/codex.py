"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

Lines are ``{"timestamp", "type", "payload"}``:

- ``session_meta``: the session id (``payload.id``), ``cwd``, ``originator``, ``cli_version``;
- ``turn_context``: the model for the following turns;
- ``response_item``: a Responses API item, converted as :mod:`.responses` does
  (``function_call`` / ``function_call_output`` matched by ``call_id``);
- ``event_msg`` of type ``token_count``: a ``usage`` event (``info.last_token_usage``).

Other ``event_msg`` lines repeat what the response items say (user and agent messages,
reasoning) and, with unknown line types, are counted as ignored. Older rollouts (a first line
``{"id", "timestamp", "instructions"}`` followed by bare items) are read too.

``is_error`` rule: that of :mod:`.responses` — a non-zero exit code where the output reports
one (``metadata.exit_code`` or ``Exit code: N``), else an output starting with ``Error: ``.
Event keys are ``line<N>:<index>``: a rollout only grows at the end.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import as_str, dumps, usage_of
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records
from memdir.transcripts.responses import ITEM_TYPES, item_events

__all__ = ["CodexImporter"]

_LINE_TYPES: Final = ("session_meta", "turn_context", "response_item", "event_msg", "compacted")
_META: Final = ("cwd", "originator", "cli_version", "source", "model_provider", "instructions")


class CodexImporter:
    name = "codex"
    description = "Codex CLI rollout JSONL (~/.codex/sessions/.../rollout-*.jsonl)"

    def detect(self, sample: Sample) -> float:
        if sample.shape != "jsonl" or not sample.records:
            return 0.0
        first = sample.records[0]
        if not isinstance(first, dict):
            return 0.0
        if first.get("type") in _LINE_TYPES and isinstance(first.get("payload"), dict):
            return 0.95
        if (
            {"id", "timestamp"} <= set(first)
            and "type" not in first
            and ("instructions" in first or "git" in first)
        ):
            return 0.6
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        builder = TranscriptBuilder(self.name, source.stem, origin=source.name)
        model: str | None = None
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            builder.transcript.redactions += ctx.last_redactions
            if not isinstance(value, dict):
                ctx.skip(source, record.line, "not a JSON object; skipped")
                continue
            ts = parse_time(value.get("timestamp"))
            kind, payload = value.get("type"), value.get("payload")
            if record.index == 0 and kind is None and "id" in value:
                kind, payload = "session_meta", value  # an older rollout's first line
            elif kind in ITEM_TYPES and "payload" not in value:
                kind, payload = "response_item", value  # an older rollout's bare item
            if not isinstance(payload, dict):
                if kind in _LINE_TYPES:
                    ctx.skip(source, record.line, f"{kind} line whose payload is not an object")
                    continue
                payload = {}
            if kind == "session_meta":
                self._session_meta(builder, payload, ts, record.line)
            elif kind == "turn_context":
                model = as_str(payload.get("model")) or model
                builder.set_meta("model", model)
            elif kind == "response_item":
                self._add(builder, item_events(payload, ts, model), record.line, value)
            elif kind == "event_msg" and payload.get("type") == "token_count":
                self._usage(builder, payload, ts, model, record.line, value)
            else:
                ctx.ignored += 1
        if builder.events:
            yield builder.build()

    @staticmethod
    def _session_meta(
        builder: TranscriptBuilder, payload: Mapping[str, Any], ts: Any, line: int
    ) -> None:
        session = as_str(payload.get("id"))
        if session and not builder.events:
            builder.transcript.session_id = session
            builder.transcript.line = line
        for key in _META:
            builder.set_meta(key, payload.get(key) if key != "instructions" else None)
        git = payload.get("git")
        if isinstance(git, dict):
            builder.set_meta("git", git)
        started = parse_time(payload.get("timestamp")) or ts
        if started is not None and builder.transcript.started_at is None:
            builder.transcript.started_at = started

    @staticmethod
    def _add(builder: TranscriptBuilder, events: list[Event], line: int, value: Any) -> None:
        raw: str | None = dumps(value)
        for index, event in enumerate(events):
            event.raw, raw = raw, None
            builder.add(event, f"line{line}:{index}")

    @staticmethod
    def _usage(
        builder: TranscriptBuilder,
        payload: Mapping[str, Any],
        ts: Any,
        model: str | None,
        line: int,
        value: Any,
    ) -> None:
        info = payload.get("info")
        usage = usage_of(info.get("last_token_usage")) if isinstance(info, dict) else None
        if usage is not None:
            event = Event("usage", ts=ts, usage=usage, model=model, raw=dumps(value))
            builder.add(event, f"line{line}:0")
