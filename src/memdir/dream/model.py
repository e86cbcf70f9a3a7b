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
``feedback``        ``kind`` (``format``, ``edit``, ``lint``, ``truncated``, ``timeout``,
                    ``limit``, ``continue``, ``warning``), ``source`` (``user``,
                    ``system`` or the tool whose result carried it), ``signature`` (the
                    templated feedback line), ``instruction`` (what the harness asked
                    for), ``fix`` (what the next compliant turn did)
``contrast``        ``tool``, ``feature`` (a call type or ``tool arg=value``), ``odds_ratio``,
                    ``failed_with``/``failed``/``succeeded_with``/``succeeded`` (sessions of
                    tasks with both outcomes)
``model``           ``title``, ``detail`` (findings a model returned)
==================  ================================================================

**Outcomes and tasks.** Sessions whose transcript has an outcome (``success``/``failure``)
feed each pattern's ``known``/``failed`` counters and the fleet baseline (and each project's),
so a pattern reports its failure rate beside the baseline's and the *lift* (how many times
likelier a session with the pattern failed). :attr:`Session.task` names the benchmark task a
session is a trial of (the ``task`` label, else the importer's ``meta.task_id`` /
``instance_id``): patterns count distinct tasks, since four trials of one task are one piece
of evidence, not four.
"""

from __future__ import annotations

import bisect
import datetime as dt
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from memdir.core.dream_options import DEFAULTS
from memdir.core.model import Operation
from memdir.transcripts.model import Event, TranscriptInfo

__all__ = [
    "COVERAGE",
    "MINER_NAMES",
    "Coverage",
    "Draft",
    "Excerpt",
    "MemoryFile",
    "MemoryText",
    "Pattern",
    "Session",
    "Signal",
    "TaskSketch",
    "Thresholds",
]

MINER_NAMES: Final = (
    "tool_errors",
    "recovery",
    "corrections",
    "exploration",
    "loops",
    "stale_memory",
    "feedback",
    "contrast",
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
    #: The transcript's import metadata (``task_id``, ``domain``, ``instance_id``, ...).
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def task(self) -> str | None:
        """The task this session is a trial of, or None when the source names none.

        The ``task`` label, else ``meta.task_id`` (prefixed by ``meta.domain`` when present:
        τ²-bench numbers tasks per domain), else ``meta.instance_id`` (SWE-bench-style
        evaluations).
        """
        if self.info.task:
            return self.info.task
        task = self.meta.get("task_id")
        if task is not None and str(task) != "":
            domain = self.meta.get("domain")
            return f"{domain}/{task}" if domain else str(task)
        instance = self.meta.get("instance_id")
        return str(instance) if instance else None

    @property
    def failed(self) -> bool | None:
        """True/False for a failure/success outcome, None when the outcome is unknown."""
        outcome = self.info.outcome
        return True if outcome == "failure" else False if outcome == "success" else None


class TaskSketch:
    """Distinct tasks in bounded memory: a *k*-minimum-values sketch (Bar-Yossef et al., 2002).

    Keeps the :data:`K` smallest 64-bit hashes (BLAKE2b, so no hash seed matters) of the task
    names added: the count is exact up to ``K`` distinct tasks and an estimate
    ``(K - 1) / (h_K / 2**64)`` beyond (about 1/sqrt(K - 2) = 13 % relative error). Merging two
    sketches is the sketch of the union.
    """

    K: Final = 64
    __slots__ = ("hashes",)

    def __init__(self, hashes: list[int] | None = None) -> None:
        self.hashes: list[int] = sorted(hashes or [])[: self.K]

    @staticmethod
    def hash_of(task: str) -> int:
        return int.from_bytes(hashlib.blake2b(task.encode("utf-8"), digest_size=8).digest(), "big")

    def add(self, task: str) -> None:
        self.add_hash(self.hash_of(task))

    def add_hash(self, value: int) -> None:
        hashes = self.hashes
        if value in hashes or (len(hashes) >= self.K and value >= hashes[-1]):
            return
        bisect.insort(hashes, value)
        del hashes[self.K :]

    def merge(self, other: TaskSketch) -> None:
        for value in other.hashes:
            self.add_hash(value)

    def count(self) -> int:
        if len(self.hashes) < self.K:
            return len(self.hashes)
        return round((self.K - 1) / ((self.hashes[-1] + 1) / 2**64))


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
    #: Facts of this observation counted across sessions beside the variant (the checks and
    #: codes a lint report names, the reason a harness gave): sessions per detail.
    details: tuple[str, ...] = ()

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
    #: Sessions per detail of its signals (:attr:`Signal.details`), most frequent first.
    details: dict[str, int] = field(default_factory=dict)
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
    #: Sessions with a known outcome, and those that failed (see the module docstring).
    known: int = 0
    failed: int = 0
    #: The same over every selected session (of the pattern's project when it has one).
    baseline_known: int = 0
    baseline_failed: int = 0
    #: Distinct tasks the sessions are trials of (0 when no session names a task).
    tasks: int = 0
    #: When all sessions are one project's: that project and its selected sessions.
    project: str | None = None
    project_selected: int = 0
    #: Extra figures a miner computed for its pattern (a contrast's odds ratio, ...).
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.miner}:{self.key}"

    @property
    def prevalence(self) -> float:
        """Sessions affected / sessions selected (0 when nothing was selected)."""
        return self.sessions / self.sessions_selected if self.sessions_selected else 0.0

    @property
    def project_prevalence(self) -> float | None:
        """For a one-project pattern, sessions affected / that project's sessions selected."""
        if self.project is None or not self.project_selected:
            return None
        return self.sessions / self.project_selected

    @property
    def failure_rate(self) -> float | None:
        return self.failed / self.known if self.known else None

    @property
    def baseline_rate(self) -> float | None:
        return self.baseline_failed / self.baseline_known if self.baseline_known else None

    @property
    def lift(self) -> float | None:
        """Failure rate of the pattern's sessions over the baseline's (None without outcomes).

        Computed with one pseudo-session of each outcome added to both sides (a Laplace
        prior), so five sessions that all failed do not claim certainty.
        """
        if not self.known or not self.baseline_known:
            return None
        rate = (self.failed + 1) / (self.known + 2)
        base = (self.baseline_failed + 1) / (self.baseline_known + 2)
        return rate / base

    def outcome_statistics(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.tasks:
            out["tasks"] = self.tasks
        if self.project_prevalence is not None:
            out["project_prevalence"] = round(self.project_prevalence, 4)
            out["project_sessions_selected"] = self.project_selected
        if self.known and self.baseline_known:
            out["sessions_with_outcome"] = self.known
            out["failure_rate"] = round(self.failed / self.known, 4)
            out["baseline_failure_rate"] = round(self.baseline_failed / self.baseline_known, 4)
            out["lift"] = round(self.lift or 0.0, 3)
        return out

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
            **({"details": dict(list(self.details.items())[:5])} if self.details else {}),
            **self.outcome_statistics(),
            **self.extra,
        }


