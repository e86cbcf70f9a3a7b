"""The data a dream run passes between its stages: sessions in, signals, patterns, drafts out.

Pure data, no I/O. The stages (see ``docs/dreaming.md``):

1. **select** — the run service streams :class:`Session` values (one transcript with its
   events) the dreaming principal may read, one at a time;
2. **map** — every miner turns one session into :class:`Signal` values (and a model, when one
   is configured, turns batches of sessions into more signals);
3. **reduce** — signals with the same ``(miner, key)`` from different sessions become one
   :class:`Pattern` with its prevalence statistics and a few example :class:`Excerpt` values;
   the reducer keeps counters and bounded samples, never the sessions, so memory stays flat as
   the fleet grows;
4. **decide** — patterns above the thresholds are checked against the memory snapshot
   (:class:`MemoryFile` values at the pinned revision) and get a ``coverage``;
5. **propose** — each kept pattern becomes a :class:`Draft`: concrete operations on the scope
   its evidence supports, with rationale, evidence, statistics and confidence.

Identity: a pattern is ``miner + ":" + key``. ``key`` is stable across runs for the same
pattern (it is built from ``subject``, never from counts or ids), so a later run's proposal for
the same pattern supersedes the earlier open one.

``subject`` holds the pattern's facts as plain JSON values, by miner:

==================  ================================================================
``tool_errors``     ``tool``, ``signature`` (the normalised error template), ``input``
                    (a representative normalised input)
``recovery``        ``tool``, ``failed`` and ``fixed`` (the literal commands), ``change``
                    (what made it work, e.g. ``"replace --frozen with --locked"``),
                    ``error``, ``failure_sessions`` (sessions the failure occurred in)
``corrections``     ``text`` (a representative correction), ``terms`` (its key terms)
``exploration``     ``tool``, ``input`` (the lookup, normalised)
``loops``           ``tool``, ``input``
``stale_memory``    ``path`` (the memory file), ``claim`` (the remembered command or
                    path), ``evidence`` (what the transcripts show instead)
``consolidation``   ``paths``, ``reason`` (``duplicate``, ``expired``, ``review-due``)
``model``           ``title``, ``detail`` (findings a model returned)
==================  ================================================================
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from memdir.core.model import Operation
from memdir.transcripts.model import Event, TranscriptInfo

__all__ = [
    "COVERAGE",
    "MINER_NAMES",
    "Coverage",
    "Draft",
    "Excerpt",
    "MemoryFile",
    "Pattern",
    "Session",
    "Signal",
    "Thresholds",
]

MINER_NAMES: Final = (
    "tool_errors",
    "recovery",
    "corrections",
    "exploration",
    "loops",
    "stale_memory",
    "consolidation",
    "model",
)

#: How a pattern relates to what memory already says (decided against the pinned snapshot).
COVERAGE: Final = ("new", "covered", "covered-failing", "contradicted")
Coverage = Literal["new", "covered", "covered-failing", "contradicted"]

#: Longest excerpt kept as evidence (characters); longer text is cut with an ellipsis.
MAX_EXCERPT_CHARS: Final = 600


@dataclass(frozen=True, slots=True)
class Session:
    """One transcript as the miners see it: its header and its ordered events.

    ``events[i]`` is the event at position ``i``; excerpts name positions, so an excerpt's
    ``first_event``/``last_event`` index this list (and the transcript's stored order).
    """

    info: TranscriptInfo
    events: list[Event]

    @property
    def id(self) -> str:
        return self.info.id


@dataclass(frozen=True, slots=True)
class Excerpt:
    """Evidence: a range of one transcript's events and the text that shows the pattern.

    ``scopes`` are the transcript's scope labels: the proposal view shows ``text`` only to a
    viewer who may read that transcript (others see that the evidence exists).
    """

    transcript_id: str
    first_event: int
    last_event: int
    text: str
    scopes: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "transcript_id": self.transcript_id,
            "first_event": self.first_event,
            "last_event": self.last_event,
            "excerpt": self.text,
            "scopes": dict(self.scopes),
        }


@dataclass(frozen=True, slots=True)
class Signal:
    """One observation a miner made in one session.

    ``variant`` is an optional detail counted across sessions (the fix that worked, the exact
    wording seen); ``occurrences`` how many times it happened in this session.

    ``origins`` names the source classes (:func:`~memdir.dream.reduce.source_class`) of the
    *other* sessions whose text the key, subject or title carries — a miner that keeps text
    across sessions (the corrections miner's cluster founders) must name them, since the
    reducer counts a signal under its own session's class only; placement then requires a
    proposal's readers to read those classes too.
    """

    miner: str
    key: str
    subject: dict[str, Any]
    title: str
    excerpt: Excerpt | None = None
    variant: str | None = None
    occurrences: int = 1
    origins: tuple[str, ...] = ()

    @property
    def pattern_id(self) -> str:
        return f"{self.miner}:{self.key}"


@dataclass
class Pattern:
    """Signals with one ``(miner, key)`` across sessions, with their prevalence.

    ``sessions`` counts distinct sessions out of ``sessions_selected``; ``agents`` and
    ``projects`` map each label to the number of sessions it appears in (unlabelled sessions
    count under ``""``).
    """

    miner: str
    key: str
    title: str
    subject: dict[str, Any]
    sessions: int = 0
    sessions_selected: int = 0
    occurrences: int = 0
    agents: dict[str, int] = field(default_factory=dict)
    projects: dict[str, int] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)
    first_seen: dt.datetime | None = None
    last_seen: dt.datetime | None = None
    examples: list[Excerpt] = field(default_factory=list)
    variants: dict[str, int] = field(default_factory=dict)
    coverage: Coverage = "new"
    memory_paths: list[str] = field(default_factory=list)
    #: Other patterns that explained this one's signals, by the number of sessions they did
    #: (a tool error a recovery fixed in the same call); decide leaves out what they explain.
    links: dict[str, int] = field(default_factory=dict)
    #: Sessions per source class (the scope labels of their transcripts, as canonical JSON;
    #: see :func:`~memdir.dream.reduce.source_class`): where the evidence comes from.
    sources: dict[str, int] = field(default_factory=dict)
    #: Per source class, the other classes whose text that class's signals carry in the key,
    #: subject or title (:attr:`Signal.origins`): text from class ``c`` may only be shown
    #: where ``c`` and every class in ``requires[c]`` may be read.
    requires: dict[str, list[str]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.miner}:{self.key}"

    @property
    def prevalence(self) -> float:
        """Sessions affected / sessions selected (0 when nothing was selected)."""
        return self.sessions / self.sessions_selected if self.sessions_selected else 0.0

    def statistics(self) -> dict[str, Any]:
        """The figures a reviewer sees beside a proposal (JSON values)."""
        return {
            "pattern": self.id,
            "miner": self.miner,
            "sessions": self.sessions,
            "sessions_selected": self.sessions_selected,
            "prevalence": round(self.prevalence, 4),
            "occurrences": self.occurrences,
            "agents": len([a for a in self.agents if a]),
            "projects": sorted(p for p in self.projects if p),
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "coverage": self.coverage,
            "variants": dict(sorted(self.variants.items(), key=lambda kv: -kv[1])[:5]),
        }


@dataclass(frozen=True)
class Thresholds:
    """What a pattern needs to be proposed (configurable per run).

    A pattern is kept when it reaches ``min_sessions`` distinct sessions *and* ``min_prevalence``
    of the sessions selected (a fraction, 0.02 = 2 %); ``per_miner`` overrides
    ``min_prevalence`` for one miner.
    """

    min_sessions: int = 5
    min_prevalence: float = 0.02
    per_miner: dict[str, float] = field(default_factory=dict)
    max_examples: int = 5

    def prevalence_for(self, miner: str) -> float:
        return self.per_miner.get(miner, self.min_prevalence)


@dataclass(frozen=True, slots=True)
class MemoryFile:
    """A memory file at the run's pinned revision (only files the dreaming principal reads)."""

    path: str
    content: str
    sha256: str
    frontmatter: dict[str, Any] = field(default_factory=dict)
    #: When the file last changed (None when unknown): sessions failing after it show a note
    #: that exists but is not followed ("covered-failing").
    updated_at: dt.datetime | None = None


@dataclass
class Draft:
    """A proposal the run will queue: operations plus what a reviewer needs to judge them.

    ``evidence`` holds :meth:`Excerpt.to_json` values; ``confidence`` is 0..1.
    """

    pattern: Pattern
    operations: list[Operation]
    rationale: str
    evidence: list[dict[str, Any]]
    confidence: float
    flags: list[str] = field(default_factory=list)
    #: The scope labels of every class of transcript the draft's text and counts come from
    #: (set by placement): a viewer of the proposal must read all of them.
    sources: list[dict[str, str]] = field(default_factory=list)

    def statistics(self) -> dict[str, Any]:
        stats = self.pattern.statistics()
        stats["confidence"] = round(self.confidence, 3)
        if self.flags:
            stats["flags"] = list(self.flags)
        if self.sources:
            stats["source_scopes"] = [dict(s) for s in self.sources]
        return stats
