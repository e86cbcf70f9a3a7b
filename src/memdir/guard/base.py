"""The guard's data types and the plug-in seam every detector goes through.

A *detector* is any object with a ``name`` and a ``scan(doc)`` method returning findings
(:class:`Detector`). :func:`memdir.guard.screen` builds one :class:`Document` per call, runs the
detectors in order and returns their findings sorted by position. The built-in detectors use
exactly this seam; third parties add theirs to a copy of ``DEFAULT_DETECTORS``.

Invariants every detector keeps (and :func:`memdir.guard.screen` re-checks):

- spans are character offsets into the content (Python ``str`` indices, not bytes);
- ``line`` is 1-based and is the line holding ``start``;
- no raw secret value ever appears in ``excerpt`` or ``reason``: excerpts are built with
  :meth:`Document.excerpt`, which masks every secret span reported so far, and secrets are
  shown only through :func:`mask_secret`.
"""

from __future__ import annotations

import bisect
import itertools
import unicodedata
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, runtime_checkable

__all__ = [
    "CATEGORIES",
    "Category",
    "Detector",
    "Document",
    "Finding",
    "mask_secret",
]

Category = Literal["secret", "injection", "provenance"]
CATEGORIES: Final = ("secret", "injection", "provenance")

#: Longest excerpt kept in a finding, in characters (before escaping invisible characters).
EXCERPT_LIMIT: Final = 120


@dataclass(frozen=True)
class Finding:
    """One thing the guard found in a write.

    ``rule`` is a stable id (``"secret.aws-access-key"``, ``"injection.override-instructions"``,
    ``"unicode.bidi-control"``, ...) that configuration and tests may rely on; ``category`` is
    one of ``"secret"``, ``"injection"`` or ``"provenance"`` and is what the service maps to an
    action. ``start``/``end`` is the character span in the content: for a secret, the secret
    value itself (what a redaction removes); for a whole-write finding (provenance), ``0, 0``.
    ``line`` is the 1-based line of ``start``. ``reason`` is one line a person or a model
    understands. ``excerpt`` is the matched text with secrets masked and invisible characters
    written as ``<U+202E>``, at most about :data:`EXCERPT_LIMIT` characters.
    """

    rule: str
    category: str
    start: int
    end: int
    line: int
    reason: str
    excerpt: str


@runtime_checkable
class Detector(Protocol):
    """A guard plug-in: pure, no I/O, deterministic; ``name`` is a short stable id."""

    @property
    def name(self) -> str: ...

    def scan(self, doc: Document) -> list[Finding]:
        """Return the findings in ``doc`` (any order; ``screen`` sorts them)."""
        ...


def mask_secret(value: str) -> str:
    """A display form of a secret that never reveals it.

    Values of 20 characters or more keep their first four characters (usually a public type
    prefix such as ``AKIA`` or ``ghp_``, which tells a reviewer what leaked); shorter values
    keep nothing. The length is given so two different secrets can be told apart.
    """
    shown = value[:4] if len(value) >= 20 else ""
    return f"{shown}{'*' * 8}[{len(value)} chars]"


_VISIBLE_FORMAT: Final = frozenset("\t")
#: Shortest run :attr:`Document.token_runs` reports.
MIN_TOKEN_RUN: Final = 16
#: Every byte to ``a`` if it is a token character (``[A-Za-z0-9+/=_-]``), else to a space.
_TOKEN_BYTES: Final = bytes(
    ord("a") if chr(i).isascii() and (chr(i).isalnum() or chr(i) in "+/=_-") else ord(" ")
    for i in range(256)
)
_RUN_NEEDLE: Final = b"a" * MIN_TOKEN_RUN
#: Characters a case-insensitive regex matches to an ASCII letter that ``str.lower`` does not
#: lower to it (``re._casefix``; U+212A KELVIN SIGN lowers to ``k`` already).
_FOLDS: Final = {0x130: "i", 0x131: "i", 0x17F: "s"}
#: The part that many secret gates share (``passw``, ``passp``, ``db_pass``, ``dbpass``, ...):
#: :meth:`Document.has` finds its occurrences once and checks those gates only there.
_CORE: Final = "pass"
_SPLIT_ASCII: Final = {i: " " for i in range(128) if not chr(i).isalnum()} | {
    ord(c): " " for c in "\u00a0\u2013\u2014\u2018\u2019\u201c\u201d\u2026"
}


