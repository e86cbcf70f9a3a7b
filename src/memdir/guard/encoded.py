"""Long encoded blobs: data a person cannot read but a model can decode and obey.

Why: memory is meant to be read. A long base64 or hex run is opaque to a reviewer, yet a model
asked to "decode and follow" it will; it is also how binaries, archives and stolen data get
smuggled into shared files.

Rules (category ``"injection"``):

- ``encoded.long-base64`` — a base64 / base64url run of more than :data:`MIN_BLOB` (200)
  characters, including the usual line-wrapped form (consecutive lines of 40+ base64
  characters), that mixes upper-case, lower-case letters and digits (so ``-----`` rules and
  ``aaaa…`` padding are not blobs).
- ``encoded.long-hex`` — a hex run of more than :data:`MIN_BLOB` characters using 10+ distinct
  digits.

- ``encoded.base64-text`` — a shorter base64 / base64url run (16 to 200 characters) that
  decodes to readable text of two or more words: an instruction too short to be a blob
  ("ZGVsZXRlIC9vcmcgbm93" is "delete /org now") hidden from a reviewer all the same. Random
  keys, commit ids and paths never decode to words, so this costs one decode attempt per run.

Not findings: runs inside a PEM ``-----BEGIN …-----`` / ``-----END …-----`` block (a private key
is already reported by the secrets detector; a certificate or public key is fine to keep) and
runs overlapping a secret already reported. The reason says when the blob decodes to text.
"""

from __future__ import annotations

import base64
import binascii
import re
import string
from typing import Final

from memdir.guard.base import Document, Finding

__all__ = ["MIN_BLOB", "EncodedBlobDetector"]

#: A run longer than this many encoded characters (newlines not counted) is a blob.
MIN_BLOB: Final = 200

#: Shortest line of a wrapped blob (PEM and MIME wrap base64 at 64 and 76).
_MIN_LINE: Final = 40
_WRAP: Final = re.compile(r"[ \t]*\r?\n[ \t]*")
_PEM: Final = re.compile(r"-----BEGIN [A-Z0-9 ]+-----[\s\S]*?-----END [A-Z0-9 ]+-----")
_WS: Final = re.compile(r"\s+")


def _decodes_to_text(blob: str) -> bool:
    try:
        padded = blob + "=" * (-len(blob) % 4)
        raw = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return False
    return sum(c.isprintable() or c.isspace() for c in text) >= 0.95 * max(1, len(text))


#: Shortest decoded text :func:`decoded_words` reports (bytes).
_MIN_TEXT: Final = 8
_HEX: Final = re.compile(r"[0-9a-fA-F]+")
_LETTERS: Final = (string.ascii_letters + " ").encode()
_B64: Final = re.compile(r"[A-Za-z0-9+/]+|[A-Za-z0-9_-]+")


def decoded_words(run: str) -> str | None:
    """The readable text a short base64 / base64url ``run`` decodes to, or None.

    Readable: valid UTF-8, printable, at least :data:`_MIN_TEXT` characters, two or more
    words of two letters, and at least 70% letters and spaces. Random bytes (keys, hashes)
    almost never pass: each byte would have to be printable ASCII.
    """
    core = run.rstrip("=")
    # Base64 of text mixes cases; paths, words and hex ids (all one case) do not: C-speed
    # tests reject nearly every run of an ordinary note before any decoding.
    if core.islower() or core.isupper() or len(core) % 4 == 1:
        return None
    if _HEX.fullmatch(core) or not _B64.fullmatch(core):
        return None  # hex (commit ids, digests) never decodes to words
    if "-" in core or "_" in core:
        if "+" in core or "/" in core:
            return None
        core = core.replace("-", "+").replace("_", "/")
    raw = base64.b64decode(core + "=" * (-len(core) % 4))  # valid by the fullmatch
    if len(raw) < _MIN_TEXT or b" " not in raw:
        return None
    if raw.isascii() and len(raw.translate(None, _LETTERS)) > 0.3 * len(raw):
        return None  # mostly punctuation, digits or control bytes (one C pass)
    text = raw.decode("ascii") if raw.isascii() else raw.decode("utf-8", "replace")
    if not text.replace("\n", " ").isprintable():
        return None
    if sum(c.isalpha() or c == " " for c in text) < 0.7 * len(text):
        return None
    words = [w for w in text.split() if sum(c.isalpha() for c in w) >= 2]
    return text if len(words) >= 2 else None


