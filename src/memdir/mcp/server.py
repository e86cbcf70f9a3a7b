"""The MCP server: tool definitions (names, descriptions, hints) over :class:`MemoryTools`.

The descriptions are written for the agent that reads them: when to use each tool, not only
what it does. ``docs/mcp.md`` is generated from them (``scripts/gen_mcp_docs.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import ValidationError

from memdir.core.context import DEFAULT_BUDGET
from memdir.core.errors import InvalidInput, MemdirError
from memdir.mcp.namespace import Namespace
from memdir.mcp.tools import MemoryTools, PrincipalForRequest, error_result
from memdir.service import MemoryService

__all__ = ["INSTRUCTIONS", "TOOLS", "ToolSpec", "build_server", "instructions_for"]

INSTRUCTIONS = """\
memdir is shared, versioned memory: a tree of markdown files that you, other agents and people
read and edit. Check memory before you start a task: `view /` (it starts with your context:
core memory in full and an index of what you may read) and `search` for the topic; memory
holds conventions, commands, known failures and decisions.
Record what the next session needs to know, where it belongs (/projects/<project>/ for project
knowledge, /agents/<you>/ for your own notes). Prefer small edits (`str_replace`, `insert`)
over rewriting files; rewrite a whole file only with `create` and `if_match`. Memory you may
read but not change (organisation memory, /org/) takes proposals: a write there is queued for
review rather than applied, and `propose` groups several changes with a rationale.
Paths are absolute, like /projects/acme/conventions.md; /memories/... names the same files.
"""


def instructions_for(root: str) -> str:
    """The server's instructions; under a root other than ``/`` the tools see one part of the
    store, so the store's layout (``/projects/…``, ``/org/``) is not theirs to name."""
    if root.rstrip("/") in ("", "/"):
        return INSTRUCTIONS
    return (
        "memdir is shared, versioned memory: a tree of markdown files that you, other agents "
        "and people read and edit. Check memory before you start a task (`view /memories` and "
        "`search` for the topic) and record what the next session needs to know. Prefer small "
        "edits (`str_replace`, `insert`) over rewriting files; rewrite a whole file only with "
        "`create` and `if_match`. A write you may not make directly is queued for review as a "
        "proposal. Paths are absolute, like /memories/notes.md (or /notes.md).\n"
    )


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    read_only: bool = False
    destructive: bool = False


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "view",
        "View a memory file or directory",
        "View a memory file with line numbers, or list a directory (files and subdirectories "
        "up to 2 levels deep, with sizes). Use it first: at the start of a task, view / or "
        "your project's directory and read what is relevant before acting. A file view ends "
        "with the file's sha256; pass it as if_match when you rewrite the whole file with "
        "create, or when an edit must apply to exactly the content you read. For a long file, "
        "view_range [start, end] shows part of it.",
        read_only=True,
    ),
    ToolSpec(
        "create",
        "Create a memory file",
        "Create a new memory file with file_text. Fails if the file exists ('File ... already "
        "exists'): then view it and change it with str_replace or insert instead. To rewrite "
        "an existing file completely, pass if_match=<its sha256 from view>; if someone changed "
        "it since, the call fails with the current sha256, so view it again and redo your "
        "change. Keep one topic per file, with a first line that says what it holds. Where you "
        "may only propose (e.g. /org/ for agents), the result says the change awaits review "
        "as a proposal: that is the expected outcome, do not retry.",
    ),
    ToolSpec(
        "str_replace",
        "Edit a memory file",
        "Replace the one exact occurrence of old_str in a file with new_str: the preferred way "
        "to change memory, small and safe while others edit the same file (it applies "
        "atomically to the current content). old_str must match exactly once, whitespace "
        "included: view the file first and include surrounding text to make it unique. Pass "
        "if_match=<sha256> when the new text depends on the file as you read it (a counter, a "
        "list you recomputed); on 'Precondition failed', view the file again and retry. To "
        "remove text, pass an empty new_str. Where you may only propose, the change is queued "
        "for review instead.",
    ),
    ToolSpec(
        "insert",
        "Insert lines into a memory file",
        "Insert insert_text as new line(s) after line insert_line (0 = at the top; the file's "
        "line count = at the end). Use it to add an entry to a list or a log without rewriting "
        "the file. Optional if_match as for str_replace.",
    ),
    ToolSpec(
        "delete",
        "Delete a memory file or directory",
        "Delete a memory file, or a directory with every file in it you can see. History is "
        "kept, so a person can restore it. Delete memory that is wrong or obsolete rather than "
        "leaving contradictions behind. Optional if_match (files only).",
        destructive=True,
    ),
    ToolSpec(
        "rename",
        "Rename or move a memory file or directory",
        "Rename or move a file or directory; files keep their history. Fails if new_path "
        "exists. Optional if_match (files only).",
    ),
    ToolSpec(
        "search",
        "Search memory",
        "Ranked full-text search over the memory you may read. Use it before starting work "
        "and whenever you hit an error or an unfamiliar topic: someone may have recorded the "
        'answer. Plain words match any term; "exact phrases" and prefix* work; prefix limits '
        "the search to a directory. View a result to read it whole.",
        read_only=True,
    ),
    ToolSpec(
        "grep",
        "Grep memory",
        "Find lines matching a regular expression (Python syntax) in current memory; returns "
        "path:line:text. Use it for exact names, identifiers and error strings; use search for "
        "topics.",
        read_only=True,
    ),
    ToolSpec(
        "history",
        "Memory history",
        "Who changed what, when and why. With path: the versions of that file (across "
        "renames). Without: the latest changes to memory. Use it to judge whether a memory is "
        "current, or to see what changed since you last looked.",
        read_only=True,
    ),
    ToolSpec(
        "propose",
        "Propose memory changes for review",
        "Propose changes for a person to review instead of applying them, with a rationale. "
        "Use it for memory you may read but not change (organisation memory, /org/, is "
        "read-only for agents) and for changes a person should check, such as a correction to "
        "a shared rule. operations: objects with a command and that tool's arguments, e.g. "
        '[{"command": "str_replace", "path": "/org/rules.md", "old_str": "...", "new_str": '
        '"..."}]. Nothing changes until the proposal is accepted; the result gives its id.',
    ),
)


