"""Errors at the HTTP edge: one status per error class, one JSON envelope for every error.

Every error response — a memdir error, a malformed request, an unknown route, a wrong method,
a rate limit, a crash — has the body ``{"error": {"type", "message", ...details}}``. Statuses
follow DESIGN.md's table, kept on the error classes themselves (``http_status``, see
:mod:`memdir.core.errors`), never by message text. Unexpected exceptions become a 500
whose message names no internals; the traceback goes to the server log only.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from memdir.core import errors

__all__ = [
    "ERROR_RESPONSES",
    "ErrorBody",
    "ErrorEnvelope",
    "envelope",
    "install_error_handlers",
    "status_for",
]

log = logging.getLogger("memdir.api")


def status_for(error: errors.MemdirError) -> int:
    """The HTTP status of an error: its class's ``http_status`` (see :mod:`memdir.core.errors`)."""
    return type(error).http_status


class ErrorBody(BaseModel):
    """``type`` is stable (match on it); ``message`` is one line saying what to do next; other
    keys are details such as ``path``, ``current_sha256``, ``proposal`` or ``findings``."""

    model_config = ConfigDict(extra="allow")
    type: str
    message: str


class ErrorEnvelope(BaseModel):
    error: ErrorBody


def _doc(text: str) -> dict[str, Any]:
    return {"model": ErrorEnvelope, "description": text}


#: The error statuses every route may answer with, for the OpenAPI document.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _doc(
        "Invalid input: a bad path (look-alike characters, percent-escapes that are not UTF-8), "
        "parameter (an integer beyond 64 bits) or body (`invalid_input`, `invalid_path`)."
    ),
    401: _doc("No valid bearer token (`unauthenticated`)."),
    403: _doc("The caller may read the target but not do this (`forbidden`)."),
    404: _doc("No such resource, or the caller may not read it (`not_found`)."),
    405: _doc("The route does not take this method (`method_not_allowed`)."),
    409: _doc("The request does not fit the current state (`conflict`, `edit_conflict`, ...)."),
    412: _doc("A precondition failed; `current_sha256` says what the file holds now."),
    413: _doc(
        "Over a limit: content over the size limit (`content_too_large`), too many operations "
        "or a body over its limit (`limit_exceeded`); see docs/configuration.md."
    ),
    422: _doc(
        "Content refused: not UTF-8 (`invalid_content`, with `offset`) or by write "
        "screening (`screening_refused`, with `findings`)."
    ),
    428: _doc("A full overwrite of an existing file needs `If-Match` (`precondition_required`)."),
    429: _doc("Too many requests for this token; see `Retry-After` (`rate_limited`)."),
    503: _doc("The database cannot be used right now (`backend_error`)."),
}


def envelope(
    status: int,
    type_: str,
    message: str,
    headers: dict[str, str] | None = None,
    **details: Any,
) -> JSONResponse:
    """An error response with the one envelope."""
    body = {"error": _jsonable({"type": type_, "message": message, **details})}
    return JSONResponse(body, status_code=status, headers=headers)


def _headers(error: errors.MemdirError, request: Request) -> dict[str, str]:
    headers: dict[str, str] = {}
    if isinstance(error, errors.Unauthenticated):
        given = request.headers.get("authorization") is not None
        headers["WWW-Authenticate"] = 'Bearer error="invalid_token"' if given else "Bearer"
    elif isinstance(error, errors.PreconditionFailed | errors.PreconditionRequired):
        current = error.details.get("current_sha256")
        if current:
            headers["ETag"] = f'"{current}"'
    elif isinstance(error, errors.Proposed):
        store = request.path_params.get("store")
        if store:
            headers["Location"] = f"/v1/stores/{store}/proposals/{error.details['proposal']}"
    elif isinstance(error, errors.BackendError):
        headers["Retry-After"] = "1"
    return headers


async def _memdir_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, errors.MemdirError)
    status = status_for(exc)
    request.state.error = exc  # read by the metrics middleware
    store = request.path_params.get("store")
    words = errors.SURFACE_WORDS["rest"]
    said = exc.to_dict(words, store) if isinstance(store, str) else exc.to_dict(words)
    body = {"error": _jsonable(said)}
    return JSONResponse(body, status_code=status, headers=_headers(exc, request))


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    problems = [
        {
            "loc": [str(part) for part in e.get("loc", ())],
            "msg": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]
    first = problems[0] if problems else {"loc": [], "msg": "invalid request"}
    where = ".".join(first["loc"]) or "request"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    message = f"invalid {where}: {first['msg']}{more}; see /openapi.json for the expected shape"
    return envelope(400, "invalid_input", message, errors=problems)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 404:
        type_, message = "not_found", f"no route {request.url.path}; see /openapi.json"
    elif exc.status_code == 405:
        methods = request.app.state.memdir.allowed(request.url.path)
        if methods:
            headers["Allow"] = ", ".join(methods)
        type_ = "method_not_allowed"
        message = (
            f"{request.method} is not allowed on {request.url.path}; allowed: "
            f"{headers.get('Allow', 'none')}"
        )
    else:
        type_, message = "http_error", str(exc.detail)
    return envelope(exc.status_code, type_, message, headers=headers)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    log.warning("database error on %s %s: %s", request.method, request.url.path, exc)
    return envelope(
        503,
        "backend_error",
        "the database could not complete the request; retry shortly",
        headers={"Retry-After": "1"},
    )


async def _crash(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return envelope(
        500,
        "internal_error",
        "internal server error; the server log has the details — retry, or report it",
    )


def install_error_handlers(app: FastAPI) -> None:
    """Route every kind of failure to the envelope."""
    app.add_exception_handler(errors.MemdirError, _memdir_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    # A database error the service did not classify (a lock held too long, a lost connection,
    # an exhausted pool, a unique-key race): the database, not the request, is at fault.
    for cls in _database_errors():
        app.add_exception_handler(cls, _database_error)
    app.add_exception_handler(Exception, _crash)


def _database_errors() -> list[type[Exception]]:
    import sqlite3

    import sqlalchemy.exc

    found: list[type[Exception]] = [
        sqlalchemy.exc.DBAPIError,
        sqlalchemy.exc.TimeoutError,  # no pooled connection came free in time
        sqlite3.Error,  # the hot read path runs on the driver's own connection
    ]
    try:
        import psycopg
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return found
    found.append(psycopg.Error)
    return found


def _jsonable(value: Any) -> Any:
    """Error details are JSON values already, except for the odd tuple or datetime."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate echoed back from the request
            return value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, int | float | bool) or value is None:
        return value
    return _jsonable(str(value))
