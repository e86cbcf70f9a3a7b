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
from dataclasses import dataclass, field
from typing import Any

from memdir.core.errors import InvalidContent

__all__ = ["KNOWN_KEYS", "Frontmatter", "parse_frontmatter", "split_frontmatter"]

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
