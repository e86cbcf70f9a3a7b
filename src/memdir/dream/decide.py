"""Decide: which patterns to keep, and how each relates to what memory already says.

In order, a pattern is left out (with the reason a reviewer reads in the report) when:

1. **below threshold** — fewer than ``min_sessions`` sessions (``below threshold: 3 sessions <
   5``), fewer than ``min_tasks`` distinct tasks when the sessions are trials of named tasks,
   or a prevalence under ``prevalence_for(miner)`` (``below threshold: prevalence 1.5% <
   2.0%``) — a one-project pattern's prevalence among its project's sessions. Store-level
   patterns (consolidation) are facts about the store, not about sessions, and skip this step;
2. **explained** — most of its sessions (at least :data:`EXPLAINED_SHARE`) are explained by a
   kept pattern of a more specific miner (:data:`EXPLAINED_BY`): a tool error that a kept
   recovery pattern fixed in the same call, or that a stale memory pattern names, is reported
   once, as the more useful pattern (``explained by recovery:...: 9 of 10 sessions``);
3. **judged** — its miner's own ``judge`` (see :mod:`.miners.base`) gives a reason to report
   it rather than propose it (a contrast that is not significant, environment feedback); an
   empty reason means the pattern is no finding at all (a call failed trials make no more often
   than successful ones) and it is left out of both lists;
4. **covered** — memory already states it (``already covered by /projects/x/notes.md``).

A miner that has ``covers`` / ``contradicts`` decides its patterns' coverage itself; the rules
below are the built-in miners' (for those without their own). Every text match is on whole
tokens (:meth:`~.model.MemoryText.has_phrase`): ``make test`` is not found in ``cmake tests``
nor ``src/a.py`` in ``lib/src/a.py``.

Coverage against the memory snapshot (:func:`coverage`):

- ``covered``: a memory file states the fix or fact — its frontmatter ``dream_pattern`` names
  the pattern (a note a dream wrote), or its text holds the pattern's needles: a tool error's
  command and error phrase; a recovery's working command, other than inside the failing one
  (or its program and every token the fix added); every key term of a correction (as
  words); a lookup's target; a loop's command with a word about retrying;
- ``covered-failing``: as covered, but sessions failed *after* that file last changed (its
  ``updated_at``, when known): memory says it and agents still miss it — the draft
  strengthens the note (``core: true``) instead of writing a new one;
- ``contradicted``: a memory file states the failing thing (a recovery's failed command, in
  a file that does not state the fix; every stale memory pattern) — the draft edits it;
- ``new``: none of these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from memdir.dream.miners.consolidation import frontmatter_of
from memdir.dream.miners.signature import PLACEHOLDERS, literal_phrase
from memdir.dream.model import Coverage, MemoryFile, MemoryText, Pattern, Thresholds

__all__ = [
    "EXPLAINED_BY",
    "EXPLAINED_SHARE",
    "STORE_MINERS",
    "MemoryIndex",
    "coverage",
    "decide",
    "threshold_reason",
]

#: Miner -> the miners whose kept patterns may explain its patterns, most specific first.
EXPLAINED_BY: Final = {
    "tool_errors": ("stale_memory", "recovery", "feedback", "loops"),
    "recovery": ("stale_memory",),
    # harness feedback on a call that a kept recovery fixed is that recovery's cause: the
    # recovery names the literal fix ("fix the indentation worked in 7 of 8 sessions")
    "feedback": ("stale_memory", "recovery"),
}
EXPLAINED_SHARE: Final = 0.5
#: The built-in miners whose patterns describe the store, not sessions (the engine passes the
#: names of every store-level miner it runs).
STORE_MINERS: Final = frozenset({"consolidation"})
_RETRY: Final = ("loop", "retry", "retries", "repeat", "again", "hang", "stuck")

#: Miner name -> the miner object of the run (its optional logic methods are asked first).
Plugins = Mapping[str, Any]


class MemoryIndex:
    """The memory snapshot prepared for coverage checks, and the run's miners.

    ``plugins`` maps miner names to the run's miner objects: their ``covers`` and
    ``contradicts`` decide their patterns' coverage.
    """

    def __init__(self, memory: Sequence[MemoryFile], plugins: Plugins | None = None) -> None:
        self.files: list[MemoryText] = []
        for file in sorted(memory, key=lambda f: f.path):
            marker = frontmatter_of(file).get("dream_pattern")
            self.files.append(MemoryText.of(file, str(marker) if marker else None))
        self.by_path = {f.file.path: f.file for f in self.files}
        self.plugins: Plugins = dict(plugins or {})


def _literal(text: str) -> str:
    """A searchable form of a normalised input: itself, or its longest placeholder-free run."""
    if not any(p in text for p in PLACEHOLDERS):
        return text.strip()
    return literal_phrase(text)


def _added_tokens(change: str) -> list[str]:
    tokens: list[str] = []
    for part in change.split("; "):
        if part.startswith("add "):
            tokens += part[4:].split()
        elif part.startswith(("replace ", "correct path ")):
            marker = " with " if part.startswith("replace ") else " to "
            tokens += part.rsplit(marker, 1)[-1].split()
    return [t for t in tokens if t not in PLACEHOLDERS]


def _states(pattern: Pattern, entry: MemoryText) -> bool:
    """Whether one memory file states the pattern's fix or fact (see the module docstring)."""
    subject = pattern.subject
    if pattern.miner == "tool_errors":
        phrase = literal_phrase(str(subject.get("signature", ""))).lower()
        command = str(subject.get("command", "")).lower()
        return (
            len(phrase.split()) >= 2
            and entry.has_phrase(phrase)
            and (not command or entry.has_phrase(command))
        )
    if pattern.miner == "recovery":
        fixed = _literal(str(subject.get("fixed", ""))).lower()
        failed = _literal(str(subject.get("failed", ""))).lower()
        # "npm ci" inside "npm ci --frozen-lockfile" does not state the fix: count the others.
        inside = entry.count_phrase(failed) if failed and fixed in failed else 0
        if fixed and entry.count_phrase(fixed) > inside:
            return True
        added = [t.lower() for t in _added_tokens(str(subject.get("change", "")))]
        head = fixed.split()[0] if fixed.split() else ""
        return bool(added) and entry.has_phrase(head) and all(entry.has_phrase(t) for t in added)
    if pattern.miner == "corrections":
        terms = [str(t) for t in subject.get("terms", ())]
        return bool(terms) and all(t in entry.words for t in terms)
    if pattern.miner == "exploration":
        target = str(subject.get("input", "")).split(" ", 1)[-1].lower()
        return bool(target) and all(entry.has_phrase(part) for part in target.split())
    if pattern.miner == "loops":
        command = _literal(str(subject.get("input", ""))).lower()
        return bool(command) and entry.has_phrase(command) and any(w in entry.words for w in _RETRY)
    return False


