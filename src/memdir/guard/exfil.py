"""Exfiltration links: URLs built to carry data out when an agent renders or follows them.

Why: an agent that renders a markdown image fetches it without asking, and an agent told to
"open this link" sends whatever the link's query string holds. Planted links with an encoded
payload slot (``?d=<base64>``) or a template for the agent to fill (``?q={secret}``) are the
standard way injected instructions leak conversation data, keys and memory to an attacker.

Rules (category ``"injection"``; markdown links, images and bare URLs alike):

- ``exfil.link-query-data`` — the query string is longer than :data:`MAX_QUERY` (100)
  characters, or a parameter value looks encoded: a base64/base64url run of 24+ characters
  mixing letters and digits, or a hex run of 32+ (bare 40/64-hex commit ids and SHA-256
  digests excepted). For markdown images, which load by themselves, any parameter value of
  16+ such characters is enough.
- ``exfil.link-template`` — a placeholder for the reader to fill sits in the URL and names
  something sensitive: ``{secret}``, ``{{api_key}}``, ``$TOKEN``, ``<conversation>``,
  ``[DATA]``. Plain REST templates such as ``/users/{id}`` are not findings.

Ordinary links (docs, issues, ``?page=2``, ``?v=abc``) are not findings.
"""

from __future__ import annotations

import re
import string
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from memdir.guard.base import Document, Finding

__all__ = ["MAX_QUERY", "ExfilLinkDetector"]

#: A query string longer than this (characters) is treated as a data carrier.
MAX_QUERY: Final = 100

_URL: Final = re.compile(r"\bhttps?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_IMAGE_PREFIX: Final = re.compile(r"!\[[^\]\n]*\]\(\s*<?")
_TEMPLATE_CHARS: Final = ("{", "$", "<", "[", "%7b", "%7B")
_SENSITIVE: Final = (
    r"(?:secret|token|key|passw|pwd|cred|cookie|session|auth|data|conversation|convo|history"
    r"|chat|message|prompt|context|memory|memories|env|summary|info|input|content|payload"
    r"|email|ssn|user)"
)
_TEMPLATE: Final = re.compile(
    rf"\{{\{{?\s*[\w.-]*{_SENSITIVE}[\w.-]*\s*\}}\}}?|\$\{{?[A-Z_]*{_SENSITIVE}[A-Z_]*\}}?"
    rf"|<[\w-]*{_SENSITIVE}[\w-]*>|\[[\w-]*{_SENSITIVE}[\w-]*\]"
    rf"|%7B%7B?[\w.-]*{_SENSITIVE}[\w.-]*%7D",
    re.IGNORECASE,
)
_B64_RUN: Final = re.compile(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_HEX_RUN: Final = re.compile(r"[0-9a-fA-F]{32,}")


def _encoded(value: str, min_len: int) -> str | None:
    """Describe the encoded run in ``value`` if there is one of at least ``min_len``."""
    for match in _HEX_RUN.finditer(value):
        run = match.group()
        if len(run) >= max(min_len, 32) and len(run) not in (40, 64):
            return f"a {len(run)}-digit hex string"
    for match in _B64_RUN.finditer(value):
        run = match.group()
        if len(run) < min_len or all(c in string.hexdigits for c in run):
            continue
        has_digit = any(c.isdigit() for c in run)
        has_alpha = any(c.isalpha() for c in run)
        if has_digit and has_alpha:
            return f"a {len(run)}-character base64-like string"
    return None


class ExfilLinkDetector:
    """URLs whose query carries encoded data or a template for secrets (see module doc)."""

    name = "exfil"

    def scan(self, doc: Document) -> list[Finding]:
        if "://" not in doc.content:
            return []
        findings: list[Finding] = []
        for match in _URL.finditer(doc.content):
            url = match.group().rstrip(".,;:!?")
            start, end = match.start(), match.start() + len(url)
            image = self._is_image(doc.content, start)
            kind = "markdown image" if image else "link"
            template = None
            if any(c in url for c in _TEMPLATE_CHARS):
                template = _TEMPLATE.search(url)
            if template is not None:
                findings.append(
                    doc.finding(
                        "exfil.link-template",
                        "injection",
                        start,
                        end,
                        f"{kind} URL contains the placeholder {template.group()!r} for a reader"
                        " to fill in: a way to make an agent send sensitive data to a server",
                    )
                )
                continue
            problem = self._query_problem(url, image)
            if problem is not None:
                findings.append(
                    doc.finding(
                        "exfil.link-query-data",
                        "injection",
                        start,
                        end,
                        f"{kind} URL whose query carries {problem}: rendering or following it"
                        " can send data to a third-party server",
                    )
                )
        return findings

    @staticmethod
    def _is_image(content: str, start: int) -> bool:
        """Is the URL at ``start`` the target of a markdown image ``![alt](url)``?"""
        if not content[max(0, start - 8) : start].rstrip().endswith(("(", "(<")):
            return False
        bang = content.rfind("![", max(0, start - 300), start)
        return bang >= 0 and _IMAGE_PREFIX.fullmatch(content, bang, start) is not None

    @staticmethod
    def _query_problem(url: str, image: bool) -> str | None:
        if "?" not in url:
            return None
        try:
            query = urlsplit(url).query
        except ValueError:
            return None
        if not query:
            return None
        if len(query) > MAX_QUERY:
            return f"{len(query)} characters of parameters"
        min_len = 16 if image else 24
        for _, value in parse_qsl(query, keep_blank_values=True):
            found = _encoded(unquote(value), min_len)
            if found is not None:
                return found
        return None
