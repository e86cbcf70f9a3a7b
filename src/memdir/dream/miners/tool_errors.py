"""Recurring tool errors: failing tool results grouped by a normalised error signature.

A call fails by the run's :class:`~memdir.dream.miners.failures.FailureRules` (a ``grep`` that
finds nothing does not). Its error line (:func:`~.signature.error_line`) is masked and filed in
a :class:`~.signature.Drain` whose groups are the tool and, for shell calls, the command words,
so ``npm ci`` errors never share a template with ``pytest`` ones.

Key: ``tool|command words|template`` (``Bash|npm ci|npm ERR! code <str>``) — from the subject
only. When a later error generalises a template, the miner reports the rename so the counts
move with it; templates too rare to matter are forgotten (lossy counting, see
:class:`~.signature.Drain`). Subject: ``tool``, ``command`` (shell calls), ``signature``,
``input`` (the latest failing input: a shell command as written, without heredoc bodies and
redirections; other inputs normalised). Excerpt: the call and its error line.

**What the session did next** (non-shell tools; shell failures have the recovery miner): the
signal's ``variant`` — counted once per session, on the pattern's first failure in it — is
:func:`next_step`: ``then calculate, then book_reservation again with payment_methods changed
worked`` (the working calls up to the first success of the same tool, or of a sibling that
looks the same thing up another way: ``find_user_id_by_email`` -> ``find_user_id_by_name_zip``,
within :data:`~.recovery.WINDOW` working calls), else ``went on without it`` and how the session
ended. The draft quotes these: the fix the sessions show, with how often it was taken.

**One cause, one pattern.** Failing calls of *different* tools in one session whose error lines
name the same thing failing the same way (:func:`same_cause`: the same first word and at least
half of the shorter line's words — ``Patient not found with provided name …`` and ``Patient
<num> not found``) are one cause: the session counts under the template filed most often so far
(ties: the smaller key), so one missing record is one proposal, not one per lookup tool.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt, lossy_epsilon
from memdir.dream.miners.failures import exit_code_of
from memdir.dream.miners.recovery import WINDOW, is_probe
from memdir.dream.miners.signature import (
    PLACEHOLDERS,
    Drain,
    DrainMined,
    error_line,
    mask_tokens,
)
from memdir.dream.model import Session, Signal
from memdir.transcripts.model import bounded_key

__all__ = ["ToolErrorsMiner", "error_key", "next_step", "same_cause", "siblings"]


def error_key(tool: str, words: str, template: str) -> str:
    """The pattern key of a tool error (bounded: long keys become a hash)."""
    parts = [tool, words, template] if words and words != tool else [tool, template]
    return bounded_key("|".join(parts))


_QUALIFIERS: Final = frozenset({"by", "with", "from", "using", "for"})


def siblings(a: str, b: str) -> bool:
    """Two tools that do one thing by different means: the same words before a qualifier
    (``find_user_id_by_email`` and ``find_user_id_by_name_zip``), at least two of them."""
    if a == b:
        return False
    stems = []
    for name in (a, b):
        words = name.lower().replace("-", "_").split("_")
        cut = next((i for i, w in enumerate(words) if w in _QUALIFIERS), None)
        if cut is None or cut < 2:
            return False
        stems.append(words[:cut])
    return stems[0] == stems[1]


def _changed(before: Any, after: Any) -> list[str]:
    """The top-level arguments a retry changed (at most 3, sorted)."""
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    keys = sorted(set(before) | set(after))
    return [k for k in keys if before.get(k) != after.get(k)][:3]


def _silent(call: Call) -> bool:
    """A call that shows nothing (a ``think`` tool's empty result): no step to report."""
    output = call.result.output if call.result is not None else None
    return not call.failed and not (output or "").strip()


def next_step(calls: Sequence[Call], position: int, failed: bool | None) -> str:
    """What the session did after ``calls[position]`` failed (see the module docstring);
    ``failed`` is the session's outcome (None: unknown)."""
    call = calls[position]
    steps: list[str] = []
    budget = WINDOW
    for later in calls[position + 1 :]:
        if budget <= 0:
            break
        same = later.name == call.name
        if later.failed:
            budget -= 1
            continue
        if same or siblings(later.name, call.name):
            step = later.name
            if same:
                changed = _changed(call.input, later.input)
                step += f" again with {', '.join(changed)} changed" if changed else " again"
            return "then " + ", then ".join([*steps, step]) + " worked"
        if _silent(later) or is_probe(later):
            continue
        if later.name not in steps:
            steps.append(later.name)
        budget -= 1
    if failed is None:
        return "went on without it"
    return f"went on without it and the session {'failed' if failed else 'succeeded'}"


def _words(template: str) -> list[str]:
    return [t for t in template.lower().split() if t not in PLACEHOLDERS]


def same_cause(a: str, b: str) -> bool:
    """Whether two error templates name the same thing failing the same way (see the module
    docstring)."""
    wa, wb = _words(a), _words(b)
    if not wa or not wb or wa[0] != wb[0]:
        return False
    shorter, longer = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    return len(set(shorter) & set(longer)) >= max(2, math.ceil(len(set(shorter)) / 2))


class ToolErrorsMiner(DrainMined):
    name: ClassVar[str] = "tool_errors"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules
        epsilon = lossy_epsilon(context.thresholds)
        self.width = math.ceil(1 / epsilon) if epsilon > 0 else 0
        self.drain = Drain(width=self.width)
        self._renames: list[tuple[str, str]] = []

    def mine(self, session: Session) -> Iterator[Signal]:
        found: list[tuple[int, Call, str]] = []
        calls = calls_of(session, self.rules)
        for call in calls:
            if not call.failed or call.result is None:
                continue
            line = error_line(call.result.output)
            if not line:
                code = exit_code_of(call.result)
                line = f"exit code {code}" if code is not None else "failed without output"
            group = f"{call.name}\x1f{call.words}"
            index, old = self.drain.add(group, mask_tokens(line))
            if old is not None:
                new = self.drain.template(index)
                self._renames.append(
                    (error_key(call.name, call.words, old), error_key(call.name, call.words, new))
                )
            found.append((index, call, line))
        # Keys are made once the whole session is filed, from the templates as they now are.
        canonical = self._causes(found)
        signals: list[Signal] = []
        varied: set[int] = set()
        for index, call, line in found:
            if canonical.get(index, index) != index:
                continue  # the same cause as another tool's error here: counted under that one
            variant = None
            if not call.shell and index not in varied:
                varied.add(index)
                variant = next_step(calls, calls.index(call), session.failed)
            signals.append(self._signal(session, index, call, line, variant))
        self.drain.tick()
        return iter(signals)

    def _causes(self, found: list[tuple[int, Call, str]]) -> dict[int, int]:
        """Template -> the template its session counts under (see :func:`same_cause`)."""
        tools: dict[int, str] = {}
        for index, call, _ in found:
            if not call.shell:
                tools.setdefault(index, call.name)
        out: dict[int, int] = {}
        members = sorted(tools)
        for index in members:
            template = self.drain.template(index)
            group = [i for i in members if i == index or (tools[i] != tools[index]
                     and same_cause(template, self.drain.template(i)))]  # fmt: skip
            if len(group) > 1:
                out[index] = min(group, key=lambda i: (-self.drain.counts[i], self._key(i, tools)))
        return out

    def _key(self, index: int, tools: dict[int, str]) -> str:
        return error_key(tools[index], tools[index], self.drain.template(index))

    def _signal(
        self, session: Session, index: int, call: Call, line: str, variant: str | None
    ) -> Signal:
        template = self.drain.template(index)
        shown = call.literal if call.shell else call.norm  # a shell command as written
        subject: dict[str, Any] = {"tool": call.name, "signature": template, "input": shown}
        if call.shell:
            subject["command"] = call.words
        label = call.words if call.shell else call.name
        last = call.result_index if call.result_index is not None else call.index
        return Signal(
            miner=self.name,
            key=error_key(call.name, call.words, template),
            subject=subject,
            title=f"{label} fails: {template}",
            excerpt=excerpt(session, call.index, last, f"{call.name}: {call.text}\n-> {line}"),
            variant=variant,
        )
