"""Claude's memory tool over memdir, driven by the `anthropic` SDK's own tool runner.

A fake Messages API on 127.0.0.1 plays a model that calls the memory tool (view, create,
str_replace, insert, rename, mistakes) and then answers in text. The same conversation runs
against memdir's ``MemoryTool`` / ``AsyncMemoryTool`` and against the SDK's reference
``BetaLocalFilesystemMemoryTool``: the tool results the fake API receives must be the same
strings (directory sizes aside: memdir sums file sizes where a file system reports blocks), and
memdir must hold the files, versions and provenance of the acting agent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest
from anthropic.lib.tools import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool

import memdir
from fake_models import FakeServer, Recorded
from memdir import OWNER, Provenance
from memdir.integrations.anthropic import AsyncMemoryTool, MemoryTool

PREFIX = "/agents/ci-bot/memories"
NOTES = "/memories/ci.md"


@pytest.fixture(autouse=True)
def _no_memdir_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients read MEMDIR_TOKEN / MEMDIR_DB when not told; tests tell them everything."""
    for name in ("MEMDIR_TOKEN", "MEMDIR_DB"):
        monkeypatch.delenv(name, raising=False)


def use(command: str, **arguments: Any) -> dict[str, Any]:
    return {"command": command, **arguments}


#: The model's turns: each a list of memory-tool calls; an empty turn ends with text.
TURNS: list[list[dict[str, Any]]] = [
    [use("view", path="/memories")],
    [use("create", path=NOTES, file_text="# CI\n- cache: /tmp/cache\n- shell: bash\n")],
    [use("str_replace", path=NOTES, old_str="/tmp/cache", new_str="/var/ci/cache")],
    [use("view", path=NOTES), use("view", path=NOTES, view_range=[2, -1])],
    [
        use("view", path="/etc/passwd"),
        use("view", path="/memories/../secrets"),
        use("view", path="/memories/nothing.md"),
        use("str_replace", path=NOTES, old_str="nope", new_str="x"),
        use("str_replace", path=NOTES, old_str="- ", new_str="* "),
        use("create", path=NOTES, file_text="again"),
        use("insert", path=NOTES, insert_line=99, insert_text="x"),
    ],
    [use("insert", path=NOTES, insert_line=1, insert_text="- runner: linux\n")],
    [use("rename", old_path=NOTES, new_path="/memories/notes/ci.md")],
    [use("view", path="/memories")],
    [use("delete", path="/memories/nothing"), use("view", path="/memories/notes/ci.md")],
    [],
]


class FakeMessagesAPI(FakeServer):
    """``POST /v1/messages``: the next scripted assistant turn; every request is kept."""

    def __init__(self, turns: list[list[dict[str, Any]]]) -> None:
        self.turns = turns
        super().__init__()

    def route(self, record: Recorded) -> tuple[int, dict[str, str], Any]:
        return 200, {}, self.reply(len(self.requests) - 1, record.body["model"])

    def reply(self, turn: int, model: str) -> dict[str, Any]:
        calls = self.turns[turn]
        content: list[dict[str, Any]] = [
            {"type": "tool_use", "id": f"toolu_{turn}_{i}", "name": "memory", "input": call}
            for i, call in enumerate(calls)
        ] or [{"type": "text", "text": "Noted in memory."}]
        return {
            "id": f"msg_{turn}", "type": "message", "role": "assistant", "model": model,
            "content": content, "stop_reason": "tool_use" if calls else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 10},
        }  # fmt: skip

    def tool_results(self) -> list[tuple[str, bool]]:
        """(content, is_error) of every tool result the runner sent back, in order."""
        out = []
        for request in self.requests[1:]:
            for block in request.body["messages"][-1]["content"]:
                if block["type"] == "tool_result":
                    out.append((block["content"], bool(block.get("is_error"))))
        return out


@pytest.fixture
def fake_api() -> Iterator[FakeMessagesAPI]:
    api = FakeMessagesAPI(TURNS)
    yield api
    api.close()


def run_sync(tool: Any, url: str) -> Any:
    client = anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0)
    runner = client.beta.messages.tool_runner(
        model="claude-test", max_tokens=1024, tools=[tool],
        messages=[{"role": "user", "content": "Keep notes about our CI in memory."}],
    )  # fmt: skip
    return runner.until_done()


def normalise(result: str) -> str:
    """Directory sizes differ by design (file-size sums vs. file-system blocks)."""
    return re.sub(r"^[0-9.]+[BKMG]\t(/memories(/.*/)?)$", r"<dir>\t\1", result, flags=re.M)


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, bool]]:
    """What the reference implementation answers to the scripted conversation."""
    api = FakeMessagesAPI(TURNS)
    try:
        tool = BetaLocalFilesystemMemoryTool(str(tmp_path_factory.mktemp("reference")))
        final = run_sync(tool, api.url)
        assert final.content[0].text == "Noted in memory."
        return api.tool_results()
    finally:
        api.close()


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    try:
        svc.create_store(OWNER, "default")
        svc.add_principal(OWNER, "agent:ci-bot")
    finally:
        svc.db.close()
    return url


