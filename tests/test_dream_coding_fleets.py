"""The offline dream on the coding-agent fleets' shapes: sub-agents of one conversation are one
session, a recovery's prevalence is over the sessions its failure affected, and aider's harness
feedback (the rejected edit, the lint run) is one cause each with the fix the sessions show.
Figures on real data are recounted here from the raw files, with readers of the test's own."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
from functools import cache
from pathlib import Path

import pytest

from memdir.dream.engine import Engine, EngineConfig, EngineResult
from memdir.dream.model import Session, Thresholds
from memdir.transcripts.importing import read_source
from memdir.transcripts.model import Event, TranscriptInfo
from memdir.transcripts.reader import ParseContext, Source
from memdir.transcripts.redact import Redactor

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
NOW = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
needs_data = pytest.mark.skipif(  # under CI=true a missing data set is a failure, not a skip
    not (DATA / "aider-chat-history").is_dir() and os.environ.get("CI") != "true",
    reason=f"shared data not found at {DATA}",
)


def _info(sid: str, *, parent: str | None = None, fmt: str = "claude-code") -> TranscriptInfo:
    return TranscriptInfo(
        id=f"{fmt}:{sid}", format=fmt, session_id=sid, parent_session=parent, project="p",
        user=None, agent=None, task=None, labels=(), outcome="unknown", score=None,
        started_at=NOW, ended_at=None, events=0, tool_calls=0, tool_errors=0, redactions=0,
        imported_at=NOW, updated_at=NOW, imported_by="owner",
    )  # fmt: skip


def _reads(*paths: str) -> list[Event]:
    events: list[Event] = []
    for n, path in enumerate(paths):
        events.append(Event("tool_call", name="Read", call_id=f"c{n}", input={"file_path": path}))
        events.append(Event("tool_result", call_id=f"c{n}", name="Read", output="text"))
    return events


def _lookups(result: EngineResult) -> dict[str, int]:
    return {p.key: p.sessions for p in result.patterns if p.miner == "exploration"}


def test_sub_agents_of_one_conversation_count_as_one_session() -> None:
    """A root and three sub-agents reading the same file are one session of it; the
    conversation counts once in the sessions selected, in whatever order its parts arrive."""
    thresholds = Thresholds(min_sessions=2, min_prevalence=0.0)
    parts = [Session(_info("root"), _reads("src/api.ts", "README.md"))]
    parts += [Session(_info(f"root/agent-{n}", parent="root"), _reads("src/api.ts"))
              for n in range(3)]  # fmt: skip
    other = Session(_info("other"), _reads("src/api.ts"))
    for order in ([*parts, other], [*parts[::-1], other], [parts[1], other, *parts[2:], parts[0]]):
        engine = Engine(EngineConfig(thresholds), [], NOW)
        for session in order:
            engine.add(session)
        result = engine.finish()
        assert engine.sessions_selected == 2
        assert _lookups(result)["read src/api.ts"] == 2  # the conversation and the other one
        assert _lookups(result)["read README.md"] == 1
        (pattern,) = [p for p in result.patterns if p.key == "read src/api.ts"]
        assert pattern.occurrences == 5 and pattern.prevalence == 1.0
    # the same session id in another format is another conversation
    engine = Engine(EngineConfig(thresholds), [], NOW)
    engine.add(Session(_info("root"), _reads("src/api.ts")))
    engine.add(Session(_info("root", fmt="codex"), _reads("src/api.ts")))
    assert engine.sessions_selected == 2


def test_conversations_survive_a_checkpoint() -> None:
    thresholds = Thresholds(min_sessions=1, min_prevalence=0.0)
    engine = Engine(EngineConfig(thresholds), [], NOW)
    engine.add(Session(_info("root"), _reads("src/api.ts")))
    state = json.loads(json.dumps(engine.state()))
    resumed = Engine.restore(EngineConfig(thresholds), [], NOW, state)
    resumed.add(Session(_info("root/agent-1", parent="root"), _reads("src/api.ts")))
    assert resumed.sessions_selected == 1
    assert _lookups(resumed.finish())["read src/api.ts"] == 1


# --- real fleets ----------------------------------------------------------------------------


@cache
def fleet(name: str) -> tuple[Session, ...]:
    """Every session of a shared fleet, imported as the store would, in id order."""
    files = sorted(p for p in (DATA / name).rglob("*")
                   if p.is_file() and p.suffix in (".jsonl", ".traj", ".md")
                   and p.name not in ("SOURCE.md",))  # fmt: skip
    redactor = Redactor()
    out: list[Session] = []
    for path in files:
        ctx = ParseContext(cleaner=redactor.clean, redaction_total=lambda: redactor.total)
        for t in read_source(Source.from_path(path), ctx, None):
            info = TranscriptInfo(
                id=f"{t.format}:{t.session_id}", format=t.format, session_id=t.session_id,
                parent_session=t.parent_session, project=t.project, user=t.user,
                agent=t.agent, task=t.task, labels=t.labels, outcome=t.outcome,
                score=t.score, started_at=t.started_at, ended_at=t.ended_at,
                events=len(t.events), tool_calls=0, tool_errors=0, redactions=0,
                imported_at=NOW, updated_at=NOW, imported_by="owner",
            )  # fmt: skip
            out.append(Session(info, t.events, dict(t.meta)))
    return tuple(sorted(out, key=lambda s: s.id))


@cache
def dream(name: str) -> tuple[EngineResult, int]:
    engine = Engine(EngineConfig(), [], NOW)
    for s in fleet(name):
        engine.add(s)
    return engine.finish(), engine.sessions_selected


@needs_data
def test_claude_code_sub_agents_are_not_independent_sessions() -> None:
    root = DATA / "claude-code-happy-cli"
    ids: set[str] = set()
    for path in root.rglob("*.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line) if line.strip() else {}
            if record.get("type") in ("user", "assistant") and record.get("sessionId"):
                ids.add(record["sessionId"])
    sessions = fleet("claude-code-happy-cli")
    assert any(s.info.parent_session for s in sessions)  # the long session's Task sub-agents
    result, selected = dream("claude-code-happy-cli")
    # stored: one transcript per conversation part; counted: one session per conversation
    # (a file whose one line is a lone summary holds no conversation)
    assert selected == len({s.info.parent_session or s.info.session_id for s in sessions})
    assert selected <= len(ids) < len(sessions)
    # a file the sub-agents of the long session each read is one session's lookup
    assert not [d for d in result.drafts if d.pattern.miner == "exploration"]


@needs_data
def test_swe_agent_recovery_prevalence_counts_the_sessions_the_failure_affected() -> None:
    rejected = re.compile(r"Your proposed edit has introduced new syntax error"
                          r"(.|\n)*IndentationError: unexpected indent")  # fmt: skip
    affected = 0
    for path in (DATA / "swe-agent-trajectories").rglob("*.traj"):
        steps = json.loads(path.read_text(encoding="utf-8")).get("trajectory") or []
        affected += any(rejected.search(str(s.get("observation") or "")) for s in steps)
    result, selected = dream("swe-agent-trajectories")
    (draft,) = [d for d in result.drafts if d.pattern.miner == "recovery"]
    assert draft.pattern.sessions == affected == draft.pattern.subject["failure_sessions"]
    fixed = draft.pattern.variants["fix the indentation"]
    assert fixed < affected  # the fix worked in fewer sessions than the failure hit
    body = draft.operations[0].content  # type: ignore[union-attr]
    assert f"worked in {fixed} of {affected} sessions" in body
    assert f"Seen in {affected} of {selected} sessions" in body


# --- aider: the rejected edit and the lint run -------------------------------------------------

REJECTED = """Tokens: 26,161 sent, 141 received. Cost: $0.08 request, $0.39 session.
The LLM did not conform to the edit format.
https://aider.chat/docs/troubleshooting/edit-errors.html
# 1 SEARCH/REPLACE block failed to match!

## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines in aider/io.py
The SEARCH section must exactly match an existing block of lines including all white space"""
LINT = """# Fix any errors below, if possible.

## Running: /home/dev/tmp.lint.sh tests/test_main.py

isort....................................................................Passed
flake8...................................................................Failed
- hook id: flake8
- exit code: 1

tests/test_main.py:312:14: F821 undefined name 'GitTemporaryDirectory'
tests/test_main.py:3:1: F401 'os' imported but unused"""


def test_a_docs_link_or_a_token_line_is_never_the_error_signature() -> None:
    from memdir.dream.miners.signature import error_line

    assert error_line(REJECTED) == "# 1 SEARCH/REPLACE block failed to match!"
    no_reason = "\n".join(REJECTED.splitlines()[:3])
    assert error_line(no_reason) == "The LLM did not conform to the edit format."


def _feedback(*events: Event) -> list[tuple[str, dict[str, object], tuple[str, ...]]]:
    from memdir.dream.miners.base import MinerContext
    from memdir.dream.miners.failures import FailureRules
    from memdir.dream.miners.feedback import FeedbackMiner

    miner = FeedbackMiner(MinerContext(FailureRules()))
    signals = miner.mine(Session(_info("s", fmt="aider"), list(events)))
    return [(s.key, s.subject, s.details) for s in signals]


def test_aider_rejection_is_one_edit_feedback_whatever_reason_follows() -> None:
    call = Event("tool_call", name="edit", call_id="e", input={"files": ["aider/io.py"]})
    reasons = (REJECTED, "\n".join(REJECTED.splitlines()[:3]) + "\nNo filename provided")
    keys = set()
    for output in reasons:
        found = _feedback(Event("message", role="assistant", text="edit"), call,
                          Event("tool_result", call_id="e", name="edit", output=output,
                                is_error=True))  # fmt: skip
        ((key, subject, _),) = found
        assert subject["kind"] == "edit"
        keys.add(key)
    assert keys == {"edit|The LLM did not conform to the edit format."}


def test_a_lint_report_is_feedback_before_the_agent_acted_and_names_its_findings() -> None:
    launch = _feedback(
        Event("message", role="system", text="aider --lint\nAider v0.50\n" + LINT),
        Event("message", role="assistant", text="I'll add the import."),
        Event("tool_call", name="edit", call_id="e", input={"files": ["tests/test_main.py"]}),
        Event("tool_result", call_id="e", name="edit", output="Applied edit"),
    )
    after_edit = _feedback(
        Event("message", role="assistant", text="edit"),
        Event("tool_call", name="edit", call_id="e", input={"files": ["tests/test_main.py"]}),
        Event("tool_result", call_id="e", name="edit", output="Applied edit\n" + LINT),
    )
    ((key, subject, details),) = launch
    assert [k for k, _, _ in after_edit] == [key] == ["lint|# Fix any errors below, if possible."]
    assert subject["details"] == ["flake8 failed", "F821 undefined name <str>",
                                  "F401 <str> imported but unused"]  # fmt: skip
    assert details[:3] == tuple(subject["details"])  # type: ignore[arg-type]
    # before the agent's first action nothing else is feedback: a system prompt's rules on
    # formats, limits and timeouts are no event
    prompt = "You must answer in the right format. Never exceed the step limit; avoid timeouts."
    assert _feedback(Event("message", role="system", text=prompt),
                     Event("message", role="assistant", text="ok")) == []  # fmt: skip
    # ... but the model API failing to answer the first turn is (reported, never proposed)
    overloaded = 'litellm.APIConnectionError: b\'{"error":{"type":"overloaded_error"}}\''
    ((key, subject, _),) = _feedback(Event("message", role="user", text="add a web ui"),
                                     Event("message", role="system", text=overloaded))  # fmt: skip
    assert subject["kind"] == "environment" and key.startswith("environment|")


@needs_data
def test_aider_fleet_rejections_and_lint_runs_recounted() -> None:
    """Recounted from the raw history: sessions (header-delimited) whose aider output says the
    edit was rejected, and whose output holds a lint report; the dream has one pattern each."""
    rejected = lint = 0
    for path in sorted((DATA / "aider-chat-history").rglob("*.md")):
        if path.name == "SOURCE.md":
            continue
        chunks = re.split(r"(?m)^# aider chat started at .*$", path.read_text(encoding="utf-8"))
        for chunk in chunks:
            harness = [x[2:] for x in chunk.splitlines() if x.startswith("> ")]
            rejected += any("did not conform to the edit format" in x for x in harness)
            lint += any(x.startswith("# Fix any errors below") for x in harness)
    result, _ = dream("aider-chat-history")
    feedback = {p.subject["kind"]: p for p in result.kept if p.miner == "feedback"}
    # within 2 of the raw count, by reading: a rejection aider printed when its developer ran
    # ``aider --apply bad-edit.md`` (no agent turn: 2 sessions) is no agent's failure, and the
    # lint report the history's headerless start opens with (the user's turn) is not counted
    assert 0 <= rejected - feedback["edit"].sessions <= 2
    assert 0 <= lint - feedback["lint"].sessions <= 2
    assert [d.pattern.miner for d in result.drafts] == ["feedback", "feedback"]
