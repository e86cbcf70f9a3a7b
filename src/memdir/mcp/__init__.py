"""The MCP surface: memdir's memory tools for agents, over stdio and streamable HTTP.

- :func:`build_server` — an ``MCPServer`` (official ``mcp`` SDK, 2.x) with the tools ``view``,
  ``create``, ``str_replace``, ``insert``, ``delete``, ``rename`` (the arguments and result
  strings of Claude's memory tool, each mutation with an optional ``if_match``) and ``search``,
  ``grep``, ``history``, ``propose``; ``principal_for_request(ctx)`` says who acts.
- :func:`http_app` — an ASGI app (mount it at ``/mcp``) where each request's bearer token
  identifies the principal; 401 without a valid one.
- ``memdir mcp`` (``memdir.cli.mcp_cmd``) serves :func:`build_server` over stdio.

See ``docs/mcp.md`` (generated from the tool definitions by ``scripts/gen_mcp_docs.py``).
"""

from __future__ import annotations

from memdir.mcp.http import McpHttpApp, bearer_principal, http_app
from memdir.mcp.namespace import Namespace
from memdir.mcp.server import INSTRUCTIONS, TOOLS, build_server

__all__ = [
    "INSTRUCTIONS",
    "TOOLS",
    "McpHttpApp",
    "Namespace",
    "bearer_principal",
    "build_server",
    "http_app",
]
