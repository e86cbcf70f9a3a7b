"""The SDK's sans-I/O core: calls, plans, JSON → dataclasses, the error envelope, retry rules.

Nothing here sends a request. A :class:`Call` is one ``httpx2.Request`` with the function that
turns its response into a typed result; a :data:`Plan` is a generator that yields calls (and
:class:`Sleep` steps) and returns a result. The sync and async clients drive plans, so logic
that takes several requests — paging, ``update()``'s read / apply / write / retry loop — is
written once and runs on either.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import email.utils
import inspect
import math
import random
import types
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import (
    Any,
    Generic,
    Literal,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

import httpx2

from memdir.core import errors
from memdir.core.errors import MemdirError

__all__ = [
    "MAX_RETRY_AFTER",
    "Call",
    "Plan",
    "RateLimited",
    "Sleep",
    "Step",
    "backoff",
    "error_from_response",
    "from_json",
    "present",
    "retry_delay",
    "single",
    "unreachable",
    "whole_seconds",
]

T = TypeVar("T")

#: The longest ``Retry-After`` (seconds) the client waits out; a longer one fails at once.
MAX_RETRY_AFTER = 60.0


class RateLimited(MemdirError):
    """The server refused the request for now (HTTP 429); ``details['retry_after']`` seconds.

    Raised only once the client's retries are spent (each retry waits for ``Retry-After``).
    """

    type = "rate_limited"


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request and how to read its response.

    ``parse`` sees only successful responses (errors become exceptions first).
    ``retry_safe``: the request may be sent again after a failure that may have reached the
    server (a 5xx, a read error) — true for reads and for mutations the server deduplicates
    by ``Idempotency-Key``; other requests are retried only when they surely did not arrive
    (connection refused) or were refused unprocessed (429).
    """

    request: httpx2.Request
    parse: Callable[[httpx2.Response], T]
    retry_safe: bool = True


@dataclass(frozen=True)
class Sleep:
    """Pause the plan (backoff between attempts of ``update()``)."""

    seconds: float


Step = Call[Any] | Sleep
#: A generator of steps returning ``T``; a failed call is thrown into it as its MemdirError.
Plan = Generator[Step, Any, T]


def present(method: Callable[..., Any], builder: Callable[..., Any], owner: str) -> None:
    """Give a client method its builder's name, docstring and signature (returning what the
    plan returns), so ``help()`` and editors show the public method, not the plumbing."""
    name = builder.__name__.lstrip("_")
    signature = inspect.signature(builder)
    returns = signature.return_annotation
    if isinstance(returns, str) and returns.startswith("Plan[") and returns.endswith("]"):
        signature = signature.replace(return_annotation=returns[5:-1])
    method.__name__, method.__qualname__ = name, f"{owner}.{name}"
    method.__doc__ = builder.__doc__
    method.__dict__["__signature__"] = signature


def single(call: Call[T]) -> Plan[T]:
    """The plan of a method that is exactly one request."""
    result: T = yield call
    return result


# --- JSON → result dataclasses -----------------------------------------------------------------

_HINTS: dict[type, dict[str, Any]] = {}


def from_json(kind: Any, value: Any) -> Any:
    """Build ``kind`` (a dataclass, ``tuple[X, ...]``, ``X | None``, datetime, ...) from JSON.

    Keys the dataclass does not know are ignored (a newer server may send more), so results
    stay the service's own dataclasses (``memdir.core.model`` and friends).
    """
    if value is None or kind is Any:
        return value
    origin = get_origin(kind)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(kind) if a is not type(None)]
        return from_json(options[0], value) if len(options) == 1 else value
    if origin in (tuple, list, frozenset, set):
        item = get_args(kind)[0] if get_args(kind) else Any
        return origin(from_json(item, v) for v in value)
    if origin in (dict, Literal):
        return value
    if kind is dt.datetime:
        return dt.datetime.fromisoformat(value)
    if kind is float:
        return float(value)
    if isinstance(kind, type) and dataclasses.is_dataclass(kind):
        hints = _HINTS.get(kind)
        if hints is None:
            hints = _HINTS[kind] = get_type_hints(kind)
        known = {f.name for f in dataclasses.fields(kind)}
        return kind(**{k: from_json(hints[k], v) for k, v in value.items() if k in known})
    return value


# --- errors --------------------------------------------------------------------------------------

ERROR_TYPES: dict[str, type[MemdirError]] = {
    cls.type: cls
    for cls in [getattr(errors, name) for name in errors.__all__] + [RateLimited]
    if isinstance(cls, type) and issubclass(cls, MemdirError) and cls is not MemdirError
}
_BY_STATUS: dict[int, type[MemdirError]] = {
    400: errors.InvalidInput,
    401: errors.Unauthenticated,
    403: errors.Forbidden,
    404: errors.NotFound,
    409: errors.Conflict,
    412: errors.PreconditionFailed,
    413: errors.ContentTooLarge,
    428: errors.PreconditionRequired,
    429: RateLimited,
    503: errors.BackendError,
}