def _occurrences(text: str, literal: str) -> list[int]:
    """Every offset at which ``literal`` starts in ``text`` (overlapping ones included)."""
    found = []
    pos = text.find(literal)
    while pos != -1:
        found.append(pos)
        pos = text.find(literal, pos + 1)
    return found


def _token_runs(text: str) -> list[tuple[int, int]]:
    """Spans of the maximal runs of 16+ token characters: what ``re.finditer`` of
    ``[A-Za-z0-9+/=_-]{16,}`` gives.

    The text is mapped to bytes, one per character (``?`` for non-ASCII, never a token
    character), then to ``a`` (token) or space, so offsets are the string's; a run starts at
    each leftmost ``a`` * 16 and ends at the next space. ``bytes.find`` skips through text
    without long runs far faster than the regex, which tries every position.
    """
    mapped = text.encode("ascii", "replace").translate(_TOKEN_BYTES)
    find = mapped.find
    runs: list[tuple[int, int]] = []
    start = find(_RUN_NEEDLE)
    while start != -1:
        end = find(b" ", start + MIN_TOKEN_RUN)
        if end == -1:
            end = len(mapped)
        runs.append((start, end))
        start = find(_RUN_NEEDLE, end)
    return runs


def _escape_invisible(text: str) -> str:
    """Write control, format and line-separator characters as ``<U+XXXX>``; newlines as ``⏎``."""
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append("⏎")
        elif ch in _VISIBLE_FORMAT or ch.isprintable():
            out.append(ch)
        elif unicodedata.category(ch) in ("Cf", "Cc", "Zl", "Zp", "Co", "Cn", "Cs"):
            out.append(f"<U+{ord(ch):04X}>")
        else:
            out.append(ch)
    return "".join(out)


