"""memdir's stand-ins for what the SDK's memory-tool tests touch beside the tool.

The SDK's own tests (``tests/test_anthropic_sdk_memory_tool.py``, vendored) build
``BetaLocalFilesystemMemoryTool`` over a temporary directory and look at that directory: a
snapshot of every file, a file seeded or read as bytes, the ``memory_root`` that must survive a
refused delete, the ``base_path`` that must not leak into a message. Here the tool is memdir's
adapter over a real SQLite database, and those looks go to the store instead, through a
second client of the same principal (never through the tool under test):

- :func:`directory_snapshot` — every file under the tool's prefix, keyed as the reference keys
  them (``memories/<path>``);
- ``tool.memory_root / "name"`` — a :class:`StoreFile` whose ``write_bytes`` writes the store
  file and ``read_bytes`` reads it back;
- ``tool.memory_root.is_dir()`` — ``view /memories`` still answers (memdir's root always exists);
- ``tool.base_path`` — the store prefix ``/memories`` stands for: what must never show in a
  message, as the temporary directory must not in the reference's.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import memdir
from memdir import OWNER
from memdir.core.errors import NotFound
from memdir.integrations.anthropic import AsyncMemoryTool, MemoryTool

__all__ = [
    "PREFIX",
    "StoreMemoryRoot",
    "async_store_tool",
    "directory_snapshot",
    "store_tool",
]

#: A non-default prefix, so a leaked store path would show in any message.
PREFIX = "/agents/bot/memories"
PRINCIPAL = "agent:bot"


_TEMPLATE: list[Path] = []


def _database(directory: Path) -> str:
    """A fresh SQLite database with the default store and the agent the tool acts as: a copy
    of one made (migrated, store created, agent registered) once per test process."""
    if not _TEMPLATE:
        folder = tempfile.mkdtemp(prefix="memdir-sdk-template-")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        made = Path(folder) / "memdir.db"
        service = memdir.open(f"sqlite:///{made}", create=True)
        service.create_store(OWNER, "default")
        service.add_principal(OWNER, PRINCIPAL)
        service.db.close()
        _TEMPLATE.append(made)
    database = directory / "memdir.db"
    shutil.copyfile(_TEMPLATE[0], database)
    return f"sqlite:///{database}"


class StoreFile:
    """A store file where the reference's tests hold a ``pathlib.Path`` under the memory root."""

    def __init__(self, client: memdir.Client, path: str) -> None:
        self.client = client
        self.path = path

    def write_bytes(self, data: bytes) -> None:
        self.client.write(self.path, data.decode("utf-8"))

    def read_bytes(self) -> bytes:
        return self.client.read(self.path).content.encode("utf-8")


class StoreMemoryRoot:
    """The tool's ``/memories`` directory, as the reference's tests use ``memory_root``."""

    def __init__(self, client: memdir.Client, tool: MemoryTool | None) -> None:
        self.client = client
        self.tool = tool

    def __truediv__(self, name: str) -> StoreFile:
        return StoreFile(self.client, f"{PREFIX}/{name}")

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to make: in memdir a directory is the files beneath it."""

    def is_dir(self) -> bool:
        assert self.tool is not None
        return self.tool.view(_view_root()).startswith("Here're the files and directories")


class AsyncStoreMemoryRoot(StoreMemoryRoot):
    """``memory_root`` of the async tool: ``is_dir`` is awaited, as on ``anyio.Path``."""

    def __init__(self, client: memdir.Client, tool: AsyncMemoryTool) -> None:
        super().__init__(client, None)
        self.async_tool = tool

    async def is_dir(self) -> bool:  # type: ignore[override]
        answer = await self.async_tool.view(_view_root())
        return answer.startswith("Here're the files and directories")


def _view_root() -> Any:
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    return BetaMemoryTool20250818ViewCommand(command="view", path="/memories")


def directory_snapshot(tool: MemoryTool | AsyncMemoryTool) -> dict[str, str]:
    """Every file under the tool's prefix, keyed ``memories/<relative path>`` (as the
    reference's ``get_directory_snapshot`` keys the files of its base directory)."""
    seer: memdir.Client = tool.seer  # type: ignore[union-attr]
    try:
        entries = seer.ls(PREFIX, recursive=True)
    except NotFound:
        return {}
    return {
        "memories/" + e.path[len(PREFIX) + 1 :]: seer.read(e.path).content
        for e in entries
        if e.kind == "file"
    }


def store_tool(tmp_path: Path) -> Iterator[MemoryTool]:
    """``MemoryTool`` over a real SQLite store, with the attributes the reference's tests use."""
    url = _database(tmp_path)
    with (
        memdir.Client(db=url, principal=PRINCIPAL) as client,
        memdir.Client(db=url, principal=PRINCIPAL) as seer,
    ):
        tool = MemoryTool(client, prefix=PREFIX)
        tool.seer = seer  # type: ignore[attr-defined]
        tool.base_path = PREFIX  # type: ignore[attr-defined]
        tool.memory_root = StoreMemoryRoot(seer, tool)  # type: ignore[attr-defined]
        yield tool


async def async_store_tool(tmp_path: Path) -> AsyncIterator[AsyncMemoryTool]:
    """``AsyncMemoryTool`` over a real SQLite store (seeded and inspected synchronously)."""
    url = _database(tmp_path)
    with memdir.Client(db=url, principal=PRINCIPAL) as seer:
        async with memdir.AsyncClient(db=url, principal=PRINCIPAL) as client:
            tool = AsyncMemoryTool(client, prefix=PREFIX)
            tool.seer = seer  # type: ignore[attr-defined]
            tool.base_path = PREFIX  # type: ignore[attr-defined]
            tool.memory_root = AsyncStoreMemoryRoot(seer, tool)  # type: ignore[attr-defined]
            yield tool
