"""The deterministic miners, one by one, on hand-made sessions — with the negative cases that keep
them precise (grep finding nothing is no error, a question is no correction, ...)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from typing import Any

import pytest

from memdir.core.content import sha256_hex
from memdir.core.errors import InvalidInput
from memdir.dream.miners import FailureRules, MinerContext, calls_of, create, miners, register
from memdir.dream.miners.base import unregister
from memdir.dream.miners.corrections import CorrectionsMiner, is_correction, key_terms
from memdir.dream.miners.failures import command_text, command_words
from memdir.dream.miners.recovery import describe_change
from memdir.dream.miners.signature import Drain, error_line, mask, mask_tokens
from memdir.dream.model import MemoryFile, Session, Signal
from memdir.transcripts.model import Event, TranscriptInfo

NOW = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
RULES = FailureRules()

Step = tuple[Any, ...]


def info(
    sid: str,
    *,
    project: str | None = None,
    user: str | None = None,
    agent: str | None = None,
    started: dt.datetime | None = None,
) -> TranscriptInfo:
    return TranscriptInfo(
        id=sid, format="generic", session_id=sid, parent_session=None, project=project,
        user=user, agent=agent, task=None, labels=(), outcome="unknown", score=None,
        started_at=started or NOW - dt.timedelta(days=1), ended_at=None, events=0,
        tool_calls=0, tool_errors=0, redactions=0, imported_at=NOW, updated_at=NOW,
        imported_by="owner",
    )  # fmt: skip


def session(steps: Sequence[Step], sid: str = "s1", **labels: Any) -> Session:
    """Events from compact steps: ``("user", text)``, ``("assistant", text)``,
    ``("bash", command, output, exit_code)`` (is_error = exit != 0, as Claude Code sets it),
    ``("tool", name, input, output, is_error)``."""
    events: list[Event] = []
    for n, step in enumerate(steps):
        kind = step[0]
        if kind in ("user", "assistant"):
            events.append(Event("message", role=kind, text=step[1]))
        elif kind == "bash":
            _, command, output, code = step
            events.append(
                Event("tool_call", name="Bash", call_id=f"c{n}", input={"command": command})
            )
            events.append(Event("tool_result", name="Bash", call_id=f"c{n}", output=output,
                                exit_code=code, is_error=code != 0))  # fmt: skip
        else:
            _, name, value, output, is_error = step
            events.append(Event("tool_call", name=name, call_id=f"c{n}", input=value))
            events.append(Event("tool_result", name=name, call_id=f"c{n}", output=output,
                                is_error=is_error))  # fmt: skip
    return Session(info(sid, **labels), events)


def mine(name: str, s: Session, memory: Sequence[MemoryFile] = ()) -> list[Signal]:
    context = MinerContext(rules=RULES, memory=tuple(memory), now=NOW)
    (miner,) = create(context, [name])
    return list(miner.mine(s))  # type: ignore[union-attr]


def memory_file(path: str, content: str, **frontmatter: Any) -> MemoryFile:
    return MemoryFile(path, content, sha256_hex(content), dict(frontmatter))


# --- failure rules ------------------------------------------------------------------------


def judge(command: str, code: int, *, is_error: bool | None = None, output: str = "") -> bool:
    call = Event("tool_call", name="Bash", input={"command": command})
    flag = code != 0 if is_error is None else is_error
    result = Event("tool_result", output=output, exit_code=code, is_error=flag)
    return RULES.is_failure(call, result)


def test_exit_codes_that_are_results_not_failures() -> None:
    assert not judge("grep -rn TODO src", 1)
    assert not judge("rg needle", 1)
    assert not judge("cat log.txt | grep ERROR", 1)  # the pipeline returns grep's status
    assert not judge("git grep foo", 1)
    assert not judge("diff a.txt b.txt", 1)
    assert not judge("cmp a b", 1)
    assert not judge("test -f setup.cfg", 1)
    assert not judge("[ -d build ]", 1)
    # ... but their real errors, and other commands' non-zero exits, are failures
    assert judge("grep -P '(' src", 2)
    assert judge("diff a missing", 2)
    assert judge("npm ci --frozen-lockfile", 1)
    assert judge("grep foo src | wc -l", 1)  # the last command is wc, not grep
    assert not judge("npm test", 0)


def test_flag_exit_code_and_output_fallbacks() -> None:
    call = Event("tool_call", name="get_invoice", input={"invoice_id": "in_1"})
    assert RULES.is_failure(call, Event("tool_result", output="Error: not found"))
    assert not RULES.is_failure(call, Event("tool_result", output="{}"))
    assert RULES.is_failure(call, Event("tool_result", output="{}", is_error=True))
    assert not RULES.is_failure(call, Event("tool_result", output="Error: x", is_error=False))
    shell = Event("tool_call", name="shell", input={"command": ["bash", "-lc", "make"]})
    assert RULES.is_failure(shell, Event("tool_result", output="Exit code: 2\nmake: *** x"))
    assert not RULES.is_failure(shell, Event("tool_result", output="Exit code: 0\nok"))
    assert not RULES.is_failure(call, None) and not RULES.is_failure(None, Event("tool_result"))


def test_rules_are_extendable() -> None:
    lint = RULES.with_ok_exit("ruff check", 1)
    call = Event("tool_call", name="Bash", input={"command": "ruff check src"})
    result = Event("tool_result", output="E501", exit_code=1, is_error=True)
    assert RULES.is_failure(call, result) and not lint.is_failure(call, result)
    assert "ruff check" not in RULES.ok_exit_codes  # the defaults are untouched


def test_command_text_and_words() -> None:
    assert command_text({"command": ["bash", "-lc", "npm test"]}) == "npm test"
    assert command_text({"cmd": "ls -la"}) == "ls -la"
    assert command_text({"path": "x"}) is None
    assert command_words("cd app && FOO=1 sudo npm ci --frozen-lockfile") == "npm ci"
    assert command_words("/usr/bin/git push origin main") == "git push"
    assert command_words("cat README.md") == "cat"
    assert command_words("make test") == "make test"


# --- signatures ---------------------------------------------------------------------------


def test_masking_abstracts_variable_parts() -> None:
    text = (
        "request 3f2b1c9e-1111-4222-8333-444455556666 to https://api.x.io/v1/a?b=1 failed at "
        "2026-03-01T10:00:00Z reading /srv/app/config.yml: key 'db.host' = 'a b' missing "
        "(0x7ffd, 42)"
    )
    assert mask(text).split()[1] == "<id>"
    tokens = mask_tokens(text)
    assert "<url>" in tokens and "<ts>" in tokens and "<path>" in tokens[:12]
    assert "<str>" in tokens and "<hex>" in " ".join(tokens) and "<num>" in tokens
    assert "'db.host'" in tokens  # a quoted name is the informative literal: kept
    assert mask_tokens("flight HAT030 not available") == ["flight", "<num>", "not", "available"]


def test_error_line_skips_exit_codes_and_prefers_error_words() -> None:
    assert (
        error_line("Exit code 1\nrunning\nnpm error code EUSAGE\nmore") == "npm error code EUSAGE"
    )
    assert error_line("Error: payment method not found") == "payment method not found"
    assert error_line("just text\nsecond") == "just text"
    assert error_line(None) == ""


def toks(text: str) -> list[str]:
    return text.split()


def test_drain_merges_variable_tokens_and_reports_renames() -> None:
    drain = Drain()
    first, old = drain.add("t", toks("cannot find module foo in package"))
    assert old is None and drain.template(first) == "cannot find module foo in package"
    second, old = drain.add("t", toks("cannot find module bar in package"))
    assert second == first and old == "cannot find module foo in package"
    assert drain.template(first) == "cannot find module <*> in package"
    other, _ = drain.add("t", toks("cannot connect to database server now"))
    assert other != first  # same length, different leading tokens: another template
    grouped, _ = drain.add("u", toks("cannot find module foo in package"))
    assert grouped != first  # another group never shares a template
    routed, _ = drain.add("t", toks("module foo not found in the package"))
    assert routed != first  # the leading tokens route it (Drain's fixed-depth prefix tree)
    restored = Drain.from_state(drain.state())
    assert restored.add("t", toks("cannot find module baz in package")) == (first, None)


# --- tool_errors --------------------------------------------------------------------------


def test_tool_errors_group_by_signature_tool_and_command() -> None:
    context = MinerContext(rules=RULES, now=NOW)
    (miner,) = create(context, ["tool_errors"])
    a = session([("tool", "get_invoice", {"id": "in_1"}, "Error: invoice in_1 not found", None)])
    b = session([("tool", "get_invoice", {"id": "in_9"}, "Error: invoice in_93 not found", None)])
    c = session([("bash", "npm ci --frozen-lockfile", "npm error code EUSAGE", 1)])
    (sa,) = miner.mine(a)  # type: ignore[union-attr]
    (sb,) = miner.mine(b)  # type: ignore[union-attr]
    (sc,) = miner.mine(c)  # type: ignore[union-attr]
    assert sa.key == sb.key == "get_invoice|invoice <num> not found"
    assert sa.subject["tool"] == "get_invoice" and sa.excerpt is not None
    assert sc.key == "Bash|npm ci|npm error code EUSAGE"
    assert sc.subject["command"] == "npm ci" and "--frozen-lockfile" in sc.subject["input"]


def test_grep_finding_nothing_is_not_a_tool_error() -> None:
    s = session([("bash", "grep -rn TODO src", "", 1), ("bash", "diff a b", "< x\n> y", 1)])
    assert mine("tool_errors", s) == []
    assert [c.failed for c in calls_of(s, RULES)] == [False, False]


# --- recovery -----------------------------------------------------------------------------


def test_recovery_pairs_a_failure_with_the_similar_call_that_worked() -> None:
    s = session([
        ("bash", "npm ci --frozen-lockfile", "npm error code EUSAGE", 1),
        ("assistant", "That flag does not exist."),
        ("bash", "npm ci", "added 100 packages", 0),
    ])  # fmt: skip
    (signal,) = mine("recovery", s)
    assert signal.key == "Bash|npm ci|--frozen-lockfile"
    assert signal.variant == "remove --frozen-lockfile"
    assert signal.subject == {
        "tool": "Bash", "failed": "npm ci --frozen-lockfile", "fixed": "npm ci",
        "change": "remove --frozen-lockfile", "error": "npm error code EUSAGE",
    }  # fmt: skip
    assert signal.excerpt is not None and (
        signal.excerpt.first_event,
        signal.excerpt.last_event,
    ) == (0, 4)


def test_recovery_needs_a_changed_similar_call_within_three_calls() -> None:
    unchanged = session([("bash", "make build", "boom", 1), ("bash", "make build", "ok", 0)])
    assert mine("recovery", unchanged) == []
    unrelated = session([("bash", "npm ci --x", "bad", 1), ("bash", "ls -la docs", "a", 0)])
    assert mine("recovery", unrelated) == []
    # Three calls that do work in between: too far. Probes and lookups do not count.
    far = session([
        ("bash", "npm ci --frozen-lockfile", "bad", 1), ("bash", "make build", "a", 0),
        ("bash", "git add -A", "", 0), ("bash", "whoami", "me", 0), ("bash", "npm ci", "ok", 0),
    ])  # fmt: skip
    assert mine("recovery", far) == []
    looked = session([
        ("bash", "npm ci --frozen-lockfile", "bad", 1), ("bash", "ls", "a", 0),
        ("bash", "pwd", "/", 0), ("bash", "cat package.json", "{}", 0),
        ("bash", "grep -rn lockfile .npmrc", "", 1), ("bash", "npm ci", "ok", 0),
    ])  # fmt: skip
    assert [s.variant for s in mine("recovery", looked)] == ["remove --frozen-lockfile"]
    api = session([
        ("tool", "create_ticket", {"title": "x", "priority": "urgent"}, "Error: bad", None),
        ("tool", "create_ticket", {"title": "x", "priority": "high"}, '{"id": "T-1"}', None),
    ])  # fmt: skip
    (signal,) = mine("recovery", api)
    assert signal.key == "create_ticket|priority=urgent"
    assert signal.variant == "replace priority=urgent with priority=high"


def test_describe_change() -> None:
    assert describe_change(["make", "test"], ["make", "check"]) == "replace test with check"
    assert describe_change(["git", "push"], ["git", "push", "-u", "origin"]) == "add -u origin"
    assert describe_change(["cat", "src/a.py"], ["cat", "lib/a.py"]) == (
        "correct path src/a.py to lib/a.py"
    )


# --- corrections --------------------------------------------------------------------------

CORRECTIONS = [
    "No, use pnpm here.",
    "Don't use npm in this repo.",
    "Stop editing the generated files.",
    "Actually, the config lives in settings.toml.",
    "I told you to run the linter first.",
    "Please always run the tests before committing.",
    "Never push to main.",
    "Use pnpm, not npm.",
    "use ruff instead of flake8 please",
    "That's wrong, the port is 8080.",
]
NOT_CORRECTIONS = [
    "Can you use pnpm for this?",
    "Thanks!",
    "Great, that works.",
    "No problem, thanks for the help",
    "Please add a CLI flag that lists users, then write tests for it and document the flag in "
    "the README; we always want docs updated, and never ship without tests. " * 3,
    "Now add the export endpoint.",
    "ok",
]


def test_correction_rules_and_their_negative_cases() -> None:
    for text in CORRECTIONS:
        assert is_correction(text), text
    for text in NOT_CORRECTIONS:
        assert not is_correction(text), text


def test_correction_terms_drop_intent_words() -> None:
    assert key_terms("Always use pnpm, not npm!") == ["npm", "pnpm"]
    assert key_terms("use pnpm instead of npm please") == ["npm", "pnpm"]
    assert key_terms("Don't push directly to main branches") == [
        "branche",
        "directly",
        "main",
        "push",
    ]


def test_corrections_need_the_agent_to_have_acted_and_cluster_across_sessions() -> None:
    miner = CorrectionsMiner(MinerContext(rules=RULES))
    opening = session([("user", "Don't use npm, use pnpm."), ("assistant", "ok")])
    assert list(miner.mine(opening)) == []  # the first request is a task
    one = session([("user", "set up"), ("bash", "npm install", "ok", 0),
                   ("user", "Always use pnpm, not npm.")], "a")  # fmt: skip
    two = session([("user", "go"), ("assistant", "Installing with npm"),
                   ("user", "use pnpm instead of npm please")], "b")  # fmt: skip
    three = session([("user", "go"), ("assistant", "pushed"),
                     ("user", "Never push to main directly")], "c")  # fmt: skip
    (s1,), (s2,), (s3,) = (list(miner.mine(s)) for s in (one, two, three))
    assert s1.key == s2.key == "npm+pnpm" and s3.key != s1.key
    assert s1.variant != s2.variant  # each wording is counted
    fresh = CorrectionsMiner(MinerContext(rules=RULES))
    fresh.load_state(miner.state())
    (again,) = fresh.mine(
        session([("user", "go"), ("assistant", "x"), ("user", "No, pnpm not npm")])
    )
    assert again.key == "npm+pnpm"


# --- exploration --------------------------------------------------------------------------


def test_exploration_normalises_lookups_in_the_first_calls() -> None:
    s = session([
        ("bash", "cat ./docs/ARCHITECTURE.md", "# Architecture", 0),
        ("tool", "Read", {"file_path": "docs/ARCHITECTURE.md"}, "# Architecture", False),
        ("bash", "ls -la", "a b", 0),  # no target: says nothing
        ("bash", "ls src/", "app", 0),
        ("bash", "cat missing.md", "cat: missing.md: No such file or directory", 1),
        ("tool", "Grep", {"pattern": "TODO", "path": "src"}, "src/a.py", False),
    ])  # fmt: skip
    found = mine("exploration", s)
    assert [x.key for x in found] == ["read docs/ARCHITECTURE.md", "list src", "search TODO src"]
    assert found[0].subject == {"tool": "Bash", "input": "read docs/ARCHITECTURE.md"}
    late = session([("bash", "echo x", "x", 0)] * 8 + [("bash", "cat docs/A.md", "a", 0)])
    assert mine("exploration", late) == []  # after the first 8 calls


# --- loops --------------------------------------------------------------------------------


def test_loops_count_consecutive_identical_calls() -> None:
    poll = ("bash", "kubectl get pods -n staging", "Pending", 0)
    s = session([("user", "deploy"), poll, ("assistant", "still pending"), poll, poll, poll])
    (signal,) = mine("loops", s)
    assert signal.key == "Bash|kubectl get pods -n staging" and signal.occurrences == 4
    assert signal.variant == "no failure"
    interleaved = session([poll, ("bash", "ls", "x", 0), poll, poll])
    assert mine("loops", interleaved) == []
    broken = session([poll, poll, ("user", "wait"), poll])
    assert mine("loops", broken) == []
    ids = session([("tool", "get_order", {"id": f"o{n}"}, "{}", False) for n in range(4)])
    assert mine("loops", ids) == []  # different inputs: not a loop


# --- stale memory -------------------------------------------------------------------------

NOTE = memory_file("/projects/api/testing.md", "# Tests\n\nRun `make test` before pushing.\n")


def test_stale_memory_when_a_remembered_command_fails_and_a_replacement_works() -> None:
    s = session([
        ("bash", "make test", "make: *** No rule to make target 'test'.  Stop.", 2),
        ("bash", "make check", "300 passed", 0),
    ])  # fmt: skip
    (signal,) = mine("stale_memory", s, [NOTE])
    assert signal.key == "/projects/api/testing.md|make test"
    assert signal.variant == "make check"
    assert signal.subject["claim"] == "make test" and "make check" in signal.subject["evidence"]


def test_stale_memory_ignores_commands_that_work_later_and_old_sessions() -> None:
    flaky = session([("bash", "make test", "1 failed", 2), ("bash", "make test", "ok", 0)])
    assert mine("stale_memory", flaky, [NOTE]) == []
    old = session([("bash", "make test", "No rule to make target", 2)],
                  started=NOW - dt.timedelta(days=90))  # fmt: skip
    assert mine("stale_memory", old, [NOTE]) == []
    unrelated = session([("bash", "make lint", "error", 2)])
    assert mine("stale_memory", unrelated, [NOTE]) == []
    script = memory_file("/projects/web/deploy.md", "Deploy with `./scripts/deploy web`.\n")
    gone = session([("bash", "./scripts/deploy web", "bash: ./scripts/deploy: No such file", 127)])
    (signal,) = mine("stale_memory", gone, [script])
    assert signal.key == "/projects/web/deploy.md|./scripts/deploy web" and signal.variant == ""


# --- consolidation ------------------------------------------------------------------------


def test_consolidation_finds_expired_review_due_and_near_duplicates() -> None:
    body = (
        "Every change needs one approving review. Keep pull requests under 400 lines, describe "
        "how you tested them, link the issue, and squash-merge once CI is green."
    )
    files = [
        memory_file("/a/review.md", body + " Reviewers answer within one working day."),
        memory_file("/b/review.md", body + " Reviewers answer within a working day."),
        memory_file("/c/freeze.md", "---\nexpires: 2026-10-15\n---\nNo deploys."),
        memory_file("/c/deploy.md", "Deploy from main.", review_after=dt.date(2026, 3, 1)),
        memory_file("/c/later.md", "---\nexpires: 2027-01-01\n---\nLater."),
        memory_file("/d/other.md", "A completely different note about the database backups."),
    ]
    context = MinerContext(rules=RULES, memory=tuple(files), now=NOW)
    (miner,) = create(context, ["consolidation"])
    found = list(miner.mine_memory(files, NOW))  # type: ignore[union-attr]
    assert sorted((s.subject["reason"], tuple(s.subject["paths"])) for s in found) == [
        ("duplicate", ("/a/review.md", "/b/review.md")),
        ("expired", ("/c/freeze.md",)),
        ("review-due", ("/c/deploy.md",)),
    ]


# --- registry -----------------------------------------------------------------------------


class TodoMiner:
    name = "todo"

    def __init__(self, context: MinerContext) -> None:
        self.context = context

    def mine(self, s: Session) -> list[Signal]:
        return [
            Signal("todo", "todo", {"text": "x"}, "TODO left") for e in s.events if e.text == "TODO"
        ]  # fmt: skip


def test_registry_built_ins_and_third_party_miners() -> None:
    assert miners()[:9] == [
        "tool_errors", "recovery", "corrections", "exploration", "loops", "stale_memory",
        "feedback", "contrast", "consolidation",
    ]  # fmt: skip
    register("todo", TodoMiner)
    try:
        with pytest.raises(InvalidInput, match="already registered"):
            register("todo", TodoMiner)
        (made,) = create(MinerContext(rules=RULES), ["todo"])
        assert isinstance(made, TodoMiner)
        assert "todo" in miners()
    finally:
        unregister("todo")
    with pytest.raises(InvalidInput, match="unknown miner 'todo'"):
        create(MinerContext(rules=RULES), ["todo"])


def test_drain_forgets_rare_templates_by_lossy_counting() -> None:
    drain = Drain(width=10)
    frequent = None
    for n in range(100):
        frequent, _ = drain.add("t", toks("connection refused by the database"))
        word = "".join(chr(97 + (n * 7 + k) % 26) for k in range(8))
        drain.add("t", toks(f"{word} exploded at start"))
        drain.tick()
    assert frequent is not None and frequent in drain.templates
    assert len(drain.templates) <= 11  # the frequent template and this bucket's one-offs
    restored = Drain.from_state(json.loads(json.dumps(drain.state())), width=10)
    assert restored.state() == drain.state()
    assert restored.add("t", toks("connection refused by the database")) == (frequent, None)
