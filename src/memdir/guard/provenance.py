"""Provenance: where the text came from decides how far it may travel unreviewed.

Rule ``provenance.tool-result-to-shared`` (category ``"provenance"``): a write whose source kind
is ``tool-result`` (web pages, API responses, command output copied into memory) aimed at shared
memory — ``/org/`` or ``/projects/`` — where every agent of the organisation or project will
read it. Tool output is attacker-reachable text (a web page, an issue comment, a WHOIS record can
carry planted instructions), so such writes are quarantined for review by default. The finding
covers the whole write: its span is ``0, 0`` and its excerpt empty.
"""

from __future__ import annotations

from typing import Final

from memdir.guard.base import Document, Finding

__all__ = ["SHARED_PREFIXES", "ProvenanceDetector"]

#: Path prefixes read by many principals (see DESIGN.md, "Default layout of a store").
SHARED_PREFIXES: Final = ("/org/", "/projects/")


class ProvenanceDetector:
    """Flags tool output written to shared memory."""

    name = "provenance"

    def __init__(self, shared_prefixes: tuple[str, ...] = SHARED_PREFIXES) -> None:
        self.shared_prefixes = shared_prefixes

    def scan(self, doc: Document) -> list[Finding]:
        if doc.source_kind != "tool-result" or not doc.path.startswith(self.shared_prefixes):
            return []
        scope = doc.path.split("/", 2)[1]
        return [
            doc.finding(
                "provenance.tool-result-to-shared",
                "provenance",
                0,
                0,
                f"tool output written to shared /{scope}/ memory is quarantined by default for"
                " review: tool results may carry planted instructions that every reader would"
                " then trust",
                excerpt="",
            )
        ]
