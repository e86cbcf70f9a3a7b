"""OpenHands event streams: evaluation ``output.jsonl`` rows, resolver rows, replay files.

Accepted shapes: JSONL (or a JSON array) of evaluation rows ``{"instance_id" | "id",
"instruction", "metadata", "history": [...], "test_result", "error"}`` or resolver rows
``{"issue", "history", "success", ...}`` — one session per row —, and a replay trajectory: a
JSON array of events, one session named after the file.

Events: an *action* ``{"id", "timestamp", "source", "action", "args", "message"}`` and an
*observation* ``{"id", "cause" (the action's id), "observation", "content", "extras"}``;
older rows give ``[action, observation]`` pairs, resolver rows plain dicts without ids
(an observation then answers the action before it); an ``error`` observation that answers
no action — the harness refused a malformed call — is a call named ``invalid_tool_call``
with its failed result. ``message`` actions -> messages (``user`` source -> user, else
assistant); ``think`` -> thinking; ``system`` -> a system message;
``finish`` -> the agent's closing message; ``recall`` and state changes are ignored; any
other action (``run``, ``run_ipython``, ``read``, ``edit``, ``browse``, …) -> a tool call named
after the action (``run`` is ``bash``) with ``args`` as input; an observation -> its result.

``is_error`` rule: an ``error`` observation, or a non-zero exit code in
``extras.metadata.exit_code`` / ``extras.exit_code`` / ``exit_code`` (``-1`` means "no exit code
yet" and is not a failure). Outcome: a resolver row's ``success``, else ``test_result.result``
when boolean, else unknown; the row's ``error`` and ``instance_id`` are metadata.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import as_str, dumps
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["REFUSED_CALL", "OpenHandsImporter"]

#: The tool name of a call the harness refused before it ran (an ``error`` observation that
#: answers no action, e.g. an editor command outside the tool's schema).
REFUSED_CALL: Final = "invalid_tool_call"

_NOT_TOOLS: Final = frozenset(
    {"message", "system", "finish", "think", "recall", "change_agent_state", "null"}
)
_IGNORED_OBSERVATIONS: Final = frozenset({"agent_state_changed", "recall", "null"})


def _event(value: Any) -> bool:
    return isinstance(value, Mapping) and ("action" in value or "observation" in value)


def _row(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("history"), list)
        and bool({"instruction", "instance_id", "issue", "test_result", "metadata"} & value.keys())
    )


class OpenHandsImporter:
    name = "openhands"
    description = "OpenHands evaluation/resolver output.jsonl rows and replay event lists"

    def detect(self, sample: Sample) -> float:
        records = [r for r in sample.records if isinstance(r, dict)]
        if not records:
            head = sample.text[:100_000]
            if (
                sample.shape in ("jsonl", "json-object")
                and '"history"' in head
                and ('"instance_id"' in head or '"observation"' in head)
            ):
                return 0.8
            return 0.0
        if all(_row(r) for r in records):
            return 0.95
        if sample.shape == "json-array" and all(_event(r) and "source" in r for r in records[:8]):
            return 0.95
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        loose: TranscriptBuilder | None = None
        stream = _Stream()
        ordinal = 0
        for record in iter_records(source, shape, ctx):
            value = ctx.clean(record.value)
            if _row(value):
                ordinal += 1
                yield self._row(source, value, ordinal, record.line, ctx.last_redactions)
            elif _event(value):
                if loose is None:
                    loose = TranscriptBuilder(
                        self.name, source.stem, origin=source.name, line=record.line
                    )
                loose.transcript.redactions += ctx.last_redactions
                stream.add(loose, value, record.index)
            else:
                ctx.skip(source, record.line, "neither an OpenHands row nor an event; skipped")
        if loose is not None:
            yield loose.build()

    def _row(
        self, source: Source, row: Mapping[str, Any], ordinal: int, line: int, redactions: int
    ) -> Transcript:
        issue = row.get("issue") if isinstance(row.get("issue"), Mapping) else None
        session = as_str(row.get("instance_id")) or (
            str(row["id"]) if row.get("id") is not None else None
        )
        if session is None and issue is not None:
            session = f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}"
        builder = TranscriptBuilder(
            self.name, f"{source.stem}/{session or ordinal}", origin=source.name, line=line
        )
        t = builder.transcript
        t.redactions += redactions
        result = row.get("test_result")
        if isinstance(row.get("success"), bool):
            t.outcome = "success" if row["success"] else "failure"
        elif isinstance(result, Mapping) and isinstance(result.get("result"), bool):
            t.outcome = "success" if result["result"] else "failure"
        builder.set_meta("instance_id", session)
        builder.set_meta("error", as_str(row.get("error")))
        metadata = row.get("metadata")
        if isinstance(metadata, Mapping):
            llm = metadata.get("llm_config")
            builder.set_meta("agent_class", as_str(metadata.get("agent_class")))
            if isinstance(llm, Mapping):
                builder.set_meta("model", as_str(llm.get("model")))
        history: list[Any] = row["history"]
        if history and isinstance(history[0], list):  # older rows: [action, observation] pairs
            history = [item for pair in history if isinstance(pair, list) for item in pair]
        stream = _Stream()
        for index, event in enumerate(history):
            if _event(event):
                stream.add(builder, event, index)
        return builder.build()


class _Stream:
    """Turns one session's events into transcript events, pairing observations to actions."""

    def __init__(self) -> None:
        self.last_call: str | None = None  # the action an id-less observation answers

    def add(self, builder: TranscriptBuilder, event: Mapping[str, Any], index: int) -> None:
        key = f"e{event.get('id', index)}"
        ts = parse_time(event.get("timestamp"))
        raw: str | None = dumps(event)
        made: list[tuple[Event, str]] = []
        action, observation = event.get("action"), event.get("observation")
        if isinstance(observation, str):
            made.extend(self._observation(event, observation, key, ts))
        elif isinstance(action, str):
            made.extend(self._action(event, action, key, ts, index))
        for item, item_key in made:
            item.raw, raw = raw, None
            builder.add(item, item_key)

    def _action(
        self, event: Mapping[str, Any], action: str, key: str, ts: Any, index: int
    ) -> list[tuple[Event, str]]:
        given = event.get("args")
        args: Mapping[str, Any] = (
            given
            if isinstance(given, Mapping)
            else {
                k: v for k, v in event.items() if k not in ("action", "id", "timestamp", "source")
            }
        )
        text = as_str(event.get("message")) or as_str(args.get("content")) or ""
        if action in ("message", "system", "finish"):
            role = {"system": "system", "message": None, "finish": "assistant"}[action]
            role = role or ("user" if event.get("source") == "user" else "assistant")
            if action == "finish":
                text = as_str(args.get("final_thought")) or text
            return [(Event("message", role=role, text=text, ts=ts), f"{key}:text")] if text else []
        if action == "think":
            thought = as_str(args.get("thought")) or text
            return [(Event("thinking", text=thought, ts=ts), f"{key}:think")] if thought else []
        if action in _NOT_TOOLS:
            return []
        call_id = str(event["id"]) if event.get("id") is not None else f"a{index}"
        self.last_call = call_id
        out: list[tuple[Event, str]] = []
        reasoning = as_str(args.get("thought"))
        if reasoning:
            out.append((Event("thinking", text=reasoning, ts=ts), f"{key}:think"))
        inputs = {k: v for k, v in args.items() if k != "thought"}
        name = "bash" if action == "run" else action
        out.append(
            (Event("tool_call", name=name, call_id=call_id, input=inputs, ts=ts), f"{key}:call")
        )
        return out

    def _observation(
        self, event: Mapping[str, Any], observation: str, key: str, ts: Any
    ) -> list[tuple[Event, str]]:
        if observation in _IGNORED_OBSERVATIONS:
            return []
        cause = event.get("cause")
        call_id = str(cause) if cause is not None else self.last_call
        self.last_call = None
        out: list[tuple[Event, str]] = []
        if call_id is None:
            if observation != "error":  # an observation no action asked for
                return []
            # The harness refused a malformed call before it became an action.
            call_id = f"{key}:refused"
            out.append(
                (
                    Event("tool_call", name=REFUSED_CALL, call_id=call_id, input={}, ts=ts),
                    f"{key}:call",
                )
            )
        extras = _mapping(event.get("extras"))
        metadata = _mapping(extras.get("metadata"))
        code = next(
            (
                c
                for c in (
                    metadata.get("exit_code"),
                    extras.get("exit_code"),
                    event.get("exit_code"),
                )
                if isinstance(c, int)
            ),
            None,
        )
        failed = observation == "error" or (code is not None and code not in (0, -1))
        output = as_str(event.get("content")) or as_str(event.get("message")) or ""
        out.append(
            (
                Event(
                    "tool_result",
                    call_id=call_id,
                    output=output,
                    is_error=failed,
                    exit_code=None if code == -1 else code,
                    ts=ts,
                ),
                f"{key}:result",
            )
        )
        return out


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
