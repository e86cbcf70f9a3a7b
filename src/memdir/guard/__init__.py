"""Write screening: every write and proposal passes :func:`screen` before it lands.

The guard only *detects*. It is a pure function of (content, path, source kind): no I/O, no
state, no network. The service maps each finding's ``category`` to the store's configured
action (``reject`` → HTTP 422 / exit 7, ``quarantine`` → a proposal, ``allow``).

Detectors are plug-ins behind one interface (:class:`Detector`: a ``name`` and
``scan(doc) -> list[Finding]``); :data:`DEFAULT_DETECTORS` lists the built-ins in the order
they run — secrets first, so that every later excerpt masks them:

========================  ===========================================  ============
detector                  rules                                        category
========================  ===========================================  ============
``SecretsDetector``       ``secret.*`` (detect-secrets + own formats)  secret
``InjectionDetector``     ``injection.*`` (weighted signals)           injection
``UnicodeDetector``       ``unicode.*`` (bidi, zero-width, tags, ...)  injection
``ExfilLinkDetector``     ``exfil.*`` (data-carrying URLs)             injection
``EncodedBlobDetector``   ``encoded.*`` (base64 / hex > 200 chars)     injection
``ProvenanceDetector``    ``provenance.tool-result-to-shared``         provenance
========================  ===========================================  ============

Each module's docstring says what its rules catch and why (the rule tables live in
:mod:`~memdir.guard.secret_rules`, :mod:`~memdir.guard.signals` and
:mod:`~memdir.guard.signals_persona`). Bare 40/64-hex git commit ids and
SHA-256 digests are deliberately *not* findings: memory quotes them all the time (memdir's own
ETags are SHA-256). Third parties extend the guard by passing
``detectors=[*DEFAULT_DETECTORS, MyDetector()]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from memdir.guard.base import CATEGORIES, Category, Detector, Document, Finding, mask_secret
from memdir.guard.encoded import EncodedBlobDetector
from memdir.guard.exfil import ExfilLinkDetector
from memdir.guard.injection import InjectionDetector
from memdir.guard.provenance import ProvenanceDetector
from memdir.guard.secrets import SecretsDetector
from memdir.guard.unicode import UnicodeDetector

__all__ = [
    "CATEGORIES",
    "DEFAULT_DETECTORS",
    "MAX_FINDINGS_PER_RULE",
    "Category",
    "Detector",
    "Document",
    "EncodedBlobDetector",
    "ExfilLinkDetector",
    "Finding",
    "InjectionDetector",
    "ProvenanceDetector",
    "SecretsDetector",
    "UnicodeDetector",
    "screen",
]

DEFAULT_DETECTORS: Final[list[Detector]] = [
    SecretsDetector(),
    InjectionDetector(),
    UnicodeDetector(),
    ExfilLinkDetector(),
    EncodedBlobDetector(),
    ProvenanceDetector(),
]

#: Secret values shorter than this are not searched for in other findings' text.
_MIN_REMASK: Final = 6
#: At most this many findings per rule are returned, except secrets (all kept, so a caller can
#: redact every one): a pathological write must not produce an unbounded error response.
MAX_FINDINGS_PER_RULE: Final = 20


def screen(
    content: str,
    *,
    path: str,
    source_kind: str | None = None,
    detectors: Sequence[Detector] | None = None,
) -> list[Finding]:
    """Screen one write; return its findings sorted by position, then rule.

    ``path`` is the memory path being written, ``source_kind`` the commit's provenance source
    kind (``user-stated``, ``tool-result``, ``agent-inferred``, ``dream``, ``import``) if known.
    ``detectors`` defaults to :data:`DEFAULT_DETECTORS`. An empty list means nothing was found.
    No finding's ``excerpt`` or ``reason`` contains a raw secret value found in the content.
    Beyond :data:`MAX_FINDINGS_PER_RULE` findings of one non-secret rule, the rest are dropped.
    """
    doc = Document(content=content, path=path, source_kind=source_kind)
    findings: list[Finding] = []
    for detector in DEFAULT_DETECTORS if detectors is None else detectors:
        for finding in detector.scan(doc):
            if finding.category == "secret":
                doc.add_secret_span(finding.start, finding.end)
            findings.append(finding)
    if doc.secret_spans:
        findings = _remask(findings, content, doc.secret_spans)
    findings.sort(key=lambda f: (f.start, f.end, f.rule))
    per_rule: dict[str, int] = {}
    kept = []
    for finding in findings:
        per_rule[finding.rule] = per_rule.get(finding.rule, 0) + 1
        if finding.category == "secret" or per_rule[finding.rule] <= MAX_FINDINGS_PER_RULE:
            kept.append(finding)
    return kept


def _remask(
    findings: list[Finding], content: str, spans: tuple[tuple[int, int], ...]
) -> list[Finding]:
    """Belt and braces: replace any raw secret still present in a finding's text."""
    values = sorted({content[s:e] for s, e in spans if e - s >= _MIN_REMASK}, key=len, reverse=True)
    out = []
    for finding in findings:
        excerpt, reason = finding.excerpt, finding.reason
        for value in values:
            if value in excerpt or value in reason:
                masked = mask_secret(value)
                excerpt = excerpt.replace(value, masked)
                reason = reason.replace(value, masked)
        if excerpt is not finding.excerpt or reason is not finding.reason:
            finding = Finding(
                finding.rule,
                finding.category,
                finding.start,
                finding.end,
                finding.line,
                reason,
                excerpt,
            )
        out.append(finding)
    return out
