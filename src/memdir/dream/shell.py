"""Shell command lines parsed into simple commands: programs, arguments, reads and writes.

Agents' shell calls are whole scripts: ``cd app && FOO=1 timeout 60 python -m pytest -x tests
2>&1 | tee log``, heredocs (``cat <<'EOF' > reproduce.py`` … ``EOF``), ``bash -c '…'``. The
miners need to know what each of them *runs* (``pytest``), on what (``-x tests``), and what it
reads and writes (``log``, ``reproduce.py``) — not the text between ``&&``. :func:`parse` does
that with a small lexer of its own (the standard library's ``shlex`` has no heredocs and raises on
an unbalanced quote; the usual Python bash parsers are GPL):

- **quoting**: ``'…'``, ``"…"`` (backslash escapes), ``\\x``, ``$(…)``, ``${…}`` and backticks
  stay inside one word; the word's value has its quotes removed;
- **lists and pipelines**: ``&&``, ``||``, ``;``, ``&``, ``|``, ``|&``, newlines, ``( … )`` and
  ``{ … }`` separate simple commands; each records the operator after it (:attr:`SimpleCommand.
  connector`); ``if``/``then``/``do``/``while``/``!``/… keywords are skipped, ``for x in …``
  headers and function definitions are not commands;
- **redirections**: ``>``, ``>>``, ``>|``, ``&>``, ``&>>``, ``N>`` are writes (not to
  ``/dev/null`` or a descriptor: ``2>&1``), ``<`` a read, ``<<<`` a here-string; ``<<DELIM`` /
  ``<<-DELIM`` bodies (up to the delimiter's line) are the command's :attr:`~SimpleCommand.
  heredoc`, never words or commands of their own. SWE-agent's multi-line tools (``edit 1:5`` …
  ``end_of_edit``) are read the same way (:data:`BODY_TERMINATORS`);
- **what runs**: leading assignments (``A=b``) go to :attr:`~SimpleCommand.env`; wrappers
  (:data:`WRAPPERS`: ``sudo``, ``env``, ``nohup``, ``time``, ``timeout 60``, ``nice -n 5``,
  ``xargs``, ``npx``, ``uv run``, …) are stripped with their options into :attr:`~SimpleCommand.
  wrappers`; ``python -m tool`` runs ``tool``; ``bash -c '…'`` is parsed recursively (to depth
  3); a preceding ``cd x`` in the same line becomes :attr:`~SimpleCommand.cwd`;
- **program families** (:func:`family`): ``/usr/bin/python3.11`` and ``python3`` are
  ``python``, ``py.test`` is ``pytest``, ``pip3`` is ``pip``, so one cause is one pattern; the
  words as written stay in :attr:`~SimpleCommand.argv` (drafts quote literal commands);
- **writes by programs**: ``tee FILE``, ``sed -i … FILE``, ``cp``/``mv``/``touch`` targets;
  reads: ``<`` targets and the file arguments of readers (``cat``, ``head``, ``source``, …).

It never raises: any text gives a (possibly empty) list. Work is bounded: at most
:data:`MAX_CHARS` characters and :data:`MAX_COMMANDS` commands are read; an unterminated quote or
heredoc runs to the end of the text.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "BODY_TERMINATORS",
    "MAX_CHARS",
    "MAX_COMMANDS",
    "SETUP",
    "WRAPPERS",
    "SimpleCommand",
    "family",
    "main_command",
    "parse",
    "status_command",
]

MAX_CHARS: Final = 100_000
MAX_COMMANDS: Final = 200
_MAX_DEPTH: Final = 3

#: Commands that prepare the shell rather than do the work (skipped to find what a line runs).
SETUP: Final = frozenset(
    {"cd", "pushd", "popd", "export", "source", ".", "set", "unset", "alias", "shopt", "ulimit",
     "umask", "trap", "true", ":", "local", "declare", "readonly", "hash", "wait"}
)  # fmt: skip
#: Wrapper programs -> the options of theirs that take a value (stripped with the wrapper).
WRAPPERS: Final[dict[str, frozenset[str]]] = {
    "sudo": frozenset({"-u", "-g", "-h", "-p", "-C", "-D", "-U", "-r", "-t"}),
    "env": frozenset({"-u", "-C", "-S", "--unset", "--chdir"}),
    "nohup": frozenset(),
    "time": frozenset({"-f", "-o"}),
    "exec": frozenset({"-a"}),
    "builtin": frozenset(),
    "nice": frozenset({"-n"}),
    "ionice": frozenset({"-c", "-n", "-p"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
    "unbuffer": frozenset(),
    "chronic": frozenset(),
    "xargs": frozenset({"-n", "-I", "-P", "-d", "-L", "-s", "-E", "-a"}),
    "npx": frozenset({"-p", "--package"}),
    "bunx": frozenset(),
    "pnpx": frozenset(),
}
#: Two-word wrappers (``uv run pytest``): the pair -> options taking a value.
RUN_WRAPPERS: Final[dict[tuple[str, str], frozenset[str]]] = {
    ("uv", "run"): frozenset({"--with", "--python", "-p", "--project", "--directory"}),
    ("poetry", "run"): frozenset(),
    ("pipenv", "run"): frozenset(),
    ("pdm", "run"): frozenset(),
    ("hatch", "run"): frozenset(),
    ("rye", "run"): frozenset(),
    ("conda", "run"): frozenset({"-n", "--name", "-p", "--prefix"}),
    ("bundle", "exec"): frozenset(),
    ("pnpm", "exec"): frozenset(),
    ("yarn", "exec"): frozenset(),
    ("npm", "exec"): frozenset(),
}
#: SWE-agent style tools whose arguments run on to a terminator line (like a heredoc).
BODY_TERMINATORS: Final = {"edit": "end_of_edit", "insert": "end_of_insert",
                           "append": "end_of_append"}  # fmt: skip
_SHELLS: Final = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_INTERPRETERS_M: Final = frozenset({"python", "pypy", "py"})
_KEYWORDS: Final = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "{"})
_CLOSERS: Final = frozenset({"fi", "done", "esac", "}"})
_OPERATORS: Final = ("&>>", "<<<", "<<-", ";;&", "&&", "||", ";;", ";&", "|&", ">>", "<<", ">&",
                     "<&", "&>", ">|", "<>", ";", "|", "&", "<", ">", "(", ")", "\n")  # fmt: skip
_REDIRECTS: Final = frozenset({">", ">>", ">|", "&>", "&>>", "<", "<>", "<<", "<<-", "<<<", ">&",
                               "<&"})  # fmt: skip
_SEPARATORS: Final = frozenset({"&&", "||", ";", "&", "|", "|&", "\n", "(", ")", ";;", ";&",
                                ";;&"})  # fmt: skip
_OP_START: Final = frozenset("&|;<>()\n")
_ASSIGNMENT: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\[[^]]*\])?\+?=")
_PYTHON: Final = re.compile(r"python(?:\d+(?:\.\d+)*[a-z]?)?(?:-dbg)?|pypy\d*(?:\.\d+)?")
_FAMILIES: Final = {
    "py.test": "pytest", "pytest-3": "pytest", "pip3": "pip", "nodejs": "node",
    "ipython3": "ipython", "gcc-12": "gcc", "g++-12": "g++",
}  # fmt: skip
_PIP: Final = re.compile(r"pip\d+(?:\.\d+)*")
_NULL_TARGETS: Final = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
_READERS: Final = frozenset({"cat", "head", "tail", "less", "more", "bat", "nl", "wc", "source",
                             ".", "diff", "cmp", "sort", "uniq", "jq", "xxd", "od", "strings",
                             "file", "stat", "md5sum", "sha256sum"})  # fmt: skip
_FILE_WRITERS: Final = frozenset({"touch", "mkdir", "rm", "truncate"})


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One simple command of a line (see the module docstring).

    ``program`` is the family name of what runs (``pytest`` for ``python3 -m pytest``, ``git``
    for ``/usr/bin/git``; a relative script path as written: ``./run.sh``); ``args`` the words
    after it; ``argv`` the words as written from the program word on (``python3 -m pytest -x``)
    — the literal command. ``connector`` is the operator that follows (``&&``, ``||``, ``;``,
    ``|``, ``&``, or ``""`` at the end of the line).
    """

    program: str
    args: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    heredoc: str | None = None
    env: tuple[str, ...] = ()
    wrappers: tuple[str, ...] = ()
    cwd: str | None = None
    connector: str = ""

    @property
    def words(self) -> tuple[str, ...]:
        """``(program, *args)``: what runs, family-normalised, with its arguments."""
        return (self.program, *self.args)

    @property
    def text(self) -> str:
        """The command as written (its ``argv`` joined), without wrappers or redirections."""
        return " ".join(self.argv)

    @property
    def setup(self) -> bool:
        """Whether it only prepares the shell (``cd``, ``export``, ...)."""
        return self.program in SETUP


