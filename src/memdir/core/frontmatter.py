"""YAML frontmatter: parsed for meaning, never rewritten.

A file has frontmatter when its first line is exactly ``---`` and a later line is exactly
``---`` (or ``...``); the lines between are a YAML mapping. The content is always stored
verbatim — this module only reads it. Keys memdir gives meaning to are exposed as typed fields
of :class:`Frontmatter`; every other key is kept in ``extra`` as parsed.

YAML is parsed by :func:`memdir.core.yamlsafe.load_yaml`: anchors, aliases and nesting deeper
than 64 levels are refused like malformed YAML, so parsing costs time in proportion to size.
Malformed YAML, or YAML that is not a mapping, is refused with the line (1-based, counted in
the whole file) and the reason, because a memory whose metadata silently vanished would be
worse than a refused write.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Any

from memdir.core.errors import InvalidContent

__all__ = [
    "KNOWN_KEYS",
    "NEVER",
    "Described",
    "Frontmatter",
    "describe",
    "first_heading",
    "parse_frontmatter",
    "parse_when",
    "split_frontmatter",
]

KNOWN_KEYS = (
    "description",
    "name",
    "tags",
    "core",
    "expires",
    "review_after",
    "verify",
    "protected",
    "source",
)


@dataclass(frozen=True)
class Frontmatter:
    """The meaningful keys of a file's frontmatter; ``raw`` is the whole parsed mapping."""

    description: str | None = None
    name: str | None = None
    tags: tuple[str, ...] = ()
    core: bool = False
    expires: str | None = None
    review_after: str | None = None
    verify: str | None = None
    protected: bool = False
    source: str | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def extra(self) -> dict[str, Any]:
        """Keys memdir gives no meaning to, as parsed."""
        return {k: v for k, v in self.raw.items() if k not in KNOWN_KEYS}


