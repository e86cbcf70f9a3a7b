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
``BetaLocalFilesystemMemoryTool``, so a model reads what it was trained on; they and the
commands' rules are written once in :mod:`memdir.core.memory_tool`, which the MCP server's
memory tools use too. Differences, all
because memory is not a file system: a directory's size is the total size of the visible files
beneath it (not the file system's block size), the ``/memories`` root always exists (empty
until written), and memdir's own outcomes — a change queued for review (``Proposed``), refused
by screening, forbidden by policy, or an invalid path — come back as memdir's one-line
messages. Edits read the file, check the reference's conditions, then write with ``If-Match``
(re-reading if another writer got in between), so no concurrent change is lost.
"""

from __future__ import annotations

from collections.abc import Generator
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

from memdir.core import memory_tool as text
from memdir.core.errors import (
    SURFACE_WORDS,
    InvalidInput,
    InvalidPath,
    MemdirError,
    NotFound,
    PathConflict,
    PreconditionFailed,
)
from memdir.core.memory_tool import ROOT, Refusal
from memdir.core.model import Delete, Entry, FileView, Provenance, Rename
from memdir.core.paths import normalize_prefix
from memdir.sdk import AsyncClient, Client

__all__ = ["ROOT", "AsyncMemoryTool", "MemoryTool"]

_EDIT_ATTEMPTS = 5


@dataclass(frozen=True)
class _Do:
    """One SDK call a command needs: ``client.<method>(*args, **kwargs)``."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


#: A command as a generator of SDK calls (failures thrown back in) returning the result text.
_Script = Generator[_Do, Any, str]


def _refuse(text: str | None) -> None:
    if text is not None:
        raise Refusal(text)


# --- the commands, once for both tools: the facts through the SDK, the rules in core -------


class _Commands:
    """The six commands as scripts of SDK calls, shared by the sync and async tools.

    Each gathers what :mod:`memdir.core.memory_tool` decides on (is there a file, files beneath
    a directory, a file's content) and answers with its text.
    """

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
        """The store path of a tool path; refused outside ``/memories`` (reference wording)."""
        relative = text.relative_path(path)
        if relative == "/":
            return self.root
        return ("" if self.root == "/" else self.root) + relative

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

    def _kind(self, target: str) -> Generator[_Do, Any, text.Kind]:
        """What ``target`` names: a file, a directory (files beneath it, or the root), nothing."""
        if target == self.root:
            return "directory"
        if (yield from self._file(target)) is not None:
            return "file"
        return "directory" if (yield from self._files_under(target)) else None

    def _existing_file(self, path: str, target: str) -> Generator[_Do, Any, FileView]:
        found = yield from self._file(target)
        if found is not None:
            return found
        if (yield from self._files_under(target)) or target == self.root:
            raise Refusal(text.not_a_file(path))
        raise Refusal(text.not_found(path))

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> _Script:
        target = self.resolve(command.path)
        found = yield from self._file(target)
        if found is not None:
            return text.file_view(command.path, found.content, command.view_range)
        entries = yield from self._files_under(target)
        if not entries and target != self.root:
            raise Refusal(text.not_found(command.path))
        base = len(target) + 1 if target != "/" else 1
        listing = text.directory_view(command.path, [(e.path[base:], e.size) for e in entries])
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
            raise Refusal(text.already_exists(command.path)) from None
        return text.created(command.path)

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> _Script:
        target = self.resolve(command.path)
        old, new = command.old_str, command.new_str
        for _ in range(_EDIT_ATTEMPTS):
            found = yield from self._existing_file(command.path, target)
            content, line = text.plan_replace(command.path, found.content, old, new)
            operation = text.replace_operation(target, old, new, content, found.sha256)
            try:
                yield self._change("commit", [operation])
            except PreconditionFailed:
                continue  # another writer got in between: look again
            return text.replaced(content, line)
        raise Refusal(text.kept_changing(command.path))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> _Script:
        target = self.resolve(command.path)
        for _ in range(_EDIT_ATTEMPTS):
            found = yield from self._existing_file(command.path, target)
            content = text.plan_insert(
                command.path, found.content, command.insert_line, command.insert_text
            )
            try:
                yield self._change("commit", [text.insert_operation(target, content, found.sha256)])
            except PreconditionFailed:
                continue
            return text.edited(command.path)
        raise Refusal(text.kept_changing(command.path))

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> _Script:
        target = self.resolve(command.path)
        _refuse(text.delete_refusal(command.path, target="directory", is_root=target == self.root))
        try:
            yield self._change("delete", target)
        except NotFound:
            entries = yield from self._files_under(target)
            kind: text.Kind = "directory" if entries else None
            _refuse(text.delete_refusal(command.path, target=kind, is_root=False))
            yield self._change("commit", [Delete(e.path, if_match=e.sha256) for e in entries])
        return text.deleted(command.path)

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> _Script:
        old, new = self.resolve(command.old_path), self.resolve(command.new_path)
        moving_root = old == self.root
        onto_itself = old == new
        destination = None if moving_root or onto_itself else (yield from self._kind(new))
        source = None if moving_root or destination else (yield from self._kind(old))
        refusal = text.rename_refusal(
            command.old_path,
            command.new_path,
            source=source,
            destination=destination,
            source_is_root=moving_root,
            into_source=new.startswith(old + "/"),
            onto_itself=onto_itself,
        )
        _refuse(refusal)
        try:
            if source == "file":
                yield self._change("rename", old, new)
            else:
                entries = yield from self._files_under(old)
                moves = [
                    Rename(e.path, new + e.path[len(old) :], if_match=e.sha256) for e in entries
                ]
                yield self._change("commit", moves)
        except PathConflict:
            if (yield from self._kind(new)) is not None:  # written meanwhile
                raise Refusal(text.destination_exists(command.new_path)) from None
            raise  # memdir's own reason (a file where the destination needs a directory)
        return text.renamed(command.old_path, command.new_path)

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
        except Refusal as refusal:
            raise ToolError(refusal.text) from None
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
        except Refusal as refusal:
            raise ToolError(refusal.text) from None
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
