"""Reduce: signals from many sessions become patterns with prevalence, in bounded memory.

Per ``(miner, key)`` the reducer keeps counters and bounded samples only — never sessions or
events — so its size grows with the number of distinct patterns, not with the fleet:

- ``sessions`` (a session counts once per pattern however many signals it gave), summed
  ``occurrences``, sessions per agent / project / user label (``""`` for unlabelled);
- ``first_seen`` / ``last_seen``: the earliest and latest session ``started_at``;
- ``examples``: the best :data:`~memdir.dream.model.Thresholds.max_examples` excerpts, from
  distinct transcripts, ranked by :func:`example_rank` — a total order on the excerpt itself
  (shortest clear text first, then transcript id), so the choice does not depend on arrival
  order;
- ``variants``: a counter of the signals' variants, pruned to the top :data:`MAX_VARIANTS`
  whenever it reaches four times that (ties broken by text), each with the title and subject
  of its first signal: a pattern's subject is its top variant's, else its latest signal's;
  ``details`` count the signals' details (sessions per detail) the same way;
- ``links``: for each session, the other patterns whose signals explain this one's in that
  session (a tool error that a recovery fixed), counted and pruned the same way; decide uses
  them to leave out what a stronger pattern already explains.

**Lossy counting** (Manku and Motwani, *Approximate Frequency Counts over Data Streams*, VLDB
2002) keeps the number of patterns bounded as well: with an error ``epsilon`` (the engine uses
a tenth of the lowest prevalence threshold, 0.2 % by default), every ``1 / epsilon``
sessions the patterns with ``sessions + delta <= bucket`` are dropped, ``delta`` being the
bucket a pattern was (re)created in, minus one. A dropped pattern had fewer than ``epsilon``
of the sessions seen — far below any threshold — and a pattern's count is short by at most
``epsilon * sessions_selected`` (never, for one that is not dropped before it recurs; never
below ``1 / epsilon`` sessions). One-off noise (a unique error, a lookup made once) thus stops
growing memory with the fleet. ``epsilon = 0`` keeps every pattern.

**Sources.** Each pattern also keeps the same counters and samples per *source class* — the
scope labels of the transcripts its sessions came from (:func:`source_class`), so the engine
can restrict a pattern to the transcripts every reader of its target may read
(:meth:`Reducer.restricted`) with the sessions selected of those classes as the denominator
(:attr:`Reducer.selected_by_class`). A pattern restricted to all its classes is the pattern.

**Outcomes and tasks.** Per pattern (and per source class) the reducer also counts the sessions
with a known outcome and those that failed, and the distinct tasks they are trials of (a
bounded :class:`~memdir.dream.model.TaskSketch`); the fleet baseline (sessions with a known
outcome, failures) is kept overall and per project, as are the sessions selected per project,
so a one-project pattern is judged against its own project's prevalence and failure rate.

**Conversations.** A sub-agent's transcript (``parent_session`` set) is part of the conversation
that started it, not an independent session: a conversation — its root transcript and every
sub-agent of it (:func:`conversation_of`) — counts once in the sessions selected and once per
pattern, whichever of its transcripts arrive first (later ones add occurrences and examples,
not sessions or variants). The reducer remembers which patterns a conversation counted (64-bit
hashes of their ids) for the last :data:`CONVERSATIONS` conversations a sub-agent was seen in,
and for the last :data:`RECENT_ROOTS` root transcripts (a root does not say whether it has
sub-agents, and most have none): exact when a conversation's sub-agents arrive before its root
or within that many conversations after it; otherwise a sub-agent counts as a conversation of
its own. Memory stays bounded, and flat once the fleet passes those counts.

``rename`` moves everything counted under one key to another (a Drain template that
generalised). ``state()`` is plain JSON and :meth:`Reducer.from_state` restores it exactly, so
an interrupted run resumes with the same result.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.dream.model import Excerpt, Pattern, Session, Signal, TaskSketch
from memdir.transcripts.model import TranscriptInfo

__all__ = [
    "CONVERSATIONS",
    "MAX_VARIANTS",
    "RECENT_ROOTS",
    "Reducer",
    "conversation_of",
    "example_rank",
    "json_object",
    "json_text",
    "source_class",
    "source_scopes",
]

MAX_VARIANTS: Final = 20
#: Conversations with a sub-agent, and root transcripts, whose counted patterns the reducer
#: remembers (see the module docstring).
CONVERSATIONS: Final = 4096
RECENT_ROOTS: Final = 256


def conversation_of(info: TranscriptInfo) -> str:
    """The conversation a transcript belongs to: its parent's session, else its own."""
    return f"{info.format}:{info.parent_session or info.session_id}"


