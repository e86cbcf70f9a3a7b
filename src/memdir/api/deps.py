"""Per-request plumbing the routes share: who calls, provenance, preconditions, pages, output.

Service calls are synchronous (database I/O); :meth:`Caller.call` runs them in the thread
pool so the event loop never blocks. Bodies are serialised straight from the service's
dataclasses by pydantic's serialiser (no re-validation on the way out).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Concatenate, ParamSpec, TypeVar

from fastapi import APIRouter, Depends, Header, Path, Query, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool

from memdir.api.metrics import Metrics
from memdir.api.models import ProvenanceFields, SourceKind
from memdir.api.tokens import TokenCache
from memdir.core.errors import InvalidInput, NotFound, PreconditionFailed, Unauthenticated
from memdir.core.limits import MAX_INT64
from memdir.core.model import CommitResult, Principal, Provenance
from memdir.service import MemoryService

__all__ = [
    "JSON_ETAG_SUFFIX",
    "AppState",
    "Caller",
    "Ctx",
    "Cursor",
    "FilePath",
    "IdempotencyKey",
    "Limit",
    "Prov",
    "StoreName",
    "commit_headers",
    "commit_paths",
    "commit_response",
    "cursor_key",
    "dump_json",
    "if_match_of",
    "keyed_page",
    "merged",
    "methods_by_route",
    "offset_of",
    "offset_page",
    "once",
    "parse_if_match",
    "render",
    "v1_router",
]

P = ParamSpec("P")
T = TypeVar("T")
K = TypeVar("K")

_JSON = TypeAdapter(Any)


@dataclass
class AppState:
    """What the app holds for its lifetime (``app.state.memdir``).

    ``methods``: each route template's regex with every method it takes, for the ``Allow``
    header of a 405 (one template may be served by several routes, one per method).
    """

    service: MemoryService
    metrics: Metrics
    tokens: TokenCache
    owns_service: bool
    methods: list[tuple[re.Pattern[str], frozenset[str]]]

    def allowed(self, path: str) -> list[str]:
        found: set[str] = set()
        for regex, methods in self.methods:
            if regex.match(path):
                found |= methods
        return sorted(found)


def methods_by_route(routers: Sequence[APIRouter]) -> list[tuple[re.Pattern[str], frozenset[str]]]:
    merged: dict[str, tuple[re.Pattern[str], set[str]]] = {}
    for router in routers:
        for route in router.routes:
            if isinstance(route, APIRoute):
                entry = merged.setdefault(route.path, (route.path_regex, set()))
                entry[1].update(route.methods or ())
    return [(regex, frozenset(methods)) for regex, methods in merged.values()]


@dataclass
class Caller:
    """The authenticated principal of a request and the service it calls."""

    service: MemoryService
    principal: Principal

    async def call(
        self, method: Callable[Concatenate[Principal, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``method(principal, *args, **kwargs)`` in the thread pool."""
        return await run_in_threadpool(method, self.principal, *args, **kwargs)


_bearer = HTTPBearer(
    auto_error=False,
    description="A memdir token (`memdir token create`, or the one `memdir serve` printed).",
)


async def _caller(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    state: AppState = request.app.state.memdir
    if credentials is None:
        raise Unauthenticated(
            "missing bearer token: send the header 'Authorization: Bearer <token>' (create a "
            "token with `memdir token create`)"
        )
    token = credentials.credentials
    principal = state.tokens.get(token)
    if principal is None:
        principal = await run_in_threadpool(state.service.authenticate, token)
        state.tokens.put(token, principal)
    return Caller(state.service, principal)


Ctx = Annotated[Caller, Depends(_caller)]
StoreName = Annotated[str, Path(description="The store's name (e.g. `default`).")]
FilePath = Annotated[
    str,
    Path(description="The memory path without its leading '/', percent-encoded (`org/a.md`)."),
]


def _utf8(value: str | None) -> str | None:
    """Header values arrive decoded as Latin-1; recover the UTF-8 text a client sent."""
    if value is None:
        return None
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value


async def _provenance(
    session: Annotated[
        str | None, Header(alias="X-Memdir-Session", description="The agent session.")
    ] = None,
    transcript: Annotated[
        str | None,
        Header(alias="X-Memdir-Transcript", description="A reference to the transcript."),
    ] = None,
    reason: Annotated[
        str | None,
        Header(alias="X-Memdir-Reason", description="Why the change is made (UTF-8)."),
    ] = None,
    source_kind: Annotated[
        SourceKind | None,
        Header(alias="X-Memdir-Source-Kind", description="Where the knowledge comes from."),
    ] = None,
    idempotency_key: Annotated[
        str | None,
        Header(
            alias="Idempotency-Key",
            description="Retry-safe key: repeating it returns the first attempt's result.",
        ),
    ] = None,
) -> Provenance:
    """Provenance headers of a mutation (values may be raw UTF-8)."""
    return Provenance(
        session=_utf8(session),
        transcript=_utf8(transcript),
        reason=_utf8(reason),
        source_kind=source_kind,
        idempotency_key=_utf8(idempotency_key),
    )


Prov = Annotated[Provenance, Depends(_provenance)]


def merged(headers: Provenance, body: ProvenanceFields) -> Provenance:
    """Provenance from headers, overridden field by field by the JSON body."""
    return Provenance(
        session=body.session or headers.session,
        transcript=body.transcript or headers.transcript,
        reason=body.reason or headers.reason,
        source_kind=body.source_kind or headers.source_kind,
        idempotency_key=headers.idempotency_key,
    )


IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        description="Retry-safe key: repeating it returns the first attempt's result.",
    ),
]


