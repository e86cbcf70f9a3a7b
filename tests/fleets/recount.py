"""Recount the ground-truth manifests of the real fleets from the raw files.

Standard library only, and no ``memdir`` import: this is the reviewer's own reading of the data,
independent of the importers and the dream engine it measures. Each manifest
(``tests/fleets/<fleet>.json``) names its files and, per pattern, a ``rule``; this module reads
the files in its own simple way and counts the sessions where each rule holds. The manifest
stores those counts; ``tests/test_dream_real_fleets.py`` checks that a recount equals them.

A session here is what a reader of the format would call one:

- ``openai-chat`` (τ-bench results): one element of the top-level list; a tool result is a
  failure when its content starts with ``Error: ``; ``reward`` 1 is a success; its task is
  ``task_id``.
- ``tau2``: one entry of ``simulations``; a tool message fails when its boolean ``error`` is
  true (else when it starts with ``Error: ``); ``reward_info.reward`` >= 1 is a success; the
  user simulator's turns are ``user`` messages; its task is ``<domain>/<task_id>`` (the domain
  from the file's ``info.environment_info.domain_name`` or ``domain``, in a bare list from the
  first heading of the simulation's ``policy``: ``# Airline Agent Policy``).
- ``swe-agent``: one ``.traj`` file; each ``trajectory`` step is a call (``action``) and its
  observation (the harness's reply, feedback included).
- ``aider``: the text between ``# aider chat started at`` headers (the file's headerless start
  is a session too), when it holds a non-blank line; ``> `` lines are aider's own output (the
  harness), ``#### `` lines the user's.
- ``openhands``: one ``output.jsonl`` row, or one replay file (a JSON list of events).
- ``claude-code``: one ``sessionId`` of a JSONL file with its sub-agent (sidechain) lines: a
  sub-agent is part of the conversation that started it, not an independent session.

Rules (a pattern's ``rule``; every ``regex`` is a Python regex searched case-sensitively):

- ``{"type": "tool_error", "tool": NAME|null, "regex": R}``: a failing tool result (by the format's
  rule above) of tool NAME whose text matches R;
- ``{"type": "feedback", "regex": R}``: a harness or environment message (swe-agent
  observations, aider ``> `` lines, tool results of any status) matching R;
- ``{"type": "user", "regex": R}``: a user (or user-simulator) turn matching R;
- ``{"type": "call", "tool": NAME|null, "regex": R, "outcome": "failure"|null}``: a call of tool
  NAME whose arguments (as JSON, keys sorted) match R, in a session with that outcome.

``sessions`` in the manifest is the number of sessions where the rule holds; ``prevalence`` is
that over the fleet's sessions; ``tasks`` (formats whose sessions are trials of named tasks)
the distinct tasks of those sessions. A pattern is ``above`` the thresholds when it holds in
``min_sessions`` sessions, ``min_prevalence`` of the fleet and — where sessions name tasks —
``min_tasks`` distinct tasks: five trials of two tasks are two tasks' quirk, not a recurring
cause. Run ``python tests/fleets/recount.py [FLEET...]`` to print the
recount beside the manifest's figures.
"""

from __future__ import annotations

import glob
import json
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE.parents[2] / "shared" / "data" / "transcripts"
_AIDER_START = re.compile(r"^# aider chat started at ")


@dataclass
class Session:
    """One session as a reviewer reads it: its calls, harness output, user turns, outcome."""

    name: str
    #: (tool, arguments as sorted JSON, result text, failed)
    calls: list[tuple[str, str, str, bool]] = field(default_factory=list)
    feedback: list[str] = field(default_factory=list)
    users: list[str] = field(default_factory=list)
    outcome: str = "unknown"  # success / failure / unknown
    task: str | None = None  # the task the session is a trial of, where the format names one


def _args(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            str(b.get("text") or b.get("content") or "") if isinstance(b, dict) else str(b)
            for b in value
        )
    return "" if value is None else str(value)


def read_openai_chat(path: Path) -> Iterator[Session]:
    for element in json.loads(path.read_text(encoding="utf-8")):
        s = Session(f"{path.stem}/task-{element['task_id']}/trial-{element.get('trial', 0)}")
        reward = element.get("reward")
        s.outcome = "unknown" if reward is None else "success" if reward >= 1 else "failure"
        s.task = str(element["task_id"])
        names: dict[str, tuple[str, str]] = {}
        for message in element["traj"]:
            for tool_call in message.get("tool_calls") or []:
                function = tool_call["function"]
                names[tool_call["id"]] = (function["name"], _args(function["arguments"]))
            if message["role"] == "tool":
                tool, args = names.get(message.get("tool_call_id", ""), (message.get("name"), ""))
                text = _text(message.get("content"))
                s.calls.append((str(tool), args, text, text.startswith("Error: ")))
            elif message["role"] == "user":
                s.users.append(_text(message.get("content")))
        yield s


