"""Tool paths ↔ store paths.

MCP tool paths are memdir paths under a configurable *root* prefix of the store (default ``/``,
the whole store): with root ``/agents/bot``, the tool path ``/notes.md`` is the store path
``/agents/bot/notes.md``. Agents trained on Claude's memory tool address memory as
``/memories/...``; with the alias on (the default), ``/memories`` and ``/memories/...`` name the
root too, so ``/memories/org/rules.md`` is ``/org/rules.md`` under root ``/``. Results name
paths the way the caller spelled them: with ``/memories`` if the caller used it. Under
``/memories``, ``.`` and ``..`` resolve as the memory tool resolves them (``..`` above
``/memories`` is refused in its words); other paths are plain store paths, without either.
"""

from __future__ import annotations

from dataclasses import dataclass

from memdir.core import memory_tool
from memdir.core.errors import InvalidPath
from memdir.core.paths import normalize_prefix

__all__ = ["ALIAS", "Namespace", "Resolved"]

ALIAS = "/memories"


@dataclass(frozen=True)
class Resolved:
    """A tool path resolved: the store path, and whether the caller used the alias."""

    store_path: str  # "/" or "/a/b" (no trailing slash)
    alias: bool


@dataclass(frozen=True)
class Namespace:
    """Maps tool paths onto one store prefix (``root``) and back."""

    root: str = "/"
    memories_alias: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", normalize_prefix(self.root))

    def resolve(self, tool_path: str) -> Resolved:
        """The store path a tool path names (a trailing ``/`` is accepted and dropped)."""
        if not isinstance(tool_path, str) or not tool_path.startswith("/"):
            raise InvalidPath(
                f"Path must start with /, got: {tool_path}; memory paths look like {self.example}",
                path=str(tool_path),
            )
        alias = self.memories_alias and (tool_path == ALIAS or tool_path.startswith(ALIAS + "/"))
        # under /memories, `.` and `..` resolve as Claude's memory tool resolves them
        relative = memory_tool.relative_path(tool_path) if alias else tool_path
        try:
            relative = normalize_prefix(relative)  # validates; "/" for the root itself
        except InvalidPath as error:  # name the path as the caller wrote it
            reason = error.details.get("reason", "it is not a valid path")
            raise InvalidPath(
                f"invalid path {tool_path!r}: {reason}; memory paths look like {self.example}",
                path=tool_path,
                reason=reason,
            ) from None
        if relative == "/":
            return Resolved(self.root, alias)
        base = "" if self.root == "/" else self.root
        return Resolved(base + relative, alias)

    @property
    def example(self) -> str:
        """A path to show in messages: under ``/memories`` when the alias is on, as the
        memory tool a model was trained on names them."""
        return f"{ALIAS}/notes.md" if self.memories_alias else "/notes.md"

    def is_root(self, resolved: Resolved) -> bool:
        return resolved.store_path == self.root

    def display(self, store_path: str, alias: bool = False) -> str:
        """A store path as a tool path (under the alias when ``alias``)."""
        relative = store_path if self.root == "/" else store_path[len(self.root) :] or "/"
        if alias:
            return ALIAS if relative == "/" else ALIAS + relative
        return relative

    def inside(self, store_path: str) -> bool:
        """True if ``store_path`` lies under the root (so it has a tool path)."""
        return self.root == "/" or store_path == self.root or store_path.startswith(self.root + "/")