def error_from_response(response: httpx2.Response) -> MemdirError:
    """The exception for an error response, chosen by the envelope's ``error.type``.

    Types this client does not know (``method_not_allowed``, ``internal_error``, a newer
    server's) fall back to the class of the HTTP status, keeping the server's ``type`` in
    ``details``; a body that is not the envelope (a proxy's error page) likewise.
    """
    try:
        body = response.json()
    except ValueError:
        body = None
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(inner, dict) and isinstance(inner.get("type"), str):
        details = {k: v for k, v in inner.items() if k not in ("type", "message")}
        cls = ERROR_TYPES.get(inner["type"])
        if cls is None:
            cls = _BY_STATUS.get(response.status_code, MemdirError)
            details["type"] = inner["type"]
        message = str(inner.get("message", ""))
        hint = details.pop("hint", None)
        if isinstance(hint, str) and hint in errors.HINTS and "; " in message:
            # The server said the next step in REST's words; keep the statement and let the
            # caller's surface (the SDK's Python wording, an adapter's tool wording) say it.
            return cls(message.rsplit("; ", 1)[0], hint=hint, **details)
        return cls(message, **details)
    cls = _BY_STATUS.get(response.status_code, MemdirError)
    text = " ".join(response.text.split())[:200]
    return cls(
        f"HTTP {response.status_code} from {response.request.url} without a memdir error body: "
        f"{text!r}; is the URL a memdir server?",
        status=response.status_code,
    )


def is_error(response: httpx2.Response) -> bool:
    """4xx/5xx, and 202 — the envelope of a change queued as a proposal (``Proposed``)."""
    return response.status_code >= 400 or response.status_code == 202


# --- retries -------------------------------------------------------------------------------------


def backoff(attempt: int, base: float = 0.25, cap: float = 8.0) -> float:
    """Exponential backoff with jitter: about ``base * 2**attempt`` seconds, at most ``cap``."""
    return min(cap, base * 2.0**attempt) * random.uniform(0.5, 1.0)


def _retry_after(response: httpx2.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = (when - dt.datetime.now(dt.UTC)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


_CONNECT_ERRORS = (httpx2.ConnectError, httpx2.ConnectTimeout)


def retry_delay(
    call: Call[Any],
    attempt: int,
    max_retries: int,
    *,
    response: httpx2.Response | None = None,
    error: httpx2.TransportError | None = None,
) -> float | None:
    """Seconds to wait before sending ``call`` again, or None to stop (``attempt`` counts from 0).

    Retried: a connection that could not be made; a 429 after its ``Retry-After`` (up to
    :data:`MAX_RETRY_AFTER`); and, for retry-safe calls only, other transport errors and
    502 / 503 / 504 (and 500).
    """
    if attempt >= max_retries:
        return None
    if error is not None:
        if isinstance(error, _CONNECT_ERRORS) or call.retry_safe:
            return backoff(attempt)
        return None
    assert response is not None
    status = response.status_code
    if status == 429:
        wait = _retry_after(response)
        if wait is None:
            return backoff(attempt)
        return wait + random.uniform(0, 0.1) if wait <= MAX_RETRY_AFTER else None
    if status in (500, 502, 503, 504) and call.retry_safe:
        wait = _retry_after(response)
        return min(wait, MAX_RETRY_AFTER) if wait is not None else backoff(attempt)
    return None


def unreachable(base_url: str, error: httpx2.TransportError) -> errors.BackendError:
    """The error for a server that could not be reached (after the retries)."""
    return errors.BackendError(
        f"could not reach memdir at {base_url}: {type(error).__name__}: {error}; is the server "
        "running and the URL right?",
        url=base_url,
    )


def whole_seconds(value: float | dt.timedelta | None) -> int | None:
    """A duration as whole seconds for the wire (at least 1; None stays None)."""
    if isinstance(value, dt.timedelta):
        return max(1, round(value.total_seconds()))
    return None if value is None else max(1, round(value))


def fresh_key() -> httpx2.Headers:
    """A new ``Idempotency-Key``: retries of the one request it travels in apply it once."""
    return httpx2.Headers({"Idempotency-Key": uuid.uuid4().hex})


def json_body(response: httpx2.Response) -> Any:
    return response.json()


def parser(kind: type[T]) -> Callable[[httpx2.Response], T]:
    """A response parser into ``kind`` (see :func:`from_json`)."""
    return lambda response: cast(T, from_json(kind, response.json()))
