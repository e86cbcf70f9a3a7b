"""The one SDK memory-tool case that differs over memdir: a file of a million lines.

The SDK's ``test_view_error_for_files_with_too_many_lines`` creates a 1,000,000-line file and
expects ``view`` to refuse it (``exceeds maximum line limit of 999,999 lines``). memdir refuses
that file earlier, when it is created: it is over ``max_file_bytes`` (100 kB by default), and
the model is told so with the limit and what to do — at the write, where it can still split the
file, rather than at a later view (docs/sdk.md). With the limit raised so the file fits, the
SDK's case passes as written: the view refuses it with the reference's words.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from anthropic.lib.tools import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818ViewCommand,
)

import anthropic_sdk_tool

TOO_MANY_LINES = "\n".join(["line"] * 1000000)
CREATE = BetaMemoryTool20250818CreateCommand(
    command="create", file_text=TOO_MANY_LINES, path="/memories/huge.txt"
)
VIEW = BetaMemoryTool20250818ViewCommand(command="view", path="/memories/huge.txt")


def test_the_reference_creates_it_and_refuses_the_view(tmp_path: Path) -> None:
    reference = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    assert reference.create(CREATE) == "File created successfully at: /memories/huge.txt"
    with pytest.raises(ToolError, match=r"exceeds maximum line limit of 999,999 lines"):
        reference.view(VIEW)


def test_memdir_refuses_it_at_create_with_the_limit(tmp_path: Path) -> None:
    for tool in anthropic_sdk_tool.store_tool(tmp_path):
        with pytest.raises(ToolError) as refused:
            tool.create(CREATE)
        message = str(refused.value)
        assert message == (
            "content is 4999999 bytes, over the limit of 100000; split it into several files"
        )
        assert anthropic_sdk_tool.PREFIX not in message, message
        assert anthropic_sdk_tool.directory_snapshot(tool) == {}
        with pytest.raises(ToolError, match=r"The path /memories/huge.txt does not exist"):
            tool.view(VIEW)


def test_with_room_for_it_the_view_refuses_it_as_the_reference_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMDIR_MAX_FILE_BYTES", str(8 << 20))
    for tool in anthropic_sdk_tool.store_tool(tmp_path):
        assert tool.create(CREATE) == "File created successfully at: /memories/huge.txt"
        with pytest.raises(ToolError, match=r"exceeds maximum line limit of 999,999 lines"):
            tool.view(VIEW)
