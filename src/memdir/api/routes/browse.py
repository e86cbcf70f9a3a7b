"""Looking around a store: tree, glob, grep, search. Only readable files are ever listed."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.responses import Response

from memdir.api.deps import (
    Ctx,
    Cursor,
    Limit,
    StoreName,
    keyed_page,
    offset_of,
    offset_page,
    render,
    v1_router,
)
from memdir.api.models import Page
from memdir.core.errors import InvalidInput
from memdir.core.model import Entry, GrepMatch, SearchHit

__all__ = ["router"]

router = v1_router("browse")

Prefix = Annotated[str, Query(description="Only under this directory.", max_length=1024)]
IncludeExpired = Annotated[bool, Query(description="Expired files too (docs/context.md).")]


@router.get("/stores/{store}/tree", response_model=Page[Entry], summary="List a directory")
async def tree(
    ctx: Ctx,
    store: StoreName,
    prefix: Prefix = "/",
    depth: Annotated[int, Query(ge=1, le=64, description="Levels to list.")] = 1,
    recursive: Annotated[bool, Query(description="Every file under prefix.")] = False,
    include_expired: IncludeExpired = False,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Files and directories under ``prefix``, in path order; directories carry their file
    count (readable files only; expired ones only with ``include_expired``)."""
    entries = await ctx.call(
        ctx.service.ls, store, prefix, depth=None if recursive else depth,
        include_expired=include_expired,
    )  # fmt: skip
    return render(keyed_page(entries, lambda e: e.path, cursor, limit))


@router.get("/stores/{store}/glob", response_model=Page[str], summary="Match paths")
async def glob(
    ctx: Ctx,
    store: StoreName,
    pattern: Annotated[str, Query(description="'*' within a segment, '**' across segments.")],
    include_expired: IncludeExpired = False,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Readable live files whose path matches ``pattern``, in path order."""
    found = await ctx.call(ctx.service.glob, store, pattern, include_expired=include_expired)
    paths = sorted(found)
    return render(keyed_page(paths, lambda p: p, cursor, limit))


@router.get("/stores/{store}/grep", response_model=Page[GrepMatch], summary="Grep content")
async def grep(
    ctx: Ctx,
    store: StoreName,
    pattern: Annotated[
        str,
        Query(
            description="A regular expression (Python syntax, run by RE2 in linear time: "
            "no backreferences or lookaround)."
        ),
    ],
    prefix: Prefix = "/",
    ignore_case: bool = False,
    context: Annotated[int, Query(ge=0, le=20, description="Lines around each match.")] = 0,
    include_expired: IncludeExpired = False,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Matching lines of current content, in path and line order."""
    start = offset_of(cursor)
    matches = await ctx.call(
        ctx.service.grep, store, pattern, prefix=prefix, ignore_case=ignore_case,
        context=context, limit=start + limit + 1, include_expired=include_expired,
    )  # fmt: skip
    return render(offset_page(matches, start, limit))


@router.get("/stores/{store}/search", response_model=Page[SearchHit], summary="Search")
async def search(
    ctx: Ctx,
    store: StoreName,
    q: Annotated[str, Query(description='Words match any term; "phrases" and prefix* work.')],
    prefix: Prefix = "/",
    include_expired: IncludeExpired = False,
    cursor: Cursor = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
) -> Response:
    """Ranked full-text search over readable current content (best first)."""
    start = offset_of(cursor)
    if start > 1000:  # deep pages of a ranking are not worth computing
        raise InvalidInput("search pages stop at 1000 results; narrow the query or the prefix")
    hits = await ctx.call(
        ctx.service.search, store, q, prefix=prefix, limit=start + limit + 1,
        include_expired=include_expired,
    )  # fmt: skip
    return render(offset_page(hits, start, limit))