def family(word: str) -> str:
    """The program family of a command word: ``/usr/bin/python3.11`` -> ``python``.

    Absolute paths give their basename; a relative path (``./run.sh``, ``bin/x``) is a script of
    the project and stays as written; versioned interpreters and tools join their family
    (``python3``, ``pypy3`` -> ``python``, ``pip3.12`` -> ``pip``, ``py.test`` -> ``pytest``).
    """
    if not word:
        return word
    base = word.rsplit("/", 1)[-1] if word.startswith("/") else word
    if "/" in base:
        return base
    if _PYTHON.fullmatch(base):
        return "python"
    if _PIP.fullmatch(base):
        return "pip"
    return _FAMILIES.get(base, base)


# --- lexer ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Token:
    kind: str  # "word" | "op"
    value: str
    raw: str = ""
    body: list[str] | None = field(default=None)  # a heredoc's lines, filled at its newline


def _lex(text: str) -> list[_Token]:
    """Words and operators; heredoc bodies attached to their ``<<`` operator's delimiter word."""
    out: list[_Token] = []
    pending: list[tuple[_Token, str, bool]] = []  # (delimiter token, delimiter, strip tabs)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            out.append(_Token("op", "\n"))
            i += 1
            if pending:
                i = _bodies(text, i, pending)
                pending = []
            continue
        if c in " \t\r":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":
            i += 2
            continue
        if c == "#":
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in _OP_START:
            op = next(o for o in _OPERATORS if text.startswith(o, i))
            i += len(op)
            out.append(_Token("op", op))
            if op in ("<<", "<<-"):
                while i < n and text[i] in " \t":
                    i += 1
                word, raw, i = _word(text, i)
                token = _Token("word", word, raw)
                out.append(token)
                if word:
                    pending.append((token, word, op == "<<-"))
            continue
        word, raw, i = _word(text, i)
        if word.isdigit() and i < n and text[i] in "<>":
            out.append(_Token("op", "fd", word))  # ``2>``: the descriptor of a redirection
            continue
        out.append(_Token("word", word, raw))
        terminator = BODY_TERMINATORS.get(word)
        if terminator and (len(out) == 1 or out[-2].kind == "op") and f"\n{terminator}" in text[i:]:
            pending.append((out[-1], terminator, False))  # its body: the next lines, to the end
    return out