class _Server(MCPServer):
    """The SDK's server, with arguments that fail the input schema answered in one line.

    The SDK reports them with pydantic's multi-line text; memdir's tool errors are one line
    an agent can act on, with the error type in ``_meta`` as for every other tool error.
    """

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if not isinstance(exc.__cause__, ValidationError):
                raise
            problems = exc.__cause__.errors()
            first = problems[0]
            where = ".".join(str(part) for part in first["loc"]) or "arguments"
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            error = InvalidInput(
                f"invalid argument {where} for {name}: {first['msg']}{more}; see the tool's "
                "input schema",
                fields=sorted({".".join(str(p) for p in e["loc"]) for e in problems}),
            )
            return error_result(error.message, error)


def build_server(
    service: MemoryService,
    principal_for_request: PrincipalForRequest,
    *,
    store: str = "default",
    root: str = "/",
    memories_alias: bool = True,
    name: str = "memdir",
) -> MCPServer:
    """An MCP server exposing the memory tools on ``store`` for each request's principal.

    ``principal_for_request(ctx)`` says who acts for a tool call (a fixed principal on stdio,
    the bearer token's on HTTP: :func:`memdir.mcp.bearer_principal`). Tool paths are store paths
    under ``root``; with ``memories_alias``, ``/memories/...`` names them too.
    """
    from memdir import __version__

    tools = MemoryTools(service, principal_for_request, store, Namespace(root, memories_alias))
    server: MCPServer = _Server(
        name, instructions=instructions_for(root), version=__version__, log_level="WARNING"
    )
    for spec in TOOLS:
        server.add_tool(
            getattr(tools, spec.name),
            name=spec.name,
            title=spec.title,
            description=spec.description,
            annotations=ToolAnnotations(
                title=spec.title,
                read_only_hint=spec.read_only,
                destructive_hint=spec.destructive,
                idempotent_hint=spec.read_only,
                open_world_hint=False,
            ),
            structured_output=False,
        )
    if tools.ns.root == "/":
        _add_context(server, tools)
    return server


CONTEXT_DESCRIPTION = (
    "The memory to start a task with: core files in full, skills, then an index of the other "
    "files you may read by scope (task, agent, user, project, org), cut to a token budget with "
    "a closing line saying what was left out; view a listed path to read it whole."
)


def _budget(value: str | None) -> int:
    if not value:
        return DEFAULT_BUDGET
    if not value.isdigit():
        raise ToolError(f"budget must be a whole number of tokens, received {value!r}")
    return int(value)


def _add_context(server: MCPServer, tools: MemoryTools) -> None:
    """The context as a prompt (``context``) and as resources (``memdir://context``, and per
    project or task); a view of ``/`` starts with it too (see MemoryTools.view)."""

    def text(ctx: Context[Any, Any], **options: Any) -> str:
        try:
            return tools.context_text(tools.principal_for(ctx), **options)
        except MemdirError as error:
            raise ToolError(error.message) from error

    @server.prompt(name="context", title="Memory context", description=CONTEXT_DESCRIPTION)
    def context_prompt(
        ctx: Context[Any, Any],
        project: str | None = None,
        task: str | None = None,
        query: str | None = None,
        budget: str | None = None,
    ) -> str:
        return text(ctx, project=project, task=task, query=query, budget=_budget(budget))

    # Context reaches only template resources, so the plain one takes an optional budget.
    @server.resource("memdir://context{?budget}", name="context", title="Memory context",
                     description=CONTEXT_DESCRIPTION, mime_type="text/markdown")  # fmt: skip
    def context_resource(ctx: Context[Any, Any], budget: str = "") -> str:
        return text(ctx, budget=_budget(budget))

    @server.resource("memdir://context/project/{project}", name="project-context",
                     title="Memory context for a project", description=CONTEXT_DESCRIPTION,
                     mime_type="text/markdown")  # fmt: skip
    def project_resource(project: str, ctx: Context[Any, Any]) -> str:
        return text(ctx, project=project)

    @server.resource("memdir://context/task/{task}", name="task-context",
                     title="Memory context for a task", description=CONTEXT_DESCRIPTION,
                     mime_type="text/markdown")  # fmt: skip
    def task_resource(task: str, ctx: Context[Any, Any]) -> str:
        return text(ctx, task=task)