def check_memdir(db: str, session: str) -> None:
    with memdir.Client(db=db) as owner:
        path = PREFIX + "/notes/ci.md"
        assert owner.glob("/**") == [path]
        assert owner.read(path).content == (
            "# CI\n- runner: linux\n- cache: /var/ci/cache\n- shell: bash\n"
        )
        versions = owner.history(path)
        assert [v.operation for v in versions] == ["renamed", "modified", "modified", "created"]
        assert {v.actor for v in versions} == {"agent:ci-bot"}
        assert {v.session for v in versions} == {session}
        assert versions[0].old_path == PREFIX + "/ci.md"


def test_the_tool_runner_drives_memory_tool(
    fake_api: FakeMessagesAPI, reference: list[tuple[str, bool]], db: str
) -> None:
    with memdir.Client(db=db, principal="agent:ci-bot") as client:
        tool = MemoryTool(client, prefix=PREFIX, provenance=Provenance(session="sess-sync"))
        final = run_sync(tool, fake_api.url)
    assert final.content[0].text == "Noted in memory."
    assert fake_api.requests[0].body["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    got = fake_api.tool_results()
    assert [(normalise(c), e) for c, e in got] == [(normalise(c), e) for c, e in reference]
    assert got[0][0].endswith("\n0B\t/memories")  # an empty /memories exists
    check_memdir(db, "sess-sync")


def test_the_async_tool_runner_drives_async_memory_tool(
    fake_api: FakeMessagesAPI, reference: list[tuple[str, bool]], db: str
) -> None:
    async def main() -> Any:
        async with memdir.AsyncClient(db=db, principal="agent:ci-bot") as client:
            tool = AsyncMemoryTool(client, prefix=PREFIX, provenance=Provenance(session="s-a"))
            api = anthropic.AsyncAnthropic(api_key="k", base_url=fake_api.url, max_retries=0)
            runner = api.beta.messages.tool_runner(
                model="claude-test", max_tokens=1024, tools=[tool],
                messages=[{"role": "user", "content": "Keep notes about our CI in memory."}],
            )  # fmt: skip
            return await runner.until_done()

    final = anyio.run(main)
    assert final.content[0].text == "Noted in memory."
    got = fake_api.tool_results()
    assert [(normalise(c), e) for c, e in got] == [(normalise(c), e) for c, e in reference]
    check_memdir(db, "s-a")


def test_directories_refusals_and_clearing(db: str) -> None:
    def call(tool: MemoryTool, command: str, **arguments: Any) -> str:
        return str(tool.call(use(command, **arguments)))

    with memdir.Client(db=db, principal="agent:ci-bot") as client:
        tool = MemoryTool(client, prefix=PREFIX)
        for name in ("a/x.md", "a/b/y.md", "a/.hidden.md", "top.md"):
            call(tool, "create", path=f"/memories/{name}", file_text="12345")
        listing = call(tool, "view", path="/memories")
        assert listing.splitlines()[1:] == [
            "15B\t/memories", "10B\t/memories/a/", "5B\t/memories/a/b/", "5B\t/memories/a/x.md",
            "5B\t/memories/top.md",
        ]  # fmt: skip
        assert call(tool, "rename", old_path="/memories/a", new_path="/memories/c") == (
            "Successfully renamed /memories/a to /memories/c"
        )
        assert client.glob(PREFIX + "/c/**") == [PREFIX + "/c/.hidden.md", PREFIX + "/c/b/y.md",
                                                 PREFIX + "/c/x.md"]  # fmt: skip
        with pytest.raises(ToolError, match=r"The destination /memories/top\.md already exists"):
            call(tool, "rename", old_path="/memories/c/x.md", new_path="/memories/top.md")
        with pytest.raises(ToolError, match="Cannot delete the /memories directory itself"):
            call(tool, "delete", path="/memories/")
        with pytest.raises(ToolError, match=r"The path /memories/c is not a file\."):
            call(tool, "str_replace", path="/memories/c", old_str="1", new_str="2")
        assert call(tool, "delete", path="/memories/c") == "Successfully deleted /memories/c"
        assert client.glob(PREFIX + "/**") == [PREFIX + "/top.md"]
        assert tool.clear_all_memory() == "All memory cleared"
        assert client.glob(PREFIX + "/**") == []

        outside = MemoryTool(client, prefix="/org/memories")  # the agent may only propose there
        with memdir.Client(db=db) as owner:
            owner.write("/org/memories/rules.md", "- be kind\n")
        assert "be kind" in call(outside, "view", path="/memories/rules.md")
        with pytest.raises(ToolError, match=r"^not applied: .* proposal"):
            call(outside, "create", path="/memories/new.md", file_text="x")
        with pytest.raises(ToolError, match="invalid path"):
            call(tool, "create", path="/memories/bad\x07name.md", file_text="x")
