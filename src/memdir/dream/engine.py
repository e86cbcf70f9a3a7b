"""The dreaming engine: map (miners) -> reduce -> decide -> drafts, streaming, without I/O.

The run service feeds sessions one at a time (:meth:`Engine.add`), optionally adds a model's
findings about a session already added (:meth:`Engine.add_signals`), checkpoints with
:meth:`Engine.state` (JSON values) and resumes with :meth:`Engine.restore`, and ends with
:meth:`Engine.finish`. Invariants:

- **flat memory**: the engine keeps the reducer's counters and bounded samples and the
  miners' cross-session state (Drain templates, correction clusters), never a session or its
  events; patterns far below the thresholds are dropped as the stream goes (lossy counting,
  see :mod:`.reduce`); each session is mined once, by every miner, from one shared list of
  its calls;
- **deterministic**: the same sessions in the same order give the same result — miners break
  ties by value, patterns are ordered by (sessions, occurrences, id) descending/ascending,
  nothing depends on set order or the hash seed; an interrupted run restored from its last
  ``state()`` ends exactly as an uninterrupted one;
- **explained signals**: in each session, a tool error whose failing call a recovery, a stale
  memory claim or a loop covers (same call, see :data:`~.decide.EXPLAINED_BY`) is linked to
  that pattern, so decide can report it once, as the more useful pattern;
- store-level miners (consolidation) run at :meth:`Engine.finish`, over the memory snapshot;
- **plug-ins own their logic**: at :meth:`Engine.finish` each pattern's miner may
  ``annotate`` it (end-of-run figures), ``judge`` it, decide its coverage and write its note
  (see :mod:`.miners.base`); decide and drafts ask the miner before the built-in rules.

Pure: no database, no clock (the run's ``now`` is given), no model calls.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.core.errors import InvalidInput
from memdir.dream.decide import EXPLAINED_BY, STORE_MINERS, MemoryIndex, decide
from memdir.dream.miners.base import MemoryMiner, Miner, MinerContext, create, lossy_epsilon
from memdir.dream.miners.failures import FailureRules
from memdir.dream.miners.recovery import fix_rates
from memdir.dream.model import Draft, MemoryFile, Pattern, Session, Signal, Thresholds
from memdir.dream.placement import Audience, place
from memdir.dream.reduce import Reducer, json_object, json_text
from memdir.transcripts.model import TranscriptInfo

__all__ = ["STATE_VERSION", "Engine", "EngineConfig", "EngineResult", "links_of", "lossy_epsilon"]

#: 2: patterns keep their source classes (placement); 3: parsed shell, quoted literals;
#: 4: and the classes whose text their signals carry from other sessions (corrections'
#: cluster founders)
#: 5: outcomes, distinct tasks, baselines, the contrast miner's strata
STATE_VERSION: Final = 5


@dataclass(frozen=True)
class EngineConfig:
    """What a run configures: thresholds, which miners, failure rules, the recent window."""

    thresholds: Thresholds = field(default_factory=Thresholds)
    miners: tuple[str, ...] | None = None  # None: all registered miners
    failure_rules: FailureRules | None = None  # None: the documented defaults
    recent_days: int = 30  # "recent" for stale-memory checks

    def __post_init__(self) -> None:
        t = self.thresholds
        if t.min_sessions < 1 or t.max_examples < 0 or not 0 <= t.min_prevalence <= 1:
            raise InvalidInput(
                "thresholds need min_sessions >= 1, max_examples >= 0 and 0 <= min_prevalence "
                f"<= 1; received {t.min_sessions}, {t.max_examples}, {t.min_prevalence}"
            )
        if self.recent_days < 0:
            raise InvalidInput(f"recent_days must be 0 or more, received {self.recent_days}")


@dataclass
class EngineResult:
    """What a run found: every pattern, the kept ones, the left-out ones and why, drafts."""

    patterns: list[Pattern]
    kept: list[Pattern]
    left_out: list[tuple[Pattern, str]]
    drafts: list[Draft] = field(default_factory=list)


def links_of(signals: Sequence[Signal]) -> dict[str, set[str]]:
    """Per pattern id, the patterns that explain its signals in this session.

    A signal is explained by one of a miner named in ``EXPLAINED_BY`` whose excerpt starts at
    the same call (a loop's: covers it).
    """
    out: dict[str, set[str]] = {}
    for signal in signals:
        explainers = EXPLAINED_BY.get(signal.miner)
        if not explainers or signal.excerpt is None:
            continue
        at = signal.excerpt.first_event
        for other in signals:
            span = other.excerpt
            if other.miner not in explainers or span is None:
                continue
            if span.first_event == at or (
                other.miner == "loops" and span.first_event <= at <= span.last_event
            ):
                out.setdefault(signal.pattern_id, set()).add(other.pattern_id)
    return out


class Engine:
    """One dream's engine (see the module docstring)."""

    def __init__(self, config: EngineConfig, memory: Sequence[MemoryFile], now: dt.datetime):
        if now.tzinfo is None:
            raise InvalidInput(f"now must be timezone-aware (UTC), received {now.isoformat()}")
        self.config = config
        self.memory = tuple(sorted(memory, key=lambda f: f.path))
        self.now = now
        context = MinerContext(
            rules=config.failure_rules or FailureRules(),
            memory=self.memory,
            now=now,
            recent_days=config.recent_days,
            thresholds=config.thresholds,
        )
        made = create(context, config.miners)
        self._session_miners: list[Miner] = [m for m in made if isinstance(m, Miner)]
        self._memory_miners: list[MemoryMiner] = [
            m for m in made if isinstance(m, MemoryMiner) and not isinstance(m, Miner)
        ]
        self._reducer = Reducer(config.thresholds.max_examples, lossy_epsilon(config.thresholds))
        #: Pattern ids renamed while this engine ran (old -> new; see :meth:`current_id`).
        self.renamed: dict[str, str] = {}

    @property
    def sessions_selected(self) -> int:
        return self._reducer.sessions_selected

    def add(self, session: Session) -> int:
        """Mine one session with every session miner and reduce; returns the signals found."""
        return len(self.observe(session))

    def observe(self, session: Session) -> list[Signal]:
        """:meth:`add`, returning the session's signals (keys as of this session: a later
        template generalisation is recorded in :attr:`renamed`, see :meth:`current_id`)."""
        signals: list[Signal] = []
        for miner in self._session_miners:
            signals.extend(miner.mine(session))
            renames = getattr(miner, "renames", None)
            if renames is not None:
                for old, new in renames():
                    self._reducer.rename(miner.name, old, new)
                    if old != new:
                        self.renamed[f"{miner.name}:{old}"] = f"{miner.name}:{new}"
        self._reducer.add_session(session.info, signals, links_of(signals), session=session)
        return signals

    def current_id(self, pattern_id: str) -> str:
        """The id ``pattern_id`` is counted under now (following template renames)."""
        seen = {pattern_id}
        while pattern_id in self.renamed:
            pattern_id = self.renamed[pattern_id]
            if pattern_id in seen:  # a rename back and forth: stop at the latest
                break
            seen.add(pattern_id)
        return pattern_id

    def add_signals(self, info: TranscriptInfo, signals: Iterable[Signal]) -> None:
        """More signals about a session already added (e.g. a model's findings)."""
        listed = list(signals)
        self._reducer.add_session(info, listed, links_of(listed), selected=False)

    def state(self) -> dict[str, Any]:
        """The whole engine as JSON values: a checkpoint for :meth:`restore`."""
        miners: dict[str, Any] = {}
        for miner in self._session_miners:
            state = getattr(miner, "state", None)
            if state is not None:
                miners[miner.name] = state()
        return {"version": STATE_VERSION, "reducer": self._reducer.state(), "miners": miners}

    def state_text(self) -> str:
        """:meth:`state` as :func:`~.reduce.json_text`, the reducer written pattern by pattern
        (a checkpoint's peak memory is its text, not a second copy of the engine)."""
        miners: dict[str, Any] = {}
        for miner in self._session_miners:
            state = getattr(miner, "state", None)
            if state is not None:
                miners[miner.name] = state()
        return json_object({"version": json_text(STATE_VERSION), "miners": json_text(miners),
                            "reducer": self._reducer.state_text()})  # fmt: skip

    @classmethod
    def restore(
        cls,
        config: EngineConfig,
        memory: Sequence[MemoryFile],
        now: dt.datetime,
        state: Mapping[str, Any],
    ) -> Engine:
        """An engine that continues from ``state`` (same config, memory and time as before)."""
        if state.get("version") != STATE_VERSION:
            raise InvalidInput(
                f"engine checkpoint version {state.get('version')!r} is not {STATE_VERSION}; "
                "start the run again instead of resuming it"
            )
        engine = cls(config, memory, now)
        engine._reducer = Reducer.from_state(state["reducer"])
        saved: Mapping[str, Any] = state.get("miners", {})
        for miner in engine._session_miners:
            load = getattr(miner, "load_state", None)
            if load is not None and miner.name in saved:
                load(saved[miner.name])
        return engine

    @classmethod
    def continue_from(
        cls,
        config: EngineConfig,
        memory: Sequence[MemoryFile],
        now: dt.datetime,
        state: Mapping[str, Any],
    ) -> Engine:
        """A fresh engine (nothing counted) whose miners keep what ``state``'s had learned
        (Drain templates, correction clusters): the same error gets the same pattern id as in
        the run ``state`` came from. What a backtest mines its later part with."""
        earlier = cls.restore(config, memory, now, state)
        engine = cls(config, memory, now)
        engine._session_miners = earlier._session_miners
        return engine

    def finish(self, audience: Audience | None = None) -> EngineResult:
        """Run the store-level miners, decide, place and draft. Does not change the engine.

        ``audience`` decides where a pattern's drafts may go (see :mod:`.placement`): only to
        paths every reader of which may read the transcripts the draft is derived from.
        """
        store_signals = [
            s for m in self._memory_miners for s in m.mine_memory(self.memory, self.now)
        ]
        patterns = self._reducer.patterns(store_signals)
        fix_rates(patterns)  # "worked in N of M sessions": recoveries learn M from tool errors
        plugins: dict[str, Any] = {m.name: m for m in self._memory_miners}
        plugins.update({m.name: m for m in self._session_miners})
        for pattern in patterns:
            annotate = getattr(plugins.get(pattern.miner), "annotate", None)
            if annotate is not None:
                annotate(pattern)
        store = STORE_MINERS | {m.name for m in self._memory_miners}
        kept, left_out = decide(patterns, self.config.thresholds, self.memory, store, plugins)
        by_path = {f.path: f for f in self.memory}
        taken = set(by_path)
        drafts: list[Draft] = []
        index = MemoryIndex(self.memory, plugins)
        for pattern in kept:
            made, unsafe = place(pattern, self._reducer, self.config.thresholds, by_path,
                                 index, taken, audience, store)  # fmt: skip
            drafts.extend(made)
            left_out.extend(unsafe)
        return EngineResult(patterns, kept, left_out, drafts)
