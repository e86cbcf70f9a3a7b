"""τ²-bench simulation results: ``{info, tasks, simulations}`` files and their variants.

Accepted shapes (all one JSON value per file): the standard results object
``{"timestamp", "info", "tasks", "simulations": [...]}``; a summary object that also carries
``simulations`` (``{"domain", "agent", "model", ..., "simulations"}``); and a bare JSON array of
simulations. A *simulation* is one session: ``{"id", "task_id", "trial", "start_time",
"end_time", "termination_reason", "reward_info": {"reward", ...}, "messages": [...]}``.

Each simulation becomes a transcript named ``<file>/<simulation id>`` with ``task`` left unset
(a scope label would make it unreadable to most principals) and the benchmark task kept as
``meta.task_id`` — dreaming counts distinct tasks from it. ``reward_info.reward`` is the score
(>= 1 success, else failure; a null ``reward_info`` leaves the outcome unknown);
``termination_reason``, ``trial``, the domain (``info.environment_info.domain_name`` or
``domain``; in a bare list, the first heading of the simulation's own ``policy``: ``# Airline
Agent Policy`` -> ``airline``, so its tasks are the same tasks as the other files') and the
agent's model are metadata. ``start_time`` / ``end_time`` are the session's
times; every message's ``timestamp`` is its event time.

Messages: ``assistant`` and ``user`` text -> messages (the user is τ²'s user simulator; its
closing ``###STOP###`` stays in the text); each of an assistant's ``tool_calls``
(``{id, name, arguments}``) -> a tool call; ``role: "tool"`` -> a tool result linked by ``id``.

``is_error`` rule: the tool message's boolean ``error`` when present, else content starting
with ``Error: ``. The message's ``raw_data`` (the provider's whole API response) is left out of
``raw``, which would otherwise repeat each prompt's size per message.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder, outcome_from_score
from memdir.transcripts.common import (
    as_str,
    blocks_text,
    dumps,
    parse_arguments,
    starts_with_error,
    usage_of,
)
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Sample, Source, iter_records

__all__ = ["Tau2Importer"]

#: Keys only a τ² simulation has (any two identify one).
_SIMULATION_KEYS: Final = frozenset({"termination_reason", "reward_info", "task_id", "messages"})
#: A results file's head when the file is larger than the sample: the standard file's ``info``
#: comes first; a summary file names its pass rate before the simulations.
_HEAD_MARKERS: Final = (
    ('"num_trials"', '"agent_info"', '"environment_info"', '"user_info"'),
    ('"total_tasks"', '"pass_rate"', '"simulations"', '"termination_reason"'),
)


#: The first heading of a domain's policy: ``# Airline Agent Policy``.
_POLICY_HEADING: Final = re.compile(r"#\s+([A-Za-z][A-Za-z ]{0,40}?)\s+Agent Policy\b")


def _simulation(value: Any) -> bool:
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("messages"), list)
        and len(_SIMULATION_KEYS & value.keys()) >= 3
    )


class Tau2Importer:
    name = "tau2"
    description = "τ²-bench simulation results ({info, tasks, simulations} or a list of them)"

    def detect(self, sample: Sample) -> float:
        records = [r for r in sample.records if isinstance(r, dict)]
        if sample.shape == "json-array" and records:
            return 0.97 if _simulation(records[0]) else 0.0
        if sample.shape != "json-object":
            return 0.0
        if records:
            first = records[0]
            sims = first.get("simulations")
            return 0.97 if isinstance(sims, list) and (not sims or _simulation(sims[0])) else 0.0
        # A results file larger than the sample: its head must name the keys.
        head = sample.text[:65_536]
        known = any(all(marker in head for marker in markers) for markers in _HEAD_MARKERS)
        return 0.9 if known else 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        for record in iter_records(source, shape, ctx):
            if shape == "json-array":
                if _simulation(record.value):
                    built = self._session(source, record.value, {}, record.line, ctx)
                    if built is not None:
                        yield built
                else:
                    ctx.skip(source, record.line, "not a τ² simulation (messages, reward_info)")
                continue
            value = record.value
            sims = value.get("simulations") if isinstance(value, Mapping) else None
            if not isinstance(sims, list):
                ctx.skip(source, record.line, "a τ² results file needs a 'simulations' list")
                continue
            header = _header(value)
            for sim in sims:
                if not _simulation(sim):
                    ctx.skip(source, record.line, "a simulation without messages; skipped")
                    continue
                built = self._session(source, sim, header, record.line, ctx)
                if built is not None:
                    yield built

    def _session(
        self,
        source: Source,
        sim: Mapping[str, Any],
        header: dict[str, Any],
        line: int,
        ctx: ParseContext,
    ) -> Transcript | None:
        sim_id = as_str(sim.get("id")) or f"task-{sim.get('task_id')}-trial-{sim.get('trial')}"
        builder = TranscriptBuilder(
            self.name, f"{source.stem}/{sim_id}", origin=source.name, line=line
        )
        messages = sim.get("messages") or []
        cleaned = ctx.clean({k: v for k, v in sim.items() if k not in ("messages", "policy")})
        builder.transcript.redactions += ctx.last_redactions
        t = builder.transcript
        t.started_at = parse_time(cleaned.get("start_time"))
        t.ended_at = parse_time(cleaned.get("end_time"))
        reward = (cleaned.get("reward_info") or {}).get("reward")
        if isinstance(reward, int | float) and not isinstance(reward, bool):
            t.score = float(reward)
            t.outcome = outcome_from_score(t.score)
        for key, value in header.items():
            builder.set_meta(key, value)
        if "domain" not in header:  # a bare list of simulations: the policy names the domain
            builder.set_meta("domain", _policy_domain(sim.get("policy")))
        for key in ("task_id", "trial", "termination_reason", "agent_cost", "user_cost"):
            builder.set_meta(key, cleaned.get(key))
        for index, message in enumerate(messages):
            if not isinstance(message, Mapping):
                ctx.skip(source, line, f"message {index} of {sim_id} is not an object; skipped")
                continue
            message = ctx.clean({k: v for k, v in message.items() if k != "raw_data"})
            builder.transcript.redactions += ctx.last_redactions
            _message(builder, message, index)
        return builder.build()


def _header(value: Mapping[str, Any]) -> dict[str, Any]:
    """File-level facts every session of the file shares: domain and agent model."""
    info = _mapping(value.get("info"))
    env, agent = _mapping(info.get("environment_info")), _mapping(info.get("agent_info"))
    out: dict[str, Any] = {}
    domain = as_str(env.get("domain_name")) or as_str(value.get("domain"))
    if domain:
        out["domain"] = domain
    model = as_str(agent.get("llm")) or as_str(value.get("model"))
    if model:
        out["model"] = model
    return out


def _policy_domain(policy: Any) -> str | None:
    """The domain a simulation's own ``policy`` text names in its first heading
    (``# Medical Triage Agent Policy`` -> ``medical_triage``, as the results files'
    ``domain_name`` spells it), else None."""
    if not isinstance(policy, str):
        return None
    found = _POLICY_HEADING.match(policy.lstrip())
    return "_".join(found.group(1).lower().split()) if found else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _message(builder: TranscriptBuilder, message: Mapping[str, Any], index: int) -> None:
    key = f"m{index}"
    ts = parse_time(message.get("timestamp"))
    role = message.get("role")
    raw: str | None = dumps(message)
    events: list[tuple[Event, str]] = []
    if role == "tool":
        output = blocks_text(message.get("content")) or ""
        flag = message.get("error")
        is_error = flag if isinstance(flag, bool) else starts_with_error(output)
        events.append(
            (
                Event(
                    "tool_result",
                    call_id=as_str(message.get("id")),
                    output=output,
                    is_error=is_error,
                    ts=ts,
                ),
                f"{key}:result",
            )
        )
    elif role in ("assistant", "user", "system"):
        text = blocks_text(message.get("content"))
        if text:
            events.append((Event("message", role=role, text=text, ts=ts), f"{key}:text"))
        calls = message.get("tool_calls")
        for position, call in enumerate(calls if isinstance(calls, list) else []):
            if isinstance(call, Mapping):
                events.append(
                    (
                        Event(
                            "tool_call",
                            name=as_str(call.get("name")),
                            call_id=as_str(call.get("id")),
                            input=parse_arguments(call.get("arguments")),
                            ts=ts,
                        ),
                        f"{key}:call{position}",
                    )
                )
        usage = usage_of(message.get("usage"))
        if usage is not None and role == "assistant":
            events.append((Event("usage", usage=usage, ts=ts), f"{key}:usage"))
    for event, event_key in events:
        event.raw, raw = raw, None
        builder.add(event, event_key)
