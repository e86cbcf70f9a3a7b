"""Cleaning every record before it becomes events: secrets redacted, text made storable.

:class:`Redactor` walks a parsed JSON record and, for every string in it (values, not keys):

- replaces each secret the guard's secret detectors find (:class:`memdir.guard.SecretsDetector`
  through :func:`memdir.guard.screen`, findings of category ``secret``) by a marker naming the
  kind — ``[REDACTED:secret.aws-access-key]`` — and counts it per rule;
- replaces lone surrogates (from ``\\udXXX`` escapes) and NUL characters by U+FFFD, which
  neither SQLite's UTF-8 nor PostgreSQL's text can hold.

Keys are only made storable. Redaction runs on the source record, before an importer reads it,
so every field derived from it (message text, tool input and output, the raw record) is clean.

Cost: the guard runs once per record, over its distinct strings joined by newlines (each
string keeps its own lines, which is what the line-based detectors look at; a finding that
would cross from one string into the next redacts its part of each). Results for strings of
256+ characters are cached across the import (bounded), so system prompts and repeated tool
outputs are screened once. Only strings with findings or unstorable characters get a result
of their own; keys are tested for storability together (one joined string), as are the
screened strings. The guard's secret detectors are the largest single cost of an import:
see benchmarks/transcripts.py.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable, Sequence
from typing import Any, Final

__all__ = ["MARKER", "Redactor", "marker"]

MARKER: Final = "[REDACTED:{rule}]"
_UNSTORABLE: Final = re.compile("[\x00\ud800-\udfff]")
#: Screening results are cached for strings this long or longer (prompts, tool outputs: what
#: repeats across sessions); the cache is emptied when it holds this many characters.
_CACHE_MIN: Final = 256
_CACHE_CHARS: Final = 16_000_000

Screen = Callable[[str], Sequence[Any]]
#: What screening one string gives: the cleaned text (None if unchanged) and the rules found.
_Result = tuple[str | None, tuple[str, ...]]
#: The result of a string with no finding and nothing to make storable.
_CLEAN: Final[_Result] = (None, ())


def marker(rule: str) -> str:
    return MARKER.format(rule=rule)


def _default_screen() -> Screen:
    from memdir.guard import SecretsDetector, screen

    # The strings of a record are joined by line breaks: a key "wrapped" over two of them
    # would be two strings' ends, so wrapped keys are not looked for.
    detectors = [SecretsDetector(split_lines=False)]

    def run(text: str) -> Sequence[Any]:
        return [f for f in screen(text, path="/transcript", detectors=detectors)
                if f.category == "secret"]  # fmt: skip

    return run


class Redactor:
    """Redacts and sanitises records; ``counts`` holds redactions per guard rule, ``total``
    their sum.

    ``screen`` returns secret findings (objects with ``rule``, ``start``, ``end``) for a text;
    the default runs the guard's secret detectors. :meth:`disabled` only makes text storable:
    it is for measuring the rest of the pipeline (benchmarks), never for real imports.
    """

    def __init__(self, screen: Screen | None = None) -> None:
        self._screen = screen if screen is not None else _default_screen()
        self._enabled = True
        self._cache: dict[str, _Result] = {}
        self._cached_chars = 0
        self.counts: dict[str, int] = {}
        self.total = 0

    @classmethod
    def disabled(cls) -> Redactor:
        """A redactor that only makes text storable (no secret screening)."""
        redactor = cls(screen=lambda _text: ())
        redactor._enabled = False
        return redactor

    def clean(self, record: Any) -> Any:
        """``record`` with secrets redacted and text storable (the same object if unchanged)."""
        strings: list[str] = []
        keys: list[str] = []
        _collect(record, strings, keys)
        if not _storable("".join(keys)):  # one test for every key: they almost always pass
            strings.extend(key for key in keys if not _storable(key))
        if not strings:
            return record
        replacements = self._replacements(strings)
        if not replacements:
            return record
        return _rebuild(record, replacements)

    def clean_text(self, text: str) -> str:
        """One string, cleaned the same way."""
        return self._replacements([text]).get(text, text)

    def _replacements(self, strings: list[str]) -> dict[str, str]:
        """Original -> cleaned, for the strings that change (screening the uncached ones)."""
        cache = self._cache
        changed: dict[str, _Result] = {}  # only strings with findings or unstorable text
        pending = []
        for text in dict.fromkeys(strings):
            if len(text) >= _CACHE_MIN:
                hit = cache.get(text)
                if hit is not None:
                    if hit is not _CLEAN:
                        changed[text] = hit
                    continue
            pending.append(text)
        if pending:
            if self._cached_chars > _CACHE_CHARS:
                cache.clear()
                self._cached_chars = 0
            results = self._screen_many(pending)
            changed.update(results)
            if self._enabled:
                for text in pending:
                    if len(text) >= _CACHE_MIN:
                        cache[text] = results.get(text, _CLEAN)
                        self._cached_chars += len(text)
        if not changed:
            return {}
        out: dict[str, str] = {}
        for text in strings:  # redactions count per occurrence
            hit = changed.get(text)
            if hit is None:
                continue
            cleaned, rules = hit
            if rules:
                self.total += len(rules)
                for rule in rules:
                    self.counts[rule] = self.counts.get(rule, 0) + 1
            if cleaned is not None:
                out[text] = cleaned
        return out

    def _screen_many(self, texts: list[str]) -> dict[str, _Result]:
        """(cleaned text or None if unchanged, rules found) of each text that has findings or
        unstorable characters; the others are clean.

        The texts are screened as one, joined by newlines: a screen call has a fixed cost
        (views of the text, gates), and a session's strings are many and short.
        """
        joined = "\n".join(texts)
        findings = self._screen(joined) if self._enabled else ()
        results: dict[str, _Result] = {}
        if findings:
            spans: list[list[tuple[int, int, str]]] = [[] for _ in texts]
            starts, offset = [], 0
            for text in texts:
                starts.append(offset)
                offset += len(text) + 1
            for finding in findings:
                _assign(finding.start, finding.end, finding.rule, texts, starts, spans)
            for text, found in zip(texts, spans, strict=True):
                if found:
                    cleaned = _apply(text, found)
                    if not _storable(cleaned):
                        cleaned = _UNSTORABLE.sub("\ufffd", cleaned)
                    results[text] = (cleaned, tuple(rule for _s, _e, rule in found))
        if not _storable(joined):
            for text in texts:
                if text not in results and not _storable(text):
                    results[text] = (_UNSTORABLE.sub("\ufffd", text), ())
        return results


def _assign(
    start: int,
    end: int,
    rule: str,
    texts: list[str],
    starts: list[int],
    spans: list[list[tuple[int, int, str]]],
) -> None:
    """Map a span of the joined text to the strings it covers (usually one)."""
    index = bisect.bisect_right(starts, start) - 1
    while index < len(texts) and start < end:
        base = starts[index]
        text_end = base + len(texts[index])
        lo, hi = max(start, base) - base, min(end, text_end) - base
        if hi > lo:
            spans[index].append((lo, hi, rule))
        start = text_end + 1
        index += 1


def _apply(text: str, spans: list[tuple[int, int, str]]) -> str:
    pieces: list[str] = []
    pos = 0
    for start, end, rule in sorted(spans):
        if start < pos:
            continue  # overlapping findings: the first one already covers it
        pieces.append(text[pos:start])
        pieces.append(marker(rule))
        pos = end
    pieces.append(text[pos:])
    return "".join(pieces)


def _storable(text: str) -> bool:
    if text.isascii():
        return "\x00" not in text
    return _UNSTORABLE.search(text) is None


def _collect(value: Any, out: list[str], keys: list[str]) -> None:
    """Append the strings in ``value`` to ``out`` and the keys of its objects to ``keys``."""
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        keys.extend(value)
        for item in value.values():
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (dict, list)):
                _collect(item, out, keys)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str):
                out.append(item)
            elif isinstance(item, (dict, list)):
                _collect(item, out, keys)


def _rebuild(value: Any, replacements: dict[str, str]) -> Any:
    if isinstance(value, str):
        return replacements.get(value, value)
    if isinstance(value, dict):
        return {
            (k if _storable(k) else replacements.get(k, k)): _rebuild(v, replacements)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_rebuild(v, replacements) for v in value]
    return value
