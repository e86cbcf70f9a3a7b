"""The leak oracle's surfaces: one call, made through the service, REST or MCP, as text.

Every answer is turned into the text a caller could see — the whole response body and every
header (REST), the tool result and its ``_meta`` (MCP), the result's ``repr`` or the error's
message and details (service) — so the oracle checks all of it, not the fields a test expects.

REST is the ASGI app in-process through httpx; MCP is the real MCP SDK client against the
server in memory (``build_server`` with the caller's authenticated principal, its token scope
included); the service is called with the principal ``authenticate`` returns for the caller's
token, exactly what both surfaces do.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx2

from drivers import McpSessions
from leak_world import STORE, World
from memdir.core.errors import MemdirError
from memdir.core.model import Principal

SURFACES = ("service", "rest", "mcp")


@dataclass
class Answer:
    """What one call showed its caller: the texts to search, and whether it succeeded."""

    texts: list[str]
    ok: bool
    status: int | None = None


def _dump(value: Any) -> str:
    return json.dumps(value, default=repr, sort_keys=True)


class Surfaces:
    """The three ways in, over one world's database."""

    def __init__(self, world: World) -> None:
        from memdir.api import create_app
        from memdir.api.settings import ApiSettings
        from memdir.sdk._local import SyncASGITransport
        from memdir.settings import Settings

        self.world = world
        app = create_app(Settings(), world.svc, api_settings=ApiSettings(rate=None))
        self.transport = SyncASGITransport(app)
        self.http = httpx2.Client(transport=self.transport, base_url="http://memdir", timeout=60)
        self.mcp = McpSessions(self._connect)

    def _connect(self, principal: Principal) -> Any:
        from mcp import Client

        from memdir.mcp import build_server

        return Client(build_server(self.world.svc, lambda _ctx: principal, store=STORE))

    def principal(self, actor_id: str) -> Principal:
        return self.world.svc.authenticate(self.world.tokens[actor_id])

    def forget(self, actor_id: str) -> None:
        """Drop the caller's MCP session (its principal changed); the next call opens one."""
        self.mcp.clients.pop(actor_id, None)

    def close(self) -> None:
        self.mcp.close()
        self.http.close()
        self.transport.close()

    # --- the three calls ---------------------------------------------------------------------

    def service(self, actor_id: str, call: Callable[[Principal], Any]) -> Answer:
        try:
            principal = self.principal(actor_id)
        except MemdirError as error:
            return Answer([str(error)], False)
        try:
            value = call(principal)
        except MemdirError as error:
            return Answer([str(error), _dump(getattr(error, "details", None))], False)
        if hasattr(value, "__iter__") and not isinstance(value, (str, bytes, dict, tuple)):
            value = list(value)
        return Answer([repr(value)], True)

    def rest(
        self, actor_id: str, method: str, url: str, *, params: dict[str, Any] | None = None,
        json_body: Any = None, content: bytes | None = None, headers: dict[str, str] | None = None,
    ) -> Answer:  # fmt: skip
        sent = {"Authorization": f"Bearer {self.world.tokens[actor_id]}", **(headers or {})}
        query = {k: v for k, v in (params or {}).items() if v is not None}
        response = self.http.request(method, url, params=query, headers=sent, json=json_body,
                                     content=content)  # fmt: skip
        shown = [response.text, _dump(dict(response.headers))]
        return Answer(shown, response.status_code < 300, response.status_code)

    def tool(self, actor_id: str, name: str, **arguments: Any) -> Answer:
        try:
            principal = self.principal(actor_id)
        except MemdirError as error:
            return Answer([str(error)], False)
        args = {k: v for k, v in arguments.items() if v is not None}
        text, is_error, meta = self.mcp.call(principal, name, args)
        return Answer([text, _dump(meta)], not is_error)


def store_url(tail: str = "", store: str = STORE) -> str:
    return f"/v1/stores/{quote(store, safe='')}{tail}"


def file_url(path: str, verb: str = "", kind: str = "files") -> str:
    return store_url(f"/{kind}/{quote(path[1:], safe='/')}{verb}")
