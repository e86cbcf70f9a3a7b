"""Vendor the anthropic SDK's memory-tool tests into tests/, adapted to memdir's adapter.

    pip download anthropic==VERSION --no-binary :all: --no-deps -d /tmp/sdist
    python scripts/vendor_sdk_memory_tests.py /tmp/sdist/anthropic-VERSION.tar.gz

writes tests/test_anthropic_sdk_memory_tool.py from the sdist's
tests/lib/tools/memory_tools/test_filesystem.py with the changes its header lists (fixtures,
the directory snapshot, the cases that are about a file system), then ``ruff format``s it; the
tests then run without network. Copy the sdist's LICENSE to tests/LICENSE-anthropic-sdk.txt when
it changes. Each replacement checks that it found what it replaces, so a changed upstream file
stops the script rather than vendoring a half-adapted copy.
"""
# ruff: noqa: E501

import re
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MEMBER = "tests/lib/tools/memory_tools/test_filesystem.py"
TARGET = ROOT / "tests" / "test_anthropic_sdk_memory_tool.py"

HEADER = """# The anthropic Python SDK's own memory-tool tests, run against memdir's adapter.
#
# Vendored from the SDK's source distribution, anthropic {version} (anthropic-{version}.tar.gz,
# tests/lib/tools/memory_tools/test_filesystem.py). Copyright 2023 Anthropic, PBC. Licensed under
# the Apache License, Version 2.0 (the licence of that version; the text is in
# tests/LICENSE-anthropic-sdk.txt): you may not use this file except in compliance with it.
# Distributed on an "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND.
#
# Changed from the original (nothing else is):
# - the imports: the tool classes are memdir's ``MemoryTool`` / ``AsyncMemoryTool`` under the
#   reference's names, and the two fixtures build them over a real SQLite store
#   (tests/anthropic_sdk_tool.py); the test bodies are the SDK's, formatted by ``ruff format``;
# - ``get_directory_snapshot(str(tool.base_path))`` reads the store under the tool's prefix
#   (``get_directory_snapshot(tool)``), and the async CRLF tests take ``tool.memory_root``
#   as it is instead of ``Path(str(tool.memory_root))`` (there is no directory to convert);
# - the cases that are about a file system (symlinks, ``_validate_path``, POSIX mode bits)
#   are skipped with the reason, and the one whose difference docs/sdk.md lists is an xfail
#   naming it (both in ``NOT_FOR_A_STORE`` below);
# - the async class is marked for anyio (the SDK's suite runs it under pytest-asyncio's auto mode).
"""
OLD_IMPORTS = """from anthropic.lib.tools._beta_builtin_memory_tool import (
    BetaLocalFilesystemMemoryTool,
    BetaAsyncLocalFilesystemMemoryTool,
)
"""

NEW_IMPORTS = """
import anthropic_sdk_tool
from memdir.integrations.anthropic import MemoryTool as BetaLocalFilesystemMemoryTool
from memdir.integrations.anthropic import AsyncMemoryTool as BetaAsyncLocalFilesystemMemoryTool
"""

FIXTURES = """@pytest.fixture
def sync_local_filesystem_tool(tmp_path: Path) -> Iterator[BetaLocalFilesystemMemoryTool]:
    yield from anthropic_sdk_tool.store_tool(tmp_path)


@pytest.fixture
async def async_local_filesystem_tool(tmp_path: Path) -> AsyncIterator[BetaAsyncLocalFilesystemMemoryTool]:
    async for tool in anthropic_sdk_tool.async_store_tool(tmp_path):
        yield tool


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


#: The SDK's cases that do not apply to a store, by test name: skipped (a file system's own
#: behaviour) or expected to fail in the way docs/sdk.md lists as a difference.
NOT_FOR_A_STORE: dict[str, tuple[str, str]] = {
    **dict.fromkeys(
        [
            "test_read_rejects_symlink_created_after_validation",
            "test_read_rejects_file_replaced_with_symlink_before_open",
            "test_view_rejects_directory_symlink_created_after_validation",
            "test_symlink_validation_reject_symlink_pointing_outside_memories",
            "test_view_lists_symlinks_only_when_they_stay_inside_memories",
            "test_symlink_validation_reject_creating_files_through_symlink_pointing_outside",
            "test_symlink_validation_reject_parent_directory_that_is_symlink_pointing_outside",
        ],
        ("skip", "symlinks: a store has no links, every path is a key under the prefix"),
    ),
    "test_validate_path_returns_resolved_path_not_symlink_target": (
        "skip",
        "symlinks and the reference's private _validate_path: a store path is never resolved "
        "through a link",
    ),
    "test_mkdir_parents_not_world_writable_under_permissive_umask": (
        "skip",
        "OS permissions of the directories the reference makes: a store makes none "
        "(who may read is memdir's path permissions)",
    ),
    "test_view_error_for_files_with_too_many_lines": (
        "xfail",
        "docs/sdk.md: a file over max_file_bytes (100 kB by default) is refused when it is "
        "created, so a million-line file never reaches view "
        "(test_anthropic_sdk_memory_tool_limits.py checks both answers)",
    ),
}


@pytest.fixture(autouse=True)
def _not_for_a_store(request: pytest.FixtureRequest) -> None:
    kind, reason = NOT_FOR_A_STORE.get(request.node.originalname, ("run", ""))
    if kind == "skip":
        pytest.skip(reason)
    if kind == "xfail":
        request.applymarker(pytest.mark.xfail(strict=True, raises=ToolError, reason=reason))


"""

