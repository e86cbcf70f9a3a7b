"""Failure -> recovery: a failing call fixed by a similar call of the same tool soon after.

A failing call is paired with the first succeeding call of the same tool among the next
:data:`WINDOW` tool calls whose input is similar (:func:`similar`: token Jaccard >= 0.5, or a
token-sequence ratio (difflib, first 60 tokens) >= 0.6, or the same arguments with at most
half of their values (at least one) changed, or — for short shell commands — the same
program) and not identical (an unchanged retry teaches nothing). Each success fixes at most
one failure: the first failure that reaches it (``npm ci --frozen-lockfile``, then ``...
--force``, then ``npm ci`` records the first). The change is a token-level diff
(:func:`describe_change`): ``add --foo``, ``remove --bar``, ``replace X with Y``, ``correct
path X to Y``.

Key: ``tool|command words|failing side`` — the tokens the fix removed or replaced (``Bash|npm
ci|--frozen-lockfile``, ``create_ticket|priority=urgent``), or ``+`` and those it
added — so every fix tried for one failing flag or value counts under one pattern, whatever
else varies in the input, with each change a ``variant`` (how often it worked). Subject: ``tool``,
``failed``, ``fixed``, ``change`` (the most frequent variant's, once reduced).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Sequence
from typing import ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt
from memdir.dream.miners.signature import error_line, tokens_of
from memdir.dream.model import Session, Signal
from memdir.transcripts.model import bounded_key

__all__ = ["WINDOW", "RecoveryMiner", "describe_change", "find_recoveries", "similar"]

#: A fix must come within this many later tool calls.
WINDOW: Final = 3
_JACCARD: Final = 0.5
_RATIO: Final = 0.6


def input_tokens(call: Call) -> list[str]:
    """Tokens to compare and diff: a shell command's words, else the input's ``key=value``s
    (values masked as in :attr:`Call.norm`)."""
    if call.shell or not isinstance(call.input, dict):
        return tokens_of(call.text)
    return call.norm.split(" ")


def similar(a: Call, b: Call) -> bool:
    """Whether ``b`` looks like another try of ``a`` (see the module docstring)."""
    ta, tb = input_tokens(a), input_tokens(b)
    sa, sb = set(ta), set(tb)
    if sa and sb and len(sa & sb) / len(sa | sb) >= _JACCARD:
        return True
    if a.shell and b.shell and ta and tb and ta[0] == tb[0] and max(len(ta), len(tb)) <= 6:
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


def find_recoveries(calls: Sequence[Call], window: int = WINDOW) -> Iterator[tuple[Call, Call]]:
    """``(failed, fixed)`` pairs of one session, in order (see the module docstring)."""
    claimed: set[int] = set()
    for position, call in enumerate(calls):
        if not call.failed:
            continue
        for later in calls[position + 1 : position + 1 + window]:
            if later.name != call.name or later.norm == call.norm or not similar(call, later):
                continue
            if later.failed:
                continue
            if later.result is not None and later.index not in claimed:
                claimed.add(later.index)
                yield call, later
            break


class RecoveryMiner:
    name: ClassVar[str] = "recovery"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules

    def mine(self, session: Session) -> Iterator[Signal]:
        for failed, fixed in find_recoveries(calls_of(session, self.rules)):
            change, side = diff(input_tokens(failed), input_tokens(fixed))
            error = error_line(failed.result.output if failed.result else None)
            last = fixed.result_index if fixed.result_index is not None else fixed.index
            yield Signal(
                miner=self.name,
                key=bounded_key(
                    "|".join(dict.fromkeys([failed.name, failed.words, " ".join(side)]))
                ),
                subject={
                    "tool": failed.name,
                    "failed": failed.norm,
                    "fixed": fixed.norm,
                    "change": change,
                },
                title=f"{failed.norm} fails; {change} works",
                excerpt=excerpt(
                    session,
                    failed.index,
                    last,
                    f"{failed.name}: {failed.text}\n-> {error}\n{fixed.name}: {fixed.text}\n-> ok",
                ),
                variant=change,
            )
