"""The ASGI middleware of the app: address, rate limits and metrics around everything, then
bounds.

:class:`ObserveMiddleware` wraps everything the server mounts (REST, ``/mcp``, ``/ui``), so the
client address (the socket peer, or what a trusted proxy forwarded:
:func:`~memdir.api.ratelimit.client_address`) and the failed-authentication limit are the same
for every surface. A response with status 401, or a request a surface marks with
``scope["state"]["auth_failed"]`` (the web UI's invalid session cookie), charges its address's
failure bucket. While an address's bucket is empty, its failed authentications answer 429
instead of 401 — but a request that authenticates still goes through: many local agents share
127.0.0.1 (and many users one NAT address), and one misconfigured client must not lock the
others out. Tokens are 256-bit random values, so the limit is about load and noise, not about
guessing. It also refuses requests over a token's rate and counts every response.

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
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.api.errors import envelope
from memdir.api.metrics import Metrics
from memdir.api.ratelimit import Network, RateLimiter, client_address
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

    def __init__(
        self,
        app: ASGIApp,
        metrics: Metrics,
        limiter: RateLimiter | None,
        failures: RateLimiter | None = None,
        proxies: Sequence[Network] = (),
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.limiter = limiter
        self.failures = failures
        self.proxies = tuple(proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        if self.proxies:
            scope = self._forwarded(scope)
        # One state dict for the request, shared by every (shallow) copy of the scope below,
        # so a mounted surface's ``auth_failed`` mark reaches this middleware.
        state: dict[str, Any] = scope.setdefault("state", {})
        client = scope.get("client")
        address = "a:" + (client[0] if client else "?")
        limited = scope["path"] not in _UNLIMITED
        throttled = 0.0  # > 0: this address's failed authentications answer 429
        if self.failures is not None and limited:
            throttled = self.failures.wait(address)
        if self.limiter is not None and limited:
            wait = self.limiter.take(self._key(scope, address))
            if wait > 0:
                await self._refuse(scope, receive, send, wait, self.limiter, "requests for "
                                   "this token")  # fmt: skip
                self.metrics.rate_limited.inc()
                self.metrics.observe(scope["method"], "(rate limited)", 429, 0.0)
                return

        refused = False

        async def send_observed(message: Message) -> None:
            nonlocal status, refused
            if refused:
                return  # the 401's body: replaced by the 429 already sent
            if message["type"] == "http.response.start":
                status = message["status"]
                failed = status == 401 or bool(state.get("auth_failed"))
                if throttled > 0 and failed and self.failures is not None:
                    refused, status = True, 429
                    await self._refuse(scope, receive, send, throttled, self.failures,
                                       "failed authentications from this address")  # fmt: skip
                    self.metrics.rate_limited.inc()
                    return
            await send(message)

        try:
            await self.app(scope, receive, send_observed)
        finally:
            if (
                self.failures is not None
                and not refused
                and (status == 401 or state.get("auth_failed"))
            ):
                self.failures.take(address)
            self._record(scope, status, time.perf_counter() - started)

    def _forwarded(self, scope: Scope) -> Scope:
        """The scope with the client (and scheme) a trusted proxy forwarded, if it is one."""
        client = scope.get("client")
        peer = client[0] if client else None
        forwarded = [v for n, v in scope["headers"] if n == b"x-forwarded-for"]
        address = client_address(peer, forwarded, self.proxies)
        if address == peer:
            return scope
        proto = next((v for n, v in scope["headers"] if n == b"x-forwarded-proto"), b"")
        scheme = proto.decode("latin-1").split(",")[-1].strip().lower()
        changed = {**scope, "client": (address, 0)}
        if scheme in ("http", "https"):
            changed["scheme"] = scheme
        return changed

    @staticmethod
    def _key(scope: Scope, address: str) -> str:
        """A request's bucket: its bearer credential (hashed), else its client address."""
        for name, value in scope["headers"]:
            if name == b"authorization" and value:
                return RateLimiter.key(value, None)
        return address

    @staticmethod
    async def _refuse(
        scope: Scope, receive: Receive, send: Send, wait: float, limiter: RateLimiter, what: str
    ) -> None:
        seconds = limiter.retry_after(wait)
        response = envelope(
            429,
            "rate_limited",
            f"too many {what} (limit {limiter.rate:g}/s, burst {limiter.burst}); retry after "
            f"{seconds} s",
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
