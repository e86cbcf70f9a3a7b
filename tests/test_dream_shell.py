"""Shell parsing, failure outcomes, signatures and recovery on real harness output.

Unit tests pin each rule; the real-data tests read ``../shared/data/transcripts/`` twice — once
through the importers and the engine, once straight from the raw files with the standard
library (an independent recount) — and compare.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import random
import re
from pathlib import Path

import pytest

from memdir.dream.engine import Engine, EngineConfig
from memdir.dream.miners.base import Call, calls_of
from memdir.dream.miners.failures import FailureRules, classify, command_words, exit_code_of
from memdir.dream.miners.recovery import find_recoveries
from memdir.dream.miners.signature import error_line, mask_tokens
from memdir.dream.model import Session, Thresholds
from memdir.dream.shell import MAX_COMMANDS, family, main_command, parse, status_command
from memdir.transcripts.importing import read_source
from memdir.transcripts.model import Event, TranscriptInfo
from memdir.transcripts.reader import ParseContext, Source
from memdir.transcripts.redact import Redactor

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
SWE = DATA / "swe-agent-trajectories"
OPENHANDS = DATA / "openhands-samples"
HAPPY = DATA / "claude-code-happy-cli"
needs_data = pytest.mark.skipif(  # under CI=true a missing data set is a failure, not a skip
    not SWE.is_dir() and os.environ.get("CI") != "true",
    reason=f"shared data not found at {DATA}",
)
NOW = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
RULES = FailureRules()


# --- shell parsing ------------------------------------------------------------------------


def test_parse_strips_setup_env_and_wrappers_to_the_program() -> None:
    cd, pytest_, tee = parse("cd app && A=1 timeout 60 python3 -m pytest -x tests 2>&1 | tee log")
    assert (cd.program, cd.args) == ("cd", ("app",))
    assert pytest_.program == "pytest" and pytest_.args == ("-x", "tests")
    assert pytest_.argv == ("python3", "-m", "pytest", "-x", "tests")  # literal, as written
    assert (pytest_.env, pytest_.wrappers, pytest_.cwd) == (("A=1",), ("timeout",), "app")
    assert pytest_.connector == "|" and pytest_.writes == ()  # 2>&1 is no file
    assert tee.writes == ("log",)
    assert [c.program for c in parse("sudo -u root nohup env X=1 time nice -n 5 make")] == ["make"]
    assert [c.program for c in parse("npx tsx t.ts; uv run --with x pytest; xargs -n1 rm")] == [
        "tsx", "pytest", "rm",
    ]  # fmt: skip
    assert command_words("cd app && FOO=1 sudo npm ci --frozen-lockfile") == "npm ci"
    assert command_words("npm run lint -- --fix") == "npm run lint"


def test_parse_heredocs_are_bodies_not_commands() -> None:
    text = "cat <<'EOF' > reproduce.py\nimport numpy\nprint(1 && 2) | x\nEOF\npython reproduce.py"
    cat, python = parse(text)
    assert cat.program == "cat" and cat.writes == ("reproduce.py",) and cat.args == ()
    assert cat.heredoc == "import numpy\nprint(1 && 2) | x"
    assert (python.program, python.args) == ("python", ("reproduce.py",))
    tabbed = parse("cat <<-END >> notes.txt\n\tline\n\tEND\necho done")
    assert [c.program for c in tabbed] == ["cat", "echo"] and tabbed[0].writes == ("notes.txt",)
    (edit,) = parse("edit 1:5\n    foo && bar\nend_of_edit")  # SWE-agent's editor body
    assert edit.args == ("1:5",) and edit.heredoc == "    foo && bar"
    assert parse("cat <<< 'a b'")[0].reads == ()  # a here-string is no file


def test_parse_quotes_redirections_and_recursion() -> None:
    echo, grep = parse("echo 'a|b;c' | grep -c \"x && y\" file.txt > /dev/null")
    assert echo.args == ("a|b;c",) and grep.args == ("-c", "x && y", "file.txt")
    assert grep.writes == () and grep.reads == ()  # grep's file is not a reader's read
    assert parse("sed -i 's/a/b/' src/x.py")[0].writes == ("src/x.py",)
    assert parse("sort < in.txt 2> err.log")[0].reads == ("in.txt",)
    assert parse("sort < in.txt 2> err.log")[0].writes == ("err.log",)
    inner = parse("bash -lc 'cd /x && make -C build test'")
    assert [(c.program, c.cwd) for c in inner] == [("cd", None), ("make", "/x")]
    assert [c.program for c in parse("if [ -f x ]; then make; fi; for f in *.py; do ruff $f; done")
            ] == ["[", "make", "ruff"]  # fmt: skip
    assert [c.program for c in parse("f() { echo hi; }; f")] == ["echo", "f"]
    assert status_command(parse("cat log | grep x")).program == "grep"  # type: ignore[union-attr]
    assert main_command(parse("cd a && export X=1 && go test ./...")).program == "go"  # type: ignore[union-attr]


def test_program_families() -> None:
    for word in ("python", "python3", "python3.11", "/usr/bin/python3", "pypy3"):
        assert family(word) == "python"
    assert family("pip3") == family("pip3.12") == "pip" and family("py.test") == "pytest"
    assert family("./scripts/run.sh") == "./scripts/run.sh"  # a project's script stays itself
    assert {c.program for c in [*parse("py.test x"), *parse("python -m pytest x")]} == {"pytest"}
    assert parse("python3 -m pip install --user x")[0].words == ("pip", "install", "--user", "x")


def test_parse_never_raises_and_bounds_its_work() -> None:
    rng = random.Random(7)
    alphabet = "ab |&;<>()'\"\\$`{}#\n=-12EOF"
    for _ in range(2000):
        parse("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 60))))
    assert parse("") == [] and parse("   ") == []
    assert parse('echo "unterminated')[0].args == ("unterminated",)
    assert parse("cat <<EOF\nnever ends")[0].heredoc == "never ends"
    huge = "; ".join(f"echo {i}" for i in range(50_000))
    assert len(parse(huge)) == MAX_COMMANDS
    assert parse("bash -c " * 50 + "ls")  # nesting is cut, not followed forever


# --- failure outcomes ---------------------------------------------------------------------


def outcome(command: str, output: str = "", code: int | None = None,
            is_error: bool | None = None) -> str:  # fmt: skip
    call = Event("tool_call", name="bash", input={"command": command})
    return classify(call, Event("tool_result", output=output, exit_code=code, is_error=is_error))


def test_exit_codes_recovered_from_harness_wrappers() -> None:
    for output, code in [
        ("<returncode>2</returncode>\n<output>\nboom\n</output>", 2),
        ("Exit code 127\nbash: x: command not found", 127),
        ("ran\n[Command finished with exit code 1]", 1),
        ("Command `grep -r x src` executed with exit code 1.", 1),
        ("Process exited with code 3", 3),
        ("lots of output\nProcess exited with code 0", 0),
    ]:
        assert exit_code_of(Event("tool_result", output=output)) == code, output
    # a program's own log line in the middle is not the harness speaking
    logged = Event("tool_result", output="a\n[INFO] Process exited with code 1\nb")
    assert exit_code_of(logged) is None


def test_probes_searches_and_tests_are_not_tool_errors() -> None:
    assert outcome("grep -rn TODO src", "", None, True) == "no-match"  # no output, flagged
    assert outcome("cd src && rg needle", "", 1, True) == "no-match"
    assert outcome("ls build", "ls: cannot access 'build': No such file or directory", 2) == "probe"
    assert outcome("[ -f setup.cfg ]", "", 1) == "probe"
    assert outcome("which cargo", "", None, True) == "probe"
    assert (
        outcome("rm -r dist", "rm: cannot remove 'dist': No such file or directory", 1) == "probe"
    )
    assert outcome("rm -r dist", "rm: cannot remove 'dist': Permission denied", 1) == "error"
    assert outcome("diff a b", "< x\n> y", 1) == "probe"
    assert outcome("diff a missing", "diff: missing: No such file or directory", 2) == "error"
    assert outcome("ls x && python run.py", "Traceback ...", 1) == "error"  # not only probes
    report = "F.\n=========== 1 failed, 1 passed in 0.12s ==========="
    assert outcome("python -m pytest tests", report, 1) == "tests-failed"
    assert outcome("npm test", "  3 passing (2s)\n  1 failing\n", 1, True) == "tests-failed"
    assert outcome("cargo test", "test result: FAILED. 3 passed; 1 failed", 101) == "tests-failed"
    assert (
        outcome("go test ./...", "--- FAIL: TestX (0.00s)\nFAIL\tpkg\t0.01s", 1) == "tests-failed"
    )
    assert outcome("pytest", "bash: pytest: command not found", 127) == "error"  # never ran
    assert outcome("npm test", "Exception during run: error TS2304", 1, True) == "error"
    refused = "The user doesn't want to proceed with this tool use."
    assert outcome("rm x", refused, None, True) == "rejected"
    editor = Event("tool_call", name="edit", input={"command": "str_replace", "path": "a.py"})
    assert not RULES.is_shell(editor.name, editor.input)  # an editor's action is no shell line


def test_failure_rules_are_data_users_extend() -> None:
    lint = "src/a.py:1:1: E501 line too long"
    assert outcome("ruff check src", lint, 1) == "error"
    rules = RULES.with_ok_exit("ruff check", 1).with_probe("kubectl get", "NotFound")
    call = Event("tool_call", name="bash", input={"command": "ruff check src"})
    assert rules.classify(call, Event("tool_result", output=lint, exit_code=1)) == "probe"
    get = Event("tool_call", name="bash", input={"command": "kubectl get pod x"})
    missing = Event("tool_result", output='Error from server (NotFound): pods "x"', exit_code=1)
    assert rules.classify(get, missing) == "probe" and RULES.classify(get, missing) == "error"
    e2e = RULES.with_test_runner("make e2e")
    run = Event("tool_call", name="bash", input={"command": "make e2e"})
    report = Event("tool_result", output="=== 2 failed in 3.1s ===", exit_code=2)
    assert e2e.classify(run, report) == "tests-failed" and RULES.classify(run, report) == "error"
    assert "ruff check" not in RULES.ok_exit_codes  # the defaults are untouched


# --- signatures ---------------------------------------------------------------------------


def test_error_line_reads_past_wrappers_to_the_cause() -> None:
    frames = "".join(f'  File "/x/m{i}.py", line {i}, in f\n    g()\n' for i in range(400))
    cause = "ModuleNotFoundError: No module named 'numpy'"
    traceback = f"Traceback (most recent call last):\n{frames}{cause}\n"
    assert error_line("collecting ...\n" + traceback) == cause
    assert error_line("bash: line 1: ponyc: command not found") == "command not found: 'ponyc'"
    assert error_line("/bin/sh: 1: cmake: not found") == "command not found: 'cmake'"
    assert error_line("<returncode>1</returncode>\n<output>\nError: no such table: users") == (
        "no such table: 'users'"
    )
    assert error_line("=== FAILURES ===\n___ t ___\nE   KeyError: 'x'") == "KeyError: 'x'"
    swe = (
        "Your proposed edit has introduced new syntax error(s). Please understand the fixes "
        "and retry your edit commmand.\n\nERRORS:\n- E999 IndentationError: unexpected indent\n"
    )
    assert error_line(swe) == "IndentationError: unexpected indent"
    assert error_line("Command timed out after 35s (node:1) ExperimentalWarning: x") == (
        "Command timed out after 35s"
    )


def test_literals_and_identifiers_survive_masking_and_drain() -> None:
    assert mask_tokens("No module named 'numpy'")[-1] == "'numpy'"
    assert mask_tokens("python3: sqlite3 utf8 Uint8Array HAT030 42 'mia_li_3668'") == [
        "python3:", "sqlite3", "utf8", "Uint8Array", "<num>", "<num>", "<str>",
    ]  # fmt: skip
    sessions = []
    for i, module in enumerate(["numpy", "numpy", "pandas", "pandas", "numpy"]):
        command = {"command": f"python{3 if i % 2 else ''} run.py"}
        output = (
            f"Traceback (most recent call last):\n  File 'x'\nImportError: No module named {module}"
        )
        events = [
            Event("tool_call", name="Bash", call_id="c", input=command),
            Event("tool_result", name="Bash", call_id="c", output=output, exit_code=1),
        ]
        sessions.append(Session(_info(f"s{i}"), events))
    engine = Engine(EngineConfig(thresholds=Thresholds(min_sessions=1, min_prevalence=0)), [], NOW)
    for session in sessions:
        engine.add(session)
    found = {p.key: p.sessions for p in engine.finish().patterns if p.miner == "tool_errors"}
    assert found == {
        "Bash|python|ImportError: No module named 'numpy'": 3,
        "Bash|python|ImportError: No module named 'pandas'": 2,
    }  # one cause, one pattern: python and python3 are one program; the modules stay apart


# --- recovery -----------------------------------------------------------------------------


def _session(steps: list[tuple[str, str, int]]) -> Session:
    events: list[Event] = []
    for i, (command, output, code) in enumerate(steps):
        events.append(Event("tool_call", name="Bash", call_id=f"c{i}", input={"command": command}))
        events.append(Event("tool_result", name="Bash", call_id=f"c{i}", output=output,
                            exit_code=code, is_error=code != 0))  # fmt: skip
    return Session(_info("r"), events)


def pairs(steps: list[tuple[str, str, int]]) -> list[tuple[str, str]]:
    calls = calls_of(_session(steps), RULES)
    return [(a.literal, b.literal) for a, b in find_recoveries(calls)]


def test_recovery_is_an_argument_preserving_substitution() -> None:
    missing = "bash: pytest: command not found"
    ran = "=== 1 failed, 3 passed in 0.5s ==="
    assert pairs(
        [
            ("pytest tests/a.py", missing, 127),
            ("ls", "a", 0),
            ("which python3", "/usr/bin/python3", 0),
            ("python3 -m pytest tests/a.py", ran, 1),
        ]
    ) == [
        ("pytest tests/a.py", "python3 -m pytest tests/a.py")
    ]  # probes in between; a test run that reports failures is the fix
    assert pairs([("make test", "make: *** No rule", 2), ("make -C build test", "ok", 0)]) == [
        ("make test", "make -C build test")
    ]
    assert pairs([("pip install x", "Permission denied", 1), ("pip install --user x", "ok", 0)])
    assert pairs([("python a.py", "Error: boom", 1), ("python b.py", "ok", 0)]) == []
    assert pairs([("pytest tests/a.py", missing, 127), ("pytest tests/b.py", ran, 0)]) == []
    assert pairs([("npm run build && npm test", "x failed", 1), ("npm run build", "ok", 0)]) == []


def _info(sid: str) -> TranscriptInfo:
    return TranscriptInfo(
        id=sid, format="generic", session_id=sid, parent_session=None, project=None, user=None,
        agent=None, task=None, labels=(), outcome="unknown", score=None, started_at=NOW,
        ended_at=None, events=0, tool_calls=0, tool_errors=0, redactions=0, imported_at=NOW,
        updated_at=NOW, imported_by="owner",
    )  # fmt: skip


# --- real fleets --------------------------------------------------------------------------


def _sessions(root: Path) -> list[Session]:
    redactor = Redactor()
    ctx = ParseContext(cleaner=redactor.clean, redaction_total=lambda: redactor.total)
    out = []
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".traj", ".json", ".jsonl")):
        for t in read_source(Source.from_path(path), ctx, None):
            out.append(Session(_info(t.session_id), t.events))
    return out


def _raw_swe_steps() -> list[tuple[str, str, str]]:
    """(file, action, observation) of every SWE-agent step, from the raw JSON."""
    out = []
    for path in sorted(SWE.rglob("*.traj")):
        value = json.loads(path.read_text(encoding="utf-8"))
        for step in value.get("trajectory") or []:
            out.append((str(path), step["action"], step.get("observation") or ""))
    return out


@needs_data
def test_swe_agent_editor_bodies_and_the_indentation_fix() -> None:
    steps = _raw_swe_steps()
    # Recount: sessions whose editor reported E999 IndentationError, and those where the next
    # edit of the same line range, re-indented only, was accepted.
    indent = {f for f, _, o in steps if "E999 IndentationError: unexpected indent" in o}
    fixed: set[str] = set()
    for (f, a, o), (g, b, p) in itertools.pairwise(steps):
        reindented = f == g and a != b and a.split() == b.split()
        if reindented and "E999 IndentationError" in o and "syntax error" not in p:
            fixed.add(f)  # the editor took the re-indented edit
    sessions = _sessions(SWE)
    engine = Engine(EngineConfig(thresholds=Thresholds(min_sessions=2, min_prevalence=0)), [], NOW)
    for session in sessions:
        for call in calls_of(session, RULES):  # a body's lines are never commands of their own
            if call.text.startswith("edit") and "\n" in call.text:
                assert [c.program for c in call.commands] == ["edit"]
        engine.add(session)
    result = engine.finish()
    errors = [
        p for p in result.patterns if p.miner == "tool_errors" and p.subject["command"] == "edit"
    ]
    top = max(errors, key=lambda p: p.sessions)
    assert top.subject["signature"] == "IndentationError: unexpected indent"
    assert top.sessions == len({f.rsplit("/", 2)[-2] + "/" + f for f in indent}) == 8
    (recovery,) = [p for p in result.kept if p.miner == "recovery"]
    assert recovery.variants == {"fix the indentation": len(fixed)} and len(fixed) == 7
    assert recovery.subject["failure_sessions"] == 8  # "worked in 7 of 8 sessions"
    # no tool error is signed with the editor's wrapper (the feedback miner owns that text)
    assert not any("Your proposed edit" in p.subject.get("signature", "") for p in result.patterns
                   if p.miner != "feedback")  # fmt: skip


@needs_data
def test_openhands_probes_searches_and_missing_commands() -> None:
    raw: list[tuple[str, int]] = []  # (command, exit code) of every run action, from raw files
    for path in sorted(OPENHANDS.rglob("*.json*")):
        text = path.read_text(encoding="utf-8")
        raw += [(m.group(1), int(m.group(2))) for m in re.finditer(
            r"Command `([^`]*)` executed with exit code (-?\d+)", text)]  # fmt: skip
    calls = [c for s in _sessions(OPENHANDS) for c in calls_of(s, RULES)]
    greps = [c for c in calls if c.shell and c.words == "grep" and c.result is not None
             and exit_code_of(c.result) == 1]  # fmt: skip
    assert greps and all(c.outcome == "no-match" for c in greps)
    assert len(greps) >= len({cmd for cmd, code in raw if cmd.startswith("grep") and code == 1})
    ls = [c for c in calls if c.shell and c.words == "ls" and c.result is not None
          and "No such file" in (c.result.output or "")]  # fmt: skip
    assert ls and all(c.outcome == "probe" for c in ls)
    assert not any(c.shell for c in calls if c.name in ("edit", "str_replace_editor"))
    missing = [error_line(c.result.output) for c in calls if c.failed and c.result is not None
               and "command not found" in (c.result.output or "")]  # fmt: skip
    assert missing and all(line.startswith("command not found: '") for line in missing)


@needs_data
def test_happy_cli_test_runs_and_rejections_are_not_tool_errors() -> None:
    path = next(HAPPY.rglob("400429ba-*.jsonl"))
    commands: dict[str, str] = {}
    reports = rejections = 0  # recount from the raw JSONL: mocha reports, user rejections
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = (record.get("message") or {}).get("content")
        for block in content if isinstance(content, list) else []:
            if block.get("type") == "tool_use" and block.get("name") == "Bash":
                commands[block["id"]] = block["input"]["command"]
            if block.get("type") != "tool_result" or block.get("is_error") is not True:
                continue
            body = block.get("content")
            parts = body if isinstance(body, list) else []
            text = body if isinstance(body, str) else " ".join(b.get("text", "") for b in parts)
            command = commands.get(block["tool_use_id"], "")
            if "npm test" in command and re.search(r"^\s*\d+ failing", text, re.M):
                reports += 1
            elif re.match(r"The user doesn't want to proceed|\[Request interrupted", text):
                rejections += 1 if block["tool_use_id"] in commands else 0
    calls = [c for s in _sessions(HAPPY) for c in calls_of(s, RULES) if c.shell]
    outcomes = [c.outcome for c in calls]
    assert outcomes.count("tests-failed") >= reports > 0
    assert outcomes.count("rejected") == rejections > 0
    reported = [c for c in calls if re.search(r"^\s*\d+ failing", _output(c), re.M)]
    assert reported and not any(c.failed for c in reported if c.words == "npm test")


def _output(call: Call) -> str:
    return (call.result.output or "") if call.result is not None else ""


def test_heredoc_writes_are_no_lookups_and_no_loop_of_their_bodies() -> None:
    from memdir.dream.miners.exploration import lookup_of

    calls = calls_of(
        _session([
            ("cat <<'EOF' > reproduce.py\nimport x\nEOF", "", 0),
            ("cat reproduce.py", "import x", 0),
            ("cd src && grep -rn TODO . | head -5", "a.py:1: TODO", 0),
        ]),
        RULES,
    )  # fmt: skip
    assert [lookup_of(c) for c in calls] == [None, "read reproduce.py", "search TODO"]
    assert calls[0].literal == "cat" and calls[0].commands[0].writes == ("reproduce.py",)