#: ``expires`` / ``review_after`` as a duration: a whole number and a unit (``90m``, ``12h``,
#: ``30d``, ``2w``, ``1y`` = 365 days), counted from the time of the file's current version.
_DURATION = re.compile(r"^\s*(\d{1,6})\s*(m|min|h|d|w|y)\s*$", re.IGNORECASE)
_UNIT_SECONDS = {"m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
#: ``expires: never`` opts a file out of every expiry, the task scopes' default included.
NEVER = "never"


def parse_when(key: str, value: str | None, written: dt.datetime) -> dt.datetime | None:
    """The moment an ``expires`` / ``review_after`` value names, as an aware UTC datetime.

    A date is its midnight UTC (``expires: 2026-03-01`` hides the file from that day on); a
    datetime without a zone is UTC; a duration (:data:`_DURATION`) counts from ``written``, the
    time of the version that holds the value. None (no value, or ``never``). Anything else is
    :class:`InvalidContent`, refused at write time: a memory whose expiry silently failed to
    parse would never expire.
    """
    if value is None or value.strip().lower() == NEVER:
        return None
    text = value.strip()
    match = _DURATION.match(text)
    if match is not None:
        amount, unit = int(match.group(1)), match.group(2).lower()
        return written + dt.timedelta(seconds=amount * _UNIT_SECONDS[unit])
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            return dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidContent(
            f"malformed frontmatter: {key} must be a date (2026-03-01), a datetime, a duration "
            f"from this version (90m, 12h, 30d, 2w, 1y) or 'never', received {value!r}",
            key=key,
            reason="bad time",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def first_heading(body: str) -> str | None:
    """The text of the first markdown ATX heading (``# Title``) in ``body``, or None."""
    fenced = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fenced = not fenced
        elif not fenced and stripped.startswith("#"):
            text = stripped.lstrip("#")
            if text[:1] in (" ", "\t") and text.strip().strip("#").strip():
                return text.strip().rstrip("#").strip()
    return None


def split_frontmatter(content: str) -> tuple[str | None, str]:
    """Split ``content`` into (frontmatter YAML text or None, body).

    Only a leading ``---`` line opens frontmatter; an unterminated block is an error, since
    the writer almost certainly meant frontmatter and forgot to close it.
    """
    if not (content.startswith("---\n") or content.startswith("---\r\n")):
        return None, content
    lines = content.splitlines(keepends=True)
    for index in range(1, len(lines)):
        if lines[index].rstrip("\r\n") in ("---", "..."):
            return "".join(lines[1:index]), "".join(lines[index + 1 :])
    raise InvalidContent(
        "malformed frontmatter at line 1: the opening '---' has no closing '---' line; "
        "close the block or remove the first line",
        line=1,
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value)


def _yaml_error_line(exc: Exception) -> int | None:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    return None if mark is None else int(mark.line)


def parse_frontmatter(content: str) -> Frontmatter:
    """Parse the frontmatter of ``content`` (an empty :class:`Frontmatter` if it has none)."""
    block, _ = split_frontmatter(content)
    if block is None:
        return Frontmatter()
    import yaml  # deferred: most commands never parse frontmatter

    from memdir.core.yamlsafe import load_yaml

    try:
        data = load_yaml(block)
    except yaml.YAMLError as exc:
        line = _yaml_error_line(exc)
        file_line = 2 + line if line is not None else None
        reason = str(getattr(exc, "problem", None) or exc).strip()
        where = f"line {file_line}" if file_line is not None else "the frontmatter"
        raise InvalidContent(
            f"malformed frontmatter at {where}: {reason}; fix the YAML between the '---' lines",
            line=file_line,
            reason=reason,
        ) from None
    if data is None:
        return Frontmatter()
    if not isinstance(data, dict):
        raise InvalidContent(
            f"malformed frontmatter at line 2: expected a YAML mapping of keys, "
            f"received a {type(data).__name__}; write 'key: value' lines",
            line=2,
            reason="not a mapping",
        )
    raw = {str(k): v for k, v in data.items()}
    tags = raw.get("tags") or ()
    if isinstance(tags, str):
        tags = [t.strip() for t in tags.split(",") if t.strip()]
    for key in ("expires", "review_after"):  # refused now, not ignored later
        parse_when(key, _text(raw.get(key)), dt.datetime(2000, 1, 1, tzinfo=dt.UTC))
    return Frontmatter(
        description=_text(raw.get("description")),
        name=_text(raw.get("name")),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list | tuple) else (),
        core=raw.get("core") is True,
        expires=_text(raw.get("expires")),
        review_after=_text(raw.get("review_after")),
        verify=_text(raw.get("verify")),
        protected=raw.get("protected") is True,
        source=_text(raw.get("source")),
        raw=raw,
    )


@dataclass(frozen=True)
class Described:
    """What context, expiry and the stale report keep of a file's current version (the
    ``file_meta`` row): derived from its content and the version's time alone."""

    summary: str | None
    name: str | None
    core: bool
    skill: bool
    expires_at: dt.datetime | None
    no_expiry: bool
    review_after: dt.datetime | None
    verify: str | None


_SUMMARY_CHARS = 300


def describe(path: str, content: str, written: dt.datetime) -> Described:
    """The ``file_meta`` values of ``content`` at ``path``, written at ``written``.

    ``summary``: the ``description``, else the first heading, cut to 300 characters.
    ``skill``: an Agent Skills file, ``SKILL.md`` with a ``name`` and a ``description``.
    Frontmatter that does not parse (stored before a rule refused it) describes nothing but the
    first heading of the whole content.
    """
    try:
        front = parse_frontmatter(content)
        _, body = split_frontmatter(content)
    except InvalidContent:
        front, body = Frontmatter(), content
    summary = front.description or first_heading(body)
    if summary is not None:
        summary = " ".join(summary.split())[:_SUMMARY_CHARS] or None
    skill = path.rsplit("/", 1)[-1] == "SKILL.md" and bool(front.name and front.description)
    expires = front.expires
    return Described(
        summary=summary,
        name=front.name,
        core=front.core,
        skill=skill,
        expires_at=parse_when("expires", expires, written),
        no_expiry=expires is not None and expires.strip().lower() == NEVER,
        review_after=parse_when("review_after", front.review_after, written),
        verify=front.verify,
    )