async def once(
    ctx: Caller,
    key: str | None,
    request: list[Any],
    run: Callable[[], Any],
    *,
    authorize: Callable[[Any], None],
    status: int = 200,
    headers: Callable[[Any], dict[str, str]] | None = None,
    keep_out: tuple[str, ...] = (),
) -> Response:
    """Run a mutation that makes no commit at most once per ``Idempotency-Key``.

    ``request`` names the route and its arguments (a key reused for another request is 409
    ``idempotency_mismatch``); ``run()`` returns the response body's value. A repeat answers
    with the first attempt's status and body and ``Idempotent-Replayed: true`` — once
    ``authorize(recorded body)`` passed: it raises when the caller may no longer do what the
    first attempt did (a narrower token, a changed policy), so a key never outlives a right.
    Body keys in ``keep_out`` (a token's secret) are not recorded, so a replay shows them as
    null.
    """

    def body() -> Any:
        value = run()
        return None if value is None else _JSON.dump_python(value, mode="json")

    def record(data: Any) -> Any:
        if isinstance(data, dict) and keep_out:
            return {k: (None if k in keep_out else v) for k, v in data.items()}
        return data

    result, replayed = await run_in_threadpool(
        ctx.service.idempotent,
        ctx.principal,
        _utf8(key),
        request,
        body,
        record,
        lambda d: d,
        authorize=authorize,
    )
    sent = headers(result) if headers is not None and result is not None else {}
    if replayed:
        sent["Idempotent-Replayed"] = "true"
    if result is None:
        return Response(status_code=status, headers=sent)
    return render(result, status, sent)


def commit_paths(result: Any) -> list[str]:
    """Every path a commit result (JSON) touched, renames' old paths included."""
    paths: list[str] = []
    for op in result.get("results") or () if isinstance(result, dict) else ():
        paths.extend(p for p in (op.get("path"), op.get("old_path")) if p)
    return paths


_ENTITY_TAG = re.compile(r'(W/)?"([^"]*)"')
#: The JSON representation's ETag is the sha256 with this suffix (the markdown's is the bare
#: sha256); ``If-Match`` takes either, as both name the same content.
JSON_ETAG_SUFFIX = "-json"


def parse_if_match(value: str | None) -> tuple[tuple[bool, str], ...] | None:
    """An ``If-Match`` value as its entity tags, ``(weak, tag)`` each (RFC 9110 §13.1.1).

    A list is accepted (``"a", W/"b"``), and so is one bare sha256 (what many clients send).
    ``*`` is refused: it names no version, so it would be a blind overwrite.
    """
    if value is None:
        return None
    text = value.strip()
    if text == "*":
        raise InvalidInput(
            f"If-Match must name the ETag you read, received {value!r}; a blind overwrite "
            "is refused — read the file first",
            if_match=value,
        )
    tags: list[tuple[bool, str]] = []
    for part in text.split(","):
        part = part.strip()
        match = _ENTITY_TAG.fullmatch(part)
        if match is not None:
            tag = match.group(2).lower().removesuffix(JSON_ETAG_SUFFIX)
            tags.append((match.group(1) is not None, tag))
        elif part and '"' not in part and " " not in part:
            tags.append((False, part.lower().removesuffix(JSON_ETAG_SUFFIX)))
        else:
            raise InvalidInput(
                f'If-Match must be entity tags such as "<sha256>" (the ETag you read), '
                f"received {value!r}",
                if_match=value,
            )
    return tuple(tags)


async def if_match_of(ctx: Caller, store: str, path: str, value: str | None) -> str | None:
    """The sha256 to compare-and-swap on, from an ``If-Match`` header, by RFC 9110's rules.

    One strong tag is passed on as it is (the service compares it in the write's
    transaction). A list holds if one of its strong tags is the file's current ETag; weak
    tags never match (If-Match compares strongly). The current sha256 is read as the caller,
    so a file it may not read answers as the service would (not found), and the write still
    compares-and-swaps on that sha256, so nothing that changes in between is overwritten.
    """
    tags = parse_if_match(value)
    if tags is None:
        return None
    strong = [tag for weak, tag in tags if not weak]
    if len(tags) == 1 and strong:
        return strong[0]
    try:
        view = await ctx.call(ctx.service.read, store, path)
    except NotFound:
        # the service's own answer: not found if unreadable, 412 "does not exist" if absent
        return strong[0] if strong else "0" * 64
    current: str = view.sha256
    if current in strong:
        return current
    raise PreconditionFailed(
        f'{path} changed: its ETag "{view.sha256}" is not among the strong ETags of '
        f"If-Match {value!r} (weak ETags never match); re-read it, re-apply your change and "
        "retry with the new ETag",
        path=path,
        expected_sha256=strong[0] if strong else None,
        current_sha256=current,
    )


