"""Failure -> recovery: a failing call fixed by a call that changes how it is run, soon after.

A failing call (outcome ``error``) is paired with the first later call of the same tool that
**worked** (outcome ``ok``, or ``tests-failed``: a test runner that ran and reported failing
tests is a fix for "the runner does not start") and is **another try of it** (:func:`similar`),
among the next :data:`WINDOW` tool calls — not counting probes and lookups in between
(:func:`is_probe`: ``ls``, ``cat``, ``grep``, ``which``, a file read, a probe's or search's
"no"), which agents make while they find the fix. An identical retry (the same text) is not a
recovery; each success fixes at most one failure (the first that reaches it).

For shell calls, another try is an **argument-preserving substitution** of the command that does
the work (:func:`substitution`): the same program family (``pytest X`` and ``python -m pytest
X`` both run ``pytest``; ``pip3`` is ``pip``), every positional argument of the failing command
kept in order (``make test`` -> ``make -C build test``, ``pip install x`` -> ``pip install
--user x``; options may come and go), except that a subcommand tool may change its subcommand
(``make test`` -> ``make check``) — and never another script of the same interpreter
(``python a.py`` -> ``python b.py`` is a different program, not a fix). Other tools: token
Jaccard >= 0.5, a token-sequence ratio (difflib, first 60 tokens) >= 0.6, or the same
arguments with at most half of their values (at least one) changed.

A failing shell call that works when **retried unchanged** after a working call of the same
tool that is no probe and writes no file (:func:`find_prerequisites`: ``pip install pytest``
between two ``python -m pytest``, ``python manage.py migrate`` between two ``python
reproduce.py``) was fixed by that call, the latest such one: the change is ``run `X` first``,
keyed by the masked error line (one cause whatever was installed), ``fixed`` is the
prerequisite and ``then`` the call that then worked.

The change is a token-level diff (:func:`describe_change`): ``add --foo``, ``remove --bar``,
``replace X with Y``, ``correct path X to Y``; a change of whitespace only (an editor body
re-indented) is ``fix the indentation``, of a body only ``change the body`` — and then the
failing side is the masked error line (``IndentationError: unexpected indent``).

Key: ``tool|command words|failing side`` — the tokens the fix removed or replaced (``Bash|npm
ci|--frozen-lockfile``, ``create_ticket|priority=urgent``), or ``+`` and those it added — so
every fix tried for one failing flag or value counts under one pattern, whatever else varies
in the input, with each change a ``variant`` (in how many sessions it worked). Subject:
``tool``, ``failed`` and ``fixed`` (the literal commands of the top variant's session, heredoc
bodies and redirections left out: what a note should quote), ``change``, ``error`` (the
failing call's error line); :func:`fix_rates` adds ``failure_sessions`` (the sessions where
the failure it fixes occurred) once patterns are reduced, so a draft can say "worked in 41 of
44 sessions".
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Sequence
from typing import ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt
from memdir.dream.miners.failures import SUBCOMMAND_TOOLS
from memdir.dream.miners.signature import error_line, mask_tokens, tokens_of
from memdir.dream.model import Pattern, Session, Signal
from memdir.dream.shell import SimpleCommand
from memdir.transcripts.model import bounded_key

__all__ = [
    "INTERPRETERS",
    "LOOKUPS",
    "WINDOW",
    "RecoveryMiner",
    "describe_change",
    "find_prerequisites",
    "find_recoveries",
    "fix_rates",
    "is_probe",
    "similar",
    "substitution",
]

#: A fix must come within this many later tool calls.
WINDOW: Final = 3
_JACCARD: Final = 0.5
_DIGITS: Final = re.compile(r"\d+")
_RATIO: Final = 0.6
#: The share of a tool error's sessions a recovery must have fixed to stand for it (as
#: ``decide.EXPLAINED_SHARE``: the error is then reported as explained by the recovery).
_STANDS_FOR: Final = 0.5


def input_tokens(call: Call) -> list[str]:
    """Tokens to compare and diff: a shell command's words, else the input's ``key=value``s
    (values masked as in :attr:`Call.norm`)."""
    if call.shell or not isinstance(call.input, dict):
        return tokens_of(call.literal if call.shell else call.text)
    return call.norm.split(" ")


#: Programs whose first positional argument is the program itself (a script).
INTERPRETERS: Final = frozenset({"python", "node", "ruby", "perl", "php", "bash", "sh", "zsh",
                                 "tsx", "ts-node", "deno", "bun", "Rscript", "julia", "lua",
                                 "java", "go run", "dotnet run"})  # fmt: skip
#: Shell programs that only look (their calls between a failure and its fix are skipped).
LOOKUPS: Final = frozenset({"ls", "cat", "head", "tail", "less", "grep", "rg", "ag", "find",
                            "fd", "tree", "pwd", "echo", "which", "type", "file", "stat", "wc",
                            "git status", "git log", "git diff", "git show", "open", "goto",
                            "scroll_up", "scroll_down", "search_file", "search_dir",
                            "find_file", "sed -n", "nl", "du", "env", "printenv"})  # fmt: skip
_READ_TOOLS: Final = frozenset({"read", "read_file", "view", "view_file", "ls", "list_dir",
                                "glob", "grep", "search_files", "todoread"})  # fmt: skip


def is_probe(call: Call) -> bool:
    """Whether a call only looks around (see the module docstring): skipped by the window."""
    if call.outcome in ("probe", "no-match"):
        return True
    if not call.shell:
        return call.name.lower() in _READ_TOOLS
    work = call.work
    return (
        bool(work)
        and all(
            c.program in LOOKUPS or f"{c.program} {c.args[0] if c.args else ''}".strip() in LOOKUPS
            for c in work
        )
        and not any(c.writes for c in work)
    )


def _positional(words: Sequence[str]) -> list[str]:
    """Arguments that are not options, whitespace-normalised (a re-indented body is the same)."""
    return [" ".join(w.split()) for w in words if not w.startswith("-")]


def _subsequence(needle: Sequence[str], hay: Sequence[str]) -> bool:
    it = iter(hay)
    return all(any(h == n for h in it) for n in needle)


def substitution(a: Call, b: Call) -> bool:
    """Whether shell call ``b`` runs ``a``'s command another way (see the module docstring)."""
    fa, fb = a.work, b.work
    if not fa or len(fa) != len(fb):
        return False  # ``build && test`` -> ``build`` drops the step that failed: no fix
    return all(_substitutes(ma, mb) for ma, mb in zip(fa, fb, strict=True))