def _bodies(text: str, i: int, pending: list[tuple[_Token, str, bool]]) -> int:
    """Read the heredoc bodies that start at ``i``; return the position after the last one."""
    for token, delimiter, strip in pending:
        lines: list[str] = []
        while i < len(text):
            end = text.find("\n", i)
            line = text[i:] if end < 0 else text[i:end]
            i = len(text) if end < 0 else end + 1
            if (line.lstrip("\t") if strip else line).rstrip("\r") == delimiter:
                break
            lines.append(line)
        token.body = lines
    return i


def _word(text: str, i: int) -> tuple[str, str, int]:
    """One word from ``i``: (its value without quotes, as written, the position after it)."""
    start, n = i, len(text)
    value: list[str] = []
    while i < n:
        c = text[i]
        if c in " \t\r" or c in _OP_START:
            break
        if c == "'":
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            value.append(text[i + 1 : end])
            i = end + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '"\\$`\n':
                    i += 1
                value.append(text[i])
                i += 1
            i += 1
        elif c == "\\" and i + 1 < n:
            value.append(text[i + 1])
            i += 2
        elif c == "$" and i + 1 < n and text[i + 1] in "({":
            end = _balanced(text, i + 1)
            value.append(text[i:end])
            i = end
        elif c == "`":
            end = text.find("`", i + 1)
            end = n if end < 0 else end + 1
            value.append(text[i:end])
            i = end
        else:
            value.append(c)
            i += 1
    return "".join(value), text[start:i], min(i, n)


def _balanced(text: str, i: int) -> int:
    """The position after the bracket group opening at ``i`` (quotes respected)."""
    pairs = {"(": ")", "{": "}"}
    stack = [pairs[text[i]]]
    i += 1
    while i < len(text) and stack:
        c = text[i]
        if c in "'\"":
            end = text.find(c, i + 1)
            i = len(text) if end < 0 else end + 1
            continue
        if c == "\\":
            i += 2
            continue
        if c in pairs:
            stack.append(pairs[c])
        elif c == stack[-1]:
            stack.pop()
        i += 1
    return i


# --- parser ---------------------------------------------------------------------------------