async def _refuse_nul_in_query(request: Request) -> None:
    """Query text may not hold NUL (no memdir value can; PostgreSQL text cannot either)."""
    if b"%00" in request.scope.get("query_string", b""):
        raise InvalidInput("query parameters must not contain NUL (%00)")


def v1_router(tag: str | None = None) -> APIRouter:
    """A router for one area of ``/v1``: the prefix, the error responses and the checks every
    route shares are fixed when a route is declared (once, at import), so building an app
    adds the routes as they are instead of re-deriving them per app."""
    from memdir.api.errors import ERROR_RESPONSES

    return APIRouter(
        prefix="/v1",
        tags=[tag] if tag else None,
        responses=ERROR_RESPONSES,
        dependencies=[Depends(_refuse_nul_in_query)],
    )


# --- output --------------------------------------------------------------------------------


def dump_json(value: Any) -> bytes:
    """JSON bytes of dataclasses, dicts, lists and datetimes (UTC, ISO 8601)."""
    return _JSON.dump_json(value)


def render(value: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    """A JSON response from dataclasses, dicts, lists and datetimes (UTC, ISO 8601)."""
    return Response(
        _JSON.dump_json(value), status_code=status, media_type="application/json", headers=headers
    )


def commit_response(result: CommitResult, status: int = 200) -> Response:
    """A commit's result; ``ETag`` of the first file written, and replays marked."""
    headers = {"X-Memdir-Revision": str(result.revision)}
    first = result.results[0] if result.results else None
    if first is not None and first.sha256:
        headers["ETag"] = f'"{first.sha256}"'
    if result.replayed:
        headers["Idempotent-Replayed"] = "true"
    return render(result, status, headers)


def commit_headers(result: dict[str, Any]) -> dict[str, str]:
    """:func:`commit_response`'s headers from a commit result's JSON."""
    headers = {"X-Memdir-Revision": str(result["revision"])}
    first = result["results"][0] if result.get("results") else None
    if first is not None and first.get("sha256"):
        headers["ETag"] = f'"{first["sha256"]}"'
    return headers


# --- pagination ----------------------------------------------------------------------------

Cursor = Annotated[
    str | None,
    Query(description="Opaque: the `next_cursor` of the previous page.", max_length=2000),
]
Limit = Annotated[int, Query(ge=1, le=1000, description="Most items in this page.")]


def _encode(data: dict[str, Any]) -> str:
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _decode(cursor: str | None) -> dict[str, Any]:
    if not cursor:
        return {}
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        data = json.loads(raw.decode("utf-8"))
    except (binascii.Error, ValueError):
        data = None
    if not isinstance(data, dict):
        raise InvalidInput(
            f"invalid cursor {cursor[:40]!r}: pass back the next_cursor of the previous page "
            "unchanged",
            cursor=cursor[:200],
        )
    return data


def cursor_key(cursor: str | None, kind: type[K]) -> K | None:
    """The key a keyed cursor continues after (None on the first page)."""
    key = _decode(cursor).get("k")
    if key is not None and (not isinstance(key, kind) or isinstance(key, bool)):
        raise InvalidInput("invalid cursor: it does not belong to this list")
    if isinstance(key, int) and not 0 <= key <= MAX_INT64:
        raise InvalidInput("invalid cursor: pass back next_cursor unchanged")
    return key


def keyed_page(
    items: Sequence[T],
    key: Callable[[T], K],
    cursor: str | None,
    limit: int,
    *,
    descending: bool = False,
) -> dict[str, Any]:
    """A page of ``items`` (sorted by ``key``) after the key in ``cursor``.

    Stable under inserts and deletes: a page starts after the last key seen, not at an offset.
    """
    after = _decode(cursor).get("k")
    rest: Sequence[T] = items
    if after is not None:
        try:
            rest = [i for i in items if (key(i) < after if descending else key(i) > after)]
        except TypeError:
            raise InvalidInput("invalid cursor: it does not belong to this list") from None
    page = list(rest[:limit])
    more = len(rest) > limit
    return {"items": page, "next_cursor": _encode({"k": key(page[-1])}) if more else None}


def offset_of(cursor: str | None) -> int:
    """Where a page of a ranked or computed list starts."""
    offset = _decode(cursor).get("o", 0)
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= 100_000:
        raise InvalidInput("invalid cursor: it does not belong to this list")
    return offset


def offset_page(fetched: Sequence[T], offset: int, limit: int) -> dict[str, Any]:
    """A page from a list fetched with at least ``offset + limit + 1`` items when more exist."""
    page = list(fetched[offset : offset + limit])
    more = len(fetched) > offset + limit
    return {"items": page, "next_cursor": _encode({"o": offset + limit}) if more else None}
