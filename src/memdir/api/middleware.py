"""The one ASGI middleware of the app: rate limits first, then metrics around the rest.

A plain ASGI middleware (not Starlette's ``BaseHTTPMiddleware``) so streaming responses pass
through untouched and the per-request cost stays a few microseconds.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.api.errors import envelope
from memdir.api.metrics import Metrics
from memdir.api.ratelimit import RateLimiter
from memdir.core import errors

__all__ = ["ObserveMiddleware"]

#: Paths that are never rate limited: probes and scrapes must work under load.
_UNLIMITED = ("/healthz", "/readyz", "/metrics")
_PROPOSE_ROUTE = "/v1/stores/{store}/proposals"


class ObserveMiddleware:
    """Refuse requests over a token's rate (429); count and time every response."""

    def __init__(self, app: ASGIApp, metrics: Metrics, limiter: RateLimiter | None) -> None:
        self.app = app
        self.metrics = metrics
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        if self.limiter is not None and scope["path"] not in _UNLIMITED:
            wait = self.limiter.take(self._key(scope))
            if wait > 0:
                await self._refuse(scope, receive, send, wait)
                self.metrics.rate_limited.inc()
                self.metrics.observe(scope["method"], "(rate limited)", 429, 0.0)
                return

        async def send_observed(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        finally:
            self._record(scope, status, time.perf_counter() - started)

    def _key(self, scope: Scope) -> str:
        authorization = None
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value
                break
        client = scope.get("client")
        assert self.limiter is not None
        return self.limiter.key(authorization, client[0] if client else None)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, wait: float) -> None:
        assert self.limiter is not None
        seconds = self.limiter.retry_after(wait)
        response = envelope(
            429,
            "rate_limited",
            f"too many requests for this token (limit {self.limiter.rate:g}/s, burst "
            f"{self.limiter.burst}); retry after {seconds} s",
            headers={"Retry-After": str(seconds)},
            retry_after=seconds,
        )
        await response(scope, receive, send)

    def _record(self, scope: Scope, status: int, seconds: float) -> None:
        route = scope.get("route")
        template = getattr(route, "path", None) or "(unmatched)"
        template = template.replace("{path:path}", "{path}")
        self.metrics.observe(scope["method"], template, status, seconds)
        error: Any = scope.get("state", {}).get("error")
        if status == 412:
            self.metrics.cas_conflicts.labels(template).inc()
        elif status == 202 and isinstance(error, errors.Proposed):
            findings = error.details.get("findings") or []
            quarantined = any(isinstance(f, dict) and f.get("action") == "quarantine"
                              for f in findings)  # fmt: skip
            origin = "quarantine" if quarantined else "agent"
            self.metrics.proposals.labels(origin).inc()
            self.metrics.findings(findings)
        elif status == 201 and template == _PROPOSE_ROUTE and scope["method"] == "POST":
            self.metrics.proposals.labels("agent").inc()
        elif isinstance(error, errors.ScreeningRefused):
            self.metrics.screening_refusals.inc()
            self.metrics.findings(error.details.get("findings"))
