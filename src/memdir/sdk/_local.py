"""The local transport: the REST app built in-process over a database URL.

A client given ``db=URL`` instead of ``base_url`` opens the database, builds the same ASGI app
``memdir serve`` runs (``memdir.api.create_app``) and talks to it without a socket — the async
client through ``httpx2.ASGITransport``, the sync client through :class:`SyncASGITransport`, an
anyio blocking portal (one event-loop thread per client, as Starlette's ``TestClient`` does).
Every request therefore takes exactly the path an HTTP request takes: authentication, policy,
the error envelope, idempotency keys.

Who acts: the database owner by default (as the CLI does with direct database access), or
``principal="agent:x"`` resolved through the service on each request (so a removed principal
stops working), or a ``token``, authenticated as the server would. The owner and ``principal``
are reached with a random per-client bearer secret that only :class:`LocalService` accepts;
it never leaves the process.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import httpx2
from anyio.from_thread import BlockingPortal

from memdir.core.errors import InvalidInput
from memdir.core.model import OWNER

if TYPE_CHECKING:
    from fastapi import FastAPI

    from memdir.sdk._local_service import LocalService

__all__ = ["LocalApp", "SyncASGITransport", "open_local"]

LOCAL_URL = "http://memdir.local"


@dataclass
class LocalApp:
    """The in-process app, its service (closed with the client) and the bearer to send."""

    app: FastAPI
    service: LocalService
    bearer: str | None

    @property
    def acts_as_owner(self) -> bool:
        """The bearer is the local secret standing for the database owner."""
        return (
            self.bearer is not None
            and self.bearer == self.service._secret
            and self.service._acting == OWNER.id
        )

    def close(self) -> None:
        self.service.close()


def open_local(
    db: str, *, principal: str | None, token: str | None, create: bool, store: str
) -> LocalApp:
    """Open ``db`` and build the app; with ``create``, create and migrate it and the store."""
    from memdir.api import create_app
    from memdir.api.settings import ApiSettings
    from memdir.sdk._local_service import LocalService
    from memdir.settings import Settings
    from memdir.storage.database import Database

    if principal is not None and token is not None:
        raise InvalidInput("give principal= or token=, not both: a token names its principal")
    settings = Settings.load({"db": db})
    service = LocalService(Database(settings.db, create=create), **settings.service_limits())
    try:
        if create:
            service.create_store(OWNER, store, exist_ok=True)
        bearer = token if token is not None else service.act_as(principal or OWNER.id)
        # No rate limits in-process: the caller is the process itself.
        limits = ApiSettings(rate=None, auth_failure_rate=None)
        app = create_app(settings, service, api_settings=limits)
    except BaseException:
        service.db.close()
        raise
    return LocalApp(app, service, bearer)


class SyncASGITransport(httpx2.BaseTransport):
    """Sends sync requests to an ASGI app through an event loop in a daemon thread.

    The loop runs an anyio :class:`~anyio.from_thread.BlockingPortal` (as Starlette's
    ``TestClient`` does) in a daemon thread, so a client that is never closed cannot keep the
    interpreter from exiting. Requests and responses are buffered whole (the change feed is
    read by long polling, not streaming); the transport may be used from several threads.
    """

    def __init__(self, app: Any) -> None:
        self._inner = httpx2.ASGITransport(app=app)
        ready = threading.Event()
        self._portal: BlockingPortal | None = None

        async def serve() -> None:
            async with BlockingPortal() as portal:
                self._portal = portal
                ready.set()
                await portal.sleep_until_stopped()

        self._thread = threading.Thread(
            target=anyio.run, args=(serve,), name="memdir-local-transport", daemon=True
        )
        self._thread.start()
        ready.wait()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._portal is None:
            raise RuntimeError("the client is closed; open a new one")
        request.read()  # a byte stream both sync and async code can read
        return self._portal.call(self._handle, request)

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        response = await self._inner.handle_async_request(request)
        body = await response.aread()
        return httpx2.Response(response.status_code, headers=response.headers, content=body)

    def close(self) -> None:
        portal, self._portal = self._portal, None
        if portal is not None:
            portal.call(portal.stop)
            self._thread.join(10)