def parse(command: str) -> list[SimpleCommand]:
    """The simple commands of a command line, in order (see the module docstring).

    ``parse("cd app && A=1 timeout 60 python3 -m pytest -x 2>&1 | tee log")`` gives ``cd app``
    and ``pytest -x`` (argv ``python3 -m pytest -x``, cwd ``app``, env ``A=1``, wrappers
    ``timeout 60``) piped (``|``) into ``tee log`` (writes ``log``). Never raises.

    Lines up to :data:`_CACHED_CHARS` characters are parsed once per :data:`_CACHE_SIZE` most
    recent distinct lines (the miners of a session ask for the same line several times, and
    fleets repeat their commands); the commands are frozen, the list is the caller's own.
    """
    if not isinstance(command, str):
        return []
    if len(command) <= _CACHED_CHARS:
        return list(_parse_cached(command))
    return _parse(command)


#: Bounded, so the cache is a constant in a dream's memory whatever the fleet's size.
_CACHE_SIZE: Final = 1024
_CACHED_CHARS: Final = 1000


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _parse_cached(command: str) -> tuple[SimpleCommand, ...]:
    return tuple(_parse(command))


def _parse(command: str, *, _depth: int = 0) -> list[SimpleCommand]:
    if not command.strip():
        return []
    try:
        tokens = _lex(command[:MAX_CHARS])
    except (IndexError, ValueError, StopIteration):  # pragma: no cover - defensive
        return []
    out: list[SimpleCommand] = []
    cwd: str | None = None
    for words, redirects, body, connector in _groups(tokens):
        for made in _commands(words, redirects, body, connector, cwd, _depth):
            out.append(made)
            if made.program == "cd" and made.args:
                cwd = made.args[-1] if cwd is None or made.args[-1].startswith(("/", "~")) \
                    else f"{cwd.rstrip('/')}/{made.args[-1]}"  # fmt: skip
            if len(out) >= MAX_COMMANDS:
                return out
    return out


_Group = tuple[list[_Token], list[tuple[str, str]], str | None, str]


def _groups(tokens: list[_Token]) -> Iterator[_Group]:
    """Per simple command: its words, its redirections ``(op, target)``, heredoc, connector."""
    words: list[_Token] = []
    redirects: list[tuple[str, str]] = []
    body: list[str] = []
    has_body = False
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.kind == "op" and token.value in _SEPARATORS:
            if token.value == "(" and i + 1 < len(tokens) and tokens[i + 1].value == ")":
                words, redirects, i = [], [], i + 2  # ``name() { ...``: a function definition
                continue
            if words or redirects:
                yield words, redirects, "\n".join(body) if has_body else None, token.value
            words, redirects, body, has_body = [], [], [], False
            i += 1
            continue
        if token.kind == "op":
            op = token.value
            if op == "fd" and i + 1 < len(tokens) and tokens[i + 1].kind == "op":
                op = token.raw + tokens[i + 1].value
                i += 1
            target = tokens[i + 1] if i + 1 < len(tokens) and tokens[i + 1].kind == "word" else None
            if target is not None:
                redirects.append((op, target.value))
                if target.body is not None:
                    body.extend(target.body)
                    has_body = True
                i += 2
            else:
                i += 1
            continue
        words.append(token)
        if token.body is not None:
            body.extend(token.body)
            has_body = True
        i += 1
    if words or redirects:
        yield words, redirects, "\n".join(body) if has_body else None, ""


def _commands(tokens: list[_Token], redirects: list[tuple[str, str]], heredoc: str | None,
              connector: str, cwd: str | None, depth: int) -> list[SimpleCommand]:  # fmt: skip
    words = [t.value for t in tokens]
    while words and (words[0] in _KEYWORDS or words[0] in _CLOSERS):
        words = words[1:]
    if (
        not words
        or words[0] in ("for", "select", "case", "function", "in")
        or (len(words) >= 1 and words[0].endswith("()"))
    ):
        return []
    if len(words) > 1 and words[1] == "()":
        return []
    env: list[str] = []
    while words and _ASSIGNMENT.match(words[0]):
        env.append(words.pop(0))
    wrappers: list[str] = []
    words = _strip_wrappers(words, wrappers, env)
    if not words:
        if not env:
            return []
        return [SimpleCommand("export", tuple(env), tuple(env), env=tuple(env), cwd=cwd,
                              connector=connector)]  # fmt: skip
    head = family(words[0])
    if head in _SHELLS and depth < _MAX_DEPTH:
        script = _dash_c(words[1:])
        if script is not None:
            inner = _parse(script, _depth=depth + 1)
            if inner:
                last = inner[-1]
                inner[-1] = SimpleCommand(
                    last.program, last.args, last.argv, last.reads, last.writes, last.heredoc,
                    last.env, (*wrappers, words[0], *last.wrappers), last.cwd or cwd, connector,
                )  # fmt: skip
                return [c if c.cwd or cwd is None else _with_cwd(c, cwd) for c in inner[:-1]] + [
                    inner[-1]
                ]
            return []
    program, args = head, words[1:]
    if head in _INTERPRETERS_M:
        module = _dash_m(words[1:])
        if module is not None:
            program, args = family(module[0]), module[1]
    reads, writes = _io(program, args, redirects)
    return [SimpleCommand(program, tuple(args), tuple(words), tuple(reads), tuple(writes),
                          heredoc, tuple(env), tuple(wrappers), cwd, connector)]  # fmt: skip


