"""``memdir mcp``: serve the memory tools over MCP on stdio, for desktop and CLI agents."""

from __future__ import annotations

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli


@verb(cli, "mcp")
@click.option(
    "--root",
    default="/",
    show_default=True,
    metavar="PREFIX",
    help="Store directory the tools see as '/' (e.g. /agents/bot to confine them to it).",
)
@click.option(
    "--no-memories-alias",
    is_flag=True,
    help="Do not accept /memories/... as another name for the root.",
)
def mcp(app: App, root: str, no_memories_alias: bool) -> None:
    """Serve MCP on stdin/stdout (tools view, create, str_replace, ... as in docs/mcp.md).

    The tools act as the principal of MEMDIR_TOKEN, else --as, else the database owner, on
    --store. Configure an agent with e.g. `claude mcp add memdir -- memdir --db URL mcp`.
    """
    principal = app.principal
    app.service().store_info(principal, app.store)  # fail fast on an unknown store

    from memdir.mcp import Namespace, build_server  # this verb launches the MCP surface

    Namespace(root)  # validate --root before serving
    server = build_server(
        app.service(), lambda _ctx: principal, store=app.store, root=root,
        memories_alias=not no_memories_alias,
    )  # fmt: skip
    server.run("stdio")
