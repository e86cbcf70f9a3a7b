"""SWE-agent ``.traj`` files and mini-swe-agent ``.traj.json`` trajectories.

SWE-agent (one JSON object per file): ``trajectory[]`` holds one step per agent action —
``thought`` (the model's reasoning), ``action`` (the command it ran in the agent's shell, e.g.
``find_file "x.py"``, ``edit 1:1 … end_of_edit``, ``python reproduce.py``, ``submit``),
``observation`` (what the environment printed) and, in newer files, ``execution_time``
(seconds). ``info`` carries ``exit_status`` (``submitted``, ``exit_cost``, …), ``submission``
(the final patch) and ``model_stats``. A file with only ``history[]`` (the chat sent to the
model, OpenAI-style roles with ``tool_calls``) is read from the history instead.

mini-swe-agent (``{"info", "messages", "trajectory_format": "mini-swe-agent-1"}``): assistant
messages whose content holds a fenced ```` ```bash ```` block are the actions; the next user
message (``<returncode>N</returncode>`` + ``<output>…</output>``) is the observation.

Each file is one session named ``<parent folder>/<file>`` (runs of the same instance under
different configurations share file names). Every action is a ``tool_call`` named ``bash``
with input ``{"command": ...}``; its observation is the ``tool_result``.

``is_error`` rule — SWE-agent records no exit codes, so it is read from the observation: an
explicit ``<returncode>N</returncode>`` (mini-swe-agent) or ``Exit code N`` wins (non-zero is an
error); otherwise an observation with the harness's own failure messages is an error: a Python
traceback, ``command not found``, ``No such file or directory``, the editor's ``Your proposed
edit has introduced new syntax error`` or a ``SyntaxError``, or a line starting with
``Error:`` / ``error:``. Empty output from a probe (``grep`` with no match) is not an error.
A step's ``raw`` leaves out ``messages`` and ``state`` (see :data:`_NOT_RAW`). The outcome
is unknown (no resolved flag is stored with trajectories); ``exit_status`` and
whether a submission was made are kept as metadata.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import as_str, blocks_text, dumps, exit_code_in, parse_arguments
from memdir.transcripts.model import Event, Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["SweAgentImporter", "observation_failed"]

_FAILURE: Final = re.compile(
    r"Traceback \(most recent call last\)|command not found|No such file or directory|"
    r"Your proposed edit has introduced new syntax error|SyntaxError|^(?:Error|error):",
    re.MULTILINE,
)
_RETURNCODE: Final = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
#: Step fields left out of ``raw``: ``messages`` repeats the whole prompt at every step, and
#: ``state`` is the editor's cursor as a JSON *string* of long path names, which redaction
#: would read differently inside and outside that string (so an export would not re-import
#: to the same events).
_NOT_RAW: Final = frozenset({"messages", "state"})
_BASH_BLOCK: Final = re.compile(r"```(?:bash|sh)\s*\n(.*?)```", re.DOTALL)


def observation_failed(output: str) -> tuple[bool, int | None]:
    """``(is_error, exit code)`` of an observation by the rule in the module docstring."""
    found = _RETURNCODE.search(output[:200])
    code = int(found.group(1)) if found else exit_code_in(output)
    if code is not None:
        return code != 0, code
    return bool(_FAILURE.search(output)), None


def _session_name(source: Source) -> str:
    parts = source.name.replace("\\", "/").rsplit("/", 2)
    base = parts[-1]
    for suffix in (".traj.json", ".traj"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return f"{parts[-2]}/{base}" if len(parts) > 1 else base


class SweAgentImporter:
    name = "swe-agent"
    description = "SWE-agent .traj and mini-swe-agent .traj.json trajectories"

    def detect(self, sample: Sample) -> float:
        if sample.shape != "json-object":
            return 0.0
        if sample.records and isinstance(sample.records[0], dict):
            value = sample.records[0]
            if isinstance(value.get("trajectory"), list) and (
                "info" in value or "history" in value
            ):
                return 0.96
            if str(value.get("trajectory_format", "")).startswith("mini-swe-agent"):
                return 0.96
            history = value.get("history")
            if isinstance(history, list) and any(
                isinstance(m, dict) and "agent" in m and "role" in m for m in history[:4]
            ):
                return 0.9  # a history-only file: SWE-agent names each message's agent
            return 0.0
        head = sample.text[:100_000]
        if '"trajectory"' in head and '"observation"' in head and '"action"' in head:
            return 0.9
        return 0.9 if '"trajectory_format": "mini-swe-agent' in head else 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        for record in iter_records(source, shape, ctx):
            value = record.value
            if not isinstance(value, Mapping):
                ctx.skip(source, record.line, "a trajectory file holds one JSON object")
                continue
            builder = TranscriptBuilder(
                self.name, _session_name(source), origin=source.name, line=record.line
            )
            info = ctx.clean(value.get("info")) if isinstance(value.get("info"), Mapping) else {}
            builder.transcript.redactions += ctx.last_redactions if info else 0
            builder.set_meta("exit_status", info.get("exit_status"))
            builder.set_meta("submitted", bool(info.get("submission")) if info else None)
            builder.set_meta("environment", as_str(value.get("environment")))
            stats = info.get("model_stats")
            if isinstance(stats, Mapping):
                builder.set_meta("model_stats", stats)
            steps = value.get("trajectory")
            if isinstance(steps, list) and steps:
                for index, step in enumerate(steps):
                    self._step(builder, step, index, ctx, source, record.line)
            elif isinstance(value.get("messages"), list):
                _mini(builder, value["messages"], ctx)
            elif isinstance(value.get("history"), list):
                _history(builder, value["history"], ctx)
            else:
                ctx.skip(source, record.line, "no trajectory, messages or history; skipped")
                continue
            yield builder.build()

    @staticmethod
    def _step(
        builder: TranscriptBuilder,
        step: Any,
        index: int,
        ctx: ParseContext,
        source: Source,
        line: int,
    ) -> None:
        if not isinstance(step, Mapping) or not isinstance(step.get("action"), str):
            ctx.skip(source, line, f"trajectory step {index} has no action; skipped")
            return
        step = ctx.clean(dict(step))
        builder.transcript.redactions += ctx.last_redactions
        raw: str | None = dumps({k: v for k, v in step.items() if k not in _NOT_RAW})
        key = f"s{index}"
        events: list[tuple[Event, str]] = []
        thought = as_str(step.get("thought")) or as_str(step.get("response"))
        if thought:
            events.append((Event("message", role="assistant", text=thought), f"{key}:text"))
        call_id = f"step-{index}"
        command = step["action"].rstrip("\n")
        events.append(
            (
                Event("tool_call", name="bash", call_id=call_id, input={"command": command}),
                f"{key}:call",
            )
        )
        output = as_str(step.get("observation")) or ""
        failed, code = observation_failed(output)
        seconds = step.get("execution_time")
        duration = float(seconds) * 1000.0 if isinstance(seconds, int | float) else None
        events.append(
            (
                Event(
                    "tool_result",
                    call_id=call_id,
                    name="bash",
                    output=output,
                    is_error=failed,
                    exit_code=code,
                    duration_ms=duration,
                ),
                f"{key}:result",
            )
        )
        for event, event_key in events:
            event.raw, raw = raw, None
            builder.add(event, event_key)


def _history(builder: TranscriptBuilder, history: list[Any], ctx: ParseContext) -> None:
    """A history-only file: OpenAI-style messages with ``tool_calls`` and ``tool`` results."""
    for index, message in enumerate(history):
        if not isinstance(message, Mapping) or message.get("is_demo"):
            continue
        message = ctx.clean(dict(message))
        builder.transcript.redactions += ctx.last_redactions
        role, key = message.get("role"), f"h{index}"
        text = blocks_text(message.get("content")) or ""
        if role == "tool":
            ids = message.get("tool_call_ids")
            call_id = ids[0] if isinstance(ids, list) and ids else None
            failed, code = observation_failed(text)
            builder.add(
                Event(
                    "tool_result",
                    call_id=as_str(call_id),
                    output=text,
                    is_error=failed,
                    exit_code=code,
                ),
                f"{key}:result",
            )
            continue
        if role in ("system", "user", "assistant") and text:
            builder.add(Event("message", role=role, text=text), f"{key}:text")
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                builder.add(
                    Event(
                        "tool_call",
                        name=as_str(function.get("name")),
                        call_id=as_str(call.get("id")),
                        input=parse_arguments(function.get("arguments")),
                    ),
                    f"{key}:call{position}",
                )


def _mini(builder: TranscriptBuilder, messages: list[Any], ctx: ParseContext) -> None:
    """mini-swe-agent: bash blocks in assistant turns, observations in the next user turn."""
    pending: str | None = None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            continue
        message = ctx.clean(dict(message))
        builder.transcript.redactions += ctx.last_redactions
        role, key = message.get("role"), f"m{index}"
        text = blocks_text(message.get("content")) or ""
        if role == "user" and pending is not None:
            failed, code = observation_failed(text)
            builder.add(
                Event(
                    "tool_result",
                    call_id=pending,
                    name="bash",
                    output=text,
                    is_error=failed,
                    exit_code=code,
                ),
                f"{key}:result",
            )
            pending = None
            continue
        if role in ("system", "user", "assistant") and text:
            builder.add(Event("message", role=role, text=text), f"{key}:text")
        block = _BASH_BLOCK.search(text) if role == "assistant" else None
        if block is not None:
            pending = f"m{index}"
            builder.add(
                Event(
                    "tool_call",
                    name="bash",
                    call_id=pending,
                    input={"command": block.group(1).strip()},
                ),
                f"{key}:call",
            )
