"""Harness feedback, simulator closings, outcomes and tasks, the contrast miner and the feedback
loops — on the real fleets in ``../shared/data/transcripts/`` (each figure recounted here from
the imported events or the raw files with logic of the test's own), plus unit tests."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import re
from collections import defaultdict
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from memdir.core.model import Write
from memdir.dream.decide import MemoryIndex, coverage
from memdir.dream.engine import Engine, EngineConfig, EngineResult
from memdir.dream.miners.base import MinerContext, register, unregister
from memdir.dream.miners.contrast import benjamini_hochberg, mantel_haenszel
from memdir.dream.miners.corrections import is_correction, is_simulator_closing
from memdir.dream.miners.failures import FailureRules
from memdir.dream.miners.feedback import feedback_kind
from memdir.dream.miners.stale_memory import claims_of
from memdir.dream.model import MemoryFile, Pattern, Session, Signal, TaskSketch, Thresholds
from memdir.transcripts.importing import read_source
from memdir.transcripts.model import Event, TranscriptInfo
from memdir.transcripts.reader import ParseContext, Source
from memdir.transcripts.redact import Redactor

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
NOW = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
needs_data = pytest.mark.skipif(  # under CI=true a missing data set is a failure, not a skip
    not (DATA / "tau-bench-airline").is_dir() and os.environ.get("CI") != "true",
    reason=f"shared data not found at {DATA}",
)
FLEETS = {
    "tau2": "tau2-leaderboard",
    "tau": "tau-bench-airline",
    "aider": "aider-chat-history",
    "swe": "swe-agent-trajectories",
    "openhands": "openhands-samples",
}


def _info(t: Any) -> TranscriptInfo:
    return TranscriptInfo(
        id=f"{t.format}:{t.session_id}", format=t.format, session_id=t.session_id,
        parent_session=t.parent_session, project=t.project, user=t.user, agent=t.agent,
        task=t.task, labels=t.labels, outcome=t.outcome, score=t.score,
        started_at=t.started_at, ended_at=t.ended_at, events=len(t.events), tool_calls=0,
        tool_errors=0, redactions=0, imported_at=NOW, updated_at=NOW, imported_by="owner",
    )  # fmt: skip


@cache
def fleet(name: str) -> tuple[Session, ...]:
    """Every session of a shared fleet, imported as the store would, in id order."""
    root = DATA / FLEETS[name]
    files = sorted(
        p for p in root.rglob("*")
        if p.is_file() and p.name not in ("SOURCE.md", "LICENSE", "MANIFEST.tsv")
        and not p.name.endswith("_policy.md")
    )  # fmt: skip
    redactor = Redactor()
    out: list[Session] = []
    for path in files:
        ctx = ParseContext(cleaner=redactor.clean, redaction_total=lambda: redactor.total)
        for t in read_source(Source.from_path(path), ctx, None):
            out.append(Session(_info(t), t.events, dict(t.meta)))
    return tuple(sorted(out, key=lambda s: s.id))


@cache
def dream(name: str) -> EngineResult:
    engine = Engine(EngineConfig(), [], NOW)
    for s in fleet(name):
        engine.add(s)
    return engine.finish()


def by_miner(result: EngineResult, miner: str) -> list[Pattern]:
    return [p for p in result.kept if p.miner == miner]


def reason_of(result: EngineResult, pattern_id: str) -> str | None:
    return next((why for p, why in result.left_out if p.id == pattern_id), None)


def acted_then(session: Session, text: re.Pattern[str], *, kind: str) -> bool:
    """The test's own reading: after the agent's first action, an event of ``kind`` holds it."""
    acted = False
    for event in session.events:
        if event.kind == "tool_call" or (event.kind == "message" and event.role == "assistant"):
            acted = True
        elif acted and event.kind == kind:
            body = event.output if kind == "tool_result" else event.text
            if body and text.search(body):
                return True
    return False


# --- harness feedback on real fleets ----------------------------------------------------


def harness_said(session: Session, text: re.Pattern[str]) -> bool:
    """The test's own reading: a tool result or a system message (aider's output) holds it."""
    return any(
        text.search(e.output or "") if e.kind == "tool_result" else
        e.kind == "message" and e.role == "system" and bool(text.search(e.text or ""))
        for e in session.events
    )  # fmt: skip


@needs_data
def test_aider_edit_and_lint_feedback_are_mined_with_their_fix() -> None:
    result = dream("aider")
    found = {p.subject["kind"]: p for p in by_miner(result, "feedback")}
    assert set(found) >= {"edit", "lint"}
    sessions = fleet("aider")
    # one cause each: the rejection, whatever reason follows it (a SEARCH block that failed
    # to match, no file name, ...), and the lint run, after an edit or at a --lint launch
    rejected = re.compile(r"did not conform to the edit format")
    lint = re.compile(r"# Fix any errors below, if possible\.")
    assert found["edit"].sessions == sum(acted_then(s, rejected, kind="tool_result")
                                         for s in sessions)  # fmt: skip
    assert found["lint"].sessions == sum(harness_said(s, lint) for s in sessions)
    assert found["edit"].subject["signature"] == "The LLM did not conform to the edit format."
    edit = found["edit"]
    # the fix is the harness's own rule (its most frequent request) and how often the next
    # edit applied
    asks = [d for d in edit.details if d.startswith("asks: ")]
    assert asks and "must exactly match" in asks[0]
    assert (
        sum(n for v, n in edit.variants.items() if v.startswith("complied")) >= edit.sessions // 2
    )
    (draft,) = [d for d in result.drafts if d.pattern.id == edit.id]
    note = draft.operations[0]
    assert isinstance(note, Write) and note.path.startswith("/org/known-failures/")
    assert "must exactly match" in note.content and "What worked: the next turn complied" in (
        note.content
    )
    # the lint note names what the linter reported, counted over sessions: the failing check
    # first, then the codes with their messages (names masked: the code is the cause)
    flake8 = re.compile(r"^flake8\.{3,}\s*Failed$", re.M)
    details = found["lint"].details
    assert next(d for d in details if not d.startswith("asks: ")) == "flake8 failed"
    linted = [s for s in sessions if harness_said(s, lint)]
    assert details["flake8 failed"] == sum(harness_said(s, flake8) for s in linted)
    (lint_draft,) = [d for d in result.drafts if d.pattern.id == found["lint"].id]
    body = lint_draft.operations[0].content  # type: ignore[union-attr]
    assert "`F821 undefined name <str>`" in body and "`F401 <str> imported but unused`" in body
    # no docs link is a signature; the tool errors the rejected edits gave are reported once,
    # as the feedback pattern that carries the fix
    assert not [p for p in result.patterns if p.miner == "tool_errors"
                and p.subject["signature"] == "<url>"]  # fmt: skip
    no_match = [p for p, _ in result.left_out if p.miner == "tool_errors"
                and "failed to match" in p.subject["signature"]]  # fmt: skip
    assert no_match and all(
        (reason_of(result, p.id) or "").startswith(f"explained by {edit.id}") for p in no_match
    )


@needs_data
def test_swe_agent_editor_lint_feedback_is_one_cause_with_its_recovery() -> None:
    result = dream("swe")
    (lint,) = [p for p in result.patterns if p.miner == "feedback" and p.subject["kind"] == "lint"]
    assert lint.subject["source"] == "bash" and "retry" in lint.subject["instruction"]
    text = re.compile(r"Your proposed edit has introduced new syntax error")
    assert lint.sessions == sum(acted_then(s, text, kind="tool_result") for s in fleet("swe"))
    # the editor's rejection and the re-indented edit that it took are one cause: the recovery
    # names the literal fix, so the feedback and the tool error are reported once, through it
    (recovery,) = by_miner(result, "recovery")
    assert (reason_of(result, lint.id) or "").startswith(f"explained by {recovery.id}")
    assert not by_miner(result, "tool_errors") and not by_miner(result, "feedback")


@needs_data
def test_openhands_continue_prompt_is_a_rule_agents_keep_breaking() -> None:
    result = dream("openhands")
    (pattern,) = by_miner(result, "feedback")
    assert pattern.subject["kind"] == "continue"
    raw = 0
    for path in (DATA / FLEETS["openhands"]).rglob("*.json*"):
        text = path.read_text(encoding="utf-8")
        rows = [json.loads(line) for line in text.splitlines() if line.strip()] if (
            path.suffix == ".jsonl") else [json.loads(text)]  # fmt: skip
        for row in rows:
            raw += "Please continue working on the task" in json.dumps(row)
    assert pattern.sessions == raw == 6
    # no turn complied (the agent replied and the run ended), yet the harness states the rule
    assert pattern.variants == {"never complied": 6}
    (draft,) = [d for d in result.drafts if d.pattern.id == pattern.id]
    content = draft.operations[0].content  # type: ignore[union-attr]
    assert "exit" in content and "keep breaking" in content


@needs_data
def test_tau2_simulator_closings_are_neither_corrections_nor_feedback() -> None:
    sessions = fleet("tau2")
    closing = sum(
        any(e.kind == "message" and e.role == "user" and "###STOP###" in (e.text or "")
            for e in s.events)
        for s in sessions
    )  # fmt: skip
    assert closing >= 100  # the data has them: without the rule they made a "correction"
    result = dream("tau2")
    texts = [json.dumps(p.subject) + json.dumps(p.variants) for p in result.patterns
             if p.miner in ("corrections", "feedback")]  # fmt: skip
    assert not [t for t in texts if "###" in t or "that’s all" in t.lower()]


# --- outcomes and tasks -----------------------------------------------------------------


@needs_data
def test_tau_bench_patterns_count_tasks_and_failure_lift() -> None:
    raw = json.loads((DATA / FLEETS["tau"] / "gpt-4o-airline.json").read_text("utf-8"))
    failed = sum(1 for e in raw if e["reward"] < 1)
    tasks: dict[str, set[str]] = defaultdict(set)
    outcome: dict[str, list[bool]] = defaultdict(list)
    for element in raw:
        seen: set[str] = set()
        for message in element["traj"]:
            content = message.get("content") or ""
            if message["role"] == "tool" and content.startswith("Error: "):
                key = re.sub(r"\d+", "#", content)
                tasks[key].add(str(element["task_id"]))
                if key not in seen:
                    seen.add(key)
                    outcome[key].append(element["reward"] < 1)
    result = dream("tau")
    payment = next(p for p in result.patterns if "payment amount does not add up" in p.id)
    key = next(k for k in tasks if "payment amount does not add up" in k)
    assert payment.tasks == len(tasks[key]) and payment.sessions == len(outcome[key])
    assert payment.failed == sum(outcome[key]) and payment.known == payment.sessions
    assert (payment.baseline_failed, payment.baseline_known) == (failed, len(raw))
    stats = payment.statistics()
    lift = ((sum(outcome[key]) + 1) / (len(outcome[key]) + 2)) / ((failed + 1) / (len(raw) + 2))
    assert stats["lift"] == round(lift, 3) and stats["tasks"] == len(tasks[key])
    (draft,) = [d for d in result.drafts if d.pattern.id == payment.id]
    assert f"trials of {len(tasks[key])} distinct tasks" in draft.rationale
    assert "lift" in draft.rationale
    # five sessions that are trials of two tasks are one scenario repeated, not a pattern
    few = [p for p in result.patterns if p.sessions >= 5 and 0 < p.tasks < 3]
    assert few and all("distinct tasks < 3" in (reason_of(result, p.id) or "") for p in few)


def test_project_scoped_patterns_use_the_projects_own_prevalence() -> None:
    def one(i: int, project: str, fails: bool) -> Session:
        events = [Event("message", role="user", text="go")]
        if fails:
            events += [
                Event("tool_call", name="Bash", call_id="c", input={"command": "npm ci"}),
                Event("tool_result", call_id="c", output="npm ERR! code EINTEGRITY", is_error=True),
            ]
        info = TranscriptInfo(
            id=f"s{i:04}", format="generic", session_id=f"s{i}", parent_session=None,
            project=project, user=None, agent=None, task=None, labels=(), outcome="unknown",
            score=None, started_at=NOW, ended_at=None, events=0, tool_calls=0, tool_errors=0,
            redactions=0, imported_at=NOW, updated_at=NOW, imported_by="owner",
        )  # fmt: skip
        return Session(info, events)

    engine = Engine(EngineConfig(miners=("tool_errors",)), [], NOW)
    # 6 of project web's 20 sessions fail (30 %), but only 6 of the fleet's 520 (1.2 %)
    for i in range(520):
        engine.add(one(i, "web" if i < 20 else "api", i < 6))
    result = engine.finish()
    (kept,) = result.kept
    assert kept.prevalence < 0.02 and kept.project_prevalence == 0.3
    assert kept.statistics()["project_prevalence"] == 0.3
    assert "In project web: 6 of 20 sessions (30.0%)" in result.drafts[0].rationale


def test_task_sketch_is_exact_when_small_and_bounded_when_large() -> None:
    sketch = TaskSketch()
    for i in range(50):
        sketch.add(f"task-{i % 25}")
    assert sketch.count() == 25
    big = TaskSketch()
    for i in range(5000):
        big.add(f"t{i}")
    assert len(big.hashes) == TaskSketch.K and abs(big.count() - 5000) / 5000 < 0.35
    merged = TaskSketch(list(sketch.hashes))
    merged.merge(TaskSketch([TaskSketch.hash_of(f"task-{i}") for i in range(20, 40)]))
    assert merged.count() == 40


# --- the contrast miner -----------------------------------------------------------------


def test_mantel_haenszel_and_benjamini_hochberg() -> None:
    # one stratum, a strong association: 9/10 failed with, 1/10 succeeded with
    odds, p = mantel_haenszel([(9, 1, 1, 9)])
    assert odds == pytest.approx(81.0)  # the plain Mantel-Haenszel estimator: a*d / b*c
    # sparse strata (one or two trials an outcome) are not pulled towards 1: two tables of
    # a=1, d=1 and one of b=1, c=1 give (1/2 + 1/2) / (1/2)
    assert mantel_haenszel([(1, 0, 0, 1), (1, 0, 0, 1), (0, 1, 1, 0)])[0] == pytest.approx(2.0)
    # a zero pooled denominator: 0.5 in every cell keeps the estimate finite
    assert mantel_haenszel([(2, 0, 0, 2)])[0] == pytest.approx((2.5 * 2.5) / (0.5 * 0.5))
    # CMH statistic by hand: (|9 - 10*10/20| - 0.5)^2 / (10*10*10*10/(20*20*19))
    stat = (abs(9 - 5) - 0.5) ** 2 / (10 * 10 * 10 * 10 / (20 * 20 * 19))
    assert p == pytest.approx(math.erfc(math.sqrt(stat / 2)))
    # strata with one outcome carry nothing; no association gives p = 1-ish
    assert mantel_haenszel([(3, 0, 0, 0)]) == (math.inf, 1.0)
    assert mantel_haenszel([(5, 5, 5, 5)])[1] > 0.5
    assert benjamini_hochberg({"a": 0.01, "b": 0.04, "c": 0.5}) == pytest.approx(
        {"a": 0.03, "b": 0.06, "c": 0.5}
    )


def _task_of(sim: dict[str, Any], domain: str) -> str:
    return f"{domain}/{sim['task_id']}"


@needs_data
def test_contrast_finds_calls_over_represented_in_failed_trials_of_the_same_task() -> None:
    # the test's own stratified count from the raw τ² files: per task, trials and whether
    # they called search_onestop_flight
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0, 0])  # fw, f, sw, s
    for path in sorted((DATA / FLEETS["tau2"]).rglob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        sims = data if isinstance(data, list) else data.get("simulations") or []
        if isinstance(data, dict):
            info = data.get("info") or {}
            domain = (info.get("environment_info") or {}).get("domain_name") or data.get("domain")
        for sim in sims:
            if isinstance(data, list):  # a bare list: the policy's first heading names it
                heading = str(sim.get("policy") or "").split("\n", 1)[0]
                domain = (
                    heading.lstrip("# ").removesuffix(" Agent Policy").lower().replace(" ", "_")
                )
            reward = (sim.get("reward_info") or {}).get("reward")
            if reward is None:
                continue
            called = any(
                (c.get("name") or (c.get("function") or {}).get("name")) == "search_onestop_flight"
                for m in sim.get("messages") or [] for c in m.get("tool_calls") or []
            )  # fmt: skip
            row = table[_task_of(sim, str(domain))]
            if reward < 1:
                row[0] += called
                row[1] += 1
            else:
                row[2] += called
                row[3] += 1
    mixed = {t: r for t, r in table.items() if r[1] and r[3] and (r[0] or r[2])}
    result = dream("tau2")
    (pattern,) = [p for p in by_miner(result, "contrast")
                  if p.subject["feature"] == "search_onestop_flight"]  # fmt: skip
    assert pattern.subject["failed_with"] == sum(r[0] for r in mixed.values())
    assert pattern.subject["succeeded_with"] == sum(r[2] for r in mixed.values())
    assert pattern.subject["contrast_tasks"] == sum(1 for r in mixed.values() if r[0])
    # the plain Mantel-Haenszel estimate over the test's own strata
    strata = [(r[0], r[1] - r[0], r[2], r[3] - r[2]) for r in mixed.values()]
    num = sum(a * d / (a + b + c + d) for a, b, c, d in strata)
    den = sum(b * c / (a + b + c + d) for a, b, c, d in strata)
    assert pattern.subject["odds_ratio"] == pytest.approx(num / den, abs=1e-3)
    assert pattern.subject["odds_ratio"] >= 3 and pattern.subject["p_value"] <= 0.05
    assert pattern in result.kept
    assert pattern.lift is not None and pattern.lift > 1
    # every other contrast feature that reached the thresholds is reported with its figures
    judged = [why for p, why in result.left_out if p.miner == "contrast" and "odds ratio" in why]
    assert judged and all("reported, not proposed" in why for why in judged)


@needs_data
def test_contrast_on_tau_bench_airline_reports_what_the_data_cannot_show() -> None:
    # 50 tasks x 4 trials: the tasks with both outcomes are too few for a significant
    # within-task contrast; the miner says so rather than proposing noise
    result = dream("tau")
    assert not by_miner(result, "contrast")
    book = "contrast:book_reservation|book_reservation"
    why = reason_of(result, book) or ""
    assert why.startswith("reported, not proposed") and "odds ratio 6.143" in why
    # cancellations: over-represented on paper, not significant within the same tasks
    cancel = next(p for p in result.patterns if p.id == "contrast:cancel_reservation|"
                  "cancel_reservation")  # fmt: skip
    assert (reason_of(result, cancel.id) or "").startswith("reported, not proposed")
    assert cancel not in result.kept
    # a call failed trials make no more often is no finding: neither proposed nor listed
    quiet = [p for p in result.patterns if p.miner == "contrast" and p.extra.get("odds_ratio")
             is not None and p.extra["odds_ratio"] < 3]  # fmt: skip
    assert quiet and not any((reason_of(result, p.id) or "").startswith("reported")
                             for p in quiet)  # fmt: skip


# --- unit tests: kinds, closings, loops, coverage, plug-ins -------------------------------


def test_feedback_kinds() -> None:
    cases = {
        "Your output was not formatted correctly. You must always include one discussion": "format",
        "## SearchReplaceNoExactMatch: This SEARCH block failed to exactly match lines": "edit",
        "# Fix any errors below, if possible.": "lint",
        "EXECUTION TIMED OUT BECAUSE NO OUTPUT WAS PRODUCED FOR MORE THAN 30 SECONDS.": "timeout",
        "Observations should not exceed 100000 characters. 250000 characters were elided.": (
            "truncated"
        ),
        "Exited (autosubmitted) because the cost limit was reached": "limit",
        "Please continue working on the task on whatever approach you think is suitable.": (
            "continue"
        ),
    }
    for line, kind in cases.items():
        assert feedback_kind(line, message=True) == kind, line
    overloaded = "Unexpected error: litellm.APIConnectionError: overloaded_error"
    assert feedback_kind(overloaded, message=True) == "environment"
    assert feedback_kind(overloaded, message=False) is None  # a program's own error
    assert feedback_kind("Sure, my user ID is mia_li_3668.", message=True) is None


def test_simulator_closings() -> None:
    for text in ("No, that’s all I needed. Thanks for your help! ###STOP###", "###TRANSFER###",
                 "That's all, thanks", "Nothing else, thank you!"):  # fmt: skip
        assert is_simulator_closing(text) and not is_correction(text)
    # a person's words stay corrections (OpenHands' one real user correction among them) ...
    people = ("no, use pnpm not npm", "No, that is wrong: use the staging db",
              "No, I mean by Goldbach's conjecture!", "stop, that output is too long")  # fmt: skip
    for text in people:
        assert not is_simulator_closing(text) and is_correction(text), text
    # ... the harness's are feedback, even when worded like a rule
    assert not is_correction("Your output was not formatted correctly. Don't use two commands.")


def _cli_fleet(i: int) -> Session:
    events = [
        Event("message", role="user", text="run the tests"),
        Event("tool_call", name="Bash", call_id="a", input={"command": "make test"}),
        Event("tool_result", call_id="a", output="make: *** No rule to make target 'test'",
              is_error=True),
        Event("tool_call", name="Bash", call_id="b", input={"command": "make check"}),
        Event("tool_result", call_id="b", output="ok", is_error=False),
    ]  # fmt: skip
    info = TranscriptInfo(
        id=f"s{i:03}", format="generic", session_id=f"s{i}", parent_session=None,
        project=None, user=None, agent=None, task=None, labels=(), outcome="unknown",
        score=None, started_at=NOW - dt.timedelta(days=1), ended_at=None, events=0,
        tool_calls=0, tool_errors=0, redactions=0, imported_at=NOW, updated_at=NOW,
        imported_by="owner",
    )  # fmt: skip
    return Session(info, events)


def _run(memory: list[MemoryFile], n: int = 10) -> EngineResult:
    engine = Engine(EngineConfig(), memory, NOW)
    for i in range(n):
        engine.add(_cli_fleet(i))
    return engine.finish()


def _file(path: str, content: str) -> MemoryFile:
    import hashlib

    return MemoryFile(path, content, hashlib.sha256(content.encode()).hexdigest())


def test_dream_notes_are_not_claims_and_the_next_run_sees_them_covered() -> None:
    first = _run([])
    notes = [op for d in first.drafts for op in d.operations if isinstance(op, Write)]
    assert notes and any("`make test`" in op.content for op in notes)
    memory = [_file(op.path, op.content) for op in notes]
    assert claims_of(memory) == []  # they quote the failing command: not a claim of memory
    second = _run(memory)
    assert not [p for p in second.patterns if p.miner == "stale_memory"]
    assert not second.drafts  # every pattern is covered by the note the first run wrote
    # a note a person wrote stating the failing command is still a claim
    human = _file("/org/testing.md", "# Tests\n\nRun `make test` before pushing.\n")
    assert [c.text for c in claims_of([human])] == ["make test"]
    assert [p.miner for p in _run([human]).kept if p.miner == "stale_memory"]


def test_coverage_matches_whole_tokens_not_substrings() -> None:
    (pattern,) = [p for p in _run([]).kept if p.miner == "recovery"]
    inside = MemoryIndex([_file("/org/a.md", "Use `cmake checkpoint` for builds.")])
    assert coverage(pattern, inside)[0] == "new"  # "make check" inside "cmake checkpoint"
    stated = MemoryIndex([_file("/org/b.md", "Tests: `make check` (not make test).")])
    assert coverage(pattern, stated) == ("covered", ["/org/b.md"])


class PolicyMiner:
    """A third-party miner that owns its judge, coverage and note."""

    name = "policy"
    category = "policies"

    def __init__(self, context: MinerContext) -> None:
        self.context = context

    def mine(self, s: Session) -> list[Signal]:
        found = any(e.kind == "tool_call" for e in s.events)
        return [Signal("policy", "confirm", {"rule": "confirm first"}, "Confirm first")] if (
            found) else []  # fmt: skip

    def judge(self, pattern: Pattern) -> str | None:
        return None if pattern.sessions >= 5 else "too few"

    def covers(self, pattern: Pattern, memory: Any) -> bool:
        return bool(memory.has_phrase("confirm first"))

    def slug_source(self, pattern: Pattern) -> str:
        return "confirm-before-writing"

    def note(self, pattern: Pattern) -> tuple[str, str, list[str]]:
        return "Confirm first", "Confirm before writing", ["Ask for a yes before any write."]


def test_third_party_miners_own_judge_coverage_and_notes() -> None:
    register("policy", PolicyMiner)
    try:
        engine = Engine(EngineConfig(miners=("policy",)), [], NOW)
        for i in range(8):
            engine.add(_cli_fleet(i))
        (draft,) = engine.finish().drafts
        op = draft.operations[0]
        assert isinstance(op, Write) and op.path == "/org/policies/confirm-before-writing.md"
        assert "Ask for a yes before any write." in op.content
        memory = [_file("/org/p.md", "Always confirm first.")]
        engine = Engine(EngineConfig(miners=("policy",)), memory, NOW)
        for i in range(8):
            engine.add(_cli_fleet(i))
        result = engine.finish()
        assert not result.drafts
        assert [why for _, why in result.left_out] == ["already covered by /org/p.md"]
    finally:
        unregister("policy")


@needs_data
def test_checkpoint_restore_with_the_new_miners_ends_as_an_uninterrupted_run() -> None:
    sessions = fleet("tau")[:120]
    config = EngineConfig(thresholds=Thresholds(min_sessions=3))
    whole = Engine(config, [], NOW)
    for s in sessions:
        whole.add(s)
    half = Engine(config, [], NOW)
    for s in sessions[:57]:
        half.add(s)
    state = json.loads(json.dumps(half.state()))
    resumed = Engine.restore(config, [], NOW, state)
    for s in sessions[57:]:
        resumed.add(s)

    def summary(result: EngineResult) -> list[Any]:
        return [(p.id, p.sessions, p.tasks, p.failed, p.known, p.extra) for p in result.patterns]

    assert summary(resumed.finish()) == summary(whole.finish())
    assert state["miners"]["contrast"]["tasks"] and state["reducer"]["baseline"]["known"] == 57
    assert FailureRules()  # the default rules were used throughout
