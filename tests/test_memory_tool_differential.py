"""memdir's memory-tool adapter against the SDK's local-filesystem tool, command by command.

A seeded stream of 300 memory-tool commands — every command, on a small set of paths so that
files collide, directories fill and empty, edits miss and repeat, paths escape and ranges run
out — goes to ``MemoryTool`` over memdir and to ``BetaLocalFilesystemMemoryTool`` over a
temporary directory. Each answer (result or ``ToolError`` text) must be the same, after the one
documented differences (docs/sdk.md): a directory's size in a listing is the sum of its files'
sizes in memdir and the file system's block size in the reference, and a directory exists in
memdir only while it holds a file (the reference's empty directories are pruned after each
command, so both start every command from the same tree). Every other difference is
a failure listed with its command, so the list in docs/sdk.md stays complete.
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from anthropic.lib.tools import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool

import memdir
from memdir import OWNER
from memdir.integrations.anthropic import MemoryTool

COMMANDS = 300
FILES = ["/memories/a.md", "/memories/b.txt", "/memories/d/c.md", "/memories/d/e/f.md",
         "/memories/g/h.md"]  # fmt: skip
DIRS = ["/memories", "/memories/d", "/memories/d/e", "/memories/g", "/memories/x"]
ODD = ["/memories/../etc", "/etc/passwd", "/memories/./a.md", "/memories/d/../a.md", "memories"]
WORDS = ["alpha", "beta", "gamma", "alpha beta", "", "é", "line\nbreak", "x"]


def _text(rng: random.Random) -> str:
    lines = [rng.choice(WORDS) for _ in range(rng.randint(0, 5))]
    return "\n".join(lines) + rng.choice(["", "\n"])


def _command(rng: random.Random) -> dict[str, Any]:
    kind = rng.choice(["view", "view", "create", "create", "str_replace", "insert", "delete",
                       "rename"])  # fmt: skip
    any_path = rng.choice(FILES * 3 + DIRS + ODD)
    if kind == "view":
        command: dict[str, Any] = {"command": "view", "path": any_path}
        if rng.random() < 0.3:
            start = rng.randint(-1, 6)
            command["view_range"] = [start, rng.choice([-1, start, start + 2, 99])]
        return command
    if kind == "create":
        return {"command": "create", "path": rng.choice(FILES * 3 + ODD), "file_text": _text(rng)}
    if kind == "str_replace":
        return {"command": "str_replace", "path": any_path, "old_str": rng.choice(WORDS),
                "new_str": rng.choice(WORDS)}  # fmt: skip
    if kind == "insert":
        return {"command": "insert", "path": any_path, "insert_line": rng.randint(-1, 7),
                "insert_text": rng.choice(WORDS)}  # fmt: skip
    if kind == "delete":
        return {"command": "delete", "path": rng.choice(FILES * 2 + DIRS + ODD)}
    targets = [*FILES, *DIRS, "/memories/n.md", "/memories/d/n.md", *ODD]
    return {"command": "rename", "old_path": rng.choice(FILES * 2 + DIRS),
            "new_path": rng.choice(targets)}  # fmt: skip


def _answer(tool: Any, command: dict[str, Any]) -> str:
    try:
        return "ok: " + str(tool.call(command))
    except ToolError as error:
        return "error: " + str(error)
    except OSError as error:  # the reference renaming a directory into itself, say
        return f"crash: {type(error).__name__}"


def _normalise(answer: str, base: Path) -> str:
    """The documented difference: directory sizes (file sums vs. blocks) — the listing's first
    line (the directory itself) and every line naming a directory (a trailing ``/``)."""
    answer = answer.replace(str(base), "<base>")
    lines = answer.split("\n")
    if answer.startswith("ok: Here're the files and directories") and len(lines) > 1:
        lines[1] = re.sub(r"^[0-9.]+[BKMG]\t", "<dir>\t", lines[1])
    answer = "\n".join(lines)
    return re.sub(r"^[0-9.]+[BKMG]\t(/memories(/.*/)?)$", r"<dir>\t\1", answer, flags=re.M)


def _prune_empty_directories(root: Path) -> None:
    """The second documented difference: in memdir a directory exists while it holds files
    (paths are keys), so the reference's empty directories are removed after each command."""
    for directory in sorted(
        (p for p in root.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)
    ):
        if not any(directory.iterdir()):
            directory.rmdir()


def _resync(base: Path, client: memdir.Client) -> None:
    """After the reference crashed mid-command, make its directory memdir's state again."""
    import shutil

    shutil.rmtree(base / "memories", ignore_errors=True)
    (base / "memories").mkdir()
    prefix = "/agents/bot/memories"
    for path in client.glob(prefix + "/**"):
        target = base / "memories" / path[len(prefix) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(client.read(path).content)


def test_same_answers_as_the_reference(tmp_path: Path, seed: int = 1) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, "default")
    svc.add_principal(OWNER, "agent:bot")
    svc.db.close()
    base = tmp_path / "fs"
    base.mkdir()
    reference = BetaLocalFilesystemMemoryTool(str(base))
    rng = random.Random(seed)
    differences: list[str] = []
    crashes: list[str] = []
    with memdir.Client(db=url, principal="agent:bot") as client:
        ours = MemoryTool(client, prefix="/agents/bot/memories")
        for step in range(COMMANDS):
            command = _command(rng)
            theirs = _normalise(_answer(reference, command), base)
            _prune_empty_directories(base / "memories")
            mine = _normalise(_answer(ours, command), base)
            if theirs.startswith("crash:"):  # the reference has no answer; memdir must have one
                assert not mine.startswith("crash:"), command
                crashes.append(f"{command} -> {mine}")
                _resync(base, client)
            elif mine != theirs:
                differences.append(
                    f"{step}: {command}\n  reference: {theirs!r}\n  memdir:    {mine!r}"
                )
    assert not differences, "\n".join(differences[:20]) + f"\n({len(differences)} differences)"
    assert len(crashes) <= COMMANDS // 20, crashes
