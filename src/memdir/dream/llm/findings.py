"""From model output to the run's data: findings -> signals, rewrites -> drafts, all screened.

Model output is as untrusted as the transcripts it read: a model can be talked into repeating
an instruction it found in a session. So every text a model returns — a finding's title,
detail and suggested memory, a draft's rationale and note text — is screened with the write
guard's injection detectors (:data:`INJECTION_DETECTORS`: weighted injection signals, hidden
Unicode, data-carrying links, encoded blobs) before it goes anywhere:

- a flagged **finding** still becomes a signal (the reviewer should see the attempt), with
  ``subject["flags"] = ["injection-suspected"]`` and ``subject["screening"]`` listing the
  findings; :func:`screen_draft` carries those flags onto any draft made from the pattern;
- a flagged **rewrite** is not applied: the draft keeps the miners' text for that field and
  gets ``"injection-suspected"`` plus one ``"injection-suspected: <rule> in <field>: <excerpt>"``
  flag per finding; the draft text itself is screened the same way, whoever wrote it.

Evidence is never model-written: an excerpt's text is rendered from the referenced events of
the real session, and a reference to a transcript that was not in the call's batch is dropped
(a model cannot cite what it was not shown). Event positions are clamped into the session.

A finding's signal key is :func:`slug` of its normalised title, so the same title from
different batches and runs is one pattern.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Final

from memdir.dream.llm.prompts import FINDING_KINDS, session_lines
from memdir.dream.model import MAX_EXCERPT_CHARS, Draft, Excerpt, Session, Signal
from memdir.guard import (
    EncodedBlobDetector,
    ExfilLinkDetector,
    Finding,
    InjectionDetector,
    UnicodeDetector,
    screen,
)
from memdir.transcripts.model import TranscriptInfo

__all__ = [
    "FLAG",
    "INJECTION_DETECTORS",
    "apply_rewrite",
    "screen_draft",
    "screen_text",
    "signals_from_findings",
    "slug",
]

FLAG: Final = "injection-suspected"
INJECTION_DETECTORS: Final = (
    InjectionDetector(),
    UnicodeDetector(),
    ExfilLinkDetector(),
    EncodedBlobDetector(),
)
#: Events an excerpt shows at most (from the first referenced one).
EXCERPT_EVENTS: Final = 6
_SLUG_CHARS: Final = 80


def slug(title: str) -> str:
    """A stable key from a title: NFKC, lowercase, runs of non-alphanumerics as ``-``.

    Longer than 80 characters: the first 71 and 8 hex digits of the full slug's SHA-256.
    """
    text = unicodedata.normalize("NFKC", title).casefold()
    text = re.sub(r"[^\w]+|_", "-", text, flags=re.UNICODE).strip("-") or "untitled"
    if len(text) <= _SLUG_CHARS:
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:8]
    return f"{text[: _SLUG_CHARS - 9].rstrip('-')}-{digest}"


def screen_text(text: str, *, path: str = "/") -> list[Finding]:
    """The injection findings in a model-written ``text`` bound for ``path``."""
    if not text.strip():
        return []
    return screen(text, path=path, source_kind="dream", detectors=INJECTION_DETECTORS)


def _describe(finding: Finding, field: str) -> str:
    return f"{FLAG}: {finding.rule} in {field}: {finding.excerpt}"


def _text(value: Any, limit: int = 4_000) -> str:
    return value[:limit].strip() if isinstance(value, str) else ""


def _int(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _excerpt(session: Session, first: int, last: int) -> Excerpt:
    lines = [line for _, line in session_lines(session, positions=range(first, last + 1))]
    text = "\n".join(lines[:EXCERPT_EVENTS])
    if len(text) > MAX_EXCERPT_CHARS:
        text = text[: MAX_EXCERPT_CHARS - 1] + "…"
    return Excerpt(session.id, first, last, text, session.info.scopes())


def signals_from_findings(
    data: Mapping[str, Any], sessions: Mapping[str, Session]
) -> tuple[list[tuple[TranscriptInfo, Signal]], int, int]:
    """Signals for one call's findings; also (findings dropped, findings flagged).

    One signal per (finding, referenced transcript of the batch); a finding with no usable
    reference or no title is dropped.
    """
    out: list[tuple[TranscriptInfo, Signal]] = []
    dropped = flagged = 0
    raw = data.get("findings")
    for item in raw if isinstance(raw, list) else []:
        if not isinstance(item, dict) or not _text(item.get("title"), 200):
            dropped += 1
            continue
        title = _text(item.get("title"), 200)
        kind = item.get("kind") if item.get("kind") in FINDING_KINDS else "other"
        subject: dict[str, Any] = {
            "title": title,
            "detail": _text(item.get("detail")),
            "kind": kind,
            "suggested_memory": _text(item.get("suggested_memory")),
        }
        fix = " ".join(_text(item.get("fix"), 400).split())
        if fix:
            subject["fix"] = fix  # the fix the model read in the evidence: the draft states it
        hits = [
            _describe(f, name)
            for name in ("title", "detail", "fix", "suggested_memory")
            if name in subject
            for f in screen_text(subject[name])
        ]
        if hits:
            subject["flags"] = [FLAG]
            subject["screening"] = hits
            flagged += 1
        made = 0
        refs = item.get("references")
        for ref in refs if isinstance(refs, list) else []:
            if not isinstance(ref, dict):
                continue
            session = sessions.get(str(ref.get("transcript_id")))
            if session is None or not session.events:
                continue
            top = len(session.events) - 1
            first = min(max(_int(ref.get("first_event"), 0), 0), top)
            last = min(max(_int(ref.get("last_event"), first), 0), top)
            first, last = min(first, last), max(first, last)
            signal = Signal(
                miner="model",
                key=slug(title),
                subject=dict(subject),
                title=title,
                excerpt=_excerpt(session, first, last),
                variant=kind,
            )
            out.append((session.info, signal))
            made += 1
        dropped += int(made == 0)
    return out, dropped, flagged


def _texts(operation: Any) -> str | None:
    for name in ("content", "new", "text"):
        if hasattr(operation, name):
            return str(getattr(operation, name))
    return None


def _with_text(operation: Any, text: str) -> Any:
    for name in ("content", "new", "text"):
        if hasattr(operation, name):
            return dataclasses.replace(operation, **{name: text})
    return operation


def _flag(draft: Draft, hits: Sequence[str]) -> None:
    for item in (FLAG, *hits):
        if item not in draft.flags:
            draft.flags.append(item)


def screen_draft(draft: Draft) -> Draft:
    """Flag ``draft`` (in place, and return it) if its text or its pattern carries injection."""
    subject = draft.pattern.subject
    hits: list[str] = []
    if FLAG in (subject.get("flags") or []):
        hits.extend(str(h) for h in subject.get("screening") or [])
    hits.extend(_describe(f, "rationale") for f in screen_text(draft.rationale))
    for i, operation in enumerate(draft.operations):
        text = _texts(operation)
        if text is not None:
            hits.extend(
                _describe(f, f"operation {i}")
                for f in screen_text(text, path=str(getattr(operation, "path", "/")))
            )
    if hits or FLAG in (subject.get("flags") or []):
        _flag(draft, hits)
    return draft


def apply_rewrite(draft: Draft, proposal: Mapping[str, Any]) -> tuple[Draft, int]:
    """``draft`` with the model's rationale and note texts where they screen clean.

    Operations keep their kind, path and preconditions; only their text changes. Returns the
    new draft and how many rewritten fields were withheld as suspected injection.
    """
    withheld: list[str] = []
    rationale = draft.rationale
    new_rationale = _text(proposal.get("rationale"), 8_000)
    if new_rationale:
        hits = screen_text(new_rationale)
        if hits:
            withheld.extend(_describe(f, "model rationale (withheld)") for f in hits)
        else:
            rationale = new_rationale
    operations = list(draft.operations)
    texts = proposal.get("texts")
    for item in texts if isinstance(texts, list) else []:
        if not isinstance(item, dict):
            continue
        index, text = _int(item.get("operation"), -1), item.get("text")
        if not 0 <= index < len(operations) or not isinstance(text, str) or not text.strip():
            continue
        if _texts(operations[index]) is None:
            continue
        path = str(getattr(operations[index], "path", "/"))
        hits = screen_text(text, path=path)
        if hits:
            withheld.extend(
                _describe(f, f"model text of operation {index} (withheld)") for f in hits
            )
        else:
            operations[index] = _with_text(operations[index], text)
    out = dataclasses.replace(
        draft, rationale=rationale, operations=operations, flags=list(draft.flags)
    )
    if withheld:
        _flag(out, withheld)
    return out, len(withheld)
