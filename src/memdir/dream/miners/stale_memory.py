"""Stale memory: remembered commands and paths that recent transcripts show failing.

Claims come from the memory snapshot's code — of the notes people wrote: a note a dream wrote
(frontmatter ``source: dream`` or ``dream_pattern``) quotes the failing command it warns about
and is no claim, or each dream would report the last one's notes as stale: inline code spans and
the lines of fenced blocks (a leading ``$ `` dropped). A claim of two or more words starting
with a program name or a script path is a **command** (``make test``, ``./scripts/deploy web``);
one word with a ``/`` or a file extension is a **path** (``docs/setup.md``). Only sessions that
started within ``recent_days`` of the run's time count.

In a session, a command claim is contradicted when a shell call runs it (the call's simple
command starts with the claim's words) and fails, and no later call of it succeeds in that
session (a test suite that fails and then passes after a code fix is not stale memory). A path
claim is contradicted when a call naming that path fails saying it does not exist. When a
similar call of the same tool works right after (see :mod:`.recovery`), that is the
replacement: ``make test`` fails, ``make check`` works.

Key: ``path|claim``. Subject: ``path`` (the memory file), ``claim``, ``evidence`` (what the
transcripts show instead: the error, and the working replacement when one was seen). The
replacement is the ``variant`` (``""`` when none was seen).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt
from memdir.dream.miners.consolidation import frontmatter_of
from memdir.dream.miners.recovery import find_recoveries
from memdir.dream.miners.signature import error_line
from memdir.dream.model import MemoryFile, Session, Signal
from memdir.dream.shell import main_command, parse
from memdir.transcripts.model import bounded_key

__all__ = ["Claim", "StaleMemoryMiner", "claims_of", "written_by_dream"]

_SPAN: Final = re.compile(r"`([^`\n]{2,200})`")
_FENCE: Final = re.compile(r"^\s*(```|~~~)")
_PROGRAM: Final = re.compile(r"^(?:\.{0,2}/)?[a-z][\w.+-]*(?:/[\w.+-]+)*$")
_NOT_FOUND: Final = re.compile(
    r"no such file|not found|does not exist|cannot find|can't find|enoent", re.IGNORECASE
)
_FILE: Final = re.compile(r"^[\w.~-]*(/[\w.@+-]+)+/?$|^[\w-]+\.[a-z0-9]{1,5}$")


@dataclass(frozen=True, slots=True)
class Claim:
    """A command or path a memory file states (``words`` splits a command)."""

    path: str
    text: str
    kind: str  # "command" | "path"
    words: tuple[str, ...]


def _snippets(content: str) -> Iterator[str]:
    fenced = False
    for line in content.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if fenced:
            text = line.strip()
            yield text[2:] if text.startswith("$ ") else text
        else:
            yield from _SPAN.findall(line)


def written_by_dream(file: MemoryFile) -> bool:
    """Whether a dream wrote the file: frontmatter ``source: dream`` or a ``dream_pattern``.

    Such a note quotes the failing command it warns about (``make test`` fails; ``make
    check`` works): reading it as a claim would make the next dream report its own note as
    stale — a feedback loop.
    """
    meta = frontmatter_of(file)
    return meta.get("source") == "dream" or bool(meta.get("dream_pattern"))


def claims_of(memory: Sequence[MemoryFile]) -> list[Claim]:
    """Every command and path claim of the snapshot, in path order, each once per file.

    Notes a dream wrote are not claims (:func:`written_by_dream`).
    """
    out: list[Claim] = []
    for file in sorted(memory, key=lambda f: f.path):
        if written_by_dream(file):
            continue
        seen: set[str] = set()
        for snippet in _snippets(file.content):
            text = " ".join(snippet.split())
            if not text or text in seen or text.startswith("#"):
                continue
            words = tuple(text.split())
            if len(words) >= 2 and _PROGRAM.match(words[0]) and len(words) <= 12:
                parsed = main_command(parse(text))  # as calls are read: ``python3 -m pytest``
                out.append(Claim(file.path, text, "command", parsed.words if parsed else words))
                seen.add(text)
            elif len(words) == 1 and _FILE.match(text) and not text.startswith("-"):
                out.append(Claim(file.path, text, "path", words))
                seen.add(text)
    return out


def _missing(call: Call) -> bool:
    """Whether a failed call says a file or directory does not exist."""
    return bool(_NOT_FOUND.search(error_line(call.result.output if call.result else None)))


def _runs(call: Call, claim: Claim) -> bool:
    if claim.kind == "path":
        return claim.text in call.text
    size = len(claim.words)
    return any(c.words[:size] == claim.words for c in call.commands)


class StaleMemoryMiner:
    name: ClassVar[str] = "stale_memory"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules
        self.claims = claims_of(context.memory)
        self.since = context.now - dt.timedelta(days=context.recent_days)
        self._by_program: dict[str, list[Claim]] = {}
        self._paths = [c for c in self.claims if c.kind == "path"]
        for claim in self.claims:
            if claim.kind == "command":
                self._by_program.setdefault(claim.words[0], []).append(claim)

    def _candidates(self, call: Call) -> list[Claim]:
        # Path claims only matter when the call failed: skip the text of the others.
        found = [c for c in self._paths if c.text in call.text] if call.failed else []
        if call.shell:
            for command in call.commands:
                found += [c for c in self._by_program.get(command.program, ()) if _runs(call, c)]
        return found

    def mine(self, session: Session) -> Iterator[Signal]:
        if not self.claims:
            return
        started = session.info.started_at
        if started is not None and started < self.since:
            return
        calls = calls_of(session, self.rules)
        failing: dict[Claim, Call] = {}
        for call in calls:
            for claim in self._candidates(call):
                if call.failed and (claim.kind == "command" or _missing(call)):
                    failing.setdefault(claim, call)
                elif claim in failing and claim.kind == "command":
                    del failing[claim]  # it works again later in the session
        if not failing:
            return
        fixes = {failed.index: fixed for failed, fixed in find_recoveries(calls)}
        for claim, call in sorted(failing.items(), key=lambda kv: (kv[1].index, kv[0].text)):
            fixed = fixes.get(call.index)
            error = error_line(call.result.output if call.result else None)[:200]
            evidence = f"`{call.literal}` fails: {error}"
            if fixed is not None:
                evidence += f"; `{fixed.literal}` works"
            end = fixed if fixed is not None else call
            last = end.result_index if end.result_index is not None else end.index
            text = f"{call.name}: {call.text}\n-> {error}"
            if fixed is not None:
                text += f"\n{fixed.name}: {fixed.text}\n-> ok"
            yield Signal(
                miner=self.name,
                key=bounded_key(f"{claim.path}|{claim.text}"),
                subject={"path": claim.path, "claim": claim.text, "evidence": evidence},
                title=f"`{claim.text}` in {claim.path} now fails"
                + (f"; `{fixed.literal}` works" if fixed is not None else ""),
                excerpt=excerpt(session, call.index, last, text),
                variant=fixed.norm if fixed is not None else "",
            )