def read_tau2(path: Path) -> Iterator[Session]:
    data = json.loads(path.read_text(encoding="utf-8"))
    sims = data if isinstance(data, list) else data.get("simulations") or []
    domain = None
    if isinstance(data, dict):
        info = data.get("info") or {}
        domain = (info.get("environment_info") or {}).get("domain_name") or data.get("domain")
    for sim in sims:
        s = Session(f"{path.stem}/{sim.get('id')}")
        named = domain or _policy_domain(str(sim.get("policy") or ""))
        s.task = f"{named}/{sim.get('task_id')}"
        reward = (sim.get("reward_info") or {}).get("reward")
        s.outcome = "unknown" if reward is None else "success" if reward >= 1 else "failure"
        names: dict[str, tuple[str, str]] = {}
        for m in sim.get("messages") or []:
            for tool_call in m.get("tool_calls") or []:
                names[tool_call.get("id", "")] = (tool_call["name"], _args(tool_call["arguments"]))
            if m["role"] == "tool":
                tool, args = names.get(m.get("id", ""), ("", ""))
                text = _text(m.get("content"))
                flag = m.get("error")
                failed = flag if isinstance(flag, bool) else text.startswith("Error: ")
                s.calls.append((tool, args, text, failed))
            elif m["role"] == "user":
                s.users.append(_text(m.get("content")))
        yield s


def _policy_domain(policy: str) -> str:
    """``# Medical Triage Agent Policy`` -> ``medical_triage`` (as ``domain_name`` spells it)."""
    heading = policy.strip().split("\n", 1)[0].lstrip("#").strip()
    return "_".join(heading.removesuffix("Agent Policy").lower().split())


def read_swe_agent(path: Path) -> Iterator[Session]:
    data = json.loads(path.read_text(encoding="utf-8"))
    s = Session(str(path))
    status = (data.get("info") or {}).get("exit_status")
    s.outcome = "unknown" if status is None else "success" if status == "submitted" else "failure"
    for step in data.get("trajectory") or []:
        action = str(step.get("action") or "")
        observation = str(step.get("observation") or "")
        s.calls.append(("bash", action, observation, False))
        s.feedback.append(observation)
    for message in data.get("history") or []:
        if message.get("role") == "user" and not message.get("is_demo"):
            s.users.append(_text(message.get("content")))
    yield s


def read_aider(path: Path) -> Iterator[Session]:
    lines: list[str] = []
    number = 0

    def close() -> Iterator[Session]:
        if any(line.strip() for line in lines):
            s = Session(f"{path}#{number}")
            s.feedback = [x[2:].rstrip() for x in lines if x.startswith("> ")]
            s.users = [x[5:].rstrip() for x in lines if x.startswith("#### ")]
            yield s

    for line in path.read_text(encoding="utf-8").splitlines():
        if _AIDER_START.match(line):
            yield from close()
            lines, number = [], number + 1
        else:
            lines.append(line)
    yield from close()


def read_openhands(path: Path) -> Iterator[Session]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".jsonl":
        rows = [json.loads(x) for x in text.splitlines() if x.strip()]
    else:
        rows = [{"history": json.loads(text)}]
    for number, row in enumerate(rows):
        s = Session(f"{path}#{number}")
        actions: dict[Any, tuple[str, str]] = {}
        for event in row.get("history") or []:
            pairs = event if isinstance(event, list) else [event]
            for e in pairs:
                if not isinstance(e, dict):
                    continue
                if "action" in e:
                    if e.get("source") == "user" and e["action"] == "message":
                        s.users.append(_text((e.get("args") or {}).get("content")))
                    actions[e.get("id")] = (str(e["action"]), _args(e.get("args") or {}))
                elif "observation" in e:
                    content = _text(e.get("content"))
                    exit_code = ((e.get("extras") or {}).get("metadata") or {}).get("exit_code")
                    failed = e["observation"] == "error" or (
                        isinstance(exit_code, int) and exit_code not in (0, -1)
                    )
                    tool, args = actions.get(e.get("cause"), (str(e["observation"]), ""))
                    s.calls.append((tool, args, content, failed))
                    s.feedback.append(content)
        yield s