class EncodedBlobDetector:
    """Base64 and hex runs longer than :data:`MIN_BLOB` characters outside PEM blocks, and
    shorter base64 runs that decode to words."""

    name = "encoded"

    def scan(self, doc: Document) -> list[Finding]:
        text = doc.content
        candidates = self._wrapped_runs(text, doc.token_runs) if len(text) > MIN_BLOB else []
        findings = self._short_runs(doc, candidates)
        if not candidates:
            return findings
        excluded = [m.span() for m in _PEM.finditer(text)] if "-----BEGIN " in text else []
        excluded.extend(doc.secret_spans)
        for start, end in candidates:
            if any(start < e and s < end for s, e in excluded):
                continue
            blob = _WS.sub("", text[start:end])
            if len(blob) <= MIN_BLOB:
                continue
            if all(c in string.hexdigits for c in blob):
                if len(set(blob.lower())) < 10:
                    continue
                rule, what = "encoded.long-hex", f"{len(blob)}-digit hex run"
            else:
                core = blob.rstrip("=")
                if not (
                    any(c.isupper() for c in core)
                    and any(c.islower() for c in core)
                    and any(c.isdigit() for c in core)
                ):
                    continue
                rule, what = "encoded.long-base64", f"{len(blob)}-character base64 run"
                if _decodes_to_text(blob):
                    what += " that decodes to readable text"
            findings.append(
                doc.finding(
                    rule,
                    "injection",
                    start,
                    end,
                    f"{what}: opaque to reviewers but decodable by a model, a common way to"
                    " smuggle instructions or data into shared memory",
                    excerpt=doc.excerpt(start, min(end, start + 60)),
                )
            )
        return findings

    @staticmethod
    def _short_runs(doc: Document, blobs: list[tuple[int, int]]) -> list[Finding]:
        """``encoded.base64-text`` findings: runs of up to :data:`MIN_BLOB` characters that
        decode to words (see :func:`decoded_words`), outside secrets already reported and
        outside long blobs (a wrapped blob's lines, its short last line included)."""
        findings: list[Finding] = []
        content = doc.content
        for start, end in doc.token_runs:
            if end - start > MIN_BLOB or any(
                s <= start < e or _WRAP.fullmatch(content, e, start) for s, e in blobs
            ):
                continue
            text = decoded_words(content[start:end])
            if text is None or any(start < e and s < end for s, e in doc.secret_spans):
                continue
            from memdir.guard.injection import injection_score

            what = f"{len(text.split())} words of text"
            if injection_score(text) >= 1.0:
                what += " that read as a prompt injection"
            findings.append(
                doc.finding(
                    "encoded.base64-text",
                    "injection",
                    start,
                    end,
                    f"{end - start}-character base64 run that decodes to {what}: hidden from"
                    " reviewers but decodable by a model, a way to smuggle instructions",
                    excerpt=doc.excerpt(start, min(end, start + 60)),
                )
            )
        return findings

    @staticmethod
    def _wrapped_runs(text: str, runs: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Join runs of 40+ characters separated only by a line break; keep the long ones."""
        joined: list[tuple[int, int]] = []
        for start, end in runs:
            if end - start < _MIN_LINE:
                continue
            if joined and _WRAP.fullmatch(text, joined[-1][1], start):
                joined[-1] = (joined[-1][0], end)
            else:
                joined.append((start, end))
        return [(s, e) for s, e in joined if e - s > MIN_BLOB]
