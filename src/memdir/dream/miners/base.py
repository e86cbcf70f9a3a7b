"""The miner interface, the registry the built-in miners use like any other, and shared helpers.

A **session miner** is any object with ``name`` and ``mine(session) -> Iterable[Signal]``: it
reads one :class:`~memdir.dream.model.Session` and returns what it saw there, never keeping the
session. A **memory miner** has ``mine_memory(memory, now) -> Iterable[Signal]`` instead and
looks at the store itself (consolidation). Optional methods, used when present:

- ``state() -> dict`` / ``load_state(dict)``: the miner's cross-session memory (Drain
  templates, correction clusters) as JSON values, so a checkpointed run resumes exactly;
- ``renames() -> list[tuple[str, str]]``: keys that changed since the last call (a template
  that generalised): the reducer moves what it counted under the old key to the new one.

A miner also owns what is decided about its patterns; these are optional too, and a
third-party miner that has them is treated exactly like a built-in one (``decide`` and
``drafts`` ask the miner first and fall back to the built-in rules only for the built-ins):

- ``judge(pattern) -> str | None``: a reason to leave a pattern that passed the thresholds
  out of the proposals (reported, not queued), e.g. a contrast that is not significant; ``""``
  when it is no finding at all (not reported either);
- ``covers(pattern, memory: MemoryText) -> bool``: whether one memory file states the
  pattern (match whole tokens with ``memory.has_phrase``, not substrings);
- ``contradicts(pattern, memory: MemoryText) -> bool``: whether it states what now fails;
- ``note(pattern) -> (title, description, body lines) | None``: a new note's text (None:
  no note — the pattern is reported only); ``slug_source(pattern) -> str`` names its file;
  ``category`` (attribute) the directory under the scope (``known-failures``, ...).

Signals of one miner in one session with one ``key`` count that session once. A miner is made
per run by its factory from a :class:`MinerContext` (the failure rules, the memory snapshot,
the run's time); it must be deterministic: same sessions in, same signals out.

Third parties add a miner with :func:`register` (``register("todo", TodoMiner)``) or an
entry point in the ``memdir.miners`` group naming the factory; the built-ins are loaded the
same way, in :data:`BUILTIN_MINERS` order, on first use (:mod:`memdir.plugins` has the rules).
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from memdir.dream.miners.failures import FailureRules, Outcome, command_text, words_of
from memdir.dream.miners.signature import normalise_command
from memdir.dream.model import (
    MAX_EXCERPT_CHARS,
    Excerpt,
    MemoryFile,
    Session,
    Signal,
    Thresholds,
)
from memdir.dream.shell import SimpleCommand, main_command, parse
from memdir.plugins import Registry
from memdir.transcripts.model import Event

__all__ = [
    "BUILTIN_MINERS",
    "MINERS",
    "Call",
    "MemoryMiner",
    "Miner",
    "MinerContext",
    "MinerFactory",
    "calls_of",
    "create",
    "cut",
    "excerpt",
    "lossy_epsilon",
    "miners",
    "register",
    "unregister",
]


@dataclass(frozen=True)
class MinerContext:
    """What a run gives its miners: the rules, the memory snapshot, its time and settings."""

    rules: FailureRules
    memory: tuple[MemoryFile, ...] = ()
    now: dt.datetime = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    recent_days: int = 30
    thresholds: Thresholds = field(default_factory=Thresholds)
    #: Exploration looks at this many first tool calls of a session.
    lookup_calls: int = 8


@runtime_checkable
class Miner(Protocol):
    """A session miner (see the module docstring)."""

    @property
    def name(self) -> str: ...

    def mine(self, session: Session) -> Iterable[Signal]: ...


@runtime_checkable
class MemoryMiner(Protocol):
    """A store-level miner: signals from the memory snapshot itself."""

    @property
    def name(self) -> str: ...

    def mine_memory(self, memory: Sequence[MemoryFile], now: dt.datetime) -> Iterable[Signal]: ...


MinerFactory = Callable[[MinerContext], Miner | MemoryMiner]

BUILTIN_MINERS: Final = (
    "memdir.dream.miners.tool_errors:ToolErrorsMiner",
    "memdir.dream.miners.recovery:RecoveryMiner",
    "memdir.dream.miners.corrections:CorrectionsMiner",
    "memdir.dream.miners.exploration:ExplorationMiner",
    "memdir.dream.miners.loops:LoopsMiner",
    "memdir.dream.miners.stale_memory:StaleMemoryMiner",
    "memdir.dream.miners.feedback:FeedbackMiner",
    "memdir.dream.miners.contrast:ContrastMiner",
    "memdir.dream.miners.consolidation:ConsolidationMiner",
)


def _factory(value: object) -> MinerFactory:
    """A miner factory is kept as it is: a class or function taking a MinerContext."""
    if not callable(value):
        raise TypeError(f"{value!r} is not a miner factory (a callable taking a MinerContext)")
    return value  # callable; its signature is the contract


def _miner_name(factory: MinerFactory) -> str:
    """A built-in miner class names itself (``name`` class attribute)."""
    name: object = getattr(factory, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"{factory!r} has no name")
    return name


MINERS: Registry[MinerFactory] = Registry(
    "miner",
    "memdir.miners",
    BUILTIN_MINERS,
    name_of=_miner_name,
    adapt=_factory,
    detail="miner",
)


def register(name: str, factory: MinerFactory, *, replace: bool = False) -> None:
    """Add a miner under ``name``; a second one with the same name needs ``replace=True``."""
    MINERS.register(name, _factory(factory), replace=replace)


def unregister(name: str) -> None:
    MINERS.unregister(name)


def miners() -> list[str]:
    """The names of every registered miner: built-ins, entry points, then code-registered."""
    return MINERS.names()


def create(context: MinerContext, names: Sequence[str] | None = None) -> list[Miner | MemoryMiner]:
    """One fresh miner per name (all registered ones when ``names`` is None), in that order."""
    known = MINERS.items()
    chosen = list(known) if names is None else list(names)
    for name in chosen:
        MINERS.get(name)  # an unknown name: InvalidInput listing the known ones
    return [known[n](context) for n in chosen]


# --- helpers the built-in miners share ------------------------------------------------------


class Call:
    """A tool call with its result, judged by the failure rules.

    ``index``/``result_index`` are event positions; ``outcome`` is the result's
    :data:`~.failures.Outcome` (``failed`` means ``error``: probes, searches that found nothing
    and test runs that reported failing tests are not tool errors); ``text`` is the call as one
    line (a shell command, or the input's canonical JSON); ``commands`` a shell call's simple
    commands (:func:`memdir.dream.shell.parse`); ``literal`` what it ran, as written, without
    setup (``cd``), redirections or heredoc bodies; ``norm`` the same with ids, times and
    numbers masked and program families unified (a mapping input as sorted ``key=value`` words,
    each value masked); ``words`` the command words of a shell call (``npm ci``, ``pytest``),
    else the tool name. All but ``outcome`` are computed on first use.
    """

    __slots__ = ("_commands", "_literal", "_norm", "_text", "_words", "index", "input", "name",
                 "outcome", "result", "result_index", "shell")  # fmt: skip

    def __init__(
        self,
        index: int,
        name: str,
        input: Any,
        result_index: int | None,
        result: Event | None,
        failed: bool | Outcome,
        command: str | None,
    ) -> None:
        self.index = index
        self.name = name
        self.input = input
        self.result_index = result_index
        self.result = result
        self.outcome: Outcome = failed if isinstance(failed, str) else ("error" if failed else "ok")
        self.shell = command is not None
        self._text = command
        self._norm: str | None = None
        self._words: str | None = None
        self._literal: str | None = None
        self._commands: list[SimpleCommand] | None = None

    @property
    def failed(self) -> bool:
        """Whether the call is a tool error (its outcome is ``error``)."""
        return self.outcome == "error"

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = _call_text(self.input)
        return self._text

    @property
    def commands(self) -> list[SimpleCommand]:
        """The simple commands of a shell call (:func:`memdir.dream.shell.parse`), else none."""
        if self._commands is None:
            self._commands = parse(self.text) if self.shell else []
        return self._commands

    @property
    def work(self) -> list[SimpleCommand]:
        """The commands that do the work: :attr:`commands` without setup (``cd``, ``export``)."""
        return [c for c in self.commands if not c.setup] or self.commands[:1]

    @property
    def literal(self) -> str:
        """What the call ran, as written (shell: the working commands' words, joined by their
        operators; heredoc bodies and redirections left out), at most 300 characters."""
        if self._literal is None:
            if self.shell:
                parts: list[str] = []
                for command in self.work:
                    parts += [command.text, command.connector]
                text = " ".join(p for p in parts[:-1] if p and p != "\n") or self.text
                self._literal = " ".join(text.split())[:300]
            else:
                self._literal = self.text[:300]
        return self._literal

    @property
    def norm(self) -> str:
        if self._norm is None:
            if not self.shell and isinstance(self.input, dict):
                self._norm = " ".join(
                    f"{k}={normalise_command(v if isinstance(v, str) else _call_text(v), 80)}"
                    for k, v in sorted(self.input.items())
                )[:200]
            elif self.shell and self.commands:
                parts = []
                for command in self.work:
                    parts += [" ".join(command.words), command.connector]
                joined = " ".join(p for p in parts[:-1] if p and p != "\n")
                self._norm = normalise_command(joined)
            else:
                self._norm = normalise_command(self.text)
        return self._norm

    @property
    def words(self) -> str:
        if self._words is None:
            main = main_command(self.commands) if self.shell else None
            self._words = words_of(main) if main is not None else self.name
        return self._words

    def __repr__(self) -> str:
        return f"Call({self.index}, {self.name!r}, {self.text!r}, {self.outcome})"


def _call_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


_cache: tuple[Session | None, FailureRules | None, list[Call]] = (None, None, [])
_cache_lock = threading.Lock()


def calls_of(session: Session, rules: FailureRules) -> list[Call]:
    """The session's tool calls in order, each with its result (computed once per session)."""
    global _cache
    with _cache_lock:
        cached_session, cached_rules, cached = _cache
        if cached_session is session and cached_rules is rules:
            return cached
    # A result answers the latest call with its id before it (sources do reuse call ids).
    out: list[Call] = []
    latest: dict[str, tuple[Call, Event]] = {}
    for position, event in enumerate(session.events):
        if event.kind == "tool_call":
            value = event.input
            command = command_text(value) if rules.is_shell(event.name, value) else None
            call = Call(position, event.name or "?", value, None, None, False, command)
            out.append(call)
            if event.call_id is not None:
                latest[event.call_id] = (call, event)
        elif event.kind == "tool_result" and event.call_id in latest:
            call, call_event = latest.pop(event.call_id)
            call.result, call.result_index = event, position
            call.outcome = rules.classify(call_event, event)
    with _cache_lock:
        _cache = (session, rules, out)
    return out


def lossy_epsilon(thresholds: Thresholds) -> float:
    """The lossy-counting error of a run: a tenth of its lowest prevalence threshold.

    Whatever is dropped for it had under 10 % of the sessions a pattern needs to be kept, and
    a kept count is short by at most that much (0.2 percentage points at the default 2 %):
    pruning every 500 sessions at the default keeps the sawtooth of noise patterns small.
    """
    lowest = min([thresholds.min_prevalence, *thresholds.per_miner.values()])
    return max(0.0, lowest) / 10


def cut(text: str, limit: int = MAX_EXCERPT_CHARS) -> str:
    """``text`` at most ``limit`` characters, cut with an ellipsis."""
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def excerpt(session: Session, first: int, last: int, text: str) -> Excerpt:
    """Evidence from ``session``: events ``first..last`` and the text that shows the pattern."""
    return Excerpt(session.id, first, last, cut(text), dict(session.info.scopes()))
