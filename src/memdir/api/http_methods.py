"""HTTP semantics every route shares: ``HEAD`` wherever ``GET`` answers, and mounts reached
without their trailing slash.

:class:`HeadMiddleware` answers ``HEAD`` as RFC 9110 §9.3.2 asks: the same status and headers
as ``GET`` would send (``Content-Length`` included), no body. The route runs as a ``GET`` —
through the same authentication and access decisions — and its body is dropped; once the
headers are out, the route sees the client disconnect, so a streaming route (the change
feed's event stream, a long poll) stops instead of producing a body nobody reads.

:class:`ExactMountMiddleware` sends ``/mcp`` to the app mounted at ``/mcp`` as ``/mcp/``
would be: Starlette's mount answers the bare prefix with a redirect whose ``Location`` is
built from the request's scheme, so behind a TLS-terminating proxy a client was sent to
``http://``, and MCP clients that do not follow redirects on POST failed.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["ExactMountMiddleware", "HeadMiddleware"]


class HeadMiddleware:
    """``HEAD`` on every ``GET`` route (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return
        started = False

        async def head_receive() -> Message:
            if started:
                return {"type": "http.disconnect"}
            return await receive()

        async def head_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                await send(message)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            # the body (and any later messages) of the GET: not sent for HEAD

        await self.app({**scope, "method": "GET"}, head_receive, head_send)


class ExactMountMiddleware:
    """Route ``prefix`` itself to the app mounted at ``prefix`` (no redirect to ``prefix/``)."""

    def __init__(self, app: ASGIApp, prefix: str) -> None:
        self.app = app
        self.prefix = prefix.rstrip("/")
        self._raw = self.prefix.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket") and scope["path"] == self.prefix:
            raw = scope.get("raw_path")
            scope = {
                **scope,
                "path": self.prefix + "/",
                "raw_path": self._raw + b"/" if raw == self._raw else raw,
            }
        await self.app(scope, receive, send)
