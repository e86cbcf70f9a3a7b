"""Claude's memory tool over memdir: ``MemoryTool`` and ``AsyncMemoryTool``.

Subclasses of the ``anthropic`` SDK's ``BetaAbstractMemoryTool`` / ``BetaAsyncAbstractMemoryTool``
(the ``memory_20250818`` tool) built on a :class:`memdir.Client` / :class:`memdir.AsyncClient`::

    import anthropic
    import memdir
    from memdir.integrations.anthropic import MemoryTool

    client = memdir.Client("http://127.0.0.1:8420", token="mdr_...")   # agent:ci-bot's token
    memory = MemoryTool(client, prefix="/agents/ci-bot/memories")
    runner = anthropic.Anthropic().beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=2048, tools=[memory],
        messages=[{"role": "user", "content": "Remember that the CI cache lives in /var/ci."}],
    )
    final = runner.until_done()

The model addresses memory as ``/memories/...``; the tool maps ``/memories`` onto ``prefix`` in
the client's store (``/memories/notes.md`` → ``/agents/ci-bot/memories/notes.md``) and refuses
any other path, including ``..`` escapes. Every change is a memdir commit whose actor is the
client's principal, with the tool's ``provenance`` (session, reason, source kind).

Results and errors are the strings of the reference implementation,
``BetaLocalFilesystemMemoryTool``, so a model reads what it was trained on. Differences, all
because memory is not a file system: a directory's size is the total size of the visible files
beneath it (not the file system's block size), the ``/memories`` root always exists (empty
until written), and memdir's own outcomes — a change queued for review (``Proposed``), refused
by screening, forbidden by policy, or an invalid path — come back as memdir's one-line
messages. Edits read the file, check the reference's conditions, then write with ``If-Match``
(re-reading if another writer got in between), so no concurrent change is lost.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from anthropic.lib.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaCacheControlEphemeralParam,
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memdir.core.errors import (
    SURFACE_WORDS,
    InvalidInput,
    InvalidPath,
    MemdirError,
    NotFound,
    PathConflict,
    PreconditionFailed,
)
from memdir.core.model import Delete, Entry, FileView, Provenance, Rename
from memdir.core.paths import normalize_prefix
from memdir.sdk import AsyncClient, Client

__all__ = ["ROOT", "AsyncMemoryTool", "MemoryTool"]

#: The directory Claude's memory tool works in; every tool path starts with it.
ROOT = "/memories"
MAX_LINES = 999_999
_WIDTH = len(str(MAX_LINES))
_EDIT_ATTEMPTS = 5


@dataclass(frozen=True)
class _Do:
    """One SDK call a command needs: ``client.<method>(*args, **kwargs)``."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: A command as a generator of SDK calls (failures thrown back in) returning the result text.
_Script = Generator[_Do, Any, str]


# --- the reference's strings -------------------------------------------------------------------


def _format_size(size: int) -> str:
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    index = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**index)
    return f"{int(value)}{units[index]}" if value == int(value) else f"{value:.1f}{units[index]}"


def _directory_view(path: str, files: Sequence[tuple[str, int]]) -> str:
    """Children and grandchildren of ``path`` (``files``: relative path, size), as the
    reference lists them: depth first, by name, directories with a trailing ``/``."""
    total = 0
    items: dict[tuple[str, ...], list[Any]] = {}  # parts -> [size, is_dir]
    for relative, size in files:
        parts = tuple(relative.split("/"))
        if any(part.startswith(".") for part in parts):
            continue
        total += size
        for depth in range(1, min(len(parts), 2) + 1):
            item = items.setdefault(parts[:depth], [0, depth < len(parts)])
            item[0] += size
    lines = [f"{_format_size(total)}\t{path}"]
    for parts in sorted(items):
        size, is_dir = items[parts]
        lines.append(f"{_format_size(size)}\t{path}/{'/'.join(parts)}{'/' if is_dir else ''}")
    header = (
        f"Here're the files and directories up to 2 levels deep in {path}, excluding hidden items:"
    )
    return header + "\n" + "\n".join(lines)


