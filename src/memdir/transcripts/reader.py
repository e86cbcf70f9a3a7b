"""Reading transcript files as streams of JSON records, with every bad record reported.

A :class:`Source` is something to read (a file, or bytes pushed by a client) with a display
name. Its *shape* is decided from its first bytes:

- ``jsonl``: one JSON value per line (``.jsonl`` / ``.ndjson``, or any file whose first line
  is a complete JSON object). Read line by line: memory holds one line at a time.
- ``json-array``: one JSON array. Read element by element with an incremental decoder, so
  a large array is never held whole (an element is parsed once its last byte has arrived).
- ``json-object``: one JSON object (read whole: objects are the small formats).

Records that cannot be read are reported through :class:`ParseContext` with the file, line and
reason, and skipped; the rest of the file goes on. A JSONL line that is not valid UTF-8 is
skipped; in a JSON document invalid bytes are replaced by U+FFFD and reported once.
"""

from __future__ import annotations

import codecs
import io
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from memdir.transcripts.model import Problem

__all__ = [
    "SAMPLE_BYTES",
    "TRANSCRIPT_SUFFIXES",
    "ParseContext",
    "Record",
    "Sample",
    "Source",
    "iter_records",
    "sources_from_paths",
]

#: How much of a file detection looks at.
SAMPLE_BYTES: Final = 1 << 20
#: File name endings a directory walk picks up; other files are reported as skipped.
TRANSCRIPT_SUFFIXES: Final = (".jsonl", ".ndjson", ".json", ".traj")
#: Markdown files a directory walk picks up only when their head carries a text transcript
#: format's marker (Aider's session header or its published-transcript block); README-like
#: files beside transcripts are passed over as before.
TEXT_SUFFIXES: Final = (".md",)
_TEXT_MARKERS: Final = (b"\n# aider chat started at ", b'\n<div class="chat-transcript"')
_CHUNK: Final = 1 << 16
_WS: Final = " \t\r\n\ufeff"

_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class Source:
    """Input to import: ``name`` for reports, ``open`` for the bytes, ``size`` if known."""

    name: str
    open: Callable[[], IO[bytes]]
    size: int | None = None

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> Source:
        p = Path(path)
        return cls(str(p), lambda: p.open("rb"), p.stat().st_size)

    @classmethod
    def from_bytes(cls, name: str, data: bytes) -> Source:
        return cls(name, lambda: io.BytesIO(data), len(data))

    @property
    def stem(self) -> str:
        """The file name without directories and suffixes (``a/b/s1.jsonl`` -> ``s1``)."""
        base = self.name.replace("\\", "/").rsplit("/", 1)[-1]
        for suffix in TRANSCRIPT_SUFFIXES:
            if base.endswith(suffix):
                return base[: -len(suffix)] or base
        return base


@dataclass(frozen=True)
class Record:
    """One JSON value read from a source, with the 1-based line it starts on."""

    value: Any
    line: int
    index: int


@dataclass
class Sample:
    """What detection sees: the shape, the leading records (up to 8) and the head text."""

    name: str
    shape: str
    records: list[Any]
    text: str


@dataclass
class ParseContext:
    """What importers report to while they read, and the record cleaner they must use.

    ``cleaner`` redacts secrets and makes text storable (:class:`~memdir.transcripts.redact.
    Redactor`); :meth:`clean` applies it and leaves the number of redactions it made in
    ``last_redactions``, for the importer to add to the transcript the record belongs to.
    """

    cleaner: Callable[[Any], Any] | None = None
    redaction_total: Callable[[], int] = lambda: 0
    skipped: list[Problem] = field(default_factory=list)
    #: imported, but worth a look (an unknown format version, ...)
    warnings: list[Problem] = field(default_factory=list)
    ignored: int = 0
    last_redactions: int = 0
    progress: Callable[[int], None] | None = None

    def clean(self, value: Any) -> Any:
        if self.cleaner is None:
            return value
        before = self.redaction_total()
        cleaned = self.cleaner(value)
        self.last_redactions = self.redaction_total() - before
        return cleaned

    def skip(self, source: Source, line: int | None, reason: str) -> None:
        self.skipped.append(Problem(source.name, line, reason))

    def warn(self, source: Source, line: int | None, reason: str) -> None:
        """Report something imported anyway that the caller should check."""
        self.warnings.append(Problem(source.name, line, reason))

    def advance(self, nbytes: int) -> None:
        if self.progress is not None and nbytes:
            self.progress(nbytes)


def sources_from_paths(
    paths: list[str], ctx: ParseContext | None = None
) -> tuple[list[Source], list[Problem]]:
    """Files as given, and transcript files (by suffix) found under directories, sorted.

    Returns the sources and what was passed over (other files in directories, missing paths).
    """
    sources: list[Source] = []
    problems: list[Problem] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            for found in sorted(p for p in path.rglob("*") if p.is_file()):
                if found.name.endswith(TRANSCRIPT_SUFFIXES) or _text_transcript(found):
                    sources.append(Source.from_path(found))
                else:
                    problems.append(Problem(str(found), None, _not_transcript_file(found.name)))
        elif path.is_file():
            sources.append(Source.from_path(path))
        else:
            problems.append(Problem(given, None, "no such file or directory"))
    return sources, problems