def _contradicts(pattern: Pattern, entry: MemoryText) -> bool:
    if pattern.miner == "stale_memory":
        return entry.file.path == pattern.subject.get("path")
    if pattern.miner == "recovery":
        failed = _literal(str(pattern.subject.get("failed", ""))).lower()
        return len(failed) >= 4 and entry.has_phrase(failed)
    return False


def _ask(plugins: Plugins, pattern: Pattern, method: str) -> Any:
    """The pattern's miner's ``method``, or None when the miner has none."""
    miner = plugins.get(pattern.miner)
    return getattr(miner, method, None) if miner is not None else None


def coverage(
    pattern: Pattern, index: MemoryIndex, store_miners: frozenset[str] = STORE_MINERS
) -> tuple[Coverage, list[str]]:
    """How memory relates to ``pattern``, and the files that say so (sorted by path)."""
    if pattern.miner in store_miners:
        return "new", []
    states = _ask(index.plugins, pattern, "covers") or _states
    contradicts = _ask(index.plugins, pattern, "contradicts") or _contradicts
    stating = [e for e in index.files if e.marker == pattern.id or states(pattern, e)]
    if stating:
        failing = [
            e.file.path
            for e in stating
            if e.file.updated_at is not None
            and pattern.last_seen is not None
            and pattern.last_seen > e.file.updated_at
        ]
        if failing:
            return "covered-failing", failing
        return "covered", [e.file.path for e in stating]
    contradicting = [e.file.path for e in index.files if contradicts(pattern, e)]
    if contradicting:
        return "contradicted", contradicting
    return "new", []