def _file_view(path: str, content: str, view_range: Sequence[int] | None) -> str:
    lines = content.split("\n")
    if len(lines) > MAX_LINES:
        raise ToolError(f"File {path} exceeds maximum line limit of 999,999 lines.")
    shown, first = lines, 1
    if view_range and len(view_range) == 2:
        start = max(1, view_range[0]) - 1
        end = len(lines) if view_range[1] == -1 else view_range[1]
        shown, first = lines[start:end], start + 1
    numbered = [f"{str(i + first).rjust(_WIDTH)}\t{line}" for i, line in enumerate(shown)]
    return f"Here's the content of {path} with line numbers:\n" + "\n".join(numbered)


def _snippet(new_content: str, changed_line_index: int) -> str:
    lines = new_content.split("\n")
    start = max(0, changed_line_index - 2)
    end = min(len(lines), changed_line_index + 3)
    shown = [f"{str(n).rjust(_WIDTH)}\t{lines[n - 1]}" for n in range(start + 1, end + 1)]
    return (
        "The memory file has been edited. Here is the snippet showing the change (with line "
        "numbers):\n" + "\n".join(shown)
    )


def _occurrence_lines(content: str, old: str) -> list[int]:
    found, start = [], 0
    while (position := content.find(old, start)) != -1:
        found.append(content[:position].count("\n") + 1)
        start = position + 1
    return found


def _not_found(path: str) -> ToolError:
    return ToolError(f"The path {path} does not exist. Please provide a valid path.")


# --- the commands, once for both tools -------------------------------------------------------


