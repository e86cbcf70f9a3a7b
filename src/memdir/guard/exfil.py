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
- ``exfil.link-path-data`` — a path segment of the URL carries readable data in encoded form:
  base64 / base64url or hex that decodes to words (``/c/dXNlciBzYWlkIGhp``), or, in an image
  (which loads by itself), percent-encoded text of six words or more. Opaque ids (Google Docs,
  UUIDs, commit ids, CDN hashes) decode to no words and are not findings.
- ``exfil.link-query-data`` also covers images whose query names what it carries (``?pw=``,
  ``?session=``, ``?msg=``, ...: :data:`_SENSITIVE` names) or holds three words or more, and
  links with a ``password`` / ``secret`` / ``ssn`` parameter that has a value.
- ``exfil.link-template`` — a placeholder for the reader to fill sits in the URL and names
  something sensitive: ``{secret}``, ``{{api_key}}``, ``$TOKEN``, ``<conversation>``,
  ``[DATA]``. Plain REST templates such as ``/users/{id}`` are not findings.

Markdown images and HTML ``<img src=...>`` count as images. Ordinary links (docs, issues,
``?page=2``, ``?v=abc``, ``?text=Hello+World`` placeholders) are not findings.
"""

from __future__ import annotations

import re
import string
from typing import Final
from urllib.parse import parse_qsl, unquote, urlsplit

from memdir.guard.base import Document, Finding
from memdir.guard.encoded import decoded_words
from memdir.guard.lazy import LazyRegex

__all__ = ["MAX_QUERY", "ExfilLinkDetector"]

#: A query string longer than this (characters) is treated as a data carrier.
MAX_QUERY: Final = 100

_URL: Final = LazyRegex(r"\bhttps?://[^\s<>\"'`)\]]+", re.IGNORECASE)
_IMAGE_PREFIX: Final = LazyRegex(r"!\[[^\]\n]*\]\(\s*<?")
_TEMPLATE_CHARS: Final = ("{", "$", "<", "[", "%7b", "%7B")
_SENSITIVE: Final = (
    r"(?:secret|token|key|passw|pwd|cred|cookie|session|auth|data|conversation|convo|history"
    r"|chat|message|prompt|context|memory|memories|env|summary|info|input|content|payload"
    r"|email|ssn|user)"
)
_TEMPLATE: Final = LazyRegex(
    rf"\{{\{{?\s*[\w.-]*{_SENSITIVE}[\w.-]*\s*\}}\}}?|\$\{{?[A-Z_]*{_SENSITIVE}[A-Z_]*\}}?"
    rf"|<[\w-]*{_SENSITIVE}[\w-]*>|\[[\w-]*{_SENSITIVE}[\w-]*\]"
    rf"|%7B%7B?[\w.-]*{_SENSITIVE}[\w.-]*%7D",
    re.IGNORECASE,
)
_SENSITIVE_NAME: Final = LazyRegex(rf"{_SENSITIVE}|^(?:d|p|pw|msg|body|b64|enc)$", re.IGNORECASE)
#: Parameter names that carry a secret in any link, not only an image.
_SECRET_NAME: Final = LazyRegex(r"passw|^pwd$|^pw$|secret|^ssn$", re.IGNORECASE)
_IMG_SRC: Final = LazyRegex(r"<img\b[^>]*\bsrc\s*=\s*[\"']?$", re.IGNORECASE)
_B64_RUN: Final = LazyRegex(r"[A-Za-z0-9+/_-]{24,}={0,2}")
_B64_SEGMENT: Final = LazyRegex(r"[A-Za-z0-9+_-]{16,}={0,2}")
_HEX_RUN: Final = LazyRegex(r"[0-9a-fA-F]{32,}")


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
        html = "<img" in doc.lowered if "<" in doc.content else False
        for match in _URL.finditer(doc.content):
            url = match.group().rstrip(".,;:!?")
            start, end = match.start(), match.start() + len(url)
            image = self._is_image(doc.content, start, html)
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
            carried = self._path_problem(url, image)
            if carried is not None:
                findings.append(
                    doc.finding(
                        "exfil.link-path-data",
                        "injection",
                        start,
                        end,
                        f"{kind} URL whose path carries {carried}: rendering or following it"
                        " can send data to a third-party server",
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
    def _is_image(content: str, start: int, html: bool) -> bool:
        """Is the URL at ``start`` the target of a markdown image ``![alt](url)`` or (with
        ``html``: the text holds ``<img``) of an HTML ``<img src=...>``?"""
        if not content[max(0, start - 8) : start].rstrip().endswith(("(", "(<")):
            if not html:
                return False
            before = content[max(0, start - 200) : start]
            return "<img" in before.lower() and _IMG_SRC.search(before) is not None
        bang = content.rfind("![", max(0, start - 300), start)
        return bang >= 0 and _IMAGE_PREFIX.fullmatch(content, bang, start) is not None

    @staticmethod
    def _path_problem(url: str, image: bool) -> str | None:
        """What data the URL's path carries, or None (see the module doc)."""
        slash = url.find("/", url.find("://") + 3)
        if slash < 0:
            return None
        end = url.find("?", slash)
        if end < 0:
            end = len(url)
        hash_at = url.find("#", slash, end)
        path = url[slash : hash_at if hash_at >= 0 else end]
        if image and "%" in path:
            for segment in path.split("/"):
                words = unquote(segment).split()
                if len(words) >= 6:
                    return f"{len(words)} words of percent-encoded text"
        if len(path) < 17:
            return None
        for match in _B64_SEGMENT.finditer(path):
            run = match.group()
            text = decoded_words(run)
            if text is None and _HEX_RUN.fullmatch(run):
                text = _hex_words(run)
            if text is not None:
                return f"encoded text ({len(text.split())} words)"
        return None

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
        for name, value in parse_qsl(query, keep_blank_values=True):
            found = _encoded(unquote(value), min_len)
            if found is not None:
                return found
            if not value:
                continue
            if image:
                if len(value.split()) >= 3 or (
                    len(value) >= 4 and not value.isdigit() and _SENSITIVE_NAME.search(name)
                ):
                    return f"data in its {name!r} parameter of an image that loads by itself"
            elif len(value) >= 4 and _SECRET_NAME.search(name) and not value.startswith("{"):
                return f"a value in its {name!r} parameter"
        return None


def _hex_words(run: str) -> str | None:
    """The readable text an even-length hex ``run`` decodes to (as for base64), or None."""
    if len(run) % 2 or len(run) < 16:
        return None
    try:
        text = bytes.fromhex(run).decode("utf-8")
    except ValueError:
        return None
    words = [w for w in text.split() if sum(c.isalpha() for c in w) >= 2]
    return text if text.isprintable() and len(words) >= 2 else None