def _substitutes(ma: SimpleCommand, mb: SimpleCommand) -> bool:
    if ma.program != mb.program:
        return False
    pa, pb = _positional(ma.args), _positional(mb.args)
    if ma.program in INTERPRETERS:
        return pa[:1] == pb[:1]
    if _subsequence(pa, pb):
        return True
    return ma.program in SUBCOMMAND_TOOLS and bool(pa) and bool(pb) and _subsequence(pa[1:], pb[1:])


def similar(a: Call, b: Call) -> bool:
    """Whether ``b`` looks like another try of ``a`` (see the module docstring)."""
    if a.shell and b.shell and a.commands and b.commands:
        return substitution(a, b)
    ta, tb = input_tokens(a), input_tokens(b)
    sa, sb = set(ta), set(tb)
    if sa and sb and len(sa & sb) / len(sa | sb) >= _JACCARD:
        return True
    x, y = a.input, b.input
    if not a.shell and isinstance(x, dict) and isinstance(y, dict) and x and x.keys() == y.keys():
        changed = sum(1 for k in x if x[k] != y[k])
        return changed <= max(1, len(x) // 2)
    matcher = difflib.SequenceMatcher(None, ta[:60], tb[:60], autojunk=False)
    return (
        matcher.real_quick_ratio() >= _RATIO
        and matcher.quick_ratio() >= _RATIO
        and matcher.ratio() >= _RATIO
    )


def _pathish(tokens: Sequence[str]) -> bool:
    return bool(tokens) and all("/" in t or "." in t.strip(".") for t in tokens)


def describe_change(before: Sequence[str], after: Sequence[str]) -> str:
    """The token-level diff from ``before`` to ``after``, as short phrases joined by ``; ``."""
    return diff(before, after)[0]


def diff(before: Sequence[str], after: Sequence[str]) -> tuple[str, list[str]]:
    """The change (as :func:`describe_change`) and the failing side of it: the tokens removed
    or replaced, else ``+`` and the tokens added."""
    parts: list[str] = []
    failing: list[str] = []
    added: list[str] = []
    matcher = difflib.SequenceMatcher(None, list(before), list(after), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        old, new = " ".join(before[i1:i2]), " ".join(after[j1:j2])
        if tag != "equal":
            failing += before[i1:i2]
            added += after[j1:j2]
        if tag == "insert":
            parts.append(f"add {new}")
        elif tag == "delete":
            parts.append(f"remove {old}")
        elif tag == "replace":
            if _pathish(before[i1:i2]) and _pathish(after[j1:j2]):
                parts.append(f"correct path {old} to {new}")
            else:
                parts.append(f"replace {old} with {new}")
    text = "; ".join(parts) or "retry unchanged"
    side = failing or ["+" + " ".join(added)]
    return (text if len(text) <= 200 else text[:199] + "…"), side


def _change(failed: Call, fixed: Call, error: str) -> tuple[str, list[str]]:
    """The change and the failing side; when only a body or whitespace changed, the failing
    side is the (masked) error the body caused, so the key says what went wrong."""
    change, side = diff(input_tokens(failed), input_tokens(fixed))
    if change == "retry unchanged" and failed.text != fixed.text:
        cause = [" ".join(mask_tokens(error, 12))] if error else ["body"]
        if failed.text.split() == fixed.text.split():
            return "fix the indentation", cause
        return "change the body", cause
    return change, side


def _retry(a: Call, b: Call) -> bool:
    """An unchanged retry: the same text but for numbers (shell), or the same masked input."""
    if a.text == b.text:
        return True
    if a.shell and b.shell:  # ``pytest`` -> ``python -m pytest``, a re-indented body: changes
        return _DIGITS.sub("0", a.text) == _DIGITS.sub("0", b.text)
    return a.norm == b.norm


def find_recoveries(calls: Sequence[Call], window: int = WINDOW) -> Iterator[tuple[Call, Call]]:
    """``(failed, fixed)`` pairs of one session, in order (see the module docstring)."""
    claimed: set[int] = set()
    for position, call in enumerate(calls):
        if not call.failed:
            continue
        budget = window
        for later in calls[position + 1 :]:
            if budget <= 0:
                break
            if later.name != call.name or _retry(call, later) or not similar(call, later):
                if not is_probe(later):
                    budget -= 1
                continue
            if later.failed:
                budget -= 1
                continue
            if later.result is not None and later.index not in claimed:
                claimed.add(later.index)
                yield call, later
            break


def _prerequisite(call: Call) -> bool:
    """Whether a working shell call can be what a retry needed first: it changes the
    environment (an install, a migration) without writing files — an edit is a change of the
    code, not a step to remember — and is no probe."""
    return (
        call.shell
        and not call.failed
        and not is_probe(call)
        and bool(call.work)
        and not any(c.writes or c.heredoc is not None for c in call.commands)
    )


def find_prerequisites(
    calls: Sequence[Call], window: int = WINDOW
) -> Iterator[tuple[Call, Call, Call]]:
    """``(failed, setup, retried)``: a failing shell call retried unchanged that then worked,
    after a working call of the same tool that is no probe and writes no file (``pip install
    pytest``, ``python manage.py migrate``: :func:`_prerequisite`) — the latest such call is
    the fix. Within ``window`` working calls; a substitution that works first is a recovery
    (:func:`find_recoveries`), not this."""
    for position, call in enumerate(calls):
        if not call.failed or not call.shell:
            continue
        setup: Call | None = None
        budget = window
        for later in calls[position + 1 :]:
            if budget <= 0:
                break
            if later.name == call.name and _retry(call, later):
                if not later.failed and later.result is not None and setup is not None:
                    yield call, setup, later
                break
            if is_probe(later):
                continue
            budget -= 1
            if later.name != call.name:
                continue
            if similar(call, later) and not later.failed:
                break  # a recovery
            if _prerequisite(later):
                setup = later


def fix_rates(patterns: Sequence[Pattern]) -> None:
    """Give each recovery pattern ``subject["failure_sessions"]``: the sessions of the tool
    errors it fixed (those whose links name it), so "worked in N of M sessions" can be said —
    and the failure's reach: a recovery stands for the cause it fixes, so its prevalence is
    counted over the sessions the failure affected, not only those where the fix was made.

    A recovery is linked from the tool error of its failing call in every session it fixed
    (see :func:`memdir.dream.engine.links_of`); ``M`` is the largest such error's session
    count (at least the recovery's own). When that error was seen in every session of the
    recovery (its links name the recovery that often) and the recovery fixed it in at least
    half of the error's sessions (:data:`_STANDS_FOR`: when decide reports the error as
    explained by it), the recovery's sessions are a subset of the error's, so the error's
    counters — sessions, outcomes, tasks, labels, source classes,
    first and last seen — are the union of both and become the recovery's (source classes
    are merged per class, so placement requires readers of every class counted).
    """
    failing: dict[str, Pattern] = {}
    for pattern in patterns:
        if pattern.miner != "tool_errors":
            continue
        for target in pattern.links:
            known = failing.get(target)
            if target.startswith("recovery:") and (
                known is None or pattern.sessions > known.sessions
            ):
                failing[target] = pattern
    for pattern in patterns:
        if pattern.miner != "recovery":
            continue
        failure = failing.get(pattern.id)
        pattern.subject["failure_sessions"] = max(
            failure.sessions if failure is not None else 0, pattern.sessions
        )
        linked = failure.links.get(pattern.id, 0) if failure is not None else 0
        if (
            failure is not None
            and failure.sessions > pattern.sessions
            and linked >= pattern.sessions
            and linked >= _STANDS_FOR * failure.sessions
        ):
            _take_reach(pattern, failure)


def _take_reach(recovery: Pattern, failure: Pattern) -> None:
    """The recovery's counters become the failure's (a superset of its sessions)."""
    for name in ("sessions", "known", "failed", "tasks", "project", "project_selected",
                 "baseline_known", "baseline_failed", "first_seen", "last_seen"):  # fmt: skip
        setattr(recovery, name, getattr(failure, name))
    for name in ("agents", "projects", "users", "sources"):
        mine, theirs = getattr(recovery, name), getattr(failure, name)
        setattr(recovery, name, {k: max(mine.get(k, 0), theirs.get(k, 0))
                                 for k in sorted(set(mine) | set(theirs))})  # fmt: skip
    for cls, needs in failure.requires.items():
        recovery.requires[cls] = sorted(set(recovery.requires.get(cls, ())) | set(needs))


class RecoveryMiner:
    name: ClassVar[str] = "recovery"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules

    def mine(self, session: Session) -> Iterator[Signal]:
        for failed, fixed in find_recoveries(calls_of(session, self.rules)):
            error = error_line(failed.result.output if failed.result else None)
            change, side = _change(failed, fixed, error)
            last = fixed.result_index if fixed.result_index is not None else fixed.index
            yield Signal(
                miner=self.name,
                key=bounded_key(
                    "|".join(dict.fromkeys([failed.name, failed.words, " ".join(side)]))
                ),
                subject={
                    "tool": failed.name,
                    "failed": failed.literal,
                    "fixed": fixed.literal,
                    "change": change,
                    "error": error[:200],
                },
                title=f"`{failed.literal[:80]}` fails ({error[:80] or 'no output'}); "
                f"{change} works",
                excerpt=excerpt(
                    session,
                    failed.index,
                    last,
                    f"{failed.name}: {failed.text}\n-> {error}\n{fixed.name}: {fixed.text}\n-> ok",
                ),
                variant=change,
            )
        for failed, setup, retried in find_prerequisites(calls_of(session, self.rules)):
            error = error_line(failed.result.output if failed.result else None)
            needed = f"run `{setup.literal}` first"
            masked = " ".join(mask_tokens(error)) if error else f"+{setup.norm}"
            last = retried.result_index if retried.result_index is not None else retried.index
            yield Signal(
                miner=self.name,
                # one cause, one pattern: the failing side is the masked error, each
                # prerequisite seen for it a variant
                key=bounded_key(f"{failed.name}|{failed.words}|{masked}"),
                subject={
                    "tool": failed.name,
                    "failed": failed.literal,
                    "fixed": setup.literal,
                    "change": needed,
                    "error": error[:200],
                    "then": retried.literal,
                },
                title=f"`{failed.literal[:80]}` fails ({error[:80] or 'no output'}); it works "
                f"after `{setup.literal[:80]}`",
                excerpt=excerpt(
                    session,
                    failed.index,
                    last,
                    f"{failed.name}: {failed.literal}\n-> {error}\n{setup.name}: "
                    f"{setup.literal}\n-> ok\n{retried.name}: {retried.literal}\n-> ok",
                ),
                variant=needed,
            )