class _Commands:
    """The six commands as scripts of SDK calls, shared by the sync and async tools."""

    def __init__(
        self,
        prefix: str,
        store: str | None,
        provenance: Provenance | None,
        context_budget: int | None = None,
    ) -> None:
        self.root = normalize_prefix(prefix)
        self.store = store
        self.provenance = provenance
        #: with a budget, the first view of /memories starts with the principal's context
        self.context_budget = context_budget

    def resolve(self, path: str) -> str:
        """The store path of a tool path; ToolError outside ``/memories`` (reference wording)."""
        if not isinstance(path, str) or not (path == ROOT or path.startswith(ROOT + "/")):
            raise ToolError(f"Path must start with /memories, got: {path}")
        parts: list[str] = []
        for segment in path[len(ROOT) :].split("/"):  # `..` resolved as the reference does
            if segment == "..":
                if not parts:
                    raise ToolError(f"Path {path} would escape /memories directory")
                parts.pop()
            elif segment not in ("", "."):
                parts.append(segment)
        if not parts:
            return self.root
        return ("" if self.root == "/" else self.root) + "/" + "/".join(parts)

    def _read(self, target: str) -> _Do:
        return _Do("read", (target,), {"store": self.store})

    def _change(self, method: str, *args: Any, **kwargs: Any) -> _Do:
        return _Do(method, args, {"store": self.store, "provenance": self.provenance, **kwargs})

    def _file(self, target: str) -> Generator[_Do, Any, FileView | None]:
        """The file at ``target``, or None if there is none (a directory, or nothing)."""
        if target == self.root and self.root == "/":
            return None
        try:
            found: FileView = yield self._read(target)
        except (NotFound, InvalidPath):
            return None
        return found

    def _files_under(self, target: str) -> Generator[_Do, Any, list[Entry]]:
        """Every file below the directory ``target`` (none: no such directory)."""
        try:
            entries: list[Entry] = yield _Do(
                "ls", (target,), {"recursive": True, "store": self.store}
            )
        except NotFound:
            return []
        return [e for e in entries if e.kind == "file" and e.path != target]

    def _existing_file(self, path: str, target: str) -> Generator[_Do, Any, FileView]:
        found = yield from self._file(target)
        if found is not None:
            return found
        if (yield from self._files_under(target)) or target == self.root:
            raise ToolError(f"The path {path} is not a file.")
        raise _not_found(path)

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> _Script:
        target = self.resolve(command.path)
        found = yield from self._file(target)
        if found is not None:
            return _file_view(command.path, found.content, command.view_range)
        entries = yield from self._files_under(target)
        if not entries and target != self.root:
            raise _not_found(command.path)
        base = len(target) + 1 if target != "/" else 1
        listing = _directory_view(command.path, [(e.path[base:], e.size) for e in entries])
        if self.context_budget is not None and target == self.root:
            budget, self.context_budget = self.context_budget, None  # the first view only
            context: str = yield _Do("context", (), {"budget": budget, "store": self.store})
            return context + "\n" + listing
        return listing

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> _Script:
        target = self.resolve(command.path)
        try:
            yield self._change("write", target, command.file_text, if_absent=True)
        except PreconditionFailed:
            raise ToolError(f"File {command.path} already exists") from None
        return f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> _Script:
        target = self.resolve(command.path)
        old, new = command.old_str, command.new_str
        for _ in range(_EDIT_ATTEMPTS):
            found = yield from self._existing_file(command.path, target)
            lines = _occurrence_lines(found.content, old)
            if not lines:
                raise ToolError(
                    f"No replacement was performed, old_str `{old}` did not appear verbatim "
                    f"in {command.path}."
                )
            if len(lines) > 1:
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in "
                    f"lines: {', '.join(map(str, lines))}. Please ensure it is unique"
                )
            if old == new:  # the reference reports the edit; memdir makes no empty version
                return _snippet(found.content, lines[0] - 1)
            try:
                yield self._change("str_replace", target, old, new, if_match=found.sha256)
            except PreconditionFailed:
                continue  # another writer got in between: look again
            return _snippet(found.content.replace(old, new), lines[0] - 1)
        raise ToolError(f"{command.path} kept changing while being edited; view it and retry")

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> _Script:
        target = self.resolve(command.path)
        for _ in range(_EDIT_ATTEMPTS):
            found = yield from self._existing_file(command.path, target)
            lines = found.content.split("\n")
            if lines[-1] == "":
                lines.pop()
            if command.insert_line < 0 or command.insert_line > len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {command.insert_line}. "
                    f"It should be within the range [0, {len(lines)}]."
                )
            lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
            content = "\n".join(lines)
            content += "" if content.endswith("\n") else "\n"
            try:
                yield self._change("write", target, content, if_match=found.sha256)
            except PreconditionFailed:
                continue
            return f"The file {command.path} has been edited."
        raise ToolError(f"{command.path} kept changing while being edited; view it and retry")

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> _Script:
        target = self.resolve(command.path)
        if target == self.root:
            raise ToolError("Cannot delete the /memories directory itself")
        try:
            yield self._change("delete", target)
        except NotFound:
            entries = yield from self._files_under(target)
            if not entries:
                raise ToolError(f"The path {command.path} does not exist") from None
            yield self._change("commit", [Delete(e.path, if_match=e.sha256) for e in entries])
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> _Script:
        old, new = self.resolve(command.old_path), self.resolve(command.new_path)
        if old == self.root:
            raise ToolError("Cannot rename the /memories directory itself")
        exists = ToolError(f"The destination {command.new_path} already exists")
        # the reference's order: an existing destination is refused before the source is looked
        # at (a file or a directory there, the root, or the source itself by another name)
        if new == self.root or (yield from self._file(new)) is not None:
            raise exists
        if (yield from self._files_under(new)):
            raise exists
        try:
            yield self._change("rename", old, new)
        except PathConflict:
            raise exists from None
        except NotFound:
            entries = yield from self._files_under(old)
            if not entries:
                raise ToolError(f"The path {command.old_path} does not exist") from None
            if new == self.root or new.startswith(old + "/"):
                raise exists from None
            moves = [Rename(e.path, new + e.path[len(old) :], if_match=e.sha256) for e in entries]
            try:
                yield self._change("commit", moves)
            except PathConflict:
                raise exists from None
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all(self) -> _Script:
        entries = yield from self._files_under(self.root)
        if entries:
            yield self._change("commit", [Delete(e.path, if_match=e.sha256) for e in entries])
        return "All memory cleared"