def _pattern_hash(miner: str, key: str) -> int:
    digest = hashlib.blake2b(f"{miner}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def example_rank(excerpt: Excerpt) -> tuple[bool, int, str, int]:
    """Order of preference among excerpts: clear (>= 40 characters), short, then by id."""
    size = len(excerpt.text)
    return (size < 40, size, excerpt.transcript_id, excerpt.first_event)


def source_class(info: TranscriptInfo) -> str:
    """The source class of a session: its transcript's scope labels as canonical JSON."""
    return json.dumps(info.scopes(), sort_keys=True, separators=(",", ":"))


def json_text(value: Any) -> str:
    """Compact JSON with sorted keys: the one text form of engine checkpoints."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def json_object(parts: Mapping[str, str]) -> str:
    """The JSON object of keys whose values are already :func:`json_text` texts: the same
    text as ``json_text`` of the values themselves."""
    return "{" + ",".join(f"{json.dumps(k)}:{parts[k]}" for k in sorted(parts)) + "}"


def source_scopes(cls: str) -> dict[str, str]:
    """The scope labels a :func:`source_class` names."""
    value = json.loads(cls)
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, dict) else {}


def _count(counter: dict[str, int], label: str | None) -> None:
    key = label or ""
    counter[key] = counter.get(key, 0) + 1


def _prune(counter: dict[str, int], limit: int) -> None:
    if len(counter) >= 4 * limit:
        keep = sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]
        counter.clear()
        counter.update(keep)


def _time(value: str | None) -> dt.datetime | None:
    return None if value is None else dt.datetime.fromisoformat(value)


@dataclass(slots=True)
class _Acc:
    """What the reducer holds for one pattern (see the module docstring).

    A pattern and its per-class parts share what neither changes in place — the subject
    dicts (of the latest signal and of each variant's first), the excerpts (frozen) and the
    task hashes — so a part costs its own counters only, not a second copy of its samples.
    """

    miner: str
    key: str
    title: str
    subject: dict[str, Any]
    sessions: int = 0
    occurrences: int = 0
    agents: dict[str, int] = field(default_factory=dict)
    projects: dict[str, int] = field(default_factory=dict)
    users: dict[str, int] = field(default_factory=dict)
    first_seen: dt.datetime | None = None
    last_seen: dt.datetime | None = None
    examples: list[Excerpt] = field(default_factory=list)
    variants: dict[str, int] = field(default_factory=dict)
    variant_meta: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    #: Sessions per signal detail (:attr:`~memdir.dream.model.Signal.details`), pruned like
    #: the variants.
    details: dict[str, int] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)
    delta: int = 0
    #: Per source class, the same counters and samples (no links) — kept only once a second
    #: class is seen: until then ``sole`` names the one class and the pattern is its part.
    parts: dict[str, _Acc] = field(default_factory=dict)
    sole: str | None = None
    #: The reducer's session sequence number when this last counted a signal.
    seq: int = 0
    #: Classes other than the counting session's whose text the signals carry
    #: (:attr:`~memdir.dream.model.Signal.origins`); a part's are its own class's needs.
    requires: set[str] = field(default_factory=set)
    known: int = 0
    failed: int = 0
    tasks: TaskSketch = field(default_factory=TaskSketch)

    def clone(self) -> _Acc:
        """A copy of the counters and samples (no parts, no links): its own containers, the
        values nothing mutates in place (subjects, excerpts, variant metadata) shared."""
        return _Acc(
            miner=self.miner,
            key=self.key,
            title=self.title,
            subject=self.subject,
            sessions=self.sessions,
            occurrences=self.occurrences,
            agents=dict(self.agents),
            projects=dict(self.projects),
            users=dict(self.users),
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            examples=list(self.examples),
            variants=dict(self.variants),
            variant_meta=dict(self.variant_meta),
            details=dict(self.details),
            delta=self.delta,
            seq=self.seq,
            requires=set(self.requires),
            known=self.known,
            failed=self.failed,
            tasks=TaskSketch(list(self.tasks.hashes)),
        )

    def split(self) -> None:
        """Materialise the parts of a pattern seen in one class so far."""
        if not self.parts and self.sole is not None:
            self.parts = {self.sole: self.clone()}
            self.sole = None

    def classes(self) -> dict[str, _Acc]:
        """Each source class with its counters (the pattern itself while it has one)."""
        if self.parts:
            return self.parts
        return {self.sole: self} if self.sole is not None else {}

    def count(
        self,
        info: TranscriptInfo,
        group: list[Signal],
        limit: int,
        seq: int,
        cls: str,
        facts: _Facts,
        fresh: bool = True,
        copies: _Copies | None = None,
    ) -> None:
        """Count one session's signals of this pattern (not its links); ``cls`` is the
        session's source class, so only the *other* classes its signals name are required.
        ``fresh``: the session's conversation had not counted this pattern yet (else only its
        occurrences and examples count). ``copies``: the session's subject copies, shared
        with the pattern's part."""
        copies = copies if copies is not None else _Copies()
        self.title, self.subject = group[-1].title, copies.subject(group[-1])
        self.seq = seq
        self.requires.update(o for s in group for o in s.origins if o != cls)
        self.seen(info.started_at)
        excerpts = [s.excerpt for s in group if s.excerpt is not None]
        if excerpts:
            self.offer(min(excerpts, key=example_rank), limit)
        self.occurrences += sum(signal.occurrences for signal in group)
        if not fresh:
            return
        self.sessions += 1
        if facts.failed is not None:
            self.known += 1
            self.failed += int(facts.failed)
        if facts.task is not None:
            self.tasks.add_hash(facts.task)
        _count(self.agents, info.agent)
        _count(self.projects, info.project)
        _count(self.users, info.user)
        for signal in group:
            self.count_variant(signal, copies)
        for detail in sorted({d for signal in group for d in signal.details}):
            self.details[detail] = self.details.get(detail, 0) + 1
        _prune(self.details, MAX_VARIANTS)

    def seen(self, when: dt.datetime | None) -> None:
        if when is None:
            return
        if self.first_seen is None or when < self.first_seen:
            self.first_seen = when
        if self.last_seen is None or when > self.last_seen:
            self.last_seen = when

    def offer(self, excerpt: Excerpt, limit: int) -> None:
        """Keep ``excerpt`` if it is among the best ``limit``, one per transcript."""
        for position, current in enumerate(self.examples):
            if current.transcript_id == excerpt.transcript_id:
                if example_rank(excerpt) < example_rank(current):
                    self.examples[position] = excerpt
                    self.examples.sort(key=example_rank)
                return
        self.examples.append(excerpt)
        self.examples.sort(key=example_rank)
        del self.examples[limit:]

    def count_variant(self, signal: Signal, copies: _Copies) -> None:
        if signal.variant is None:
            return
        self.variants[signal.variant] = self.variants.get(signal.variant, 0) + 1
        if signal.variant not in self.variant_meta:
            self.variant_meta[signal.variant] = (signal.title, copies.subject(signal))
        if len(self.variants) >= 4 * MAX_VARIANTS:
            _prune(self.variants, MAX_VARIANTS)
            self.variant_meta = {k: v for k, v in self.variant_meta.items() if k in self.variants}

    def absorb(self, other: _Acc, limit: int) -> None:
        """Add ``other``'s counts (a renamed key); this one's title and subject stay."""
        self.sessions += other.sessions
        self.occurrences += other.occurrences
        self.known += other.known
        self.failed += other.failed
        self.tasks.merge(other.tasks)
        self.delta = max(self.delta, other.delta)
        for mine, theirs in (
            (self.agents, other.agents),
            (self.projects, other.projects),
            (self.users, other.users),
            (self.variants, other.variants),
            (self.details, other.details),
            (self.links, other.links),
        ):
            for label, count in theirs.items():
                mine[label] = mine.get(label, 0) + count
        for variant, meta in other.variant_meta.items():
            self.variant_meta.setdefault(variant, meta)
        self.seen(other.first_seen)
        self.seen(other.last_seen)
        self.requires |= other.requires
        for excerpt in other.examples:
            self.offer(excerpt, limit)
        if not self.parts and not other.parts and self.sole == other.sole:
            pass  # one class on both sides: this pattern stays its own part
        else:
            self.split()
            other.split()
            for cls, part in other.parts.items():
                mine_part = self.parts.get(cls)
                if mine_part is None:
                    self.parts[cls] = part
                else:
                    mine_part.absorb(part, limit)
        self.seq = max(self.seq, other.seq)

    def pattern(self, selected: int, baseline: _Baseline | None = None) -> Pattern:
        title, subject = self.title, self.subject
        if self.variants:
            top = min(self.variants.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            title, subject = self.variant_meta.get(top, (title, subject))
        out = Pattern(
            miner=self.miner,
            key=self.key,
            title=title,
            subject=dict(subject),
            sessions=self.sessions,
            sessions_selected=selected,
            occurrences=self.occurrences,
            agents=dict(sorted(self.agents.items())),
            projects=dict(sorted(self.projects.items())),
            users=dict(sorted(self.users.items())),
            first_seen=self.first_seen,
            last_seen=self.last_seen,
            examples=list(self.examples),
            variants=dict(sorted(self.variants.items(), key=lambda kv: (-kv[1], kv[0]))),
            details=dict(sorted(self.details.items(), key=lambda kv: (-kv[1], kv[0]))),
            links=dict(sorted(self.links.items())),
            sources={cls: part.sessions for cls, part in sorted(self.classes().items())},
            requires={
                cls: sorted(part.requires - {cls})
                for cls, part in sorted(self.classes().items())
                if part.requires - {cls}
            },
            known=self.known,
            failed=self.failed,
            tasks=self.tasks.count(),
        )
        if baseline is not None:
            baseline.apply(out)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "miner": self.miner,
            "key": self.key,
            "title": self.title,
            "subject": self.subject,
            "sessions": self.sessions,
            "occurrences": self.occurrences,
            "agents": self.agents,
            "projects": self.projects,
            "users": self.users,
            "first_seen": self.first_seen.isoformat() if self.first_seen else None,
            "last_seen": self.last_seen.isoformat() if self.last_seen else None,
            "examples": [e.to_json() for e in self.examples],
            "variants": self.variants,
            "variant_meta": {k: [t, s] for k, (t, s) in self.variant_meta.items()},
            "details": self.details,
            "links": self.links,
            "delta": self.delta,
            "seq": self.seq,
            "known": self.known,
            "failed": self.failed,
            "tasks": self.tasks.hashes,
            "sole": self.sole,
            "requires": sorted(self.requires),
            "parts": {cls: part.to_json() for cls, part in sorted(self.parts.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Acc:
        return cls(
            miner=data["miner"],
            key=data["key"],
            title=data["title"],
            subject=dict(data["subject"]),
            sessions=data["sessions"],
            occurrences=data["occurrences"],
            agents=dict(data["agents"]),
            projects=dict(data["projects"]),
            users=dict(data["users"]),
            first_seen=_time(data["first_seen"]),
            last_seen=_time(data["last_seen"]),
            examples=[
                Excerpt(
                    e["transcript_id"],
                    e["first_event"],
                    e["last_event"],
                    e["excerpt"],
                    dict(e["scopes"]),
                )
                for e in data["examples"]
            ],
            variants=dict(data["variants"]),
            variant_meta={k: (t, dict(s)) for k, (t, s) in data["variant_meta"].items()},
            details=dict(data.get("details", {})),
            links=dict(data["links"]),
            delta=int(data.get("delta", 0)),
            parts={cls: _Acc.from_json(part) for cls, part in data.get("parts", {}).items()},
            seq=int(data.get("seq", 0)),
            sole=data.get("sole"),
            requires=set(data.get("requires", ())),
            known=int(data.get("known", 0)),
            failed=int(data.get("failed", 0)),
            tasks=TaskSketch([int(h) for h in data.get("tasks", ())]),
        )


@dataclass(frozen=True, slots=True)
class _Facts:
    """What a session tells every pattern it shows: its outcome and its task (as its
    :meth:`TaskSketch.hash_of`, one int object shared by every sketch that keeps it)."""

    failed: bool | None = None
    task: int | None = None


class _Copies:
    """One session's copies of its signals' subjects (a reducer never keeps a miner's own
    dict): made once per signal, so a pattern and its part hold the same copy."""

    __slots__ = ("_made",)

    def __init__(self) -> None:
        self._made: dict[int, tuple[Signal, dict[str, Any]]] = {}

    def subject(self, signal: Signal) -> dict[str, Any]:
        made = self._made.get(id(signal))
        if made is None or made[0] is not signal:
            made = self._made[id(signal)] = (signal, dict(signal.subject))
        return made[1]


@dataclass
class _Baseline:
    """The fleet's outcome baseline and, per project, selected sessions and outcomes."""

    known: int = 0
    failed: int = 0
    #: project -> [sessions selected, with a known outcome, failed]
    projects: dict[str, list[int]] = field(default_factory=dict)

    def count(self, project: str | None, failed: bool | None) -> None:
        row = self.projects.setdefault(project or "", [0, 0, 0])
        row[0] += 1
        if failed is not None:
            self.known += 1
            self.failed += int(failed)
            row[1] += 1
            row[2] += int(failed)

    def apply(self, pattern: Pattern) -> None:
        """Set the pattern's baseline: its project's when all its sessions are one project's."""
        labelled = [p for p in pattern.projects if p]
        pattern.baseline_known, pattern.baseline_failed = self.known, self.failed
        if len(labelled) == 1 and pattern.projects[labelled[0]] == pattern.sessions:
            row = self.projects.get(labelled[0])
            if row is not None:
                pattern.project, pattern.project_selected = labelled[0], row[0]
                pattern.baseline_known, pattern.baseline_failed = row[1], row[2]

    def to_json(self) -> dict[str, Any]:
        return {
            "known": self.known,
            "failed": self.failed,
            "projects": {k: list(v) for k, v in sorted(self.projects.items())},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Baseline:
        projects = {str(k): [int(x) for x in v] for k, v in data.get("projects", {}).items()}
        return cls(int(data.get("known", 0)), int(data.get("failed", 0)), projects)


class Reducer:
    """Patterns accumulated from a stream of sessions' signals (see the module docstring)."""

    def __init__(self, max_examples: int = 5, epsilon: float = 0.0) -> None:
        self.max_examples = max_examples
        self.epsilon = epsilon
        #: Sessions per lossy-counting bucket (0: never prune).
        self.width = math.ceil(1 / epsilon) if epsilon > 0 else 0
        self.sessions_selected = 0
        #: Sessions selected per source class (the denominators of restricted patterns).
        self.selected_by_class: dict[str, int] = {}
        self._seq = 0
        self._acc: dict[tuple[str, str], _Acc] = {}
        self.baseline = _Baseline()
        #: Conversations a sub-agent was seen in, and recent roots -> hashes of the patterns
        #: they counted (each oldest first).
        self._conversations: dict[str, set[int]] = {}
        self._roots: dict[str, set[int]] = {}

    def add_session(
        self,
        info: TranscriptInfo,
        signals: Iterable[Signal],
        links: Mapping[str, Iterable[str]] | None = None,
        *,
        selected: bool = True,
        session: Session | None = None,
    ) -> int:
        """Count one session's signals; ``selected=False`` for more signals about a session
        already counted (model findings). ``session`` gives its outcome and task (without
        it: the outcome of ``info``, no task). Returns the number of signals."""
        cls = source_class(info)
        self._seq += 1
        if session is not None:
            failed, task = session.failed, session.task
        else:
            outcome = info.outcome
            failed = True if outcome == "failure" else False if outcome == "success" else None
            task = info.task
        facts = _Facts(failed, None if task is None else TaskSketch.hash_of(task))
        copies = _Copies()
        conversation = conversation_of(info)
        counted = self._conversations.pop(conversation, None)
        parts = counted is not None or info.parent_session is not None
        if counted is None:
            counted = self._roots.pop(conversation, None)
        if counted is None:
            counted = set()
            if selected:
                self.sessions_selected += 1
                self.selected_by_class[cls] = self.selected_by_class.get(cls, 0) + 1
                self.baseline.count(info.project, facts.failed)
        # the most recent now: a conversation with a sub-agent in the long memory, a lone
        # root among the recent roots
        memory, bound = (
            (self._conversations, CONVERSATIONS) if parts else (self._roots, RECENT_ROOTS)
        )
        memory[conversation] = counted
        if len(memory) > bound:
            del memory[next(iter(memory))]
        grouped: dict[tuple[str, str], list[Signal]] = {}
        total = 0
        for signal in signals:
            grouped.setdefault((signal.miner, signal.key), []).append(signal)
            total += 1
        for ident, group in grouped.items():
            digest = _pattern_hash(*ident)
            fresh = digest not in counted
            counted.add(digest)
            acc = self._acc.get(ident)
            if acc is None:
                acc = self._acc[ident] = _Acc(ident[0], ident[1], group[0].title, group[0].subject)
                acc.delta = self._bucket() - 1 if self.width else 0
            if acc.sessions == 0 and not acc.parts:
                acc.sole = cls
            elif acc.sole != cls:
                acc.split()
            acc.count(info, group, self.max_examples, self._seq, cls, facts, fresh, copies)
            if acc.parts:
                part = acc.parts.get(cls)
                if part is None:
                    part = acc.parts[cls] = _Acc(ident[0], ident[1], group[0].title,
                                                 group[0].subject)  # fmt: skip
                part.count(info, group, self.max_examples, self._seq, cls, facts, fresh, copies)
            if not fresh:
                continue
            for target in sorted(set((links or {}).get(f"{ident[0]}:{ident[1]}", ()))):
                acc.links[target] = acc.links.get(target, 0) + 1
            _prune(acc.links, MAX_VARIANTS)
        if selected and self.width and self.sessions_selected % self.width == 0:
            bucket = self._bucket()
            for ident in [k for k, a in self._acc.items() if a.sessions + a.delta <= bucket]:
                del self._acc[ident]
        return total

    def _bucket(self) -> int:
        """The current lossy-counting bucket (1 for the first ``width`` sessions)."""
        return max(1, math.ceil(self.sessions_selected / self.width))

    def rename(self, miner: str, old: str, new: str) -> None:
        """Move what was counted under ``old`` to ``new`` (merging when ``new`` exists), with
        the links other patterns hold to it and the conversations that counted it."""
        if old != new:
            before, after = _pattern_hash(miner, old), _pattern_hash(miner, new)
            for counted in [*self._conversations.values(), *self._roots.values()]:
                if before in counted:
                    counted.discard(before)
                    counted.add(after)
            source, target_id = f"{miner}:{old}", f"{miner}:{new}"
            for other in self._acc.values():
                if source in other.links:
                    moved = other.links.pop(source) + other.links.get(target_id, 0)
                    other.links[target_id] = min(moved, other.sessions)
        acc = self._acc.pop((miner, old), None)
        if acc is None or old == new:
            if acc is not None:
                self._acc[(miner, old)] = acc
            return
        target = self._acc.get((miner, new))
        if target is None:
            acc.key = new
            self._acc[(miner, new)] = acc
        else:
            target.absorb(acc, self.max_examples)

    def patterns(self, extra: Iterable[Signal] = ()) -> list[Pattern]:
        """Every pattern, most prevalent first; ``extra`` are store-level signals (no session)."""
        out = [acc.pattern(self.sessions_selected, self.baseline) for acc in self._acc.values()]
        store: dict[tuple[str, str], _Acc] = {}
        for signal in extra:
            acc = store.setdefault(
                (signal.miner, signal.key),
                _Acc(signal.miner, signal.key, signal.title, dict(signal.subject)),
            )
            acc.occurrences += signal.occurrences
        out += [acc.pattern(self.sessions_selected) for acc in store.values()]
        out.sort(key=lambda p: (-p.sessions, -p.occurrences, p.id))
        return out

    def restricted(self, pattern_id: str, classes: Iterable[str], selected: int) -> Pattern:
        """The pattern counted over the sessions of ``classes`` only, out of ``selected``.

        Its title and subject are its latest such session's (or its top variant's among
        them); nothing in it comes from a session of another class.
        """
        miner, _, key = pattern_id.partition(":")
        acc = self._acc[(miner, key)]
        present = acc.classes()
        parts = sorted((present[c] for c in set(classes) if c in present), key=lambda p: -p.seq)
        if not parts:
            raise KeyError(f"pattern {pattern_id} has no sessions of those classes")
        merged = parts[0].clone()
        merged.sole = next(c for c, p in present.items() if p is parts[0])
        for part in parts[1:]:
            merged.split()
            merged.absorb(part.clone(), self.max_examples)
        if merged.parts:
            merged.parts = {c: present[c] for c in classes if c in present}
        return merged.pattern(selected, self.baseline)

    def _head(self) -> dict[str, Any]:
        return {
            "max_examples": self.max_examples,
            "epsilon": self.epsilon,
            "sessions_selected": self.sessions_selected,
            "selected_by_class": dict(sorted(self.selected_by_class.items())),
            "seq": self._seq,
            "baseline": self.baseline.to_json(),
            "conversations": [[c, sorted(h)] for c, h in self._conversations.items()],
            "roots": [[c, sorted(h)] for c, h in self._roots.items()],
        }

    def state(self) -> dict[str, Any]:
        """JSON values: the whole reducer (patterns in key order, so the text is stable)."""
        return {**self._head(), "patterns": [self._acc[k].to_json() for k in sorted(self._acc)]}

    def state_text(self) -> str:
        """``json_text(state())``, written one pattern at a time: a checkpoint never holds
        the whole reducer a second time as Python values (a run's peak memory would grow with
        its patterns' per-class parts)."""
        parts = {key: json_text(value) for key, value in self._head().items()}
        patterns = (json_text(self._acc[k].to_json()) for k in sorted(self._acc))
        parts["patterns"] = "[" + ",".join(patterns) + "]"
        return json_object(parts)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> Reducer:
        reducer = cls(int(state["max_examples"]), float(state.get("epsilon", 0.0)))
        reducer.sessions_selected = int(state["sessions_selected"])
        reducer.selected_by_class = dict(state.get("selected_by_class", {}))
        reducer._seq = int(state.get("seq", 0))
        reducer.baseline = _Baseline.from_json(state.get("baseline", {}))
        for conversation, hashes in state.get("conversations", ()):
            reducer._conversations[str(conversation)] = {int(x) for x in hashes}
        for conversation, hashes in state.get("roots", ()):
            reducer._roots[str(conversation)] = {int(x) for x in hashes}
        for data in state["patterns"]:
            acc = _Acc.from_json(data)
            reducer._acc[(acc.miner, acc.key)] = acc
        return reducer
