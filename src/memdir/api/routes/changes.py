"""The change feed: every commit as an event, after a store revision, filtered by read rights.

``GET …/changes?after=R&wait=S`` answers at once when commits after ``R`` are waiting, else
holds the request up to ``S`` seconds (long poll, at most 60) and answers as soon as one
arrives. ``GET …/changes/stream?after=R`` is the same feed as Server-Sent Events: ``id`` is the
revision (so ``Last-Event-ID`` resumes), ``event: commit``, ``data`` the event as JSON; a
comment line every 15 s keeps proxies from closing it. Both poll the database about every
100 ms from the event loop without blocking it (each poll runs in the thread pool). The stream
re-checks its token as often as the token cache expires (``MEMDIR_TOKEN_CACHE_SECONDS``) and
ends with ``event: error`` once the token is revoked or expired.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import Header, Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from memdir.api.deps import Caller, Ctx, StoreName, dump_json, render, v1_router
from memdir.api.models import ChangesPage
from memdir.core.errors import InvalidInput, MemdirError
from memdir.core.limits import MAX_INT64
from memdir.core.model import ChangeBatch, ChangeEvent

__all__ = ["router"]

router = v1_router("changes")

POLL_SECONDS = 0.1
HEARTBEAT_SECONDS = 15.0
STREAM_BATCH = 100

After = Annotated[int, Query(ge=0, le=MAX_INT64, description="Events after this store revision.")]


def _page(batch: ChangeBatch) -> dict[str, Any]:
    more = batch.next_after < batch.revision
    return {
        "items": batch.events,
        "next_after": batch.next_after,
        "revision": batch.revision,
        "next_cursor": str(batch.next_after) if more else None,
    }


def _start(after: int, cursor: str | None) -> int:
    if cursor is None:
        return after
    if not (cursor.isascii() and cursor.isdigit()) or int(cursor) > MAX_INT64:
        raise InvalidInput(f"invalid cursor {cursor[:40]!r}: pass back next_cursor unchanged")
    return int(cursor)


@router.get("/stores/{store}/changes", response_model=ChangesPage[ChangeEvent],
            summary="Change feed (long poll)")  # fmt: skip
async def changes(
    ctx: Ctx,
    request: Request,
    store: StoreName,
    after: After = 0,
    cursor: Annotated[str | None, Query(max_length=20, description="Same as after.")] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    wait: Annotated[float, Query(ge=0, le=60, description="Seconds to wait for news.")] = 0,
) -> Response:
    """Commits after ``after``, oldest first; waits up to ``wait`` seconds for the first."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    batch = await ctx.call(ctx.service.changes, store, after=_start(after, cursor), limit=limit)
    while not batch.events and loop.time() < deadline:
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - loop.time())))
        if await request.is_disconnected():
            break
        batch = await ctx.call(ctx.service.changes, store, after=batch.next_after, limit=limit)
    return render(_page(batch))


_EVENT = {
    "type": "object",
    "description": "One event; `data` is a ChangeEvent as JSON (an error envelope when "
    "`event` is `error`).",
    "properties": {
        "id": {"type": "string", "description": "The store revision of the commit."},
        "event": {"type": "string", "enum": ["commit", "error"]},
        "data": {"type": "string", "contentMediaType": "application/json"},
    },
}
_STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "Server-Sent Events: `id: <revision>`, `event: commit`, `data: <event>`.",
        "content": {"text/event-stream": {"schema": _EVENT}},
    }
}


@router.get("/stores/{store}/changes/stream", response_class=StreamingResponse,
            responses=_STREAM_DOC, summary="Change feed (Server-Sent Events)")  # fmt: skip
async def stream(
    ctx: Ctx,
    request: Request,
    store: StoreName,
    after: After = 0,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Follow the feed: past events after ``after`` (or ``Last-Event-ID``), then new ones."""
    start = after
    if last_event_id and last_event_id.isascii() and last_event_id.isdigit():
        start = min(int(last_event_id), MAX_INT64)
    first = await ctx.call(ctx.service.changes, store, after=start, limit=STREAM_BATCH)
    return StreamingResponse(
        _events(ctx, request, store, first),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _sse(event: ChangeEvent) -> bytes:
    return b"id: %d\nevent: commit\ndata: %s\n\n" % (event.revision, dump_json(event))


def _sse_error(error: MemdirError) -> bytes:
    return b"event: error\ndata: %s\n\n" % dump_json({"error": error.to_dict()})


async def _events(
    ctx: Caller, request: Request, store: StoreName, batch: ChangeBatch
) -> AsyncIterator[bytes]:
    loop = asyncio.get_running_loop()
    beat = checked = loop.time()
    reauth = max(POLL_SECONDS, request.app.state.memdir.tokens.ttl)
    token = request.headers.get("authorization", "").partition(" ")[2].strip()
    yield b"retry: 1000\n\n"
    try:
        while True:
            for event in batch.events:
                yield _sse(event)
            if len(batch.events) < STREAM_BATCH:
                await asyncio.sleep(POLL_SECONDS)
            now = loop.time()
            if now - checked >= reauth:
                principal = await run_in_threadpool(ctx.service.authenticate, token)
                ctx, checked = Caller(ctx.service, principal), now
            if now - beat >= HEARTBEAT_SECONDS:
                beat = now
                yield b": keep-alive\n\n"
            batch = await ctx.call(
                ctx.service.changes, store, after=batch.next_after, limit=STREAM_BATCH
            )
    except MemdirError as error:  # revoked token, deleted store: say so, then end
        yield _sse_error(error)