SNAPSHOT = '''def get_directory_snapshot(tool: BetaLocalFilesystemMemoryTool) -> dict[str, str]:
    """Get a snapshot of the store's contents under the tool's prefix, with relative paths."""
    return anthropic_sdk_tool.directory_snapshot(tool)


'''

ASYNC_ROOT = "memory_root = Path(str(async_local_filesystem_tool.memory_root))\n"
ASYNC_ROOT_AS_IS = "memory_root = async_local_filesystem_tool.memory_root\n"


def _replace(src: str, old: str, new: str, count: int | None = None) -> str:
    found = src.count(old)
    if not found or (count is not None and found != count):
        raise SystemExit(f"the SDK's tests changed shape ({found} of {old[:60]!r}): look again")
    return src.replace(old, new)


def adapt(src: str, version: str) -> str:
    """The SDK's test file with memdir's fixtures and the changes HEADER lists."""
    src = _replace(src, "from __future__ import annotations\n", "", 1)
    src = _replace(src, OLD_IMPORTS, NEW_IMPORTS, 1)
    start, end = src.index("@pytest.fixture\ndef temp_directory"), src.index("READ_COMMANDS:")
    src = src[:start] + FIXTURES + src[end:]
    src = _replace(
        src, "from typing import Iterator\n", "from typing import AsyncIterator, Iterator\n", 1
    )
    snapshot = re.compile(r"get_directory_snapshot\(str\((\w+)\.base_path\)\)")
    if not snapshot.search(src):
        raise SystemExit("the SDK's tests no longer snapshot base_path: look again")
    src = snapshot.sub(r"get_directory_snapshot(\1)", src)
    start = src.index("def get_directory_snapshot")
    end = src.index("class TestBetaLocalFilesystemMemoryTool")
    src = src[:start] + SNAPSHOT + src[end:]
    src = _replace(src, ASYNC_ROOT, ASYNC_ROOT_AS_IS)
    marker = "TestBetaAsyncLocalFilesystemMemoryTool = pytest.mark.anyio(TestBetaAsyncLocalFilesystemMemoryTool)\n"
    return (
        HEADER.format(version=version)
        + "\nfrom __future__ import annotations\n"
        + src
        + "\n\n"
        + marker
    )


def main(sdist: str) -> None:
    name = Path(sdist).name
    match = re.fullmatch(r"anthropic-(.+)\.tar\.gz", name)
    if match is None:
        raise SystemExit(f"expected anthropic-VERSION.tar.gz, got {name}")
    version = match.group(1)
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(f"anthropic-{version}/{MEMBER}")
        if member is None:
            raise SystemExit(f"{MEMBER} is not in {name}")
        source = member.read().decode("utf-8")
    TARGET.write_text(adapt(source, version), encoding="utf-8")
    ruff = Path(sys.executable).with_name("ruff")
    subprocess.run([str(ruff), "format", str(TARGET)], check=True)
    subprocess.run([str(ruff), "check", "--fix", str(TARGET)], check=True)
    print(f"wrote {TARGET.relative_to(ROOT)} from {name}")


if __name__ == "__main__":
    main(*sys.argv[1:])