@dataclass
class Document:
    """One write being screened, with the derived views detectors share.

    Built once per :func:`memdir.guard.screen` call. ``lowered`` is for cheap keyword
    prefilters only (``str.lower`` may change lengths, so never take spans from it).
    """

    content: str
    path: str
    source_kind: str | None = None
    _line_starts: list[int] | None = field(default=None, repr=False)
    _lowered: str | None = field(default=None, repr=False)
    _folded: str | None = field(default=None, repr=False)
    _words: frozenset[str] | None = field(default=None, repr=False)
    _token_runs: list[tuple[int, int]] | None = field(default=None, repr=False)
    _run_texts: list[str] | None = field(default=None, repr=False)
    _found: dict[str, bool] = field(default_factory=dict, repr=False)
    _core_at: list[int] | None = field(default=None, repr=False)
    _secret_spans: list[tuple[int, int]] = field(default_factory=list, repr=False)

    @property
    def lowered(self) -> str:
        if self._lowered is None:
            self._lowered = self.content.lower()
        return self._lowered

    @property
    def folded(self) -> str:
        """``content`` lowercased as case-insensitive regexes compare it, one character per
        character (offsets are ``content``'s).

        :attr:`lowered`, except that ``İ``, ``ı`` and ``ſ`` become ``i``, ``i`` and ``s``: a
        regex with ``re.IGNORECASE`` matches them to those letters, which ``str.lower`` keeps
        apart (and ``İ`` is the one character it lowers to two). A literal that every
        case-insensitive match contains therefore occurs here: gates look here.
        """
        if self._folded is None:
            text = self.content
            if text.isascii() or not any(chr(code) in text for code in _FOLDS):
                self._folded = self.lowered
            else:
                self._folded = text.translate(_FOLDS).lower()
        return self._folded

    @property
    def words(self) -> frozenset[str]:
        """Lowercase words: split on ASCII non-alphanumerics and typographic punctuation."""
        if self._words is None:
            self._words = frozenset(self.lowered.translate(_SPLIT_ASCII).split())
        return self._words

    @property
    def token_runs(self) -> list[tuple[int, int]]:
        """Spans of runs of 16+ base64/base64url characters (``[A-Za-z0-9+/=_-]``).

        Every credential format and every encoded blob lies inside one; detectors share the
        one scan.
        """
        if self._token_runs is None:
            self._token_runs = _token_runs(self.content)
        return self._token_runs

    def line_runs(self) -> dict[int, int]:
        """0-based line index -> length of the longest token run on it (lines holding one)."""
        runs: dict[int, int] = {}
        starts = self.line_starts
        for run_start, run_end in self.token_runs:
            index = bisect.bisect_right(starts, run_start) - 1
            if run_end - run_start > runs.get(index, 0):
                runs[index] = run_end - run_start
        return runs

    def long_runs(self, length: int) -> list[str]:
        """The token runs of at least ``length`` characters, lowercased (ASCII: same offsets)."""
        if self._run_texts is None:
            content = self.content
            self._run_texts = [content[s:e].lower() for s, e in self.token_runs]
        return [run for run in self._run_texts if len(run) >= length]

    def has(self, literal: str) -> bool:
        """Whether ``literal`` occurs in :attr:`folded` (memoised: detectors share gates).

        A literal holding a :data:`_CORE` (``password``, ``db_pass``, ...) is looked for only
        where the core occurs: one scan of the text serves them all.
        """
        found = self._found.get(literal)
        if found is None:
            folded = self.folded
            offset = literal.find(_CORE) if len(literal) > len(_CORE) else -1
            if offset < 0:
                found = literal in folded
            else:
                if self._core_at is None:
                    self._core_at = _occurrences(folded, _CORE)
                found = any(
                    pos >= offset and folded.startswith(literal, pos - offset)
                    for pos in self._core_at
                )
            self._found[literal] = found
        return found

    @property
    def line_starts(self) -> list[int]:
        """Offsets at which each line starts (``line_starts[0] == 0``)."""
        if self._line_starts is None:
            lengths = [len(line) + 1 for line in self.content.split("\n")]
            lengths[-1] = 0  # the last line ends the text: no start after it
            self._line_starts = list(itertools.accumulate(lengths, initial=0))[:-1]
        return self._line_starts

    def context(self, start: int, end: int, chars: int = 20) -> tuple[int, int]:
        """``start, end`` widened by up to ``chars`` on each side, without leaving the line."""
        starts = self.line_starts
        line = self.line_of(start)
        line_start = starts[line - 1]
        next_start = starts[line] if line < len(starts) else len(self.content) + 1
        return max(line_start, start - chars), min(next_start - 1, end + chars)

    def line_of(self, offset: int) -> int:
        """1-based line number holding character ``offset``."""
        return bisect.bisect_right(self.line_starts, offset)

    @property
    def secret_spans(self) -> tuple[tuple[int, int], ...]:
        return tuple(self._secret_spans)

    def add_secret_span(self, start: int, end: int) -> None:
        """Record a secret so that later excerpts mask it."""
        if end > start and (start, end) not in self._secret_spans:
            self._secret_spans.append((start, end))

    def excerpt(self, start: int, end: int, limit: int = EXCERPT_LIMIT) -> str:
        """``content[start:end]`` with known secrets masked, invisibles escaped, truncated."""
        start = max(0, start)
        end = min(len(self.content), end)
        pieces: list[str] = []
        pos = start
        for s_start, s_end in sorted(self._secret_spans):
            if s_end <= pos or s_start >= end:
                continue
            if s_start > pos:
                pieces.append(self.content[pos:s_start])
            pieces.append(mask_secret(self.content[s_start:s_end]))
            pos = max(pos, s_end)
        if pos < end:
            pieces.append(self.content[pos:end])
        text = "".join(pieces)
        if len(text) > limit:
            text = text[: limit - 1] + "…"
        return _escape_invisible(text)

    def finding(
        self,
        rule: str,
        category: Category,
        start: int,
        end: int,
        reason: str,
        *,
        excerpt: str | None = None,
    ) -> Finding:
        """Build a :class:`Finding`, computing the line and (unless given) the excerpt."""
        return Finding(
            rule=rule,
            category=category,
            start=start,
            end=end,
            line=self.line_of(start),
            reason=reason,
            excerpt=self.excerpt(start, end) if excerpt is None else excerpt,
        )
