"""What a tool call's result means: error, probe, no match, tests failed or ok — documented,
data-driven rules (:class:`FailureRules`) that a run can extend.

Harnesses report failure differently: Claude Code flags every non-zero exit (``is_error``),
SWE-agent and mini-swe-agent only wrap the output (``<returncode>1</returncode>``), OpenHands
puts the exit code in metadata or says ``Command `x` executed with exit code 1``, others print
``Exit code 1``, ``Process exited with code 1`` or ``[Command finished with exit code 1]``, and
importers guess ``is_error`` from the text when there is no code at all. :func:`classify` turns
all of it into one :data:`Outcome` per call:

- ``ok`` — the call did what was asked;
- ``error`` — a tool error (what the tool-error and recovery miners count);
- ``probe`` — a question whose answer is "no": ``ls``/``stat``/``test``/``[ -f x ]``/
  ``which``/``type``/``command -v`` on something missing, ``rm`` of a missing path,
  ``diff``/``cmp``/``git diff`` finding differences (:attr:`FailureRules.probes`);
- ``no-match`` — a search that found nothing: ``grep``/``rg``/``ag``/``ack``/``git grep``/
  ``pgrep`` exiting 1, or (without an exit code) with no output (:attr:`FailureRules.searchers`);
- ``rejected`` — a person refused or interrupted the call (``The user doesn't want to proceed
  with this tool use``, ``[Request interrupted by user``, ``Permission prompt was aborted``;
  :attr:`FailureRules.rejections`): not the tool's failure (other miners read the person's
  reasons);
- ``tests-failed`` — a test runner (:attr:`FailureRules.test_runners`: ``pytest``, ``python -m
  pytest``, ``npm test``, ``cargo test``, ``go test``, ``jest``, ``tox``, …) that ran and
  printed its report with failures (:data:`TEST_REPORT`): an outcome of the code under test,
  not a tool error — and a successful run of the runner as far as recovery is concerned
  ("``pytest: command not found``, then ``python -m pytest`` reports 2 failed" is a fix).

The order of the rules, for a call and its result:

1. **Exit code** (:func:`exit_code_of`): the result's own, else the one a known harness wrapper
   states at the start or end of the output (:data:`EXIT_CODE_WRAPPERS`). ``0`` is ``ok``
   (unless the source flagged the result anyway).
2. **Failed at all?** A non-zero code, else the source's ``is_error``, else an output starting
   with ``Error: ``. Not failed: ``ok``. A failed result that opens with a rejection is
   ``rejected``.
3. **Per program** (shell calls, parsed by :func:`memdir.dream.shell.parse`; setup commands
   such as ``cd`` are skipped): a test runner in the line whose output holds a test report is
   ``tests-failed``; the command whose status the line returns (the last: ``cat x | grep y`` is
   grep's) exiting with a code :attr:`~FailureRules.ok_exit_codes` lists is ``no-match`` (a
   searcher) or ``probe``; a searcher with no exit code and an empty output is ``no-match``;
   a line whose every command is a probe (each with its output condition: ``rm`` only when the
   path is missing) is ``probe``.
4. Otherwise ``error``.

Shell tools are recognised by name (:data:`SHELL_TOOLS`: ``Bash``, ``shell``, ``exec_command``,
...) or by an input holding a ``command``/``cmd`` string or argv list — except an editor's input
(``{"command": "str_replace", "path": ...}``). Extend the rules with :meth:`FailureRules.
with_ok_exit` (``rules.with_ok_exit("ruff check", 1)``), :meth:`~FailureRules.with_probe`,
:meth:`~FailureRules.with_searcher` and :meth:`~FailureRules.with_test_runner`; rules are
immutable values, so a run's configuration is explicit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from memdir.dream.shell import SimpleCommand, main_command, parse, status_command
from memdir.transcripts.model import Event

__all__ = [
    "DEFAULT_OK_EXIT_CODES",
    "DEFAULT_PROBES",
    "DEFAULT_REJECTIONS",
    "DEFAULT_SEARCHERS",
    "DEFAULT_TEST_RUNNERS",
    "EXIT_CODE_WRAPPERS",
    "OUTCOMES",
    "SHELL_TOOLS",
    "TEST_REPORT",
    "FailureRules",
    "Outcome",
    "classify",
    "command_text",
    "command_words",
    "exit_code_of",
    "simple_commands",
]

Outcome = Literal["ok", "error", "probe", "no-match", "tests-failed", "rejected"]
OUTCOMES: Final = ("ok", "error", "probe", "no-match", "tests-failed", "rejected")
#: Results that say a person refused or interrupted the call: not the tool's failure.
DEFAULT_REJECTIONS: Final = (
    r"The user doesn't want to (?:proceed|take this action)",
    r"\[Request interrupted by user",
    r"Permission prompt was aborted",
    r"(?:The )?[Uu]ser (?:rejected|denied|declined) (?:the |this )?(?:tool|command|request)",
    r"Tool use was (?:rejected|cancelled|canceled)",
)

#: Tool names (lowercased) whose input is a shell command line.
SHELL_TOOLS: Final = frozenset(
    {
        "bash",
        "shell",
        "sh",
        "zsh",
        "exec_command",
        "local_shell",
        "container.exec",
        "run_shell_command",
        "run_terminal_cmd",
        "execute_command",
        "execute_bash",
        "terminal",
    }
)
#: Editor tools that also name their action ``command`` (``str_replace``): not shell calls.
_EDITOR_COMMANDS: Final = frozenset({"view", "create", "str_replace", "insert", "undo_edit",
                                     "view_range", "append", "delete"})  # fmt: skip

#: Command words -> exit codes that report a result, not a failure (see the module docstring).
DEFAULT_OK_EXIT_CODES: Final[Mapping[str, frozenset[int]]] = MappingProxyType(
    {
        "grep": frozenset({1}),
        "egrep": frozenset({1}),
        "fgrep": frozenset({1}),
        "rg": frozenset({1}),
        "ag": frozenset({1}),
        "ack": frozenset({1}),
        "git grep": frozenset({1}),
        "pgrep": frozenset({1}),
        "diff": frozenset({1}),
        "cmp": frozenset({1}),
        "git diff": frozenset({1}),
        "test": frozenset({1}),
        "[": frozenset({1}),
        "[[": frozenset({1}),
        "which": frozenset({1}),
    }
)
#: Searches: no match is an answer (exit 1, or no output when there is no exit code).
DEFAULT_SEARCHERS: Final = frozenset({"grep", "egrep", "fgrep", "rg", "ag", "ack", "git grep",
                                      "pgrep", "zgrep", "find", "fd", "locate"})  # fmt: skip
_MISSING: Final = (
    r"no such file|not found|does not exist|cannot access|cannot stat|"
    r"can't open|cannot open|no such process"
)
#: Probes -> the output a failure of theirs must show to be one ("" = any failure).
DEFAULT_PROBES: Final[Mapping[str, str]] = MappingProxyType(
    {
        "ls": "", "stat": "", "which": "", "type": "", "command": "", "readlink": "",
        "pidof": "", "pkill": "", "id": "", "getent": "", "git rev-parse": "",
        "git show-ref": "", "git ls-files": "", "file": _MISSING, "rm": _MISSING,
        "rmdir": _MISSING, "realpath": _MISSING, "kill": _MISSING, "head": _MISSING,
        "cat": _MISSING, "wc": _MISSING, "tail": _MISSING, "tree": _MISSING, "du": _MISSING,
    }
)  # fmt: skip
#: Test runners (program, or program and subcommand / first argument).
DEFAULT_TEST_RUNNERS: Final = frozenset(
    ["pytest", "unittest", "nose2", "tox", "nox", "jest", "mocha", "vitest", "ava", "tap",
     "karma", "jasmine", "rspec", "phpunit", "ctest", "bats", "trial", "stestr", "go test",
     "cargo test", "cargo nextest", "npm test", "npm t", "npm run", "yarn test", "yarn run",
     "pnpm test", "pnpm run", "bun test", "bun run", "deno test", "mix test", "mvn test",
     "mvn verify", "gradle test", "./gradlew test", "dotnet test", "make test", "make check",
     "swift test", "zig test", "python setup.py"]
)  # fmt: skip
#: A test runner's report (it ran): pytest, unittest, mocha, jest/vitest, go, cargo, rspec, tap.
TEST_REPORT: Final = re.compile(
    r"^=+ .*\b(?:failed|passed|errors?|no tests ran)\b.* in [\d.]+s|"
    r"^(?:FAILED|ERROR) \S+::|^Ran \d+ tests? in |^FAILED \((?:failures|errors)=|"
    r"^\s*\d+ (?:passing|failing)\b|^Tests?:\s+.*\d+ (?:failed|passed)|"
    r"^\s*Test Files\s+.*\d+ (?:failed|passed)|^--- FAIL: |^FAIL\s+\S+|^ok\s+\S+\s+[\d.]+s|"
    r"^test result: (?:FAILED|ok)\. |^\d+ examples?, \d+ failures?|^# fail\s+\d+|"
    r"^\s*\d+ failed, \d+ passed|^Failed tests?:",
    re.MULTILINE,
)
#: Harness wrappers that state an exit code, checked at the start and at the end of an output.
EXIT_CODE_WRAPPERS: Final = (
    re.compile(r"^(?:Error: )?Exit code:? (-?\d{1,9})\b"),
    re.compile(r"<returncode>\s*(-?\d{1,9})\s*</returncode>"),
    re.compile(r"\[Command finished with exit code (-?\d{1,9})\]"),
    re.compile(r"^Command `.{0,2000}` executed with exit code (-?\d{1,9})\.?", re.DOTALL),
    re.compile(r"^Process exited with code (-?\d{1,9})\b"),
    re.compile(r"^(?:Error: )?Command (?:failed|exited) with (?:exit )?code (-?\d{1,9})\b"),
    re.compile(r"^Exit status:? (-?\d{1,9})\b"),
)
_HEAD: Final = 2_000
_TALKERS: Final = frozenset({"echo", "printf", "true", "false"})  # never the question
_SCAN: Final = 40_000  # test reports: the first and last this many characters are read

#: Tools whose second word is a subcommand worth keeping (``npm ci``, ``git push``).
_SUBCOMMAND_NAMES: Final = """apt apt-get brew bun bundle cargo composer conda deno docker dotnet
gh git go gradle helm just kubectl make mix mvn npm npx nx pip pnpm poetry rake rustup task
terraform turbo uv yarn"""
SUBCOMMAND_TOOLS: Final = frozenset(_SUBCOMMAND_NAMES.split())
_SCRIPT_RUNNERS: Final = frozenset({"npm", "yarn", "pnpm", "bun", "deno", "uv", "poetry"})
_SUBCOMMAND: Final = re.compile(r"^[a-z][a-z0-9:_-]*$")
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/usr/bin/bash"})


def command_text(value: Any) -> str | None:
    """The command line of a shell call's input, or None when it holds none.

    Accepts ``{"command": "..."}``, ``{"cmd": ...}``, a bare string, or an argv list (Codex's
    ``["bash", "-lc", "npm test"]`` gives ``npm test``).
    """
    command = value.get("command", value.get("cmd")) if isinstance(value, dict) else value
    if isinstance(command, str):
        return command
    if isinstance(command, list) and command and all(isinstance(c, str) for c in command):
        if len(command) >= 3 and command[0] in _SHELLS and command[1] in ("-c", "-lc", "-ic"):
            return str(command[2])
        return " ".join(command)
    return None


def simple_commands(text: str) -> list[list[str]]:
    """The simple commands of a line as word lists (:func:`memdir.dream.shell.parse`'s
    ``words``): ``cd app && FOO=1 sudo npm ci`` gives ``[["cd", "app"], ["npm", "ci"]]``."""
    return [list(c.words) for c in parse(text)]


def words_of(command: SimpleCommand) -> str:
    """The words naming what a simple command runs: ``npm ci``, ``pytest``, ``npm run lint``
    (a package manager's ``run`` keeps the script's name)."""
    head, args = command.program, command.args
    if head in SUBCOMMAND_TOOLS and args and _SUBCOMMAND.match(args[0]):
        script = args[1] if args[0] == "run" and len(args) > 1 else ""
        if head in _SCRIPT_RUNNERS and _SUBCOMMAND.match(script):
            return f"{head} run {script}"
        return f"{head} {args[0]}"
    return head


def command_words(text: str) -> str:
    """The command a line runs, as one or two words: ``cd app && npm ci --x`` -> ``npm ci``.

    Setup commands (``cd``, ``export``, ``source``) are skipped; the second word is kept only
    for tools with subcommands (:data:`SUBCOMMAND_TOOLS`); families are unified (``python3 -m
    pytest`` -> ``pytest``). Empty for an empty line.
    """
    command = main_command(parse(text))
    return words_of(command) if command is not None else ""


def exit_code_of(result: Event) -> int | None:
    """The result's exit code, or the one a harness wrapper states (:data:`EXIT_CODE_WRAPPERS`)
    on the output's first or last line."""
    if result.exit_code is not None:
        return result.exit_code
    output = result.output
    if not output:
        return None
    text = output.strip()
    head = text[:_HEAD]
    tail = text[-_HEAD:].rsplit("\n", 1)[-1] if len(text) > 0 else ""
    for pattern in EXIT_CODE_WRAPPERS:
        match = pattern.search(head) if pattern.pattern.startswith("<") else pattern.match(head)
        if match is None and tail is not head:
            match = pattern.match(tail.strip())
        if match:
            return int(match.group(1))
    return None