def read_claude_code(path: Path) -> Iterator[Session]:
    sessions: dict[str, Session] = {}
    pending: dict[str, tuple[Session, str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        record = json.loads(line)
        if record.get("type") not in ("user", "assistant"):
            continue
        key = str(record.get("sessionId"))
        s = sessions.setdefault(key, Session(f"{path}#{key}"))
        message = record.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            if record["type"] == "user":
                s.users.append(content)
            continue
        for block in content or []:
            kind = block.get("type")
            if kind == "tool_use":
                pending[block["id"]] = (s, str(block["name"]), _args(block.get("input")))
            elif kind == "tool_result" and block.get("tool_use_id") in pending:
                owner, tool, args = pending.pop(block["tool_use_id"])
                text = _text(block.get("content"))
                owner.calls.append((tool, args, text, bool(block.get("is_error"))))
                owner.feedback.append(text)
            elif kind == "text" and record["type"] == "user":
                s.users.append(str(block.get("text") or ""))
    yield from sessions.values()


READERS = {
    "openai-chat": read_openai_chat,
    "tau2": read_tau2,
    "swe-agent": read_swe_agent,
    "aider": read_aider,
    "openhands": read_openhands,
    "claude-code": read_claude_code,
}


def manifest_files(manifest: dict[str, Any]) -> list[Path]:
    """The fleet's files: each ``files`` glob under the transcripts root, sorted, deduplicated."""
    found: set[str] = set()
    for pattern in manifest["files"]:
        found.update(glob.glob(str(DATA / pattern), recursive=True))
    return [Path(p) for p in sorted(found) if Path(p).is_file()]


def sessions(manifest: dict[str, Any]) -> list[Session]:
    reader = READERS[manifest["reader"]]
    return [s for path in manifest_files(manifest) for s in reader(path)]


def holds(rule: dict[str, Any], s: Session) -> bool:
    """Does ``rule`` (see the module docstring) hold in session ``s``?"""
    regex = re.compile(rule["regex"])
    tool = rule.get("tool")
    kind = rule["type"]
    if kind == "tool_error":
        return any(
            failed and (tool is None or t == tool) and regex.search(text)
            for t, _, text, failed in s.calls
        )
    if kind == "feedback":
        return any(regex.search(text) for text in s.feedback) or any(
            regex.search(text) for _, _, text, _ in s.calls
        )
    if kind == "user":
        return any(regex.search(text) for text in s.users)
    if kind == "call":
        wanted = rule.get("outcome")
        if wanted is not None and s.outcome != wanted:
            return False
        return any((tool is None or t == tool) and regex.search(a) for t, a, _, _ in s.calls)
    raise ValueError(f"unknown rule type {kind!r}; expected tool_error, feedback, user or call")


def recount(manifest: dict[str, Any]) -> dict[str, Any]:
    """``{"sessions": N, "patterns": {id: sessions}, "tasks": {id: distinct tasks or None}}``
    recounted from the raw files (a skipped set — ``skip`` says why — has no sessions to
    count); a pattern's tasks are None when the format names no tasks."""
    if manifest.get("skip"):
        return {"sessions": None, "patterns": {}, "tasks": {}}
    found = sessions(manifest)
    patterns: dict[str, int] = {}
    tasks: dict[str, int | None] = {}
    for p in manifest["patterns"]:
        hit = [s for s in found if holds(p["rule"], s)]
        patterns[p["id"]] = len(hit)
        named = {s.task for s in hit if s.task is not None}
        tasks[p["id"]] = len(named) if named else None
    return {"sessions": len(found), "patterns": patterns, "tasks": tasks}


def above(manifest: dict[str, Any], pattern: dict[str, Any]) -> bool:
    """Whether ``pattern`` reaches the manifest's thresholds (see the module docstring)."""
    t = manifest["thresholds"]
    tasks = pattern.get("tasks")
    return (
        pattern["sessions"] >= t["min_sessions"]
        and pattern["prevalence"] >= t["min_prevalence"]
        and (tasks is None or tasks >= t.get("min_tasks", 1))
    )


def load(name: str) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((HERE / f"{name}.json").read_text(encoding="utf-8"))
    return manifest


def names() -> list[str]:
    return sorted(p.stem for p in HERE.glob("*.json"))


def main(argv: list[str]) -> int:
    for name in argv or names():
        manifest = load(name)
        counted = recount(manifest)
        print(f"{name}: {counted['sessions']} sessions (manifest {manifest['sessions']})")
        for p in manifest["patterns"]:
            n, tasks = counted["patterns"][p["id"]], counted["tasks"][p["id"]]
            print(f"  {n:>5} (manifest {p['sessions']:>5}), tasks {tasks} (manifest "
                  f"{p.get('tasks')})  {p['id']}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
