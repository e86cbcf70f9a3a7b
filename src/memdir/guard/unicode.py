"""Unicode smuggling: characters that make what a model reads differ from what a person sees.

Why: a reviewer approves the text they see; a model reads code points. Invisible or reordering
characters let an attacker hide instructions in plain sight, or make two different strings look
identical (a path, a command, a domain).

Rules (category ``"injection"``, one finding per run of consecutive characters):

- ``unicode.bidi-control`` — U+202A–U+202E and U+2066–U+2069 (embeddings, overrides and
  isolates): they reorder how text is displayed ("Trojan Source"), so the shown order is not the
  read order. Always a finding: memory is markdown, not right-to-left typesetting.
- ``unicode.zero-width`` — U+200B, U+200C, U+200D, U+2060 and U+FEFF anywhere but the very
  start: invisible, used to split keywords past filters or to carry bits. Legitimate uses are
  not findings: a zero-width joiner inside an emoji sequence (👩‍💻) and a joiner / non-joiner
  between letters of scripts that need them (Arabic, Persian, Indic).
- ``unicode.tag-characters`` — U+E0000–U+E007F: an invisible copy of ASCII that models decode;
  the reason shows the decoded text. Emoji subdivision flags (🏴 + tags + U+E007F) are not
  findings.
- ``unicode.mixed-script`` — a word mixing Latin letters with Cyrillic or Greek look-alikes
  (``pаypal`` with a Cyrillic ``а``): a homoglyph that defeats reading and exact matching.

ASCII-only content (almost every note) returns at once.
"""

from __future__ import annotations

import unicodedata
from typing import Final

from memdir.guard.base import Document, Finding
from memdir.guard.lazy import LazyRegex

__all__ = ["UnicodeDetector"]

_BIDI: Final = LazyRegex("[\u202a-\u202e\u2066-\u2069]+")
_ZERO_WIDTH: Final = LazyRegex("[\u200b-\u200d\u2060\ufeff]+")
_TAGS: Final = LazyRegex("[\U000e0000-\U000e007f]+")
_WORD: Final = LazyRegex(r"[^\W\d_]{2,}")

_BLACK_FLAG: Final = "\U0001f3f4"
_CANCEL_TAG: Final = "\U000e007f"
_ZWJ: Final = "\u200d"
_ZWNJ: Final = "\u200c"

#: Cyrillic and Greek letters that render like Latin ones (the homoglyphs that matter).
_LOOKALIKES: Final = frozenset(
    "аАвВеЕёЁһҺіІїЇјЈкКмМнНоОрРсСтТуУхХѕЅԁԛԜԝүҮӏ"  # Cyrillic
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧϹϳοαρνυκιχτ"  # Greek
)


def _script(ch: str) -> str:
    code = ord(ch)
    if ch.isascii() or 0x00C0 <= code <= 0x024F or 0x1E00 <= code <= 0x1EFF:
        return "Latin"
    if 0x0400 <= code <= 0x052F:
        return "Cyrillic"
    if 0x0370 <= code <= 0x03FF or 0x1F00 <= code <= 0x1FFF:
        return "Greek"
    return "other"


def _is_emoji_side(ch: str) -> bool:
    code = ord(ch)
    return (
        0x1F000 <= code <= 0x1FAFF
        or 0x2600 <= code <= 0x27BF
        or code in (0xFE0F, 0x20E3)
        or unicodedata.category(ch) == "So"
    )


def _is_joining_script_letter(ch: str) -> bool:
    """Letters of scripts where ZWJ/ZWNJ change shaping (Arabic, Syriac, Indic, ...)."""
    return ord(ch) >= 0x0590 and unicodedata.category(ch) in ("Lo", "Mn", "Mc", "Lm")


class UnicodeDetector:
    """Bidi controls, zero-width characters, tag characters and mixed-script homoglyphs."""

    name = "unicode"

    def scan(self, doc: Document) -> list[Finding]:
        text = doc.content
        if text.isascii():
            return []
        findings: list[Finding] = []
        for match in _BIDI.finditer(text):
            findings.append(
                doc.finding(
                    "unicode.bidi-control",
                    "injection",
                    match.start(),
                    match.end(),
                    f"{len(match.group())} bidirectional control character(s) reorder how the"
                    " text is displayed, so what a reviewer sees is not what a model reads",
                    excerpt=doc.excerpt(*doc.context(match.start(), match.end())),
                )
            )
        for match in _ZERO_WIDTH.finditer(text):
            if not self._suspicious_zero_width(text, match.start(), match.end()):
                continue
            findings.append(
                doc.finding(
                    "unicode.zero-width",
                    "injection",
                    match.start(),
                    match.end(),
                    f"{len(match.group())} invisible zero-width character(s) can hide or split"
                    " words so that filters and reviewers miss them",
                    excerpt=doc.excerpt(*doc.context(match.start(), match.end())),
                )
            )
        for match in _TAGS.finditer(text):
            run = match.group()
            after_flag = match.start() > 0 and text[match.start() - 1] == _BLACK_FLAG
            if after_flag and run.endswith(_CANCEL_TAG) and len(run) <= 8:
                continue
            hidden = "".join(chr(ord(c) - 0xE0000) for c in run if 0x20 <= ord(c) - 0xE0000 < 0x7F)
            shown = hidden if len(hidden) <= 60 else hidden[:59] + "…"
            findings.append(
                doc.finding(
                    "unicode.tag-characters",
                    "injection",
                    match.start(),
                    match.end(),
                    f"{len(run)} invisible Unicode tag character(s) carry hidden text a model"
                    f" can read: {shown!r}",
                )
            )
        findings.extend(self._mixed_script(doc))
        return findings

    @staticmethod
    def _suspicious_zero_width(text: str, start: int, end: int) -> bool:
        run = text[start:end]
        if start == 0 and run == "\ufeff":
            return False
        if len(run) == 1 and run in (_ZWJ, _ZWNJ):
            before = text[start - 1] if start > 0 else ""
            after = text[end] if end < len(text) else ""
            if run == _ZWJ and before and _is_emoji_side(before):
                return False
            if any(ch and _is_joining_script_letter(ch) for ch in (before, after)):
                return False
        return True

    @staticmethod
    def _mixed_script(doc: Document) -> list[Finding]:
        findings = []
        for match in _WORD.finditer(doc.content):
            word = match.group()
            if word.isascii():
                continue
            scripts = {_script(ch) for ch in word}
            if "Latin" not in scripts or not scripts & {"Cyrillic", "Greek"}:
                continue
            if not any(ch in _LOOKALIKES for ch in word):
                continue
            foreign = sorted({s for s in scripts if s in ("Cyrillic", "Greek")})
            findings.append(
                doc.finding(
                    "unicode.mixed-script",
                    "injection",
                    match.start(),
                    match.end(),
                    f"the word mixes Latin with {' and '.join(foreign)} look-alike letters"
                    f" ({word.encode('ascii', 'backslashreplace').decode()}): a homoglyph that"
                    " reads like one word and matches as another",
                )
            )
        return findings