@dataclass(frozen=True)
class Thresholds:
    """What a pattern needs to be proposed (configurable per run).

    A pattern is kept when it reaches ``min_sessions`` distinct sessions *and* ``min_prevalence``
    of the sessions selected (a fraction, 0.02 = 2 %; of its project's sessions for a
    one-project pattern) *and*, when its sessions name tasks, ``min_tasks`` distinct tasks;
    ``per_miner`` overrides ``min_prevalence`` for one miner.
    """

    min_sessions: int = DEFAULTS.min_sessions
    min_prevalence: float = DEFAULTS.min_prevalence
    per_miner: dict[str, float] = field(default_factory=dict)
    max_examples: int = 5
    #: When the sessions name tasks (benchmark trials), the distinct tasks a pattern needs:
    #: four trials of one task are one scenario repeated, not a recurring pattern.
    min_tasks: int = 3

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


_WORD: Final = re.compile(r"[a-z0-9][a-z0-9._+#/-]*")


def phrase_pattern(phrase: str) -> re.Pattern[str]:
    """A regex finding ``phrase`` as whole tokens: not inside a longer word or path.

    ``make test`` is not found in ``cmake tests``, ``src/a.py`` not in ``lib/src/a.py`` or
    ``src/a.pyc``; a sentence's full stop after it is fine.
    """
    return re.compile(r"(?<![\w./-])" + re.escape(phrase) + r"(?![\w/-]|\.\w)")


@dataclass(frozen=True)
class MemoryText:
    """A memory file prepared for coverage checks: its lowercased text and word set.

    Coverage (``decide``) and the miners that own their coverage test read memory through
    this, matching whole tokens (:meth:`has_phrase`), never substrings.
    """

    file: MemoryFile
    lower: str
    words: frozenset[str]
    #: The pattern id in the file's ``dream_pattern`` frontmatter (a note a dream wrote).
    marker: str | None

    @classmethod
    def of(cls, file: MemoryFile, marker: str | None) -> MemoryText:
        lower = file.content.lower()
        words = frozenset(w.rstrip("._-/") for w in _WORD.findall(lower.replace("'", "")))
        return cls(file, lower, words, marker)

    def has_phrase(self, phrase: str) -> bool:
        """Whether the text holds ``phrase`` (lowercase it first) as whole tokens."""
        return (
            bool(phrase)
            and phrase in self.lower
            and bool(phrase_pattern(phrase).search(self.lower))
        )

    def count_phrase(self, phrase: str) -> int:
        if not phrase or phrase not in self.lower:
            return 0
        return len(phrase_pattern(phrase).findall(self.lower))
