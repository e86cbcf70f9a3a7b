"""Prompt injection aimed at the agent that will later read this memory.

Why: memory is loaded into agents' contexts as trusted knowledge. Text that addresses the
reading model — telling it to drop its instructions, take on an unrestricted persona, spoof a
system turn, run a command or hide something from its user — turns one write into a standing
attack on every agent that reads the path.

How: weighted *signals* (:mod:`memdir.guard.signals`), not one giant regex. Each signal is a
small generalising pattern with a weight; a write is flagged when the weights of the distinct
signals it contains (by name: several entries may share one) sum to at least :data:`THRESHOLD`
(1.0). Strong signals ("ignore all previous instructions", ``<|im_start|>``, "note to the AI")
reach it alone; weak ones ("pretend to be", "without restrictions", "really important") only in
company, which is what keeps
ordinary conversation and project notes clean. When a write is flagged, every contributing
signal becomes one finding at its first occurrence, so a reviewer sees all the evidence.

Cost: each signal carries word gates — groups of words of which each group must have one in
the document's word set — checked with one set operation before its regex runs, so a clean 2 KB
note costs one tokenisation plus a handful of regex scans.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Final

from memdir.guard.base import Document, Finding

__all__ = ["THRESHOLD", "InjectionDetector", "Signal", "injection_score", "signal"]

THRESHOLD: Final = 1.0


@dataclass(frozen=True)
class Signal:
    """One weighted piece of evidence.

    ``gates``: groups; each group holds whole ``words`` (lowercase, as split on anything but
    ASCII letters and digits) and ``substrings`` (looked up in the lowered text), and each
    group must have one present before ``pattern`` runs. Gates are necessary conditions of the
    pattern (up to rare spellings), so they only save time. The regex (``source``, ``flags``)
    is compiled on first use: most signals never run in a process that screens clean notes.
    """

    rule: str
    name: str
    weight: float
    source: str
    flags: int
    gates: tuple[tuple[frozenset[str], tuple[str, ...]], ...]
    reason: str

    @functools.cached_property
    def pattern(self) -> re.Pattern[str]:
        return re.compile(self.source, self.flags)

    @functools.cached_property
    def ascii_gates(self) -> tuple[tuple[frozenset[str], tuple[str, ...]], ...]:
        """``gates`` without the non-ASCII substrings, which an ASCII text cannot hold."""
        return tuple((w, tuple(s for s in subs if s.isascii())) for w, subs in self.gates)

    def gated_in(self, doc: Document) -> bool:
        """Whether every gate group has one of its words or substrings in ``doc``."""
        lowered = doc.lowered
        return self.gated(doc.words, lowered, lowered.isascii())

    def gated(self, words: frozenset[str], lowered: str, ascii_text: bool) -> bool:
        """:meth:`gated_in` on a document's words and lowered text (the hot loop's form);
        ``ascii_text`` (``str.isascii``, O(1)) skips every Chinese, Cyrillic, ... substring."""
        for group_words, substrings in self.ascii_gates if ascii_text else self.gates:
            if group_words.isdisjoint(words):
                if not substrings:
                    return False
                for substring in substrings:
                    if substring in lowered:
                        break
                else:
                    return False
        return True


def signal(rule: str, name: str, weight: float, regex: str, gates: str, reason: str) -> Signal:
    """Build a :class:`Signal`.

    ``regex`` is case-insensitive and multi-line unless it starts with ``(?-i)``. ``gates`` is
    groups separated by ``&``; inside a group, space-separated words, where ``~text`` means a
    substring of the lowered text instead of a whole word.
    """
    flags = re.MULTILINE
    if regex.startswith("(?-i)"):
        regex = regex.removeprefix("(?-i)")
    else:
        flags |= re.IGNORECASE
    groups = []
    for group in gates.split("&"):
        tokens = group.split()
        groups.append(
            (
                frozenset(t for t in tokens if not t.startswith("~")),
                tuple(t[1:] for t in tokens if t.startswith("~")),
            )
        )
    return Signal(f"injection.{rule}", name, weight, regex, flags, tuple(groups), reason)


#: Characters a match may extend on either side of an anchor occurrence (see ``_search``).
REACH: Final = 250


def _search(sig: Signal, doc: Document) -> re.Match[str] | None:
    """Search ``sig.pattern`` only near occurrences of its first gate group's literals.

    Every match contains one of them (gates are necessary conditions) and no signal's match is
    longer than :data:`REACH` characters, so merged windows of ``REACH`` on each side of each
    occurrence find the same first match as a whole-text search, at a fraction of the cost
    on long clean text.
    """
    content, lowered = doc.content, doc.lowered
    if len(lowered) != len(content) or len(content) <= 4 * REACH:
        return sig.pattern.search(content)
    words, substrings = sig.gates[0]
    windows: list[tuple[int, int]] = []
    for literal in (*words, *substrings):
        pos = lowered.find(literal)
        while pos != -1:
            windows.append((max(0, pos - REACH), pos + len(literal) + REACH))
            pos = lowered.find(literal, pos + 1)
    windows.sort()
    merged: list[list[int]] = []
    for start, end in windows:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in merged:
        match = sig.pattern.search(content, start, min(end, len(content)))
        if match is not None:
            return match
    return None


def _matched(doc: Document, signals: tuple[Signal, ...]) -> list[tuple[Signal, re.Match[str]]]:
    """The first match of each signal name (entries sharing a name are one signal)."""
    hits: dict[str, tuple[Signal, re.Match[str]]] = {}
    words, lowered = doc.words, doc.lowered
    ascii_text = lowered.isascii()
    for sig in signals:
        if sig.name in hits or not sig.gated(words, lowered, ascii_text):
            continue
        match = _search(sig, doc)
        if match is not None and match.end() > match.start():
            hits[sig.name] = (sig, match)
    return list(hits.values())


def injection_score(content: str, signals: tuple[Signal, ...] | None = None) -> float:
    """The summed weight of the distinct signals in ``content`` (for tuning and benchmarks)."""
    from memdir.guard.signals import SIGNALS

    doc = Document(content=content, path="/")
    return sum(sig.weight for sig, _ in _matched(doc, SIGNALS if signals is None else signals))


class InjectionDetector:
    """Weighted prompt-injection signals; flags a write whose score reaches the threshold."""

    name = "injection"

    def __init__(
        self, signals: tuple[Signal, ...] | None = None, threshold: float = THRESHOLD
    ) -> None:
        from memdir.guard.signals import SIGNALS

        self.signals = SIGNALS if signals is None else signals
        self.threshold = threshold

    def scan(self, doc: Document) -> list[Finding]:
        hits = _matched(doc, self.signals)
        score = sum(sig.weight for sig, _ in hits)
        if score < self.threshold:
            return []
        names = ", ".join(sig.name for sig, _ in hits)
        return [
            doc.finding(
                sig.rule,
                "injection",
                match.start(),
                match.end(),
                f"text {sig.reason} — a prompt-injection pattern aimed at agents that read this"
                f" memory (score {score:.1f} >= {self.threshold:.1f} from: {names})",
            )
            for sig, match in hits
        ]
