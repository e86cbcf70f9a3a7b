"""The web UI's composition root: :func:`create_web_app`, an ASGI app to mount (at ``/ui``).

Server-rendered pages over the same service calls as REST, for people: browse the store,
history and diffs, the review queue with evidence and charts, dream reports, transcripts.

Invariants and reasons:

- **The service decides.** Pages authenticate the session's memdir token through the service
  on every request and call it as that principal; nothing here grants or hides anything on
  its own. "Not found" and "no read right" are one 404 page, as on every surface.
- **Untrusted text stays text.** Memory files, transcripts, proposals and reports are shown
  through autoescaped templates; no memory value becomes a URL unless it passes validation
  (:mod:`memdir.web.render`).
- **No script at all.** Every response carries a Content-Security-Policy without
  ``script-src`` (so ``default-src 'none'`` forbids every script, inline or not), plus
  ``X-Frame-Options: DENY``, ``Referrer-Policy: no-referrer`` and ``nosniff``. Charts are
  server-rendered SVG; the stylesheet is served from the package — no CDN, no build step.
- **State changes are POSTs with a CSRF token** (:mod:`memdir.web.session`); the sign-in
  cookie is ``HttpOnly`` and ``SameSite=Strict``.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memdir.core.errors import (
    Conflict,
    Forbidden,
    InvalidInput,
    MemdirError,
    NotFound,
    Unauthenticated,
)
from memdir.service import MemoryService
from memdir.web import browse, commits, find, review, runs, stale
from memdir.web.page import WebState, form_value, page, templates, viewer
from memdir.web.session import (
    SIGN_IN_REASONS,
    CsrfRefused,
    SignInRequired,
    base_path,
    check_csrf,
    check_signin_csrf,
    clear_session,
    local_next,
    new_pre_session,
    pre_value,
    set_session,
)

__all__ = ["SECURITY_HEADERS", "create_web_app"]

SECURITY_HEADERS: Final = {
    "content-security-policy": (
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}


class SecurityHeaders:
    """Adds :data:`SECURITY_HEADERS` to every response of the wrapped app."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.raw = [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in self.raw if k not in names]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, send_with_headers)


# --- sign-in --------------------------------------------------------------------------------


async def home(request: Request) -> Response:
    store = request.app.state.web.store
    return RedirectResponse(f"{base_path(request)}/s/{quote(store, safe='')}/tree/", 303)


def _signin_page(
    request: Request, *, error: str | None = None, status: int = 200, next_url: str = ""
) -> Response:
    pre = pre_value()
    next_url = next_url or local_next(request, request.query_params.get("next"))
    rendered = page(request, "signin.html", None, status, error=error, pre=pre, next=next_url)
    new_pre_session(request, rendered, pre)
    return rendered


async def signin_form(request: Request) -> Response:
    return _signin_page(request, error=SIGN_IN_REASONS.get(request.query_params.get("why", "")))


async def signin(request: Request) -> Response:
    form = await request.form()
    check_signin_csrf(request, form_value(form, "csrf"))
    token = (form_value(form, "token") or "").strip()
    next_url = local_next(request, form_value(form, "next"))
    service: MemoryService = request.app.state.web.service
    try:
        await run_in_threadpool(service.authenticate, token)
    except Unauthenticated as exc:
        return _signin_page(request, error=exc.message, status=401, next_url=next_url)
    response = RedirectResponse(next_url, 303)
    set_session(request, response, token)
    return response


async def signout(request: Request) -> Response:
    form = await request.form()
    check_csrf(request, form_value(form, "csrf"))
    response = RedirectResponse(f"{base_path(request)}/signin", 303)
    clear_session(request, response)
    return response


# --- errors ---------------------------------------------------------------------------------


async def _sign_in_required(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, SignInRequired)
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.method != "GET":  # a form's target cannot be reached by the redirect back
        here = f"{base_path(request)}/"
    target = f"{base_path(request)}/signin?next={quote(here, safe='')}"
    response = RedirectResponse(f"{target}&why={exc.reason}", 303)
    clear_session(request, response)
    return response


def _status(error: MemdirError) -> int:
    for cls, status in (
        (NotFound, 404), (CsrfRefused, 403), (Forbidden, 403), (Conflict, 409),
        (InvalidInput, 400), (Unauthenticated, 401),
    ):  # fmt: skip
        if isinstance(error, cls):
            return status
    return 500


async def _memdir_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, MemdirError)
    status = _status(exc)
    try:  # the page keeps its navigation when the session is valid
        who = await viewer(request)
    except SignInRequired:
        who = None
    title = {404: "Not found", 403: "Refused", 409: "Conflict", 400: "Invalid request"}
    return page(request, "error.html", who, status, title=title.get(status, "Error"),
                message=exc.message)  # fmt: skip


def create_web_app(service: MemoryService, *, store: str = "default") -> ASGIApp:
    """The web UI over ``service`` (the caller's: not closed here); ``store`` is its home."""
    app = Starlette(
        routes=[
            Route("/", home),
            Route("/signin", signin_form, methods=["GET"]),
            Route("/signin", signin, methods=["POST"]),
            Route("/signout", signout, methods=["POST"]),
            Mount("/static", StaticFiles(packages=[("memdir.web", "static")]), name="static"),
            *browse.routes,
            *commits.routes,
            *find.routes,
            *review.routes,
            *runs.routes,
            *stale.routes,
        ],
        exception_handlers={SignInRequired: _sign_in_required, MemdirError: _memdir_error},
    )
    app.state.web = WebState(service, store, templates())
    return SecurityHeaders(app)
