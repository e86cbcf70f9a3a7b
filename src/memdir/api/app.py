"""The composition root of the HTTP server: :func:`create_app`.

Settings are read once, here (``memdir.settings.Settings`` for the database and limits,
:class:`~memdir.api.settings.ApiSettings` for rate limits), and everything the routes need is
built from them and kept in ``app.state.memdir``. Routes are thin: parse, call the service,
format. What is served:

- ``/v1/...`` — the REST API (bearer token on every route; see ``docs/rest.md``);
- ``/healthz`` — liveness: the process answers HTTP (no database round trip), no token;
- ``/readyz`` — readiness: the database answers within :data:`READY_TIMEOUT_S` with the schema
  this memdir needs (503 with the reason otherwise), no token;
- ``/metrics`` — Prometheus text, for a token of a member of the ``admins`` group;
- ``/openapi.json`` and ``/docs`` — the schema and its browsable form;
- ``/mcp`` — the MCP streamable-HTTP app, mounted by the composition that serves both (see
  the marked place in :func:`create_app`).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.to_thread
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

import memdir
from memdir.access import METRICS
from memdir.api.deps import AppState, Ctx, methods_by_route
from memdir.api.docs import install_docs
from memdir.api.errors import install_error_handlers
from memdir.api.http_methods import HeadMiddleware
from memdir.api.metrics import Metrics
from memdir.api.middleware import BoundsMiddleware, ObserveMiddleware
from memdir.api.ratelimit import RateLimiter
from memdir.api.routes import (
    admin,
    browse,
    changes,
    checkout,
    context,
    dreams,
    files,
    history,
    review,
    transcripts,
)
from memdir.api.settings import ApiSettings
from memdir.api.tokens import TokenCache
from memdir.core.errors import MemdirError
from memdir.service import MemoryService
from memdir.settings import Settings
from memdir.storage.schema import HEAD_REVISION

__all__ = ["READY_TIMEOUT_S", "app_from_env", "create_app"]

#: Seconds ``/readyz`` waits for the database before answering 503 (a probe never hangs).
READY_TIMEOUT_S = 3.0

DESCRIPTION = """\
Versioned, permissioned memory for fleets of AI agents. Every `/v1` route needs
`Authorization: Bearer <token>`. Errors are one envelope, `{"error": {"type", "message", ...}}`.
Files use HTTP conditional requests: the `ETag` is the content's sha256; full overwrites need
`If-Match` (or `If-None-Match: *` to create). Writes (anything that makes a commit) honour
`Idempotency-Key`. Lists are pages: pass `next_cursor` back as `cursor`.
"""


def create_app(
    settings: Settings,
    service: MemoryService | None = None,
    *,
    api_settings: ApiSettings | None = None,
) -> FastAPI:
    """The ASGI app serving memdir over HTTP.

    Without ``service``, opens ``settings.db`` (which must exist: ``memdir serve`` and
    ``memdir init`` create it) and closes it at shutdown; a given service is the caller's.
    ``api_settings`` defaults to the environment (``MEMDIR_RATE_LIMIT``, ...).
    """
    api_settings = api_settings or ApiSettings.from_env()
    owns = service is None
    if service is None:
        from memdir.storage.database import Database

        database = Database(settings.db, pool_size=settings.pool_size)
        service = MemoryService(database, **settings.service_limits())
    routers = [
        m.router
        for m in (
            files,
            browse,
            checkout,
            context,
            history,
            review,
            changes,
            transcripts,
            dreams,
            admin,
        )
    ]
    tokens = TokenCache(api_settings.token_cache_seconds)
    state = AppState(service, Metrics(), tokens, owns, methods_by_route(routers))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        if state.owns_service:
            state.service.close()

    app = FastAPI(
        title="memdir",
        version=memdir.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served by memdir.api.docs: no CDN, no inline script
        redoc_url=None,
    )
    app.state.memdir = state
    install_error_handlers(app)

    if api_settings.bench_routes:  # first: the floor pays for no route matching before it
        app.add_api_route("/v1/_bench/constant", _constant, include_in_schema=False)
    for router in routers:
        app.router.routes.extend(router.routes)
    app.add_api_route("/healthz", _healthz, include_in_schema=False)
    app.add_api_route("/readyz", _readyz, include_in_schema=False)
    app.add_api_route("/metrics", _metrics, include_in_schema=False)
    install_docs(app)

    # --- MCP -------------------------------------------------------------------------------
    # The MCP streamable-HTTP app is mounted here, at /mcp, by whoever composes the server
    # (memdir.mcp builds it over the same `service`); the REST surface does not import it:
    #     app.mount("/mcp", mcp_http_app)
    # Its lifespan (session manager) must run inside this app's lifespan above.
    # -----------------------------------------------------------------------------------------

    limiter = failures = None
    if api_settings.rate is not None:
        limiter = RateLimiter(api_settings.rate, api_settings.burst)
    if api_settings.auth_failure_rate is not None:
        failures = RateLimiter(api_settings.auth_failure_rate, api_settings.auth_failure_burst)
    app.add_middleware(
        BoundsMiddleware,
        request_limit=settings.request_limit,
        transcript_limit=service.max_transcript_bytes,
    )
    app.add_middleware(HeadMiddleware)  # inside the limits and metrics: HEAD counts as a GET
    app.add_middleware(
        ObserveMiddleware, metrics=state.metrics, limiter=limiter, failures=failures,
        proxies=api_settings.trusted_proxies,
    )  # fmt: skip
    return app


def app_from_env() -> FastAPI:
    """The app from ``MEMDIR_*`` settings alone: the factory ``memdir serve`` workers load."""
    return create_app(Settings.load())


async def _constant() -> Response:
    """The benchmark floor: same stack, no token, no database."""
    return Response(b'{"ok":true}', media_type="application/json")


async def _healthz() -> JSONResponse:
    """Liveness: the process serves HTTP. No database round trip (that is ``/readyz``), so a
    database outage never makes an orchestrator restart servers that recover on their own."""
    return JSONResponse({"status": "ok", "version": memdir.__version__})


async def _readyz(request: Request) -> JSONResponse:
    """Readiness: the database answers, with the schema this memdir needs; 503 with the reason
    otherwise, within :data:`READY_TIMEOUT_S` even when the database does not answer at all (the
    check's thread is abandoned, bounded by the driver's connect timeout). No token needed."""
    db = request.app.state.memdir.service.db
    error: MemdirError | None = None
    with anyio.move_on_after(READY_TIMEOUT_S):
        try:
            await anyio.to_thread.run_sync(db.check_schema, abandon_on_cancel=True)
        except MemdirError as failed:
            error = failed
        else:
            ready = {"status": "ready", "version": memdir.__version__, "schema": HEAD_REVISION}
            return JSONResponse(ready)
    # The caller is not authenticated: it learns what kind of outage this is, never the
    # database's address or the driver's words, which go to the server's log instead.
    if error is None:
        message = f"the database did not answer within {READY_TIMEOUT_S:g} s"
        _log.warning("not ready: %s (%s)", message, db.display_url)
    else:
        _log.warning("not ready: %s", error)
        message = (
            "the database schema is behind this memdir; run `memdir migrate`"
            if "required" in error.to_dict()
            else "the database cannot be reached; the server's log says why"
        )
    body = {"status": "unavailable", "error": {"type": "backend_error", "message": message}}
    return JSONResponse(body, 503, headers={"Retry-After": "1"})


_log = logging.getLogger("memdir.api")


async def _metrics(ctx: Ctx, request: Request) -> Response:
    """Prometheus text exposition; for administrators (``admin`` on ``/.memdir/db/metrics``)."""
    ctx.service.require_admin(ctx.principal, METRICS, "read metrics")
    state: AppState = request.app.state.memdir
    body: Any = state.metrics.render()
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")