def _text_transcript(path: Path) -> bool:
    if not path.name.endswith(TEXT_SUFFIXES):
        return False
    with path.open("rb") as handle:
        head = handle.read(1 << 16)
    return any(marker in b"\n" + head for marker in _TEXT_MARKERS)


def _not_transcript_file(name: str) -> str:
    suffix = Path(name).suffix or "no suffix"
    return (
        f"not a transcript file ({suffix}); directories are searched for "
        f"{', '.join(TRANSCRIPT_SUFFIXES)} files — name the file to import it anyway"
    )


# --- detection ------------------------------------------------------------------------------


def sample(source: Source) -> Sample:
    """Read the head of ``source`` and decide its shape (see the module docstring)."""
    with source.open() as handle:
        head = handle.read(SAMPLE_BYTES)
        complete = len(head) < SAMPLE_BYTES or not handle.read(1)
    text = head.decode("utf-8", "replace")
    stripped = text.lstrip(_WS)
    if not stripped:
        return Sample(source.stem, "empty", [], text)
    if stripped[0] == "[":
        return Sample(source.stem, "json-array", _head_elements(stripped, complete), text)
    lines = [line for line in text.splitlines() if line.strip(_WS)]
    records = _head_lines(lines if complete else lines[:-1])
    if records and (len(lines) > 1 or source.name.endswith((".jsonl", ".ndjson"))):
        return Sample(source.stem, "jsonl", records, text)
    if stripped[0] == "{":
        whole: list[Any] = []
        if complete:
            try:
                whole = [json.loads(text.lstrip(_WS).rstrip(_WS))]
            except (ValueError, RecursionError):
                whole = records
        return Sample(source.stem, "json-object", whole, text)
    return Sample(source.stem, "unknown", [], text)


def _head_lines(lines: list[str]) -> list[Any]:
    records: list[Any] = []
    for line in lines[:64]:
        try:
            records.append(json.loads(line))
        except (ValueError, RecursionError):
            if not records:
                return []  # the first line is not JSON: not JSONL
            continue
        if len(records) >= 8:
            break
    return records


def _head_elements(text: str, complete: bool) -> list[Any]:
    records: list[Any] = []
    stream = _ArrayStream(iter([text]), lambda _line, _reason: None)
    try:
        for value, _line in stream:
            records.append(value)
            if len(records) >= 8:
                break
    except _Truncated:
        pass
    return records


# --- reading records ------------------------------------------------------------------------


def iter_records(source: Source, shape: str, ctx: ParseContext) -> Iterator[Record]:
    """Every JSON record of ``source`` in order; bad ones are reported to ``ctx`` and skipped."""
    if shape == "jsonl":
        yield from _jsonl(source, ctx)
    elif shape == "json-array":
        yield from _array(source, ctx)
    elif shape == "json-object":
        yield from _whole(source, ctx)


def _jsonl(source: Source, ctx: ParseContext) -> Iterator[Record]:
    index = 0
    with source.open() as handle:
        for number, raw in enumerate(handle, 1):
            ctx.advance(len(raw))
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                ctx.skip(source, number, f"not valid UTF-8 (byte {exc.start}); line skipped")
                continue
            if not line.strip(_WS):
                continue
            try:
                value = json.loads(line)
            except ValueError as exc:
                ctx.skip(source, number, f"not valid JSON ({_reason(exc, line)}); line skipped")
                continue
            except RecursionError:
                ctx.skip(source, number, "JSON nested too deeply; line skipped")
                continue
            yield Record(value, number, index)
            index += 1


def _reason(exc: ValueError, text: str) -> str:
    if isinstance(exc, json.JSONDecodeError):
        if exc.pos >= len(text.rstrip(_WS)):
            return "truncated: the line ends inside a value"
        return f"{exc.msg} at column {exc.colno}"
    return str(exc)[:200]


def _text_chunks(source: Source, ctx: ParseContext) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    reported = False
    with source.open() as handle:
        while True:
            chunk = handle.read(_CHUNK)
            ctx.advance(len(chunk))
            text = decoder.decode(chunk, final=not chunk)
            if "\ufffd" in text and not reported and b"\xef\xbf\xbd" not in chunk:
                ctx.skip(source, None, "invalid UTF-8 bytes replaced by U+FFFD")
                reported = True
            if text:
                yield text
            if not chunk:
                return