def _with_cwd(c: SimpleCommand, cwd: str) -> SimpleCommand:
    return SimpleCommand(c.program, c.args, c.argv, c.reads, c.writes, c.heredoc, c.env,
                         c.wrappers, cwd, c.connector)  # fmt: skip


def _strip_wrappers(words: list[str], wrappers: list[str], env: list[str]) -> list[str]:
    for _ in range(8):
        if not words:
            break
        head = family(words[0])
        pair = (head, words[1]) if len(words) > 1 else None
        if pair in RUN_WRAPPERS:
            assert pair is not None
            wrappers.append(" ".join(pair))
            words = _skip_options(words[2:], RUN_WRAPPERS[pair])
        elif head in WRAPPERS:
            wrappers.append(head)
            words = _skip_options(words[1:], WRAPPERS[head])
            if head == "env":
                while words and _ASSIGNMENT.match(words[0]):
                    env.append(words.pop(0))
        elif head == "timeout":
            wrappers.append("timeout")
            words = _skip_options(words[1:], frozenset({"-s", "--signal", "-k", "--kill-after"}))
            words = (
                words[1:] if words and re.fullmatch(r"\d+(?:\.\d+)?[smhd]?", words[0]) else words
            )
        elif head == "command" and len(words) > 1 and not words[1].startswith("-"):
            wrappers.append("command")
            words = words[1:]
        else:
            break
    return words


def _skip_options(words: list[str], valued: frozenset[str]) -> list[str]:
    i = 0
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        if words[i] == "--":
            return words[i + 1 :]
        i += 2 if words[i] in valued else 1
    return words[i:]


def _dash_c(args: list[str]) -> str | None:
    """The script of ``bash -c SCRIPT`` / ``-lc`` / ``-ec`` …, or None."""
    for i, arg in enumerate(args):
        if not arg.startswith("-"):
            return None
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:]:
            return args[i + 1] if i + 1 < len(args) else None
    return None


def _dash_m(args: list[str]) -> tuple[str, list[str]] | None:
    """``python [-u -X x] -m MODULE args`` -> (MODULE, args); None without ``-m``."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "-m" and i + 1 < len(args):
            return args[i + 1], args[i + 2 :]
        if args[i].startswith("-m") and len(args[i]) > 2:
            return args[i][2:], args[i + 1 :]
        if args[i] == "-c":
            return None
        i += 2 if args[i] in ("-X", "-W", "-Q") else 1
    return None


def _io(
    program: str, args: list[str], redirects: list[tuple[str, str]]
) -> tuple[list[str], list[str]]:
    reads: list[str] = []
    writes: list[str] = []
    for op, target in redirects:
        if target in _NULL_TARGETS or not target or (op.endswith("&") and target.isdigit()):
            continue
        if op.endswith((">", ">>", ">|")) or op in ("&>", "&>>"):
            writes.append(target)
        elif op.endswith(("<", "<>")) and not op.endswith("<<"):
            reads.append(target)
    operands = [a for a in args if not a.startswith("-")]
    if program == "tee":
        writes += [a for a in operands if a not in _NULL_TARGETS]
    elif program == "sed" and any(a == "-i" or a.startswith(("-i", "--in-place")) for a in args):
        writes += operands[1:]
    elif program in ("cp", "mv", "ln", "install") and len(operands) >= 2:
        reads += operands[:-1]
        writes.append(operands[-1])
    elif program in _FILE_WRITERS:
        writes += operands
    elif program in _READERS:
        reads += [a for a in operands if a not in _NULL_TARGETS and not a.isdigit()]
    return reads, writes


def main_command(commands: list[SimpleCommand]) -> SimpleCommand | None:
    """What a line runs: its first command that is not setup (``cd``, ``export``, ...)."""
    for command in commands:
        if not command.setup:
            return command
    return commands[0] if commands else None


def status_command(commands: list[SimpleCommand]) -> SimpleCommand | None:
    """The command whose exit status the line returns: the last one (``a | grep x``: grep)."""
    for command in reversed(commands):
        if command.connector != "&":
            return command
    return commands[-1] if commands else None
