"""Importers, without a database: every format, its is_error rule and tool-call pairing, checked
against figures computed here from the raw inputs (not by the importer's own code)."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memdir.transcripts import registry
from memdir.transcripts.importing import read_source
from memdir.transcripts.model import Event, Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source, sample
from memdir.transcripts.redact import Redactor

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
TAU = DATA / "tau-bench-airline" / "gpt-4o-airline.json"
CLAUDE = DATA / "claude-code-samples"
CODEX = DATA / "codex-cli-samples" / "daaain_claude-code-log__synthetic_rollout.jsonl"

needs_data = pytest.mark.skipif(  # under CI=true a missing data set is a failure, not a skip
    not DATA.is_dir() and os.environ.get("CI") != "true",
    reason=f"shared data not found at {DATA}",
)


def parse(source: Source, format: str | None = None) -> tuple[list[Transcript], ParseContext]:
    redactor = Redactor()
    ctx = ParseContext(cleaner=redactor.clean, redaction_total=lambda: redactor.total)
    return list(read_source(source, ctx, format)), ctx


def lines_source(name: str, records: list[Any]) -> Source:
    text = "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"
    return Source.from_bytes(name, text.encode())


def json_source(name: str, value: Any) -> Source:
    return Source.from_bytes(name, json.dumps(value, indent=1).encode())


def kinds(t: Transcript) -> list[str]:
    return [e.kind for e in t.events]


def assert_paired(t: Transcript) -> None:
    """Every tool result answers an earlier call of the same id, and carries its name."""
    calls: dict[str, Event] = {}
    for event in t.events:
        if event.kind == "tool_call" and event.call_id:
            calls[event.call_id] = event
        if event.kind == "tool_result":
            assert event.call_id in calls, f"{t.session_id}: result {event.call_id} has no call"
            assert event.name == calls[event.call_id].name


# --- τ-bench (OpenAI chat result file) ------------------------------------------------------


@needs_data
def test_tau_bench_against_the_raw_file() -> None:
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    transcripts, ctx = parse(Source.from_path(TAU))
    assert ctx.skipped == []
    assert len(transcripts) == len(raw) == 200
    by_session = {t.session_id: t for t in transcripts}
    total_calls = total_errors = 0
    for element in raw:
        t = by_session[f"gpt-4o-airline/task-{element['task_id']}/trial-{element['trial']}"]
        assert t.format == "openai-chat"
        assert t.score == element["reward"]
        assert t.outcome == ("success" if element["reward"] == 1.0 else "failure")
        assert t.meta["task_id"] == element["task_id"] and t.meta["info"] == element["info"]
        # Expected events, by the documented rule: one per non-empty content, one per tool
        # call, one per tool message; tool errors are tool messages starting with "Error: ".
        expected: list[tuple[str, Any]] = []
        for message in element["traj"]:
            if message["role"] == "tool":
                expected.append(("tool_result", message["tool_call_id"]))
                total_errors += message["content"].startswith("Error: ")
                continue
            if message.get("content"):
                expected.append(("message", message["role"]))
            for call in message.get("tool_calls") or []:
                expected.append(("tool_call", call["id"]))
                total_calls += 1
        got = [
            (e.kind, e.role if e.kind == "message" else e.call_id) for e in t.events
        ]  # fmt: skip
        assert got == expected
        errors = [e for e in t.events if e.kind == "tool_result" and e.is_error]
        raw_errors = [
            m for m in element["traj"] if m["role"] == "tool" and m["content"].startswith("Error: ")
        ]
        assert [e.output for e in errors] == [m["content"] for m in raw_errors]
        assert_paired(t)
        for event in t.events:
            if event.kind == "tool_call":
                assert isinstance(event.input, dict)  # arguments parsed from their JSON string
    assert total_calls == 1164
    assert sum(1 for t in transcripts for e in t.events if e.kind == "tool_call") == 1164
    assert sum(1 for t in transcripts for e in t.events if e.is_error) == total_errors > 0
    rewards = Counter(e["reward"] for e in raw)
    assert Counter(t.outcome for t in transcripts) == {
        "success": rewards[1.0],
        "failure": rewards[0.0],
    }


# --- Claude Code ----------------------------------------------------------------------------


@needs_data
def test_claude_code_samples_against_the_raw_files() -> None:
    for path in sorted(CLAUDE.glob("*.jsonl")):
        transcripts, _ctx = parse(Source.from_path(path))
        assert transcripts, path
        for t in transcripts:
            assert t.format == "claude-code"
            assert_paired(t)
        # Independently: every tool_use / tool_result block of a well-formed line is an event,
        # and usage is counted once per assistant message id.
        uses, results, errors, message_ids = set(), set(), 0, set()
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            message = record.get("message") if isinstance(record, dict) else None
            if not isinstance(message, dict) or not isinstance(record.get("sessionId"), str):
                continue
            if record.get("type") == "assistant" and message.get("usage"):
                message_ids.add((record["sessionId"], message.get("id")))
            for block in message.get("content") or []:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    uses.add(block["id"])
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    results.add(block["tool_use_id"])
                    errors += block.get("is_error") is True
        events = [e for t in transcripts for e in t.events]
        assert {e.call_id for e in events if e.kind == "tool_call"} == uses
        assert {e.call_id for e in events if e.kind == "tool_result"} == results
        assert sum(1 for e in events if e.is_error) == errors
        assert sum(1 for e in events if e.kind == "usage") == len(message_ids)


@needs_data
def test_claude_code_edge_cases_are_reported_and_skipped() -> None:
    path = CLAUDE / "daaain_claude-code-log__edge_cases.jsonl"
    transcripts, ctx = parse(Source.from_path(path))
    skipped = {p.line: p.reason for p in ctx.skipped}
    assert all(p.file == str(path) for p in ctx.skipped)
    assert "no 'content'" in skipped[10]
    assert "'message' is not an object" in skipped[11]
    assert "not a JSON object" in skipped[13] and "unknown record type" in skipped[14]
    edge = next(t for t in transcripts if t.session_id == "edge_cases")
    failing = next(e for e in edge.events if e.kind == "tool_result")
    assert failing.is_error and failing.name == "FailingTool"
    assert failing.duration_ms == 1000.0  # 11:01:30 -> 11:01:31
    assert "中文" in next(e.text for e in edge.events if e.text and "café" in e.text)


@needs_data
def test_the_schema_file_is_not_a_transcript() -> None:
    path = CLAUDE / "oneryalcin_agent-schemas__session.schema.v2.1.144.json"
    transcripts, ctx = parse(Source.from_path(path))
    assert transcripts == []
    [problem] = ctx.skipped
    assert "not a transcript" in problem.reason and "JSON Schema" in problem.reason


def _cc(uuid: str, kind: str, message: Any, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "uuid": uuid, "sessionId": "s1", "timestamp": "2026-01-01T00:00:00Z",
            "message": message, **extra}  # fmt: skip


def test_claude_code_lines_sharing_a_message_id_are_one_turn() -> None:
    usage = {"input_tokens": 10, "output_tokens": 1}
    final = {"input_tokens": 10, "output_tokens": 30}
    records = [
        _cc("u1", "user", {"role": "user", "content": "hi"}),
        _cc("a1", "assistant", {"id": "msg_1", "role": "assistant", "model": "m", "usage": usage,
                                "content": [{"type": "thinking", "thinking": "hmm"}]}),
        _cc("a2", "assistant", {"id": "msg_1", "role": "assistant", "model": "m", "usage": usage,
                                "content": [{"type": "text", "text": "Let me look."}]}),
        _cc("a3", "assistant", {"id": "msg_1", "role": "assistant", "model": "m", "usage": final,
                                "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                             "input": {"command": "ls"}}]}),
        _cc("u2", "user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True,
             "content": "Exit code 2\nls: cannot access"}]}),
    ]  # fmt: skip
    [t], ctx = parse(lines_source("s1.jsonl", records))
    assert ctx.skipped == []
    assert kinds(t) == ["message", "thinking", "message", "tool_call", "usage", "tool_result"]
    assert {e.message_id for e in t.events[1:5]} == {"msg_1"}
    assert t.events[4].usage == final  # the message's usage once, from its last line
    result = t.events[5]
    assert result.is_error and result.exit_code == 2 and result.name == "Bash"
    assert [e.key for e in t.events] == ["u1:0", "a1:0", "a2:0", "a3:0", "msg_1:usage", "u2:0"]
    assert t.events[1].raw is not None and json.loads(t.events[1].raw)["uuid"] == "a1"


def test_claude_code_sidechains_and_sub_agent_files_are_linked_sessions() -> None:
    main = [
        _cc("u1", "user", {"role": "user", "content": "start"}),
        _cc("s1", "user", {"role": "user", "content": "sub task"}, isSidechain=True,
            parentUuid=None),
        _cc("s2", "assistant", {"id": "m2", "role": "assistant", "content": "done"},
            isSidechain=True, parentUuid="s1"),
    ]  # fmt: skip
    transcripts, _ = parse(lines_source("s1.jsonl", main))
    by_id = {t.session_id: t for t in transcripts}
    assert set(by_id) == {"s1", "s1/sidechain-s1"}
    assert by_id["s1/sidechain-s1"].parent_session == "s1"
    assert len(by_id["s1/sidechain-s1"].events) == 2
    agent = [
        _cc("x1", "user", {"role": "user", "content": "explore"}, isSidechain=True,
            agentId="a9f"),
    ]  # fmt: skip
    [sub], _ = parse(lines_source("agent-a9f.jsonl", agent))
    assert sub.session_id == "s1/agent-a9f" and sub.parent_session == "s1"


# --- Codex, Responses -----------------------------------------------------------------------


@needs_data
def test_codex_rollout() -> None:
    records = [json.loads(line) for line in CODEX.read_text(encoding="utf-8").splitlines()]
    [t], ctx = parse(Source.from_path(CODEX))
    assert t.format == "codex"
    assert t.session_id == records[0]["payload"]["id"]
    assert t.meta["cwd"] == "/workspace/synthetic-project" and t.meta["model"] == "synthetic-model"
    calls = [r["payload"] for r in records if r["type"] == "response_item"
             and r["payload"]["type"] in ("function_call", "custom_tool_call")]  # fmt: skip
    assert [e.call_id for e in t.events if e.kind == "tool_call"] == [c["call_id"] for c in calls]
    assert_paired(t)
    assert [e.kind for e in t.events].count("tool_result") == len(calls)
    assert "SYNTHETIC_ENCRYPTED_CONTENT" not in "".join(e.text or "" for e in t.events)
    assert next(e for e in t.events if e.kind == "thinking").text.startswith("I will inspect")
    patched = next(e for e in t.events if e.name == "apply_patch" and e.kind == "tool_result")
    assert patched.output == "Done!"
    assert ctx.ignored == 3  # two event_msg lines repeating response items, one unknown type


def test_responses_items_and_exit_codes() -> None:
    items = [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "go"}]},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": '{"cmd":"make"}'},
        {"type": "function_call_output", "call_id": "c1",
         "output": json.dumps({"output": "boom", "metadata": {"exit_code": 2,
                                                              "duration_seconds": 1.5}})},
        {"type": "function_call", "call_id": "c2", "name": "grep", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "Exit code: 0\nWall time: "
         "0.2 seconds\nOutput:\nok"},
        {"type": "function_call", "call_id": "c3", "name": "lookup", "arguments": "not json"},
        {"type": "function_call_output", "call_id": "c3", "output": "Error: no such record"},
        {"type": "web_search_call", "id": "ws1", "status": "failed", "action": {"query": "x"}},
    ]  # fmt: skip
    [t], _ = parse(json_source("r.json", items))
    assert t.format == "openai-responses"
    results = [e for e in t.events if e.kind == "tool_result"]
    assert [(e.exit_code, e.is_error) for e in results] == [
        (2, True), (0, False), (None, True), (None, True)
    ]  # fmt: skip
    assert results[0].output == "boom" and results[0].duration_ms == 1500.0
    assert results[1].duration_ms == 200.0
    assert next(e for e in t.events if e.call_id == "c3").input == "not json"
    assert_paired(t)


def test_responses_object_with_usage_and_resent_history() -> None:
    first = {"object": "response", "id": "resp_1", "model": "gpt-x",
             "input": [{"role": "user", "content": "hi"}],
             "output": [{"type": "message", "id": "msg_1", "role": "assistant",
                         "content": [{"type": "output_text", "text": "hello"}]}],
             "usage": {"input_tokens": 5, "output_tokens": 2}}  # fmt: skip
    second = {**first, "id": "resp_2", "input": [*first["input"], *first["output"],
                                                 {"role": "user", "content": "bye"}]}  # fmt: skip
    second["output"] = [{"type": "message", "id": "msg_2", "role": "assistant",
                         "content": [{"type": "output_text", "text": "ciao"}]}]  # fmt: skip
    [t], _ = parse(lines_source("conv.jsonl", [first, second]))
    texts = [(e.role, e.text) for e in t.events if e.kind == "message"]
    assert texts == [("user", "hi"), ("assistant", "hello"), ("user", "bye"), ("assistant", "ciao")]
    assert [e.usage for e in t.events if e.kind == "usage"] == [
        {"input_tokens": 5, "output_tokens": 2}
    ] * 2


# --- Anthropic, OpenAI chat -----------------------------------------------------------------


def test_anthropic_bare_list_and_envelope() -> None:
    messages = [
        {"role": "user", "content": "read the file"},
        {"role": "assistant", "id": "msg_1", "model": "claude-x",
         "usage": {"input_tokens": 3, "output_tokens": 4},
         "content": [{"type": "thinking", "thinking": "ok", "signature": "s"},
                     {"type": "tool_use", "id": "tu1", "name": "read", "input": {"p": "/a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu1",
                                      "content": [{"type": "text", "text": "denied"}],
                                      "is_error": True}]},
        {"role": "assistant", "content": [{"type": "server_tool_use", "id": "st1",
                                           "name": "web_search", "input": {"query": "q"}},
                                          {"type": "web_search_tool_result", "tool_use_id": "st1",
                                           "content": {"type": "web_search_tool_result_error",
                                                       "error_code": "unavailable"}}]},
    ]  # fmt: skip
    [bare], _ = parse(json_source("conv.json", messages))
    assert bare.format == "anthropic-messages" and bare.session_id == "conv"
    assert kinds(bare) == ["message", "thinking", "tool_call", "usage", "tool_result",
                           "tool_call", "tool_result"]  # fmt: skip
    assert [e.is_error for e in bare.events if e.kind == "tool_result"] == [True, True]
    assert_paired(bare)
    envelope = {"session_id": "run-7", "system": "Be brief.", "messages": messages[:1],
                "metadata": {"project": "acme", "outcome": "success", "score": 0.9,
                             "ticket": "T-1"}}  # fmt: skip
    [wrapped], _ = parse(json_source("one.json", envelope))
    assert (wrapped.session_id, wrapped.project, wrapped.outcome, wrapped.score) == (
        "run-7", "acme", "success", 0.9,
    )  # fmt: skip
    assert wrapped.meta == {"ticket": "T-1"}
    assert wrapped.events[0].role == "system" and wrapped.events[0].text == "Be brief."


def test_openai_chat_error_rule_and_explicit_flag() -> None:
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "Error: bad input"},
        {"role": "tool", "tool_call_id": "b", "content": "Error: looks bad", "is_error": False},
    ]  # fmt: skip
    [t], _ = parse(json_source("chat.json", messages))
    assert t.format == "openai-chat"
    assert [(e.call_id, e.is_error) for e in t.events if e.kind == "tool_result"] == [
        ("a", True), ("b", False)
    ]  # fmt: skip
    assert_paired(t)


# --- OpenTelemetry --------------------------------------------------------------------------


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"key": key, "value": {"boolValue": value}}
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(
    span_id: str, start: int, end: int, attrs: dict[str, Any], **extra: Any
) -> dict[str, Any]:
    return {"traceId": "t1", "spanId": span_id, "name": "x", "startTimeUnixNano": str(start),
            "endTimeUnixNano": str(end), "attributes": [_attr(k, v) for k, v in attrs.items()],
            **extra}  # fmt: skip


def test_otel_genai_spans() -> None:
    base = 1_700_000_000_000_000_000
    user = {"role": "user", "parts": [{"type": "text", "content": "weather?"}]}
    call = {"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "weather",
                                            "arguments": {"city": "Paris"}}]}  # fmt: skip
    answer = {"role": "assistant", "parts": [{"type": "text", "content": "Rainy."}]}
    response = {"role": "user", "parts": [{"type": "tool_call_response", "id": "c1",
                                           "response": "rain"}]}  # fmt: skip
    spans = [
        _span("s1", base, base + 10**9, {
            "gen_ai.operation.name": "chat", "gen_ai.conversation.id": "conv-1",
            "gen_ai.request.model": "m1", "gen_ai.input.messages": json.dumps([user]),
            "gen_ai.output.messages": json.dumps([call]), "gen_ai.usage.input_tokens": 7,
            "gen_ai.usage.output_tokens": 3}),
        _span("s2", base + 2 * 10**9, base + 2 * 10**9 + 250 * 10**6, {
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "weather",
            "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.result": "rain"},
            status={"code": 2, "message": "timeout"}),
        _span("s3", base + 3 * 10**9, base + 4 * 10**9, {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps([user, call, response]),
            "gen_ai.output.messages": json.dumps([answer])}),
    ]  # fmt: skip
    doc = {"resourceSpans": [{"resource": {}, "scopeSpans": [{"spans": spans}]}]}
    [t], _ = parse(json_source("otel.json", doc))
    assert t.format == "otel-genai" and t.session_id == "conv-1"
    assert kinds(t) == ["message", "tool_call", "usage", "tool_result", "message"]
    result = t.events[3]
    assert result.is_error and result.duration_ms == 250.0 and result.name == "weather"
    assert t.events[1].input == {"city": "Paris"}
    assert t.events[4].text == "Rainy."


# --- generic, detection, registry, redaction ------------------------------------------------


def test_generic_form_reports_bad_lines() -> None:
    lines = [
        {"type": "transcript", "version": 1, "session_id": "g1", "project": "acme"},
        {"type": "event", "kind": "message", "role": "user", "text": "hi"},
        {"type": "event", "kind": "tool_result", "call_id": "x", "output": "o", "is_error": "yes"},
        {"type": "event", "kind": "teleport"},
        '{"type": "event", "kind": "message", "text": "trunc',
        {"type": "event", "kind": "tool_result", "call_id": "x", "output": "fine"},
    ]
    [t], ctx = parse(lines_source("g.jsonl", lines))
    assert (t.session_id, t.project) == ("g1", "acme")
    assert [e.key for e in t.events] == ["e0", "e1"]  # positions among the accepted events
    assert t.events[1].is_error is False  # absent is_error means false
    assert sorted(p.line or 0 for p in ctx.skipped) == [3, 4, 5]
    assert "truncated" in next(p.reason for p in ctx.skipped if p.line == 5)


def _detected(source: Source) -> str | None:
    found = registry.detect(sample(source))
    return None if found is None else found.name


def test_detection() -> None:
    chat = [{"role": "user", "content": "x"}, {"role": "assistant", "content": None,
                                               "tool_calls": []}]  # fmt: skip
    cases = {
        "openai-chat": json_source("a.json", chat),
        "anthropic-messages": json_source("b.json", [{"role": "user", "content": [
            {"type": "text", "text": "x"}]}]),
        "generic": lines_source("c.jsonl", [{"type": "transcript", "version": 1}]),
        "otel-genai": json_source("d.json", {"resourceSpans": []}),
        "openai-responses": json_source("e.json", [{"type": "function_call", "call_id": "c"}]),
        "codex": lines_source("f.jsonl", [{"type": "session_meta", "payload": {"id": "x"}}]),
        "claude-code": lines_source("g.jsonl", [_cc("u", "user", {"role": "user",
                                                                  "content": "x"})]),
    }  # fmt: skip
    assert {name: _detected(source) for name, source in cases.items()} == {n: n for n in cases}
    assert _detected(Source.from_bytes("h.json", b'{"$schema": "x", "title": "y"}')) is None


class _Echo:
    """A third-party importer: one message per line of a ``.echo`` text file."""

    name = "echo-test"
    description = "test importer"

    def detect(self, found: Sample) -> float:
        return 1.0 if found.name.startswith("echo") and found.shape == "unknown" else 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        with source.open() as handle:
            lines = handle.read().decode().splitlines()
        t = Transcript("echo-test", source.stem)
        t.events = [Event("message", key=f"l{i}", role="user", text=x) for i, x in enumerate(lines)]
        yield t


def test_third_party_importers_register_like_the_built_ins() -> None:
    registry.register(_Echo())
    try:
        assert isinstance(registry.get("echo-test"), registry.Importer)
        [t], _ = parse(Source.from_bytes("echo1.txt", b"one\ntwo\n"))
        assert t.format == "echo-test" and [e.text for e in t.events] == ["one", "two"]
        with pytest.raises(Exception, match="already registered"):
            registry.register(_Echo())
    finally:
        registry.unregister("echo-test")
    assert "echo-test" not in {i.name for i in registry.importers()}


AWS_KEY = "AKIAIOSFODNN7EXAMPLE"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_secrets_are_redacted_everywhere_with_the_kind() -> None:
    leak = f"export AWS_ACCESS_KEY_ID={AWS_KEY}\naws_secret_access_key = {AWS_SECRET}"
    messages = [
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
         "function": {"name": "sh", "arguments": json.dumps({"cmd": f"echo {AWS_KEY}"})}}]},
        {"role": "tool", "tool_call_id": "c", "content": leak},
    ]  # fmt: skip
    [t], ctx = parse(json_source("leak.json", messages))
    dump = json.dumps([e.normalised() for e in t.events])
    assert AWS_KEY not in dump and AWS_SECRET not in dump
    assert "[REDACTED:secret.aws-access-key]" in t.events[1].output  # type: ignore[operator]
    assert t.redactions >= 2 and ctx.last_redactions >= 1


def test_canonical_json_is_compact_unescaped_and_in_source_order() -> None:
    from memdir.transcripts.common import dumps

    values: list[Any] = [
        {"z": 1, "a": [None, True, 1.5, -0.0, 10**30, float("nan")], "é": "ü\u2028\"\\\n"},
        [], {}, "plain", 3, None, [{"b": {"c": ["\ud800", "\x00"]}}],
    ]  # fmt: skip
    for value in values:
        assert dumps(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    with pytest.raises(TypeError):
        dumps({"a": object()})
    assert dumps({"after": "a failure"}) == '{"after":"a failure"}'