def _keys(command: SimpleCommand) -> tuple[str, ...]:
    """The table keys a command answers to: ``git diff`` then ``git``."""
    if command.args:
        return (f"{command.program} {command.args[0]}", command.program)
    return (command.program,)


@dataclass(frozen=True)
class FailureRules:
    """The failure rules of a run (see the module docstring); the defaults when built bare."""

    ok_exit_codes: Mapping[str, frozenset[int]] = field(
        default_factory=lambda: DEFAULT_OK_EXIT_CODES
    )
    shell_tools: frozenset[str] = SHELL_TOOLS
    error_prefix: str = "Error: "
    probes: Mapping[str, str] = field(default_factory=lambda: DEFAULT_PROBES)
    searchers: frozenset[str] = DEFAULT_SEARCHERS
    test_runners: frozenset[str] = DEFAULT_TEST_RUNNERS
    rejections: tuple[str, ...] = DEFAULT_REJECTIONS

    def with_ok_exit(self, command: str, *codes: int) -> FailureRules:
        """A copy where ``command`` (one or two words) exiting with ``codes`` is no failure."""
        table = dict(self.ok_exit_codes)
        table[command] = table.get(command, frozenset()) | frozenset(codes)
        return replace(self, ok_exit_codes=MappingProxyType(table))

    def with_probe(self, command: str, output: str = "") -> FailureRules:
        """A copy where a failing ``command`` is a probe (when its output matches ``output``,
        a regular expression searched case-insensitively; ``""``: always)."""
        return replace(self, probes=MappingProxyType({**self.probes, command: output}))

    def with_searcher(self, command: str) -> FailureRules:
        """A copy where ``command`` finding nothing (exit 1 or no output) is ``no-match``."""
        return replace(self, searchers=self.searchers | {command})

    def with_test_runner(self, command: str) -> FailureRules:
        """A copy where ``command`` (``"make e2e"``) reporting failed tests is ``tests-failed``."""
        return replace(self, test_runners=self.test_runners | {command})

    def is_shell(self, name: str | None, value: Any) -> bool:
        if name is not None and name.lower() in self.shell_tools:
            return not _editor_input(value)
        return (
            isinstance(value, dict) and command_text(value) is not None and not _editor_input(value)
        )

    def benign_exit(self, command: str, code: int) -> bool:
        """Whether ``code`` from this command line reports a result rather than a failure."""
        last = status_command(parse(command))
        return last is not None and self._listed(last, code)

    def _listed(self, command: SimpleCommand, code: int) -> bool:
        return any(code in self.ok_exit_codes.get(key, ()) for key in _keys(command))

    def is_runner(self, command: SimpleCommand) -> bool:
        return any(key in self.test_runners for key in _keys(command))

    def is_searcher(self, command: SimpleCommand) -> bool:
        return any(key in self.searchers for key in _keys(command))

    def _probe(self, command: SimpleCommand, output: str) -> bool:
        for key in _keys(command):
            condition = self.probes.get(key)
            if condition is not None:
                return not condition or re.search(condition, output[:_HEAD], re.I) is not None
        return False

    def classify(self, call: Event | None, result: Event | None) -> Outcome:
        """The :data:`Outcome` of ``result`` (the answer to ``call``), by the module's rules."""
        if call is None or result is None:
            return "ok"
        code = exit_code_of(result)
        output = str(result.output or "")
        if code == 0 and result.is_error is not True:
            return "ok"
        if code is not None and code != 0:
            failed = True
        elif result.is_error is not None:
            failed = result.is_error
        else:
            failed = output.startswith(self.error_prefix)
        if not failed:
            return "ok"
        head = output.lstrip()[:300]
        if any(re.match(r, head) for r in self.rejections):
            return "rejected"
        command = command_text(call.input) if self.is_shell(call.name, call.input) else None
        if command is None:
            return "error"
        return self.shell_outcome(parse(command), code, output)

    def shell_outcome(self, commands: list[SimpleCommand], code: int | None,
                      output: str) -> Outcome:  # fmt: skip
        """The outcome of a failed shell line (rule 3 of the module docstring)."""
        work = [c for c in commands if not c.setup]
        if not work:
            return "error"
        if any(self.is_runner(c) for c in work) and _has_report(output):
            return "tests-failed"
        last = status_command(work)
        assert last is not None
        if code is not None and self._listed(last, code):
            return "no-match" if self.is_searcher(last) else "probe"
        if code is None and self.is_searcher(last) and not _body(output):
            return "no-match"
        quiet = [c for c in work if c.program not in _TALKERS]
        if quiet and all(self._probe(c, output) for c in quiet):
            return "probe"
        return "error"

    def is_failure(self, call: Event | None, result: Event | None) -> bool:
        """Whether ``result`` is a tool error (:meth:`classify` gives ``error``)."""
        return self.classify(call, result) == "error"


def classify(
    call: Event | None, result: Event | None, rules: FailureRules | None = None
) -> Outcome:
    """The outcome of a call (``ok``, ``error``, ``probe``, ``no-match``, ``tests-failed``) by
    ``rules`` (the defaults when None): the function other miners share."""
    return (rules or _DEFAULT).classify(call, result)


def _editor_input(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("command"), str)
        and value["command"] in _EDITOR_COMMANDS
        and any(k in value for k in ("path", "file_path", "file_text", "old_str", "new_str"))
    )


def _has_report(output: str) -> bool:
    text = output if len(output) <= 2 * _SCAN else output[:_SCAN] + "\n" + output[-_SCAN:]
    return TEST_REPORT.search(text) is not None


def _body(output: str) -> str:
    """The output without harness wrappers (an exit-code line, ``<returncode>``, ``<output>``)."""
    text = re.sub(r"</?(?:returncode|output)>|^\s*-?\d{1,9}\s*$", "", output, flags=re.M)
    lines = [
        line
        for line in text.splitlines()
        if not any(p.match(line.strip()) for p in EXIT_CODE_WRAPPERS)
    ]
    return "\n".join(lines).strip()


_DEFAULT: Final = FailureRules()
