"""Fuzzed input never crashes the importer and never leaves a partial transcript.

Valid files of each format are damaged the ways real files are — truncated lines, wrong types,
missing ids, huge fields, invalid UTF-8, lost bytes — and imported, sometimes with the storage
failing in the middle of a transcript. Afterwards every stored transcript is whole (its event
rows are exactly 0..n-1 of its count) and importing the same bytes again adds nothing.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from unittest import mock

import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memdir import OWNER, MemoryService
from memdir.storage.schema import transcript_events, transcripts
from memdir.transcripts import Source
from memdir.transcripts.store import TranscriptRows

STORE = "default"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"


def _lines(records: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


def _bases() -> dict[str, bytes]:
    chat = [
        {"task_id": 1, "trial": 0, "reward": 1.0, "info": {}, "traj": [
            {"role": "system", "content": "policy"},
            {"role": "user", "content": "change my flight"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "get_user", "arguments": "{\"id\": 1}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_user", "content": "Error: no"},
            {"role": "assistant", "content": "Sorry."}]},
        {"task_id": 2, "trial": 0, "reward": 0.0, "info": {}, "traj": [
            {"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]},
    ]  # fmt: skip
    generic = [
        {"type": "transcript", "version": 1, "session_id": "g1", "outcome": "failure"},
        {"type": "event", "kind": "message", "role": "user", "text": "run it"},
        {"type": "event", "kind": "tool_call", "name": "sh", "call_id": "a", "input": {"c": 1}},
        {"type": "event", "kind": "tool_result", "call_id": "a", "output": "x", "is_error": True},
        {"type": "transcript", "version": 1, "session_id": "g2"},
        {"type": "event", "kind": "usage", "usage": {"input_tokens": 3}},
    ]
    otel = {"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": "t", "spanId": "s1", "startTimeUnixNano": "1700000000000000000",
         "attributes": [{"key": "gen_ai.operation.name", "value": {"stringValue": "execute_tool"}},
                        {"key": "gen_ai.tool.name", "value": {"stringValue": "w"}}],
         "status": {"code": 2}}]}]}]}  # fmt: skip
    bases = {
        "chat.json": json.dumps(chat, indent=1).encode(),
        "generic.jsonl": _lines(generic),
        "otel.json": json.dumps(otel, indent=1).encode(),
        "anthropic.json": json.dumps({"session_id": "an1", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "u", "name": "t",
                                               "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "u",
                                          "content": "no", "is_error": True}]}]}).encode(),
    }  # fmt: skip
    for name, path in {
        "claude.jsonl": DATA / "claude-code-samples" / "daaain_claude-code-log__edge_cases.jsonl",
        "codex.jsonl": DATA / "codex-cli-samples" / "daaain_claude-code-log__synthetic_rollout"
        ".jsonl",
    }.items():
        if path.is_file():
            bases[name] = path.read_bytes()
    return bases


BASES = _bases()
IDS = ("sessionId", "uuid", "session_id", "id", "call_id", "tool_use_id", "tool_call_id",
       "message", "content", "payload", "traj", "kind", "type", "role")  # fmt: skip
WRONG = st.one_of(st.integers(), st.none(), st.lists(st.integers(), max_size=3), st.booleans(),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                  st.text(max_size=20), st.floats(allow_nan=True))  # fmt: skip


def _mutate_json(value: Any, data: st.DataObject) -> Any:
    """Replace or delete one key somewhere in a JSON value."""
    if isinstance(value, dict) and value:
        key = data.draw(st.sampled_from(sorted({*value, *(k for k in IDS if k in value)})))
        action = data.draw(st.sampled_from(["wrong", "delete", "huge", "descend"]))
        if action == "delete":
            return {k: v for k, v in value.items() if k != key}
        if action == "wrong":
            return {**value, key: data.draw(WRONG)}
        if action == "huge":
            size = data.draw(st.integers(10_000, 120_000))
            return {**value, key: data.draw(st.sampled_from(["x", "é", "\u0000", "\ud800"])) * size}
        return {**value, key: _mutate_json(value[key], data)}
    if isinstance(value, list) and value:
        index = data.draw(st.integers(0, len(value) - 1))
        return [*value[:index], _mutate_json(value[index], data), *value[index + 1 :]]
    return data.draw(WRONG)


def _mutate(raw: bytes, data: st.DataObject) -> bytes:
    kind = data.draw(st.sampled_from(["truncate", "json", "utf8", "cut", "json", "truncate"]))
    if kind == "truncate":  # a line (or the document) ends early
        lines = raw.split(b"\n")
        index = data.draw(st.integers(0, len(lines) - 1))
        keep = data.draw(st.integers(0, max(0, len(lines[index]) - 1)))
        lines[index] = lines[index][:keep]
        return b"\n".join(lines)
    if kind == "utf8":
        at = data.draw(st.integers(0, len(raw)))
        junk = data.draw(st.sampled_from([b"\xff", b"\xc3(", b"\xed\xa0\x80", b"\x80\x80"]))
        return raw[:at] + junk + raw[at:]
    if kind == "cut":
        start = data.draw(st.integers(0, len(raw)))
        return raw[:start] + raw[start + data.draw(st.integers(1, 40)) :]
    try:
        if raw.lstrip().startswith(b"[") or raw.lstrip().startswith(b"{\n"):
            return json.dumps(_mutate_json(json.loads(raw), data), indent=1).encode()
        lines = raw.decode().splitlines()
        if not lines:
            return raw
        index = data.draw(st.integers(0, len(lines) - 1))
        lines[index] = json.dumps(_mutate_json(json.loads(lines[index]), data))
        return ("\n".join(lines) + "\n").encode()
    except ValueError:
        return raw


def _assert_whole(svc: MemoryService) -> None:
    with svc.db.read() as repo:
        rows = repo.conn.execute(sa.select(transcripts.c.id, transcripts.c.events)).all()
        counts = dict(
            repo.conn.execute(
                sa.select(transcript_events.c.transcript_id, sa.func.count()).group_by(
                    transcript_events.c.transcript_id
                )
            ).all()
        )
        top = dict(
            repo.conn.execute(
                sa.select(transcript_events.c.transcript_id, sa.func.max(transcript_events.c.seq))
                .group_by(transcript_events.c.transcript_id)
            ).all()
        )  # fmt: skip
    assert set(counts) <= {tid for tid, _ in rows}, "events without a transcript"
    for tid, events in rows:
        assert counts.get(tid, 0) == events, f"transcript {tid} is partial"
        assert top.get(tid, -1) == events - 1


_INTERNAL = re.compile(r"\b[A-Z]\w*(Error|Exception): ")


@settings(
    max_examples=35,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_fuzzed_input_never_crashes_or_leaves_a_partial_transcript(
    svc: MemoryService, data: st.DataObject
) -> None:
    name = data.draw(st.sampled_from(sorted(BASES)))
    raw = BASES[name]
    for _ in range(data.draw(st.integers(1, 3))):
        raw = _mutate(raw, data)
    fail_at = data.draw(st.one_of(st.none(), st.integers(1, 3)))
    calls = {"n": 0}
    original = TranscriptRows.append_events

    def flaky(self: TranscriptRows, tid: str, first: int, events: Any) -> None:
        original(self, tid, first, events)
        calls["n"] += 1
        if calls["n"] == fail_at:  # the storage fails after writing part of a transcript
            raise sa.exc.OperationalError("INSERT", {}, Exception("injected"))

    source = Source.from_bytes(name, raw)
    with mock.patch.object(TranscriptRows, "append_events", flaky):
        report = svc.import_transcripts(OWNER, STORE, [source])
    for problem in report.skipped:
        assert problem.reason and " failed (" not in problem.reason, problem
    for problem in report.failed:
        assert "injected" in problem.reason or not _INTERNAL.search(problem.reason), problem
    _assert_whole(svc)
    again = svc.import_transcripts(OWNER, STORE, [source])
    assert again.failed == [] or all("not imported" in p.reason for p in again.failed)
    assert not _INTERNAL.search(" ".join(p.reason for p in again.failed))
    third = svc.import_transcripts(OWNER, STORE, [source])
    assert (third.new, third.grown, third.events) == (0, 0, 0)
    _assert_whole(svc)
