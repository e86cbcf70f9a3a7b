"""memdir's memory-tool adapter against the SDK's local-filesystem tool, and the MCP server's
memory tools against the adapter, command by command.

A seeded stream of 300 memory-tool commands — every command, on a small set of paths so that
files collide, directories fill and empty, edits miss and repeat, paths escape and ranges run
out — goes to ``MemoryTool`` over memdir and to ``BetaLocalFilesystemMemoryTool`` over a
temporary directory. Each answer (result or ``ToolError`` text) must be the same, after the one
documented differences (docs/sdk.md): a directory's size in a listing is the sum of its files'
sizes in memdir and the file system's block size in the reference, and a directory exists in
memdir only while it holds a file (the reference's empty directories are pruned after each
command, so both start every command from the same tree), and a change that changes nothing
is refused ("nothing to change", as on every memdir surface). Every other difference is
a failure listed with its command, so the list in docs/sdk.md stays complete.

The same stream then goes to the MCP server's tools (the real MCP SDK client, in memory, rooted
at the same prefix) and to the adapter, each on its own database: both surfaces compose their
answers from one module (``memdir.core.memory_tool``), so every answer must be the same text,
after removing what only MCP says (the sha256 a ``view`` of a file reports for ``if_match``, and
the hint to pass it when ``create`` finds the file). Paths outside ``/memories`` are left out of
that stream: the MCP tools address the whole root by design (``/notes.md`` is a path there).
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

import anyio
from anthropic.lib.tools import ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool
from mcp import Client as McpClient

import memdir
from memdir import OWNER
from memdir.integrations.anthropic import MemoryTool
from memdir.mcp import build_server

PREFIX = "/agents/bot/memories"

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


def _changes_nothing(command: dict[str, Any]) -> bool:
    """The third documented difference: a change that changes nothing (``str_replace`` of a
    text by itself, a rename onto the same path) is refused in memdir ("nothing to change"),
    where the reference reports the edit, or says the destination exists."""
    if command["command"] == "str_replace":
        return bool(command["old_str"] == command["new_str"])
    if command["command"] == "rename":
        same = [re.sub(r"/\./|/[^/]+/\.\./", "/", command[k]) for k in ("old_path", "new_path")]
        return same[0] == same[1]
    return False


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


def _database(path: Path) -> str:
    url = f"sqlite:///{path}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, "default")
    svc.add_principal(OWNER, "agent:bot")
    svc.db.close()
    return url


def test_same_answers_as_the_reference(tmp_path: Path, seed: int = 1) -> None:
    url = _database(tmp_path / "m.db")
    base = tmp_path / "fs"
    base.mkdir()
    reference = BetaLocalFilesystemMemoryTool(str(base))
    rng = random.Random(seed)
    differences: list[str] = []
    crashes: list[str] = []
    no_ops: list[dict[str, Any]] = []
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
            elif _changes_nothing(command) and mine.startswith("error: nothing to change: "):
                no_ops.append(command)  # documented: refused as on every memdir surface
            elif mine != theirs:
                differences.append(
                    f"{step}: {command}\n  reference: {theirs!r}\n  memdir:    {mine!r}"
                )
    assert not differences, "\n".join(differences[:20]) + f"\n({len(differences)} differences)"
    assert len(crashes) <= COMMANDS // 20, crashes


def _in_memories(command: dict[str, Any]) -> bool:
    paths = [command.get(key) for key in ("path", "old_path", "new_path") if key in command]
    return all(p == "/memories" or str(p).startswith("/memories/") for p in paths)


def _mcp_only_removed(answer: str) -> str:
    """What only the MCP tools say: a file view's sha256 line, ``create``'s if_match hint."""
    answer = re.sub(r"\n\nsha256: [0-9a-f]{64} \(version \d+\)$", "", answer)
    return re.sub(r"; to rewrite it pass if_match=[0-9a-f]{64}, or edit it with str_replace$",
                  "", answer)  # fmt: skip


async def _mcp_answers(url: str, commands: list[dict[str, Any]]) -> list[str]:
    svc = memdir.open(url)
    bot = svc.resolve("agent:bot")
    server = build_server(svc, lambda _ctx: bot, root=PREFIX)
    answers = []
    async with McpClient(server) as client:
        for command in commands:
            arguments = {k: v for k, v in command.items() if k != "command"}
            result = await client.call_tool(command["command"], arguments)
            said = str(getattr(result.content[0], "text", ""))
            answers.append(("error: " if result.is_error else "ok: ") + _mcp_only_removed(said))
    svc.db.close()
    return answers


def test_mcp_tools_and_the_adapter_say_the_same(tmp_path: Path, seed: int = 2) -> None:
    rng = random.Random(seed)
    commands = [c for c in (_command(rng) for _ in range(COMMANDS)) if _in_memories(c)]
    assert len(commands) >= 200, len(commands)
    adapter_url, mcp_url = _database(tmp_path / "a.db"), _database(tmp_path / "m.db")
    with memdir.Client(db=adapter_url, principal="agent:bot") as client:
        tool = MemoryTool(client, prefix=PREFIX)
        adapter = [_answer(tool, command) for command in commands]
    mcp = anyio.run(_mcp_answers, mcp_url, commands)
    differences = [
        f"{step}: {command}\n  adapter: {ours!r}\n  mcp:     {theirs!r}"
        for step, (command, ours, theirs) in enumerate(zip(commands, adapter, mcp, strict=True))
        if ours != theirs
    ]
    assert not differences, "\n".join(differences[:20]) + f"\n({len(differences)} differences)"
    kinds = {c["command"] for c, a in zip(commands, adapter, strict=True) if a.startswith("ok")}
    assert kinds == {"view", "create", "str_replace", "insert", "delete", "rename"}, kinds


SEED = [
    {"command": "create", "path": "/memories/d/one.md", "file_text": "one\n"},
    {"command": "create", "path": "/memories/d/sub/two.md", "file_text": "two\n"},
    {"command": "create", "path": "/memories/e/three.md", "file_text": "three\n"},
    {"command": "create", "path": "/memories/f.md", "file_text": "four\n"},
]
#: Renames onto what exists, with the reference's answer (None: the reference crashes).
ONTO = [
    ("/memories/d", "/memories/e", "error: The destination /memories/e already exists"),
    ("/memories/d", "/memories/f.md", "error: The destination /memories/f.md already exists"),
    ("/memories/f.md", "/memories/d", "error: The destination /memories/d already exists"),
    ("/memories/d", "/memories", "error: The destination /memories already exists"),
    ("/memories/d", "/memories/d/sub", "error: The destination /memories/d/sub already exists"),
    ("/memories/nothing", "/memories/e", "error: The destination /memories/e already exists"),
    ("/memories/d", "/memories/d/new", None),
    ("/memories/", "/memories/moved", "error: Cannot rename the /memories directory itself"),
]


def test_renaming_onto_what_exists_is_refused_alike(tmp_path: Path) -> None:
    """A directory (or file) renamed onto an existing directory, file or the root is refused,
    on both surfaces in the same words as the reference, and nothing moves."""
    commands = SEED + [{"command": "rename", "old_path": o, "new_path": n} for o, n, _ in ONTO]
    commands.append({"command": "view", "path": "/memories"})
    base = tmp_path / "fs"
    base.mkdir()
    reference = BetaLocalFilesystemMemoryTool(str(base))
    theirs = [_answer(reference, command) for command in commands]
    adapter_url, mcp_url = _database(tmp_path / "a.db"), _database(tmp_path / "m.db")
    with memdir.Client(db=adapter_url, principal="agent:bot") as client:
        tool = MemoryTool(client, prefix=PREFIX)
        adapter = [_answer(tool, command) for command in commands]
    mcp = anyio.run(_mcp_answers, mcp_url, commands)
    assert adapter == mcp
    for (old, new, expected), ours, reference_said in zip(
        ONTO, adapter[len(SEED) : -1], theirs[len(SEED) : -1], strict=True
    ):
        if expected is None:  # the reference crashes moving a directory into itself
            assert reference_said.startswith("crash:"), reference_said
            assert ours == f"error: Cannot move the directory {old} into itself ({new})"
        else:
            assert ours == expected == reference_said, (old, new)
    listing = [line.split("\t")[1] for line in adapter[-1].split("\n")[2:]]
    assert listing == ["/memories/d/", "/memories/d/one.md", "/memories/d/sub/",
                       "/memories/e/", "/memories/e/three.md", "/memories/f.md"]  # fmt: skip
