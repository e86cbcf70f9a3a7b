"""The ASGI middleware of the app: rate limits and metrics around everything, then bounds.

:class:`ObserveMiddleware` refuses requests over a token's rate and counts every response;
:class:`BoundsMiddleware`, inside it, refuses what no route may receive before a route reads
it: a body over its size limit (413, by ``Content-Length`` at once, else while the bytes
arrive — a body is never read whole past the limit) and a ``/v1`` URL whose percent-escapes
do not decode to UTF-8 (400: ``a%FFb.md`` would otherwise be decoded lossily into another
path). Plain ASGI middlewares (not Starlette's ``BaseHTTPMiddleware``) so streaming responses
pass through untouched and the per-request cost stays a few microseconds.
"""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.api.errors import envelope
from memdir.api.metrics import Metrics
from memdir.api.ratelimit import RateLimiter
from memdir.core import errors

__all__ = ["BoundsMiddleware", "ObserveMiddleware"]

#: Paths that are never rate limited: probes and scrapes must work under load.
_UNLIMITED = ("/healthz", "/readyz", "/metrics")
_PROPOSE_ROUTE = "/v1/stores/{store}/proposals"
#: Transcript uploads, which have their own (larger) body limit.
_TRANSCRIPT_UPLOAD = re.compile(r"/v1/stores/[^/]+/transcripts/?\Z")


class BoundsMiddleware:
    """Refuse over-long bodies (413 ``limit_exceeded``) and undecodable URLs (400).

    ``request_limit`` bounds every body but a transcript upload's, which
    ``transcript_limit`` bounds; both in bytes.
    """

    def __init__(self, app: ASGIApp, request_limit: int, transcript_limit: int) -> None:
        self.app = app
        self.request_limit = request_limit
        self.transcript_limit = transcript_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path.startswith("/v1/"):
            refusal = _undecodable(scope)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
        upload = scope["method"] == "POST" and _TRANSCRIPT_UPLOAD.match(path) is not None
        limit = self.transcript_limit if upload else self.request_limit
        what = "a transcript upload" if upload else "a request body"
        declared = _content_length(scope)
        if declared is not None and declared > limit:
            error = errors.LimitExceeded(
                f"{what} is {declared} bytes, over the limit of {limit}; send less "
                f"({_SETTING[upload]} raises the limit)",
                size=declared,
                limit=limit,
            )
            await _refuse(error, scope, receive, send)
            return
        received = 0
        started = False
        exceeded: errors.LimitExceeded | None = None

        async def counted() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    exceeded = errors.LimitExceeded(
                        f"{what} is over the limit of {limit} bytes; send less "
                        f"({_SETTING[upload]} raises the limit)",
                        limit=limit,
                    )
                    raise exceeded
            return message

        async def tracked(message: Message) -> None:
            # A route that met the limit while reading answers whatever its framework makes
            # of the exception (FastAPI: 400 "error parsing the body"); the answer is 413.
            nonlocal started
            if exceeded is not None and not started:
                if message["type"] == "http.response.start":
                    started = True
                    await _refuse(exceeded, scope, receive, send)
                return
            if exceeded is not None and message["type"] != "http.response.start":
                return  # the rest of the replaced response
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, tracked)
        except errors.LimitExceeded as error:  # raised where no route handler caught it
            if started:
                raise
            await _refuse(error, scope, receive, send)


_SETTING = {True: "MEMDIR_MAX_TRANSCRIPT_BYTES", False: "MEMDIR_MAX_REQUEST_BYTES"}


def _content_length(scope: Scope) -> int | None:
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


def _undecodable(scope: Scope) -> Any:
    """A 400 response if the URL's path has percent-escapes that are not UTF-8, else None."""
    raw: bytes = scope.get("raw_path") or b""
    raw = raw.split(b"?", 1)[0]
    if b"%" not in raw:
        return None
    try:
        unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as exc:
        shown = raw.decode("ascii", "replace")
        return envelope(
            400,
            errors.InvalidPath.type,
            f"invalid path {shown!r}: its percent-escapes are not UTF-8 (byte 0x"
            f"{unquote_to_bytes(raw)[exc.start]:02x}); percent-encode the path's UTF-8 bytes",
            path=shown,
        )
    return None


async def _refuse(error: errors.MemdirError, scope: Scope, receive: Receive, send: Send) -> None:
    response = envelope(413, error.type, error.message, **error.details)
    await response(scope, receive, send)


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
