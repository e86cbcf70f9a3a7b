"""Files: read, write, delete, and the edit verbs on one file.

A file is addressed as ``/v1/stores/{store}/files/{path}`` where ``path`` is the memory path
without its leading ``/``, percent-encoded as URLs need (``/org/a b.md`` →
``files/org/a%20b.md``). Verbs that act on one file are ``POST`` to the file's URL with
``:verb`` appended (``files/org/a.md:str_replace``); the last ``:`` of such a URL starts the
verb, so a file whose name itself ends in ``:insert`` is edited at ``…:insert:insert``.

Conditional requests: the ``ETag`` of a file is ``"<sha256>"``. ``PUT`` needs ``If-Match``
(overwrite exactly that content) or ``If-None-Match: *`` (create only) when the file exists —
without either it is refused with 428; a failed precondition is 412 with the current sha256,
even when the content would be the same. ``GET`` with ``If-None-Match`` answers 304 while the
file has not changed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Header, Query, Request
from fastapi.responses import Response

from memdir.api.deps import (
    JSON_ETAG_SUFFIX,
    Ctx,
    FilePath,
    Prov,
    StoreName,
    commit_response,
    if_match_of,
    merged,
    render,
    v1_router,
)
from memdir.api.errors import ErrorEnvelope
from memdir.api.models import (
    InsertBody,
    MoveBody,
    ProvenanceFields,
    RedactBody,
    RevertFileBody,
    StrReplaceBody,
)
from memdir.core.content import decode_content
from memdir.core.errors import ContentTooLarge, InvalidInput
from memdir.core.limits import MAX_INT64
from memdir.core.model import CommitResult, FileView
from memdir.history import RedactionPlan

__all__ = ["router"]

router = v1_router("files")

FILE = "/stores/{store}/files/{path:path}"
PROPOSED: dict[int | str, dict[str, Any]] = {
    202: {
        "model": ErrorEnvelope,
        "description": "Queued for review as a proposal (`proposed`, its id in `proposal`); "
        "not applied.",
    }
}
IfMatch = Annotated[
    str | None,
    Header(alias="If-Match", description='Only if the current sha256 is this ("<sha256>").'),
]
_TEXT_TYPES = ("text/", "application/octet-stream")
_RAW_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "The whole new content, raw UTF-8 (no JSON wrapping).",
        "content": {
            "text/markdown": {"schema": {"type": "string"}},
            "text/plain": {"schema": {"type": "string"}},
        },
    }
}
_READ_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The content (raw by default; the FileView as JSON with `Accept: "
        "application/json` or `?format=json`).",
        "content": {"text/markdown": {"schema": {"type": "string"}}},
        "headers": {
            "ETag": {"description": '"<sha256>" of the file', "schema": {"type": "string"}},
            "X-Memdir-Version": {"description": "version number", "schema": {"type": "string"}},
        },
    },
    304: {"description": "Not modified: the ETag in If-None-Match is current."},
}


def _memory_path(path: str) -> str:
    return "/" + path


def _lines(value: str | None) -> tuple[int, int | None] | None:
    if value is None:
        return None
    first, sep, last = value.partition("-")
    start = int(first)
    if not sep:
        return start, start
    return start, int(last) if last else None


def _wants_json(fmt: str | None, request: Request) -> bool:
    if fmt is not None:
        return fmt == "json"
    accept = request.headers.get("accept", "")
    return "application/json" in accept and "text/markdown" not in accept


def _etag_matches(header: str, sha256: str) -> bool:
    tags = [t.strip().removeprefix("W/").strip('"') for t in header.split(",")]
    return "*" in tags or sha256 in tags


@router.get(FILE, response_model=FileView, responses=_READ_RESPONSES, summary="Read a file")
async def read_file(
    ctx: Ctx,
    request: Request,
    store: StoreName,
    path: FilePath,
    version: Annotated[
        int | None, Query(ge=1, le=MAX_INT64, description="Read this version.")
    ] = None,
    lines: Annotated[
        str | None, Query(pattern=r"^\d{1,9}(-\d{0,9})?$", description="N, N-M or N- (1-based).")
    ] = None,
    format: Annotated[Literal["raw", "json"] | None, Query()] = None,
    if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
) -> Response:
    """The file's content, or with ``format=json`` its FileView (content, sha256, version…).

    Each representation has its own ``ETag``: ``"<sha256>"`` for the markdown,
    ``"<sha256>-json"`` for the JSON view, and ``Vary: Accept`` says the choice depends on
    the request, so an HTTP cache never hands one for the other. Either tag names the content
    for ``If-Match`` on a write. ``ETag`` names the file's version even when ``lines``
    selects a part.
    An expired file (docs/context.md) is still served, with ``X-Memdir-Expired: <time>``
    (and ``expired_at`` in the JSON).
    """
    view = await ctx.call(
        ctx.service.read, store, _memory_path(path), version=version, lines=_lines(lines)
    )
    as_json = _wants_json(format, request)
    tag = f"{view.sha256}{JSON_ETAG_SUFFIX}" if as_json else view.sha256
    headers = {
        "ETag": f'"{tag}"',
        "Vary": "Accept",
        "X-Memdir-Version": str(view.version),
        "X-Memdir-Revision": str(view.revision),
    }
    if view.expired_at is not None:  # hidden from listings and search, still read by path
        headers["X-Memdir-Expired"] = view.expired_at.isoformat()
    if if_none_match is not None and _etag_matches(if_none_match, tag):
        return Response(status_code=304, headers=headers)
    if as_json:
        return render(view, headers=headers)
    return Response(view.content, media_type="text/markdown; charset=utf-8", headers=headers)


async def _body_text(request: Request, limit: int) -> str:
    """The raw request body as UTF-8 text, refusing more than ``limit`` bytes early."""
    kind = request.headers.get("content-type", "text/markdown").lower()
    charset = kind.partition("charset=")[2].strip().strip('"')
    if not kind.startswith(_TEXT_TYPES) or charset not in ("", "utf-8", "utf8"):
        raise InvalidInput(
            f"send the content raw as text/markdown or text/plain (UTF-8), not {kind!r}",
            content_type=kind,
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise ContentTooLarge(
            f"content is {declared} bytes, over the limit of {limit}; split it into several "
            "files", size=int(declared), limit=limit,
        )  # fmt: skip
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ContentTooLarge(f"content is over the limit of {limit} bytes", limit=limit)
        chunks.append(chunk)
    return decode_content(b"".join(chunks), source="the request body")


@router.put(
    FILE,
    response_model=CommitResult,
    status_code=200,
    openapi_extra=_RAW_BODY,
    responses={201: {"model": CommitResult, "description": "Created."}, **PROPOSED},
    summary="Create or overwrite a file",
)
async def write_file(
    ctx: Ctx,
    request: Request,
    store: StoreName,
    path: FilePath,
    prov: Prov,
    if_match: IfMatch = None,
    if_none_match: Annotated[
        str | None, Header(alias="If-None-Match", description="`*`: create only.")
    ] = None,
) -> Response:
    """Write the whole content: ``If-Match`` to overwrite, ``If-None-Match: *`` to create.

    A new file may be created without either; an existing one needs ``If-Match`` (428).
    """
    if if_none_match is not None and if_none_match.strip() != "*":
        raise InvalidInput("If-None-Match on PUT takes only '*' (create only)")
    if if_none_match is not None and if_match is not None:
        raise InvalidInput("If-Match and If-None-Match exclude each other; send one")
    content = await _body_text(request, ctx.service.max_file_bytes)
    cas = await if_match_of(ctx, store, _memory_path(path), if_match)
    result = await ctx.call(
        ctx.service.write, store, _memory_path(path), content,
        if_match=cas, if_absent=if_none_match is not None, provenance=prov,
    )  # fmt: skip
    created = result.results[0].operation == "created"
    return commit_response(result, 201 if created else 200)


@router.delete(FILE, response_model=CommitResult, responses=PROPOSED, summary="Delete a file")
async def delete_file(
    ctx: Ctx, store: StoreName, path: FilePath, prov: Prov, if_match: IfMatch = None
) -> Response:
    """Delete a file; its history stays (``:revert`` brings it back)."""
    result = await ctx.call(
        ctx.service.delete, store, _memory_path(path),
        if_match=await if_match_of(ctx, store, _memory_path(path), if_match),
        provenance=prov,
    )  # fmt: skip
    return commit_response(result)


@router.post(FILE + ":str_replace", response_model=CommitResult, responses=PROPOSED,
             summary="Replace text in a file")  # fmt: skip
async def str_replace(
    ctx: Ctx,
    store: StoreName,
    path: FilePath,
    body: StrReplaceBody,
    prov: Prov,
    if_match: IfMatch = None,
) -> Response:
    """Replace the one occurrence of ``old`` by ``new`` in the current content, atomically."""
    cas = body.if_match or await if_match_of(ctx, store, _memory_path(path), if_match)
    result = await ctx.call(
        ctx.service.str_replace, store, _memory_path(path), body.old, body.new,
        if_match=cas, provenance=merged(prov, body),
    )  # fmt: skip
    return commit_response(result)


@router.post(FILE + ":insert", response_model=CommitResult, responses=PROPOSED,
             summary="Insert lines into a file")  # fmt: skip
async def insert(
    ctx: Ctx,
    store: StoreName,
    path: FilePath,
    body: InsertBody,
    prov: Prov,
    if_match: IfMatch = None,
) -> Response:
    """Insert ``text`` after line ``line`` (0 = at the top) of the current content."""
    cas = body.if_match or await if_match_of(ctx, store, _memory_path(path), if_match)
    result = await ctx.call(
        ctx.service.insert, store, _memory_path(path), body.line, body.text,
        if_match=cas, provenance=merged(prov, body),
    )  # fmt: skip
    return commit_response(result)


@router.post(FILE + ":move", response_model=CommitResult, responses=PROPOSED,
             summary="Rename a file")  # fmt: skip
async def move(
    ctx: Ctx, store: StoreName, path: FilePath, body: MoveBody, prov: Prov, if_match: IfMatch = None
) -> Response:
    """Rename a file; it keeps its id and history, and never overwrites ``new_path``."""
    cas = body.if_match or await if_match_of(ctx, store, _memory_path(path), if_match)
    result = await ctx.call(
        ctx.service.rename, store, _memory_path(path), body.new_path,
        if_match=cas, provenance=merged(prov, body),
    )  # fmt: skip
    return commit_response(result)


@router.post(FILE + ":revert", response_model=CommitResult, summary="Revert a file")
async def revert_file(
    ctx: Ctx, store: StoreName, path: FilePath, body: RevertFileBody, prov: Prov
) -> Response:
    """Put the content of ``to_version`` back as a new version (a live file keeps its path)."""
    result = await ctx.call(
        ctx.service.revert_file, store, _memory_path(path), body.to_version,
        merged(prov, body),
    )  # fmt: skip
    return commit_response(result)


@router.post(FILE + ":redact", response_model=RedactionPlan, summary="Redact a version")
async def redact(ctx: Ctx, store: StoreName, path: FilePath, body: RedactBody) -> Response:
    """Remove a version's content (and every version holding the same content) from history.

    With ``dry_run`` only lists the versions that would lose their content. Admin only.
    """
    plan = await ctx.call(
        ctx.service.redact, store, _memory_path(path), body.version, dry_run=body.dry_run
    )
    return render(plan)


@router.post(FILE + ":purge", response_model=CommitResult, summary="Purge a path's history")
async def purge(
    ctx: Ctx, store: StoreName, path: FilePath, prov: Prov, body: ProvenanceFields | None = None
) -> Response:
    """Remove every version ever stored at the path (admin); a tombstone commit remains."""
    provenance = merged(prov, body) if body is not None else prov
    result = await ctx.call(ctx.service.purge, store, _memory_path(path), provenance)
    return commit_response(result)
