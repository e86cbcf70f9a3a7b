"""Repeated exploration: the same lookups made near the start of many sessions.

A lookup is a successful call among a session's first ``lookup_calls`` (default 8) tool calls
that reads, lists or searches: a file tool (``Read``, ``view``, ``read_file``, ``LS``,
``Glob``, ``Grep``, ...; :data:`LOOKUP_TOOLS`) or a shell command (``cat``, ``head``, ``ls``,
``tree``, ``find``, ``grep``, ``rg``, ...; :data:`LOOKUP_COMMANDS`). It is normalised to
``<kind> <target>`` — ``read docs/ARCHITECTURE.md``, ``list src``, ``search TODO src`` — from
the paths and patterns it names (flags, numbers and quotes dropped, ``./`` and a trailing
``/`` stripped), so ``cat ./docs/ARCHITECTURE.md`` and ``head -50 docs/ARCHITECTURE.md`` are
one lookup. A lookup without a target (``ls``, ``ls .``) says nothing and is skipped.

Key: the normalised lookup. Subject: ``tool`` (the tool most used for it: the top
``variant``), ``input`` (the normalised lookup). The same lookup in many sessions is a
candidate navigation note.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt
from memdir.dream.model import Session, Signal
from memdir.dream.shell import SimpleCommand
from memdir.transcripts.model import bounded_key

__all__ = ["LOOKUP_COMMANDS", "LOOKUP_TOOLS", "ExplorationMiner", "lookup_of"]

LOOKUP_TOOLS: Final = {
    **dict.fromkeys(
        ("read", "read_file", "view", "view_file", "open_file", "readfile", "notebookread"),
        "read",
    ),
    **dict.fromkeys(("ls", "list", "list_dir", "list_directory", "glob", "file_search"), "list"),
    **dict.fromkeys(("grep", "rg", "search_files", "grep_search", "codebase_search"), "search"),
}
LOOKUP_COMMANDS: Final = {
    **dict.fromkeys(("cat", "head", "tail", "less", "more", "bat", "nl", "sed"), "read"),
    **dict.fromkeys(("ls", "tree", "find", "fd", "du"), "list"),
    **dict.fromkeys(("grep", "rg", "ag", "ack", "egrep", "fgrep"), "search"),
}
_PATH_KEYS: Final = (
    "file_path",
    "path",
    "filePath",
    "file",
    "target_file",
    "notebook_path",
    "dir",
    "directory",
    "relative_workspace_path",
)
_PATTERN_KEYS: Final = ("pattern", "query", "glob", "regex")
_TRIVIAL: Final = frozenset({"", ".", "./", "~", "*"})


def _clean(token: str) -> str:
    token = token.strip("\"'`")
    while token.startswith("./"):
        token = token[2:]
    return token.rstrip("/") if len(token) > 1 else token


def _range(token: str) -> bool:
    """Line numbers and ranges (``50``, ``1,20p``): arguments, not targets."""
    return token.replace(",", "").rstrip("p").isdigit()


def _shell_lookup(commands: list[SimpleCommand]) -> str | None:
    for command in commands:
        if command.setup:
            continue
        if command.heredoc is not None or command.writes:
            return None  # ``cat <<'EOF' > f.py`` writes a file: no lookup
        head, args = command.program, list(command.args)
        if head == "git" and args[:1] == ["grep"]:
            head, args = "grep", args[1:]
        kind = LOOKUP_COMMANDS.get(head)
        if kind is None:
            return None
        targets = [_clean(a) for a in args if not a.startswith("-") and not _range(a)]
        targets = [t for t in targets if t not in _TRIVIAL]
        return f"{kind} {' '.join(targets)}" if targets else None
    return None


def lookup_of(call: Call) -> str | None:
    """The normalised lookup a call makes (see the module docstring), or None."""
    if call.shell:
        head = call.text.lstrip().split(" ", 1)[0]
        if head not in LOOKUP_COMMANDS and not any(c in call.text for c in "&|;\n="):
            return None  # a single command that is no lookup: no need to parse it
        return _shell_lookup(call.commands)
    kind = LOOKUP_TOOLS.get(call.name.lower())
    if kind is None or not isinstance(call.input, dict):
        return None
    value: dict[str, Any] = call.input
    parts = [_clean(str(value[k])) for k in _PATTERN_KEYS if isinstance(value.get(k), str)][:1]
    parts += [_clean(str(value[k])) for k in _PATH_KEYS if isinstance(value.get(k), str)][:1]
    parts = [p for p in parts if p not in _TRIVIAL]
    return f"{kind} {' '.join(parts)}" if parts else None


class ExplorationMiner:
    name: ClassVar[str] = "exploration"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules
        self.first = context.lookup_calls

    def mine(self, session: Session) -> Iterator[Signal]:
        seen: set[str] = set()
        for call in calls_of(session, self.rules)[: self.first]:
            if call.outcome != "ok":  # a failed lookup, or a probe that found nothing
                continue
            lookup = lookup_of(call)
            if lookup is None or lookup in seen:
                continue
            seen.add(lookup)
            last = call.result_index if call.result_index is not None else call.index
            yield Signal(
                miner=self.name,
                key=bounded_key(lookup),
                subject={"tool": call.name, "input": lookup},
                title=f"Sessions start by looking up {lookup}",
                excerpt=excerpt(session, call.index, last, f"{call.name}: {call.text}"),
                variant=call.name,
            )
