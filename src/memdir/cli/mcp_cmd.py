"""``memdir mcp``: serve the memory tools over MCP on stdio, for desktop and CLI agents.

The process on the other end is an agent, so it acts as a named principal (``MEMDIR_TOKEN``
or ``--as``), never as the database owner by default: without either, it refuses to start
unless ``--as-owner`` asks for the owner explicitly.
"""

from __future__ import annotations

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.core.errors import InvalidInput


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
@click.option(
    "--as-owner",
    is_flag=True,
    help="Act as the database owner (every right in every store); only for a trusted client.",
)
def mcp(app: App, root: str, no_memories_alias: bool, as_owner: bool) -> None:
    """Serve MCP on stdin/stdout (tools view, create, str_replace, ... as in docs/mcp.md).

    The tools act as the principal of MEMDIR_TOKEN, else of --as, on --store. Without either
    it refuses to start, unless --as-owner asks for the database owner. Configure an agent
    with e.g. `claude mcp add memdir -e MEMDIR_TOKEN=mdr_... -- memdir --db URL mcp`.
    """
    named = app.as_principal is not None or bool(app.settings.token)
    if as_owner and named:
        raise InvalidInput("give --as-owner, or --as / MEMDIR_TOKEN, not both")
    if not as_owner and not named:
        raise InvalidInput(
            "memdir mcp needs a principal for the agent: set MEMDIR_TOKEN or give --as "
            "PRINCIPAL before mcp (or --as-owner to act as the database owner)"
        )
    principal = app.principal
    app.service().store_info(principal, app.store)  # fail fast on an unknown store

    from memdir.mcp import Namespace, build_server  # this verb launches the MCP surface

    Namespace(root)  # validate --root before serving
    server = build_server(
        app.service(), lambda _ctx: principal, store=app.store, root=root,
        memories_alias=not no_memories_alias,
    )  # fmt: skip
    server.run("stdio")
