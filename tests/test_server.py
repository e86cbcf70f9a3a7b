"""`memdir serve` end to end: REST and MCP from one process over one database, one token."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from test_api_live import ServeProcess


def test_serve_answers_rest_and_mcp_with_the_same_token(tmp_path: Path) -> None:
    server = ServeProcess(f"sqlite:///{tmp_path / 'memdir.db'}", tmp_path)
    try:
        server.wait_healthy()
        [token] = server.tokens()
        headers = {"Authorization": f"Bearer {token}"}
        put = httpx2.put(
            f"{server.url}/v1/stores/default/files/org/hello.md",
            content="hello from REST\n",
            headers={**headers, "If-None-Match": "*"},
        )
        assert put.status_code in (200, 201), put.text

        async def mcp() -> str:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=30) as http,
                Client(streamable_http_client(f"{server.url}/mcp", http_client=http)) as client,
            ):
                result = await client.call_tool("view", {"path": "/org/hello.md"})
                return "".join(getattr(c, "text", "") for c in result.content)

        viewed = anyio.run(mcp)
        assert "hello from REST" in viewed
        unauthenticated = httpx2.post(f"{server.url}/mcp/", json={})
        assert unauthenticated.status_code == 401
    finally:
        server.stop()
