"""The one YAML loader memdir uses (frontmatter and policy documents alike).

YAML is written by agents and read by every later request, so parsing it must cost time and
memory in proportion to its size. Plain ``yaml.safe_load`` does not: a few hundred bytes of
anchors and aliases (``&a [*b, *b, ...]``) expand to millions of nodes, and a deeply nested
document recurses until Python's stack gives out. This loader therefore refuses:

- anchors (``&name``) and aliases (``*name``), merge keys included — memdir's documents never
  need them, and refusing them outright is simpler to explain than an expansion budget;
- nesting deeper than :data:`MAX_YAML_DEPTH` sequences and mappings.

Everything else is ``yaml.SafeLoader``. Refusals are ``yaml.YAMLError`` subclasses with a
``problem`` and a ``problem_mark`` (0-based line), like any YAML syntax error, so callers
report them with the line where the anchor, alias or the too-deep node starts.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.composer import ComposerError
from yaml.events import AliasEvent, CollectionStartEvent, NodeEvent

__all__ = ["MAX_YAML_DEPTH", "load_yaml"]

#: The deepest nesting of sequences and mappings accepted (a policy needs 4, frontmatter 2-3).
MAX_YAML_DEPTH = 64


class _BoundedLoader(yaml.SafeLoader):
    """SafeLoader without anchors or aliases, and with bounded nesting."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event: Any = self.peek_event()  # type: ignore[no-untyped-call]
        mark: Any = getattr(event, "start_mark", None)
        if isinstance(event, AliasEvent):
            raise ComposerError(
                None,
                None,
                f"YAML aliases (*{event.anchor}) are not accepted; write the value out",
                mark,
            )
        if isinstance(event, NodeEvent) and event.anchor is not None:
            raise ComposerError(
                None,
                None,
                f"YAML anchors (&{event.anchor}) are not accepted; write the value out",
                mark,
            )
        nested = isinstance(event, CollectionStartEvent)
        if nested:
            self._depth += 1
            if self._depth > MAX_YAML_DEPTH:
                raise ComposerError(
                    None,
                    None,
                    f"YAML nested deeper than {MAX_YAML_DEPTH} levels; flatten the structure",
                    mark,
                )
        try:
            return super().compose_node(parent, index)
        finally:
            if nested:
                self._depth -= 1


#: A quote opens a quoted scalar only where a scalar can start (else it is plain text: it's).
_QUOTE_AFTER = frozenset(" \t\n[{,:-?")


def _flow_depth_error(text: str) -> yaml.YAMLError | None:
    """A refusal if flow brackets (``[``, ``{``) nest deeper than :data:`MAX_YAML_DEPTH`.

    Checked before parsing, in one pass: PyYAML's scanner keeps a pending simple key per open
    flow level and rescans them all for every token, so deep flow nesting costs quadratic time
    before the composer's own depth check is ever reached. Quoted scalars and comments are
    skipped; a bracket inside a plain scalar counts (erring towards refusal only past 64).
    """
    depth, quote, comment, line = 0, "", False, 0
    previous = "\n"
    for ch in text:
        if ch == "\n":
            line += 1
            comment = False
        elif comment:
            pass
        elif quote:
            if ch == quote:
                quote = ""
            elif ch == "\\" and quote == '"':
                ch = ""  # the escaped character that follows cannot close the quote
        elif ch in "'\"" and previous in _QUOTE_AFTER:
            quote = ch
        elif ch == "#" and previous in " \t\n":
            comment = True
        elif ch in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                return ComposerError(
                    None,
                    None,
                    f"YAML nested deeper than {MAX_YAML_DEPTH} levels; flatten the structure",
                    yaml.Mark("<yaml>", 0, line, 0, None, 0),
                )
        elif ch in "]}":
            depth = max(0, depth - 1)
        previous = ch
    return None


def load_yaml(text: str) -> Any:
    """Parse one YAML document safely (see the module docstring); raises ``yaml.YAMLError``."""
    too_deep = _flow_depth_error(text)
    if too_deep is not None:
        raise too_deep
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()
