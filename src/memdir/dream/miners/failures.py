"""What counts as a failed tool call: the per-tool failure rules, documented and extendable.

A tool result is judged in this order:

1. **Benign exit codes.** For a shell call, the command whose exit status the shell returns (the
   last simple command of the line: ``cat x | grep y`` returns grep's) is looked up by its
   command word(s) in :attr:`FailureRules.ok_exit_codes`. An exit code listed there is *not* a
   failure, even when the source flagged the result as an error (Claude Code sets ``is_error``
   on every non-zero exit). The defaults:

   =======================================  =====  ======================================
   command                                  code   meaning
   =======================================  =====  ======================================
   ``grep`` ``egrep`` ``fgrep`` ``rg``      1      no line matched
   ``ag`` ``ack`` ``git grep`` ``pgrep``    1      nothing found
   ``diff`` ``cmp`` ``git diff``            1      the inputs differ
   ``test`` ``[`` ``[[``                    1      the condition is false
   =======================================  =====  ======================================

2. **The source's flag.** ``is_error`` when the source has it (``None`` means unknown).
3. **The exit code.** A non-zero exit code (the result's ``exit_code``, else an output that
   starts with ``Exit code N``) is a failure, zero is not.
4. **The output.** Otherwise an output starting with ``Error: `` is a failure (the rule of
   sources without an error flag, as the importers apply it).

A result with no call, or a call with no result, is not judged (no failure). Shell tools are
recognised by name (:data:`SHELL_TOOLS`: ``Bash``, ``shell``, ``exec_command``, ...) or by an
input holding a ``command``/``cmd`` string or argv list. Extend the table with
:meth:`FailureRules.with_ok_exit` (``rules.with_ok_exit("ruff check", 1)`` would make lint
findings not count); the rules are immutable values, so a run's configuration is explicit.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final

from memdir.transcripts.model import Event

__all__ = [
    "DEFAULT_OK_EXIT_CODES",
    "SHELL_TOOLS",
    "FailureRules",
    "command_text",
    "command_words",
    "exit_code_of",
    "simple_commands",
]

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
        "terminal",
    }
)

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
    }
)

#: Tools whose second word is a subcommand worth keeping (``npm ci``, ``git push``).
_SUBCOMMAND_NAMES: Final = """apt apt-get brew bun bundle cargo composer conda deno docker dotnet
gh git go gradle helm just kubectl make mix mvn npm npx nx pip pip3 pnpm poetry rake rustup task
terraform turbo uv yarn"""
SUBCOMMAND_TOOLS: Final = frozenset(_SUBCOMMAND_NAMES.split())
_WRAPPERS: Final = frozenset({"sudo", "time", "nohup", "env", "exec", "command", "builtin"})
_SETUP: Final = frozenset({"cd", "pushd", "popd", "export", "source", ".", "set", "unset"})
_SPLIT: Final = re.compile(r"\s*(?:&&|\|\||;|\||\n)\s*")
_ASSIGNMENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBCOMMAND: Final = re.compile(r"^[a-z][a-z0-9:_-]*$")
_EXIT_CODE: Final = re.compile(r"^(?:Error: )?Exit code:? (-?\d{1,9})\b")
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
    """The simple commands of a line, each as its words without wrappers or assignments.

    ``cd app && FOO=1 sudo npm ci`` gives ``[["cd", "app"], ["npm", "ci"]]``. Quoting is not
    parsed (a quoted ``|`` splits too): good enough to name commands, which is all it is for.
    """
    out: list[list[str]] = []
    for segment in _SPLIT.split(text.strip()):
        words = segment.split()
        while words and (_ASSIGNMENT.match(words[0]) or words[0] in _WRAPPERS):
            words = words[1:]
        if words and words[0] == "timeout" and len(words) > 2:
            words = words[2:]
        if words:
            out.append(words)
    return out


def _words_of(words: list[str]) -> str:
    head = words[0].rsplit("/", 1)[-1] or words[0]
    if head in SUBCOMMAND_TOOLS and len(words) > 1 and _SUBCOMMAND.match(words[1]):
        return f"{head} {words[1]}"
    return head


def command_words(text: str) -> str:
    """The command a line runs, as one or two words: ``cd app && npm ci --x`` -> ``npm ci``.

    Setup commands (``cd``, ``export``, ``source``) are skipped; the second word is kept only
    for tools with subcommands (:data:`SUBCOMMAND_TOOLS`). Empty for an empty line.
    """
    commands = simple_commands(text)
    for words in commands:
        if words[0] not in _SETUP:
            return _words_of(words)
    return _words_of(commands[0]) if commands else ""


def exit_code_of(result: Event) -> int | None:
    """The result's exit code, or the one its output begins with (``Exit code 1``)."""
    if result.exit_code is not None:
        return result.exit_code
    output = result.output
    if output and output.startswith(("Exit code", "Error: Exit code")):
        match = _EXIT_CODE.match(output)
        if match:
            return int(match.group(1))
    return None


@dataclass(frozen=True)
class FailureRules:
    """The failure rules of a run (see the module docstring); the defaults when built bare."""

    ok_exit_codes: Mapping[str, frozenset[int]] = field(
        default_factory=lambda: DEFAULT_OK_EXIT_CODES
    )
    shell_tools: frozenset[str] = SHELL_TOOLS
    error_prefix: str = "Error: "

    def with_ok_exit(self, command: str, *codes: int) -> FailureRules:
        """A copy where ``command`` (one or two words) exiting with ``codes`` is no failure."""
        table = dict(self.ok_exit_codes)
        table[command] = table.get(command, frozenset()) | frozenset(codes)
        return FailureRules(MappingProxyType(table), self.shell_tools, self.error_prefix)

    def is_shell(self, name: str | None, value: Any) -> bool:
        if name is not None and name.lower() in self.shell_tools:
            return True
        return isinstance(value, dict) and command_text(value) is not None

    def benign_exit(self, command: str, code: int) -> bool:
        """Whether ``code`` from this command line reports a result rather than a failure."""
        commands = simple_commands(command)
        if not commands:
            return False
        last = commands[-1]
        head = last[0].rsplit("/", 1)[-1] or last[0]
        table = self.ok_exit_codes
        if len(last) > 1 and code in table.get(f"{head} {last[1]}", ()):
            return True
        return code in table.get(head, ())

    def is_failure(self, call: Event | None, result: Event | None) -> bool:
        """Whether ``result`` (the answer to ``call``) is a failed call, by the rules above."""
        if call is None or result is None:
            return False
        code = exit_code_of(result)
        if code is not None and code != 0 and self.is_shell(call.name, call.input):
            command = command_text(call.input)
            if command is not None and self.benign_exit(command, code):
                return False
        if result.is_error is not None:
            return result.is_error
        if code is not None:
            return code != 0
        return bool(result.output) and str(result.output).startswith(self.error_prefix)
