"""Signing in to the web UI: the session cookie, CSRF tokens, and who the request is.

The session cookie holds the memdir token the person signed in with (the same bearer tokens
REST takes), ``HttpOnly`` (no script reads it), ``SameSite=Strict`` (no other site sends it),
``Secure`` over HTTPS, scoped to the UI's path. Every request authenticates it through
``MemoryService.authenticate`` — no cache — so a revoked or expired token signs the person out
on their next page.

CSRF: every state-changing form is a POST carrying ``csrf``, the HMAC-SHA256 of a fixed label
keyed by the session token. Only someone who holds the cookie's value can compute it, so it is
stateless and holds across any number of server processes. The sign-in form has no session
yet; it uses a double-submit cookie (a random value in a ``SameSite=Strict`` cookie and in the
form), so another site cannot sign a browser in as someone else.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Final

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from memdir.core.errors import MemdirError, Unauthenticated
from memdir.core.model import Principal
from memdir.service import MemoryService

__all__ = [
    "COOKIE",
    "PRE_COOKIE",
    "SIGN_IN_REASONS",
    "SignInRequired",
    "base_path",
    "check_csrf",
    "check_signin_csrf",
    "clear_session",
    "csrf_for",
    "current_principal",
    "local_next",
    "new_pre_session",
    "pre_value",
    "set_session",
]

COOKIE: Final = "memdir_session"
PRE_COOKIE: Final = "memdir_signin"
_LABEL: Final = b"memdir web csrf v1"


class SignInRequired(Exception):
    """No valid session: the page sends the browser to the sign-in form (and back after).

    ``reason`` is a key of :data:`SIGN_IN_REASONS`: the sign-in page shows only those fixed
    messages, so a crafted link cannot put words of its own on it.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(SIGN_IN_REASONS[reason])
        self.reason = reason


#: Why the browser was sent to sign in (the ``why`` of the sign-in URL) -> what it shows.
SIGN_IN_REASONS: Final = {
    "required": "sign in with a memdir token to continue",
    "invalid": "your token is no longer valid (unknown, revoked or expired); sign in with another",
}


class CsrfRefused(MemdirError):
    """A POST without the right CSRF token (HTTP 403): the form was not one of ours."""

    type = "csrf_refused"


def base_path(request: Request) -> str:
    """Where the UI is mounted (``/ui``), without a trailing slash."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def csrf_for(token: str) -> str:
    """The CSRF value of a session: HMAC-SHA256 of a fixed label keyed by its token."""
    return hmac.new(token.encode("utf-8"), _LABEL, hashlib.sha256).hexdigest()


def _cookie_args(request: Request) -> dict[str, object]:
    return {
        "httponly": True,
        "samesite": "strict",
        "secure": request.url.scheme == "https",
        "path": base_path(request) or "/",
    }


def set_session(request: Request, response: Response, token: str) -> None:
    response.set_cookie(COOKIE, token, **_cookie_args(request))  # type: ignore[arg-type]
    response.delete_cookie(PRE_COOKIE, path=base_path(request) or "/")


def clear_session(request: Request, response: Response) -> None:
    response.delete_cookie(COOKIE, path=base_path(request) or "/")


def new_pre_session(request: Request, response: Response, value: str) -> None:
    """Set the sign-in form's double-submit value (``value``, from :func:`pre_value`)."""
    response.set_cookie(PRE_COOKIE, value, **_cookie_args(request))  # type: ignore[arg-type]


def pre_value() -> str:
    return secrets.token_urlsafe(24)


def _refuse(sent: object) -> CsrfRefused:
    return CsrfRefused(
        "this form was refused: its CSRF token is missing or wrong (received "
        f"{'none' if not sent else 'a different one'}); reload the page and submit it again"
    )


def check_csrf(request: Request, sent: object) -> None:
    """Refuse the request unless ``sent`` is the session's CSRF value."""
    token = request.cookies.get(COOKIE)
    expected = csrf_for(token) if token else None
    if not expected or not isinstance(sent, str) or not hmac.compare_digest(sent, expected):
        raise _refuse(sent)


def check_signin_csrf(request: Request, sent: object) -> None:
    """Refuse a sign-in unless ``sent`` is the double-submit value of its sign-in cookie."""
    expected = request.cookies.get(PRE_COOKIE)
    if not expected or not isinstance(sent, str) or not hmac.compare_digest(sent, expected):
        raise _refuse(sent)


async def current_principal(request: Request, service: MemoryService) -> tuple[Principal, str]:
    """The signed-in principal and its session token; :class:`SignInRequired` otherwise."""
    token = request.cookies.get(COOKIE)
    if not token:
        raise SignInRequired("required")
    try:
        principal = await run_in_threadpool(service.authenticate, token)
    except Unauthenticated:
        request.state.auth_failed = True  # counted per client address by the app's middleware
        raise SignInRequired("invalid") from None
    return principal, token


def local_next(request: Request, value: object) -> str:
    """A redirect target inside the UI: ``value`` when it is a path under it, else its home."""
    base = base_path(request)
    home = base + "/"
    if not isinstance(value, str) or not value.startswith(home) or value.startswith("//"):
        return home
    if "\\" in value or any(ord(c) < 32 for c in value):
        return home
    return value
