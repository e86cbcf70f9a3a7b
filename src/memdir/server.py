"""The composition root of ``memdir serve``: REST at ``/v1``, MCP at ``/mcp``, the web UI at
``/ui``, one service.

The REST surface (:mod:`memdir.api`) and the MCP surface (:mod:`memdir.mcp`) never import each
other; this module builds both over one :class:`~memdir.service.MemoryService` and runs the MCP
session manager inside the server's lifespan. Settings are read once, here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from memdir.settings import Settings

__all__ = ["app_from_env", "create_server_app"]


def create_server_app(settings: Settings) -> FastAPI:
    """The whole HTTP server: REST routes, ``/mcp``, ``/ui``, ``/healthz``, ``/metrics``."""
    from memdir.api import create_app
    from memdir.api.http_methods import ExactMountMiddleware
    from memdir.mcp import http_app
    from memdir.service import MemoryService
    from memdir.storage.database import Database
    from memdir.web import create_web_app

    service = MemoryService(
        Database(settings.db, pool_size=settings.pool_size),
        **settings.service_limits(),
    )
    app = create_app(settings, service)
    mcp_app = http_app(service, store=settings.store)
    app.mount("/mcp", mcp_app)
    app.add_middleware(ExactMountMiddleware, prefix="/mcp")  # /mcp itself, without a redirect
    app.mount("/ui", create_web_app(service, store=settings.store))
    rest_lifespan = app.router.lifespan_context

    @asynccontextmanager
    async def lifespan(application: Any) -> AsyncIterator[None]:
        try:
            async with rest_lifespan(application), mcp_app.running():
                yield
        finally:
            service.close()

    app.router.lifespan_context = lifespan
    return app


def app_from_env() -> FastAPI:
    """The app from ``MEMDIR_*`` settings alone: the factory each ``memdir serve`` worker loads."""
    return create_server_app(Settings.load())
