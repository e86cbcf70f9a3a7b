"""Generate docs/mcp.md from the MCP tool definitions themselves.

Run `python scripts/gen_mcp_docs.py` after changing a tool; tests/test_mcp.py fails while the
committed page differs from what this prints. Tool descriptions and argument schemas come from
the server's own `tools/list`; result strings from the functions that produce them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, cast

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memdir import OWNER, MemoryService  # noqa: E402
from memdir.mcp import INSTRUCTIONS, build_server, render  # noqa: E402

P, Q = "/memories/notes.md", "/memories/renamed.md"
SHA, SHA2 = "<sha256>", "<current sha256>"

RESULTS: dict[str, list[tuple[str, str]]] = {
    "view": [
        ("a file", render.file_view(P, "# Notes\nuse uv\n", SHA, 3, None)),
        ("a directory", render.directory_view("/memories", [("notes.md", 16), ("a/b.md", 2048)])),
        ("missing or unreadable", render.not_found(P)),
    ],
    "create": [
        ("created", render.created(P)),
        ("rewritten (with if_match)", render.overwritten(P)),
        ("exists (no if_match)", render.already_exists(P, SHA2)),
    ],
    "str_replace": [
        ("edited", render.replaced("# Notes\nuse uv sync\n", 1)),
        ("no match", render.no_match("use pip", P)),
        ("ambiguous", render.multiple_occurrences("use", [2, 5])),
        ("missing", render.not_found(P)),
    ],
    "insert": [
        ("edited", render.edited(P)),
        ("bad line", render.insert_out_of_range(9, 2)),
        ("missing", render.not_found(P)),
    ],
    "delete": [
        ("deleted", render.deleted(P)),
        ("missing", render.not_found_short(P)),
        ("the root", render.cannot_touch_root("delete", "/memories")),
    ],
    "rename": [
        ("renamed", render.renamed(P, Q)),
        ("target exists", render.destination_exists(Q)),
        ("missing", render.not_found_short(P)),
    ],
}

COMMON = [
    ("needs review (not an error)", render.proposed("p_1a2b3c", "agent:bot may only propose "
                                                    "changes to /org/rules.md")),
    ("stale if_match", render.precondition_failed(P, SHA, SHA2)),
    ("refused by screening", render.screening_refused(
        "write screening refused /memories/notes.md: an AWS access key (rule aws-key, line 2); "
        "remove it — memory is shared and kept forever",
        [{"rule": "aws-key", "action": "reject"}])),
]  # fmt: skip

HEADER = """# MCP server

Generated from the tool definitions by `scripts/gen_mcp_docs.py`; do not edit by hand.

memdir serves its memory to agents over the Model Context Protocol (official `mcp` SDK, 2.x)
with the tools of Claude's memory tool (`memory_20250818`) — `view`, `create`, `str_replace`,
`insert`, `delete`, `rename`, same arguments, same result strings, each change with an optional
`if_match` — plus `search`, `grep`, `history` and `propose`. Every call acts as one principal,
so permissions, provenance and review work as everywhere else in memdir.

## Connecting

### stdio: `memdir mcp`

`memdir mcp` serves the tools on stdin/stdout. It acts as the principal of `MEMDIR_TOKEN` if
set, else of `--as PRINCIPAL`, on `--store` (default `default`). Without either it refuses to
start (exit 2): the client is an agent, and the database owner may do anything — delete
`/org`, mint tokens. `memdir mcp --as-owner` asks for the owner explicitly, for a client you
trust as you trust your shell. Give the database as an absolute URL: a desktop app does not
start the server in your project directory.

Claude Code:

```sh
memdir principal add agent:claude --project acme          # once: who the agent is
memdir token create agent:claude --path '/projects/acme/**' --path '/org/**'
claude mcp add memdir -e MEMDIR_TOKEN=mdr_... -- \\
  memdir --db sqlite:////home/me/.memdir/memdir.db mcp
# or, with direct access to the database file, name the principal:
claude mcp add memdir -- memdir --db sqlite:////home/me/.memdir/memdir.db --as agent:claude mcp
```

Claude Desktop (`claude_desktop_config.json`):