def threshold_reason(
    pattern: Pattern, thresholds: Thresholds, store_miners: frozenset[str] = STORE_MINERS
) -> str | None:
    """Why ``pattern`` is below the thresholds, or None when it reaches them."""
    if pattern.miner in store_miners:
        return None
    if pattern.sessions < thresholds.min_sessions:
        return f"below threshold: {pattern.sessions} sessions < {thresholds.min_sessions}"
    if 0 < pattern.tasks < thresholds.min_tasks:
        return (
            f"below threshold: {pattern.tasks} distinct tasks < {thresholds.min_tasks} "
            f"(its {pattern.sessions} sessions are trials of {pattern.tasks} tasks)"
        )
    needed = thresholds.prevalence_for(pattern.miner)
    prevalence = pattern.prevalence
    scoped = pattern.project_prevalence
    if scoped is not None and scoped > prevalence:
        if scoped < needed:
            return (
                f"below threshold: prevalence {scoped:.1%} of project {pattern.project}'s "
                f"sessions < {needed:.1%}"
            )
        return None
    if prevalence < needed:
        return f"below threshold: prevalence {prevalence:.1%} < {needed:.1%}"
    return None


def decide(
    patterns: Sequence[Pattern],
    thresholds: Thresholds,
    memory: Sequence[MemoryFile],
    store_miners: frozenset[str] = STORE_MINERS,
    plugins: Plugins | None = None,
) -> tuple[list[Pattern], list[tuple[Pattern, str]]]:
    """Split ``patterns`` into kept ones (with coverage set) and left-out ones with reasons.

    ``store_miners`` names the miners whose patterns describe the store (no session
    thresholds, no coverage); ``plugins`` the run's miners by name, whose ``judge``,
    ``covers`` and ``contradicts`` are asked first. Order is kept: both lists follow
    ``patterns``.
    """
    plugins = plugins or {}
    reasons: dict[str, str] = {}
    silent: set[str] = set()
    for pattern in patterns:
        reason = threshold_reason(pattern, thresholds, store_miners)
        if reason is None:
            judge = _ask(plugins, pattern, "judge")
            reason = judge(pattern) if judge is not None else None
            if reason == "":
                silent.add(pattern.id)  # the miner says it is no finding at all
        if reason is not None:
            reasons[pattern.id] = reason
    passing = {p.id: p for p in patterns if p.id not in reasons}
    for pattern in patterns:
        if pattern.id in reasons or pattern.miner not in EXPLAINED_BY:
            continue
        order = EXPLAINED_BY[pattern.miner]
        candidates = [
            (order.index(passing[t].miner), -count, t)
            for t, count in pattern.links.items()
            if t in passing
            and passing[t].miner in order
            and count >= EXPLAINED_SHARE * pattern.sessions
        ]
        if candidates:
            _, count, target = min(candidates)
            reasons[pattern.id] = f"explained by {target}: {-count} of {pattern.sessions} sessions"
    index = MemoryIndex(memory, plugins)
    kept: list[Pattern] = []
    left_out: list[tuple[Pattern, str]] = []
    for pattern in patterns:
        if pattern.id in silent:
            continue
        if pattern.id in reasons:
            left_out.append((pattern, reasons[pattern.id]))
            continue
        pattern.coverage, pattern.memory_paths = coverage(pattern, index, store_miners)
        if pattern.coverage == "covered":
            left_out.append((pattern, f"already covered by {', '.join(pattern.memory_paths)}"))
        else:
            kept.append(pattern)
    return kept, left_out
