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
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any, ClassVar

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt, lossy_epsilon
from memdir.dream.miners.failures import exit_code_of
from memdir.dream.miners.signature import Drain, error_line, mask_tokens
from memdir.dream.model import Session, Signal
from memdir.transcripts.model import bounded_key

__all__ = ["ToolErrorsMiner", "error_key"]


def error_key(tool: str, words: str, template: str) -> str:
    """The pattern key of a tool error (bounded: long keys become a hash)."""
    parts = [tool, words, template] if words and words != tool else [tool, template]
    return bounded_key("|".join(parts))


class ToolErrorsMiner:
    name: ClassVar[str] = "tool_errors"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules
        epsilon = lossy_epsilon(context.thresholds)
        self.width = math.ceil(1 / epsilon) if epsilon > 0 else 0
        self.drain = Drain(width=self.width)
        self._renames: list[tuple[str, str]] = []

    def mine(self, session: Session) -> Iterator[Signal]:
        found: list[tuple[int, Call, str]] = []
        for call in calls_of(session, self.rules):
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
        signals = [self._signal(session, index, call, line) for index, call, line in found]
        self.drain.tick()
        return iter(signals)

    def _signal(self, session: Session, index: int, call: Call, line: str) -> Signal:
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
        )

    def renames(self) -> list[tuple[str, str]]:
        out, self._renames = self._renames, []
        return out

    def state(self) -> dict[str, Any]:
        return {"drain": self.drain.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.drain = Drain.from_state(state["drain"], width=self.width)