```json
{
  "mcpServers": {
    "memdir": {
      "command": "memdir",
      "args": ["--db", "sqlite:////home/me/.memdir/memdir.db", "mcp"],
      "env": {"MEMDIR_TOKEN": "mdr_..."}
    }
  }
}
```

### Streamable HTTP: `/mcp`

`memdir serve` serves the same tools at `/mcp` (stateless streamable HTTP, JSON responses, so
any number of servers can sit behind a load balancer). Each request must carry
`Authorization: Bearer <token>` (`memdir token create PRINCIPAL`); the token's principal acts,
and a missing, unknown, expired or revoked token gets HTTP 401 with the error envelope
`{"error": {"type": "unauthenticated", "message": ...}}`.

```sh
claude mcp add --transport http memdir http://127.0.0.1:8420/mcp \\
  --header "Authorization: Bearer mdr_..."
```

In Python, `memdir.mcp.http_app(service, store=..., root=...)` is the ASGI app: mount it at
`/mcp` and run `async with mcp_app.running():` in the parent app's lifespan (it starts itself on
first use otherwise, and handles the ASGI lifespan when served alone).
`memdir.mcp.build_server(service, principal_for_request)` is the `MCPServer` behind both.

## Paths

Tool paths are memdir paths under a root prefix of the store: `/` by default (the whole
store, so `/projects/acme/conventions.md` is that file), or the directory given by
`memdir mcp --root PREFIX` / `root=` (with `--root /agents/bot`, `/notes.md` is
`/agents/bot/notes.md`). Agents trained on Claude's memory tool write `/memories/...`:
`/memories` names the root as well (turn it off with `--no-memories-alias`), and results spell
paths the way the call did. Under `/memories`, `.` and `..` resolve as the memory tool resolves
them (`/memories/a/../b.md` is `/memories/b.md`; climbing above `/memories` is refused); other
paths take neither. What the principal may not read does not exist for it, exactly as
elsewhere in memdir.

## Results and errors

Results are one text block. Failures are `isError` results with one actionable line: the
reference memory tool's wording where it has one (shown per tool below), else memdir's
message. The six memory-tool commands follow the reference's rules as well — edits on what the
file says when read, applied with compare-and-swap on that version; `rename` refuses an
existing destination (a file, a directory, the root) before it looks at the source, and a
directory never moves into itself — written once in `memdir.core.memory_tool`, which the
Anthropic adapter (docs/sdk.md) answers from too. Outcomes every changing tool shares:
"""


def _results(results: list[tuple[str, str]]) -> str:
    return "".join(f"\n{outcome}:\n\n```text\n{text}\n```\n" for outcome, text in results)


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    if schema.get("type") == "array":
        return f"array of {_type(schema.get('items', {}))}"
    return str(schema.get("type", "any"))


def render() -> str:
    server = build_server(cast(MemoryService, None), lambda _ctx: OWNER)
    tools = anyio.run(server.list_tools)
    parts = [HEADER]
    parts.append(_results(COMMON))
    parts.append(
        "\nA change the principal may only propose (organisation memory, for agents) or that "
        "screening quarantines is queued as a proposal and the result says so; it is not an "
        "error, and retrying it only queues it again.\n\n## Server instructions\n\n"
        "Sent to the client when it connects:\n\n```text\n" + INSTRUCTIONS + "```\n\n## Tools\n"
    )
    for tool in tools:
        schema = tool.input_schema
        required = set(schema.get("required", []))
        parts.append(f"\n### `{tool.name}`\n\n{tool.description}\n\n")
        parts.append("| argument | type | required | description |\n|---|---|---|---|\n")
        for name, prop in schema.get("properties", {}).items():
            value = prop.get("default")
            default = (
                "" if name in required or value is None else f" (default `{json.dumps(value)}`)"
            )
            parts.append(
                f"| `{name}` | {_type(prop)} | {'yes' if name in required else 'no'} | "
                f"{prop.get('description', '')}{default} |\n"
            )
        if tool.name in RESULTS:
            parts.append(
                "\nResults (the reference memory tool's wording; memdir adds the sha256 line "
                "of a file view):\n"
            )
            parts.append(_results(RESULTS[tool.name]))
    return "".join(parts)


if __name__ == "__main__":
    (ROOT / "docs" / "mcp.md").write_text(render(), encoding="utf-8")
    print("wrote docs/mcp.md")