def _refusal(error: MemdirError, root: str) -> ToolError:
    """A memdir error the reference has no wording for: memdir's one-line message, in the
    memory tool's words — the path under ``/memories`` (never the store prefix behind it)
    and a next step the model can take with its six commands."""
    store_path = error.details.get("path")
    shown: str | None = None
    if isinstance(store_path, str) and (
        store_path == root or root == "/" or store_path.startswith(root + "/")
    ):
        relative = store_path if root == "/" else store_path[len(root) :]
        shown = ROOT + (relative if relative != "/" else "")
    return ToolError(error.say(SURFACE_WORDS["memory_tool"], shown=shown))


def _refuse_owner(client: Client | AsyncClient, as_owner: bool) -> None:
    """The model is an agent: it acts as a named principal, never as the owner by default."""
    if client.acts_as_owner and not as_owner:
        raise InvalidInput(
            "the memory tool's client acts as the database owner; open it as the agent's "
            "principal (memdir.Client(db=..., principal='agent:NAME') or a token), or pass "
            "as_owner=True to mean it"
        )


class MemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool (``memory_20250818``) over a :class:`memdir.Client`.

    ``prefix``: the store directory ``/memories`` stands for (default ``/memories``).
    ``store``: the store (default: the client's). ``provenance``: session, reason and source
    kind recorded with every change (the actor is always the client's principal).
    ``as_owner``: accept an in-process client acting as the database owner (refused by
    default: the model would administer the database). ``context_budget``: the first view of
    ``/memories`` starts with the principal's context in that many tokens (docs/context.md:
    core files whole, then an index of every readable file, named by store path); None (the
    default) keeps the reference tool's answers exactly.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str = ROOT,
        store: str | None = None,
        provenance: Provenance | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        as_owner: bool = False,
        context_budget: int | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        _refuse_owner(client, as_owner)
        self.client = client
        self._commands = _Commands(prefix, store, provenance, context_budget)

    @property
    def prefix(self) -> str:
        return self._commands.root

    def _run(self, script: _Script) -> str:
        try:
            step = next(script)
            while True:
                try:
                    value = getattr(self.client, step.method)(*step.args, **step.kwargs)
                except MemdirError as error:
                    step = script.throw(error)
                else:
                    step = script.send(value)
        except StopIteration as stop:
            return str(stop.value)
        except MemdirError as error:
            raise _refusal(error, self._commands.root) from error

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return self._run(self._commands.view(command))

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return self._run(self._commands.create(command))

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return self._run(self._commands.str_replace(command))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return self._run(self._commands.insert(command))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return self._run(self._commands.delete(command))

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return self._run(self._commands.rename(command))

    def clear_all_memory(self) -> str:
        """Delete every file under the prefix, in one commit."""
        return self._run(self._commands.clear_all())


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The async twin of :class:`MemoryTool`, over a :class:`memdir.AsyncClient`."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        prefix: str = ROOT,
        store: str | None = None,
        provenance: Provenance | None = None,
        cache_control: BetaCacheControlEphemeralParam | None = None,
        as_owner: bool = False,
        context_budget: int | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        _refuse_owner(client, as_owner)
        self.client = client
        self._commands = _Commands(prefix, store, provenance, context_budget)

    @property
    def prefix(self) -> str:
        return self._commands.root

    async def _run(self, script: _Script) -> str:
        try:
            step = next(script)
            while True:
                try:
                    value = await getattr(self.client, step.method)(*step.args, **step.kwargs)
                except MemdirError as error:
                    step = script.throw(error)
                else:
                    step = script.send(value)
        except StopIteration as stop:
            return str(stop.value)
        except MemdirError as error:
            raise _refusal(error, self._commands.root) from error

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run(self._commands.view(command))

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run(self._commands.create(command))

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run(self._commands.str_replace(command))

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run(self._commands.insert(command))

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run(self._commands.delete(command))

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run(self._commands.rename(command))

    async def clear_all_memory(self) -> str:
        """Delete every file under the prefix, in one commit."""
        return await self._run(self._commands.clear_all())