def _whole(source: Source, ctx: ParseContext) -> Iterator[Record]:
    text = "".join(_text_chunks(source, ctx))
    body = text.lstrip(_WS)
    first_line = 1 + text[: len(text) - len(body)].count("\n")
    try:
        value = json.loads(body)
    except ValueError as exc:
        ctx.skip(source, first_line, f"not valid JSON ({_reason(exc, body)}); file skipped")
        return
    except RecursionError:
        ctx.skip(source, first_line, "JSON nested too deeply; file skipped")
        return
    yield Record(value, first_line, 0)


class _Truncated(Exception):
    """The input ended inside the array."""


def _array(source: Source, ctx: ParseContext) -> Iterator[Record]:
    stream = _ArrayStream(
        _text_chunks(source, ctx), lambda line, reason: ctx.skip(source, line, reason)
    )
    try:
        for index, (value, line) in enumerate(stream):
            yield Record(value, line, index)
    except _Truncated as exc:
        ctx.skip(source, stream.line, f"{exc}; the rest of the file is skipped")


class _ArrayStream:
    """Elements of one top-level JSON array, parsed as their text arrives.

    Each element is decoded with ``raw_decode`` once enough text is buffered; when it is
    incomplete, at least as much text again is read before retrying (so a huge element costs
    O(n log n), not O(n²)). A syntax error inside an element skips that element (reported) and
    resumes at the next top-level ``,``.
    """

    def __init__(self, chunks: Iterator[str], report: Callable[[int, str], None]) -> None:
        self._chunks = chunks
        self._report = report
        self._buf = ""
        self._pos = 0
        self._eof = False
        self.line = 1  # line of self._pos

    def _more(self, at_least: int = 1) -> bool:
        """Append at least ``at_least`` characters (fewer at the end); False at the end."""
        if self._eof:
            return False
        parts = [self._buf]
        added = 0
        for chunk in self._chunks:
            parts.append(chunk)
            added += len(chunk)
            if added >= at_least:
                break
        else:
            self._eof = True
        self._buf = "".join(parts)
        return added > 0

    def _compact(self) -> None:
        if self._pos > _CHUNK:
            self._buf = self._buf[self._pos :]
            self._pos = 0

    def _skip_ws(self) -> str:
        """The next non-blank character (consumed up to it, not including it), or ''."""
        while True:
            buf, pos = self._buf, self._pos
            while pos < len(buf) and buf[pos] in _WS:
                if buf[pos] == "\n":
                    self.line += 1
                pos += 1
            self._pos = pos
            if pos < len(buf):
                return buf[pos]
            if not self._more():
                return ""

    def __iter__(self) -> Iterator[tuple[Any, int]]:
        if self._skip_ws() != "[":
            raise _Truncated("not a JSON array")
        self._pos += 1
        first = True
        while True:
            self._compact()
            ch = self._skip_ws()
            if ch == "]":
                return
            if ch == "":
                raise _Truncated("truncated: the array is not closed")
            if not first:
                if ch != ",":
                    raise _Truncated(f"expected ',' or ']' between elements, found {ch!r}")
                self._pos += 1
                if self._skip_ws() == "":
                    raise _Truncated("truncated: the array is not closed")
            first = False
            line = self.line
            value = self._element(line)
            if value is not _SKIPPED:
                yield value, line

    def _element(self, line: int) -> Any:
        while True:
            try:
                value, end = _decoder.raw_decode(self._buf, self._pos)
            except RecursionError:
                self._report(line, "JSON nested too deeply; skipped")
                self._resync(self._pos)
                return _SKIPPED
            except json.JSONDecodeError as exc:
                incomplete = len(self._buf) - exc.pos < 16 or exc.msg.startswith(
                    "Unterminated string"
                )
                if incomplete and self._more(max(_CHUNK, len(self._buf) - self._pos)):
                    continue
                if incomplete and self._eof:
                    raise _Truncated(
                        f"truncated: the file ends inside the element at line {line}"
                    ) from None
                self._report(line, f"not valid JSON ({exc.msg} at line {exc.lineno}); skipped")
                self._resync(exc.pos)
                return _SKIPPED
            self.line += self._buf.count("\n", self._pos, end)
            self._pos = end
            return value

    def _resync(self, error_pos: int) -> None:
        """Move to the ``,`` or ``]`` that ends the broken element (at nesting depth 0)."""
        depth, in_string, escaped = 0, False, False
        pos = self._pos
        while True:
            buf = self._buf
            while pos < len(buf):
                ch = buf[pos]
                if ch == "\n":
                    self.line += 1
                if in_string:
                    if escaped:
                        escaped = False
                    elif ch == "\\":
                        escaped = True
                    elif ch == '"':
                        in_string = False
                elif ch == '"':
                    in_string = True
                elif ch in "[{":
                    depth += 1
                elif ch in "]}":
                    if depth == 0:
                        self._pos = pos
                        return
                    depth -= 1
                elif ch == "," and depth == 0 and pos > error_pos:
                    self._pos = pos
                    return
                pos += 1
            if not self._more(_CHUNK):  # positions stay valid: only _compact moves them
                self._pos = len(self._buf)
                return


_SKIPPED: Final = object()
