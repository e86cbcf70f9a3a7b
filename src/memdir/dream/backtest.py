"""Backtest: would an earlier dream's proposals have covered what went wrong later? No I/O.

The run service (:mod:`memdir.backtests`) orders the selected sessions by ``started_at``,
dreams over the earlier part, accepts every proposal into a scratch copy of the memory
(:func:`apply_operations`), and mines the later part with the same engine
(:meth:`~memdir.dream.engine.Engine.continue_from`, so an error gets the pattern id it had
earlier). This module turns that into figures:

- **costly events** (:func:`costly_events`): in each later session, every tool call that failed
  by the run's failure rules, and every signal of a miner in :data:`EVENT_MINERS` (harness
  feedback, truncation and timeout notices) that is not at a failed call. Each is weighted by
  the **turns it cost**: agent turns after it (assistant messages and tool calls, the events
  of one model message counting once) up to and including the next successful call whose
  text differs from the failing one, capped at :data:`COST_CAP`; the cap when there is none.
  An event's **patterns** are the ids of every signal at it (a signal at a call: its excerpt
  starts there, or a loop spans it), so the tool error, its recovery and its loop all name it;
- **coverage** (:func:`tally`): the cost-weighted share of events one of whose patterns an
  earlier proposal has (or that the pinned memory already covered), overall and per pattern
  (events, covered, not covered, which proposal or memory file);
- the **oracle bound**: the same share had every pattern seen in at least ``K`` earlier
  sessions (K = the run's ``min_sessions``) been proposed. A proposal needs ``K`` sessions, so
  coverage never exceeds the bound; the gap is what thresholds, memory and placement left out;
- **outcome lift** (:class:`Outcomes`): per pattern, the failure rate of later sessions that
  show it minus the failure rate of all later sessions, over sessions with a known outcome.

Patterns are compared by id after the engine's template renames (``resolve``), never by text.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.core.model import Delete, Insert, Operation, Rename, StrReplace, Write
from memdir.dream.miners.base import Call, calls_of
from memdir.dream.miners.failures import FailureRules
from memdir.dream.model import Draft, Session, Signal

__all__ = [
    "COST_CAP",
    "EVENT_MINERS",
    "CostlyEvent",
    "Outcomes",
    "Tally",
    "apply_operations",
    "costly_events",
    "feedback_loops",
    "order_key",
    "split_index",
    "tally",
    "turn_cost",
]

#: Most turns one event is charged (a failure never fixed in the session costs this much).
COST_CAP: Final = 5
#: Miners whose signals are costly events by themselves (harness feedback, truncation and
#: timeout notices), wherever no failed call is.
EVENT_MINERS: Final = frozenset({"feedback"})
#: Miners whose signals name a call as a feature of a failed *session* (contrast), not the
#: call's own failure: they cover no failed call's cost.
SESSION_MINERS: Final = frozenset({"contrast"})
#: Primary label order: the pattern an event is listed under in the per-pattern table.
_PRIMARY: Final = ("tool_errors", "feedback", "recovery", "stale_memory", "loops")


@dataclass(frozen=True, slots=True)
class CostlyEvent:
    """One costly event of a later session (see the module docstring)."""

    transcript_id: str
    position: int
    kind: str  # "failed call" | "feedback"
    cost: int
    patterns: tuple[str, ...]
    label: str


def order_key(
    started_at: dt.datetime | None, imported_at: dt.datetime, transcript_id: str
) -> tuple[dt.datetime, dt.datetime, str]:
    """Sessions are ordered by start time; one without is placed by its import time."""
    return (started_at or imported_at, imported_at, transcript_id)


def split_index(times: Sequence[dt.datetime], split: float | dt.datetime) -> int:
    """How many of the ordered sessions (``times``: their order keys' times) are earlier.

    A fraction takes the first ``floor(split * n)`` sessions (at least one, and one fewer than
    all, so both parts have a session); a time takes those that started before it.
    """
    n = len(times)
    if isinstance(split, dt.datetime):
        return sum(1 for t in times if t < split)
    return min(max(1, int(split * n)), n - 1) if n >= 2 else 0


def _turns(session: Session, after: int, until: int | None) -> int:
    """Agent turns strictly after event ``after`` up to ``until`` (inclusive; None: the end)."""
    turns = 0
    last_message: str | None = None
    end = len(session.events) - 1 if until is None else until
    for event in session.events[after + 1 : end + 1]:
        agent = event.kind == "tool_call" or (event.kind == "message" and event.role == "assistant")
        if not agent:
            continue
        if event.message_id is not None and event.message_id == last_message:
            continue
        last_message = event.message_id
        turns += 1
    return turns


def turn_cost(session: Session, calls: Sequence[Call], position: int, text: str | None) -> int:
    """The turns an event at ``position`` cost: agent turns up to the next successful call
    whose text differs from ``text`` (the failing call's; None for a notice), capped."""
    for call in calls:
        if call.index <= position or call.failed or call.result is None:
            continue
        if text is not None and call.text == text:
            continue
        return max(1, min(COST_CAP, _turns(session, position, call.index)))
    return COST_CAP


def _at(signal: Signal, position: int) -> bool:
    span = signal.excerpt
    if span is None:
        return False
    if signal.miner == "loops":
        return span.first_event <= position <= span.last_event
    return span.first_event == position


def _label(signals: Sequence[Signal], fallback: str) -> str:
    for miner in _PRIMARY:
        for signal in signals:
            if signal.miner == miner:
                return signal.pattern_id
    return signals[0].pattern_id if signals else fallback


def costly_events(
    session: Session, signals: Sequence[Signal], rules: FailureRules
) -> list[CostlyEvent]:
    """The session's costly events with their cost and patterns (see the module docstring)."""
    calls = calls_of(session, rules)
    out: list[CostlyEvent] = []
    failed_at: set[int] = set()
    for call in calls:
        if not call.failed:
            continue
        failed_at.add(call.index)
        at = [s for s in signals if _at(s, call.index) and s.miner not in SESSION_MINERS]
        out.append(CostlyEvent(
            session.id, call.index, "failed call", turn_cost(session, calls, call.index,
                                                            call.text),
            tuple(sorted({s.pattern_id for s in at})), _label(at, f"unmatched:{call.words}"),
        ))  # fmt: skip
    notices: dict[int, list[Signal]] = {}
    for signal in signals:
        if signal.miner in EVENT_MINERS and signal.excerpt is not None:
            position = signal.excerpt.first_event
            if position not in failed_at:
                notices.setdefault(position, []).append(signal)
    for position, group in sorted(notices.items()):
        out.append(CostlyEvent(
            session.id, position, "feedback", turn_cost(session, calls, position, None),
            tuple(sorted({s.pattern_id for s in group})), _label(group, "unmatched:feedback"),
        ))  # fmt: skip
    out.sort(key=lambda e: e.position)
    return out


@dataclass
class _Row:
    label: str
    events: int = 0
    cost: int = 0
    covered: int = 0
    covered_cost: int = 0
    bound: int = 0
    bound_cost: int = 0
    proposals: dict[str, int] = field(default_factory=dict)


@dataclass
class Tally:
    """Coverage and bound of a later part, overall and per pattern (JSON via :meth:`to_json`)."""

    events: int = 0
    cost: int = 0
    covered_cost: int = 0
    bound_cost: int = 0
    covered_events: int = 0
    bound_events: int = 0
    rows: dict[str, _Row] = field(default_factory=dict)
    #: per proposed pattern: (events, cost) it covered
    by_proposal: dict[str, list[int]] = field(default_factory=dict)

    @property
    def coverage(self) -> float:
        return self.covered_cost / self.cost if self.cost else 0.0

    @property
    def bound(self) -> float:
        return self.bound_cost / self.cost if self.cost else 0.0

    def to_json(self, titles: Mapping[str, str] | None = None, limit: int = 50) -> dict[str, Any]:
        rows = sorted(self.rows.values(), key=lambda r: (-r.cost, r.label))
        return {
            "events": self.events,
            "cost": self.cost,
            "covered_events": self.covered_events,
            "covered_cost": self.covered_cost,
            "bound_events": self.bound_events,
            "bound_cost": self.bound_cost,
            "coverage": round(self.coverage, 6),
            "bound": round(self.bound, 6),
            "of_bound": round(self.coverage / self.bound, 6) if self.bound else None,
            "patterns": [
                {
                    "pattern": r.label,
                    "title": (titles or {}).get(r.label),
                    "events": r.events,
                    "cost": r.cost,
                    "covered": r.covered,
                    "not_covered": r.events - r.covered,
                    "covered_cost": r.covered_cost,
                    "in_bound": r.bound,
                    "covered_by": sorted(r.proposals),
                }
                for r in rows[:limit]
            ],
            "patterns_more": max(0, len(rows) - limit),
        }


def tally(
    events: Iterable[CostlyEvent],
    proposed: Iterable[str],
    recurring: Iterable[str],
    resolve: Callable[[str], str] = lambda p: p,
    memory: Mapping[str, str] | None = None,
) -> Tally:
    """Coverage of ``events`` by the ``proposed`` pattern ids, and the bound by ``recurring``
    ones (patterns in at least K earlier sessions); every id goes through ``resolve``.

    ``memory`` maps the patterns the pinned memory already covered (the earlier dream left
    them out for it) to the covering file: they count as covered, and in the bound, listed as
    ``memory:<path>`` — a backtest after notes were accepted still credits them."""
    wanted = {resolve(p) for p in proposed}
    known = {resolve(p): f"memory:{path}" for p, path in (memory or {}).items()}
    oracle = {resolve(p) for p in recurring} | set(known)
    out = Tally()
    for event in events:
        ids = {resolve(p) for p in event.patterns}
        label = resolve(event.label)
        row = out.rows.get(label)
        if row is None:
            row = out.rows[label] = _Row(label)
        row.events += 1
        row.cost += event.cost
        out.events += 1
        out.cost += event.cost
        covering = sorted(ids & wanted) + sorted({known[i] for i in ids if i in known})
        if covering:
            row.covered += 1
            row.covered_cost += event.cost
            out.covered_events += 1
            out.covered_cost += event.cost
            for pattern in covering:
                row.proposals[pattern] = row.proposals.get(pattern, 0) + 1
                counts = out.by_proposal.setdefault(pattern, [0, 0])
                counts[0] += 1
                counts[1] += event.cost
        if ids & oracle:
            row.bound += 1
            row.bound_cost += event.cost
            out.bound_events += 1
            out.bound_cost += event.cost
    return out


@dataclass
class Outcomes:
    """Failure rates of sessions with known outcomes, overall and per pattern (lift)."""

    sessions: int = 0
    failures: int = 0
    with_pattern: dict[str, list[int]] = field(default_factory=dict)  # id -> [sessions, failed]

    def add(self, outcome: str, patterns: Iterable[str]) -> None:
        if outcome not in ("success", "failure"):
            return
        failed = int(outcome == "failure")
        self.sessions += 1
        self.failures += failed
        for pattern in set(patterns):
            counts = self.with_pattern.setdefault(pattern, [0, 0])
            counts[0] += 1
            counts[1] += failed

    def lift(self, pattern: str) -> dict[str, Any] | None:
        """Failure rate with the pattern minus the baseline; None without outcomes for it."""
        counts = self.with_pattern.get(pattern)
        if not counts or not self.sessions:
            return None
        baseline = self.failures / self.sessions
        rate = counts[1] / counts[0]
        return {"sessions": counts[0], "failure_rate": round(rate, 4),
                "baseline": round(baseline, 4), "lift": round(rate - baseline, 4)}  # fmt: skip


def apply_operations(files: dict[str, str], operations: Iterable[Operation]) -> list[str]:
    """Apply a proposal's operations to ``files`` (path -> content) in place, as accepting it
    would; returns the paths it wrote. An operation that would not apply is skipped (the
    scratch copy stays consistent; an accept would have been refused the same way)."""
    written: list[str] = []
    for op in operations:
        current = files.get(op.path)
        if isinstance(op, Write):
            if op.if_absent and current is not None:
                continue
            files[op.path] = op.content
        elif isinstance(op, StrReplace):
            if current is None or current.count(op.old) != 1:
                continue
            files[op.path] = current.replace(op.old, op.new)
        elif isinstance(op, Insert):
            if current is None:
                continue
            lines = current.split("\n")
            at = max(0, min(op.line, len(lines)))
            files[op.path] = "\n".join([*lines[:at], op.text, *lines[at:]])
        elif isinstance(op, Delete):
            if files.pop(op.path, None) is None:
                continue
            written.append(op.path)
            continue
        elif isinstance(op, Rename):
            if current is None or op.new_path in files:
                continue
            files[op.new_path] = files.pop(op.path)
            written.append(op.new_path)
            continue
        written.append(op.path)
    return written


def feedback_loops(
    later: Iterable[Draft], wrote: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Per accepted pattern, the later drafts its note caused: any later draft whose
    operations touch a path an accepted draft wrote (a stale-memory or contradiction edit of
    the note, a consolidation of it). A sound dream has none."""
    out: dict[str, list[str]] = {}
    for draft in later:
        for op in draft.operations:
            for path in [op.path, op.new_path] if isinstance(op, Rename) else [op.path]:
                for pid in wrote.get(path, ()):
                    found = out.setdefault(pid, [])
                    entry = f"{draft.pattern.id} on {path}"
                    if entry not in found:
                        found.append(entry)
    return out
