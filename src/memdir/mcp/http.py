"""MCP over streamable HTTP, where the bearer token of each request identifies the principal.

:func:`http_app` returns an ASGI app to mount (at ``/mcp``) in the REST app, or to serve alone.
Every HTTP request must carry ``Authorization: Bearer <token>``; the token is checked with
``service.authenticate`` on each request (so a revoked token stops working at once) and the
principal is handed to the tools through the ASGI scope. Anything else gets 401 with the REST
error envelope.

The transport is stateless with JSON responses: no server-side session, so any number of
``memdir serve`` processes behind a load balancer can answer any request. The session manager
needs a running task group: the app starts it on the ASGI ``lifespan`` startup when served
alone, inside ``async with app.running():`` in a parent app's lifespan, or, failing both, on
the first request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping

import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from memdir.core.errors import Unauthenticated
from memdir.core.model import Principal
from memdir.mcp.server import build_server
from memdir.mcp.tools import Ctx
from memdir.service import MemoryService

__all__ = ["PRINCIPAL_SCOPE_KEY", "McpHttpApp", "bearer_principal", "http_app"]

PRINCIPAL_SCOPE_KEY = "memdir.principal"


def bearer_principal(ctx: Ctx) -> Principal:
    """The principal the HTTP request carrying this tool call authenticated as."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    principal = scope.get(PRINCIPAL_SCOPE_KEY) if isinstance(scope, Mapping) else None
    if not isinstance(principal, Principal):
        raise Unauthenticated("this MCP request was not authenticated with a bearer token")
    return principal


class McpHttpApp:
    """The ASGI app: bearer authentication in front of the SDK's streamable HTTP manager."""

    def __init__(self, service: MemoryService, server: MCPServer) -> None:
        self.service = service
        self.server = server
        # Builds the SDK's session manager; its Starlette wrapper is not used (this app takes
        # every path it is mounted at, and DNS-rebinding checks are moot behind bearer tokens).
        server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager: StreamableHTTPSessionManager = server.session_manager
        self._started = False
        self._start_lock = asyncio.Lock()
        self._background: asyncio.Task[None] | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the session manager for the duration (use it in a parent app's lifespan)."""
        self._started = True
        async with self.manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":  # websockets: not part of the MCP transport
            return
        token = _bearer(scope)
        if token is None:
            await _unauthenticated(
                send,
                "missing bearer token: send 'Authorization: Bearer <token>' (create a token with "
                "`memdir token create`)",
            )
            return
        try:
            principal = await anyio.to_thread.run_sync(self.service.authenticate, token)
        except Unauthenticated as error:
            await _unauthenticated(send, error.message)
            return
        scope[PRINCIPAL_SCOPE_KEY] = principal
        if not self._started:
            await self._start_in_background()
        await self.manager.handle_request(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                message = await receive()
        except Exception as exc:  # pragma: no cover - startup failures are reported, not raised
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _start_in_background(self) -> None:
        """Start the session manager on first use when nobody ran :meth:`running`."""
        async with self._start_lock:
            if self._started:
                return
            ready = asyncio.Event()

            async def serve() -> None:
                async with self.running():
                    ready.set()
                    await asyncio.Event().wait()  # until the loop cancels it at shutdown

            self._background = asyncio.get_running_loop().create_task(serve())
            await ready.wait()


def _bearer(scope: Scope) -> str | None:
    headers: list[tuple[bytes, bytes]] = scope.get("headers", [])
    for key, value in headers:
        if key == b"authorization":
            scheme, _, token = value.decode("latin-1").partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
            return None
    return None


async def _unauthenticated(send: Send, message: str) -> None:
    body = json.dumps({"error": {"type": Unauthenticated.type, "message": message}}).encode()
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"www-authenticate", b'Bearer realm="memdir"'),
    ]
    await send({"type": "http.response.start", "status": 401, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def http_app(
    service: MemoryService,
    *,
    store: str = "default",
    root: str = "/",
    memories_alias: bool = True,
) -> McpHttpApp:
    """An ASGI app serving the memory tools over streamable HTTP for bearer-token principals.

    Mount it at ``/mcp`` (``app.mount("/mcp", mcp_app)``), and run ``mcp_app.running()`` in the
    parent's lifespan; served alone, it handles the ASGI lifespan itself.
    """
    server = build_server(
        service, bearer_principal, store=store, root=root, memories_alias=memories_alias
    )
    return McpHttpApp(service, server)
