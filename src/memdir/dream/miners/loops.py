"""Loops: the same call repeated at least :data:`MIN_REPEATS` times in a row within a session.

Calls are the same when their tool and input are equal (a shell call's command line; other
inputs as values, so key order does not matter; ids do — polling ten orders is not a loop).
"In a row" means with nothing between them but their own results, the agent's thinking and
usage records, and assistant text (an agent saying "let me try again" is still looping); a
user message or any other tool call ends the run. Each session counts a loop once, with the
longest run as its ``occurrences``. Across sessions, loops group by the normalised input (ids,
times and numbers masked).

Key: ``tool|input``. Subject: ``tool``, ``input``. ``variant`` is how the run ended: ``still
failing`` (the last call failed), ``then succeeded`` or ``no failure``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Final

from memdir.dream.miners.base import Call, MinerContext, calls_of, excerpt
from memdir.dream.model import Session, Signal
from memdir.transcripts.model import bounded_key

__all__ = ["MIN_REPEATS", "LoopsMiner", "find_loops"]

MIN_REPEATS: Final = 3


def _same(a: Call, b: Call) -> bool:
    """The same call: tool and command line (shell), else tool and input."""
    if a.name != b.name or a.shell != b.shell:
        return False
    return a.text == b.text if a.shell else a.input == b.input


def find_loops(session: Session, calls: list[Call]) -> list[list[Call]]:
    """Runs of at least :data:`MIN_REPEATS` identical calls (see the module docstring)."""
    breaks = [
        i
        for i, e in enumerate(session.events)
        if e.kind == "message" and e.role == "user"  # a user turn ends a run
    ]
    runs: list[list[Call]] = []
    current: list[Call] = []
    user_at = 0
    for call in calls:
        while user_at < len(breaks) and breaks[user_at] < call.index:
            if current and breaks[user_at] > current[-1].index:
                runs.append(current)
                current = []
            user_at += 1
        if current and _same(call, current[-1]):
            current.append(call)
        else:
            runs.append(current)
            current = [call]
    runs.append(current)
    return [run for run in runs if len(run) >= MIN_REPEATS]


class LoopsMiner:
    name: ClassVar[str] = "loops"

    def __init__(self, context: MinerContext) -> None:
        self.rules = context.rules

    def mine(self, session: Session) -> Iterator[Signal]:
        longest: dict[str, list[Call]] = {}
        for run in find_loops(session, calls_of(session, self.rules)):
            key = bounded_key(f"{run[0].name}|{run[0].norm}")
            if len(run) > len(longest.get(key, ())):
                longest[key] = run
        for key, run in longest.items():
            first, last = run[0], run[-1]
            if last.failed:
                ending = "still failing"
            elif any(c.failed for c in run):
                ending = "then succeeded"
            else:
                ending = "no failure"
            end = last.result_index if last.result_index is not None else last.index
            output = (last.result.output or "") if last.result else ""
            yield Signal(
                miner=self.name,
                key=key,
                subject={"tool": first.name, "input": first.literal if first.shell else first.norm},
                title=f"{first.name} called {len(run)} times in a row: {first.literal[:120]}",
                excerpt=excerpt(
                    session,
                    first.index,
                    end,
                    f"{first.name}: {first.text}  (x{len(run)})\n-> {output.strip()[:200]}",
                ),
                variant=ending,
                occurrences=len(run),
            )
