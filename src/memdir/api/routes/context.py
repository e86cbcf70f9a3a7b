"""Context and staleness: ``GET /v1/stores/{store}/context`` and ``…/stale``."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel

from memdir.api.deps import Ctx, Cursor, Limit, StoreName, keyed_page, render, v1_router
from memdir.api.models import Page
from memdir.context import StaleFile
from memdir.core.context import DEFAULT_BUDGET, MAX_BUDGET

__all__ = ["router"]

router = v1_router("context")

Name = Annotated[str | None, Query(max_length=255, pattern=r"^[^/]+$")]


class ContextItem(BaseModel):
    """One file in the context: its scope, summary and marks (``content`` for core files)."""

    path: str
    scope: str
    scope_name: str
    summary: str | None
    marks: list[str]
    skill: str | None = None
    content: str | None = None
    tokens: int | None = None


class ContextDocument(BaseModel):
    """The assembled context (``format=json``); ``markdown`` is what an agent reads."""

    tokens: int
    budget: int
    readable_files: int
    core: list[ContextItem]
    core_listed: list[ContextItem]
    skills: list[ContextItem]
    index: list[ContextItem]
    omitted: dict[str, Any]
    closing: str
    markdown: str


@router.get(
    "/stores/{store}/context",
    response_model=ContextDocument,
    summary="Assemble context",
    responses={200: {"content": {"text/markdown": {}}}},
)
async def context(
    ctx: Ctx,
    store: StoreName,
    project: Annotated[Name, Query(description="Only this project's scope among projects.")] = None,
    task: Annotated[Name, Query(description="Only this task's scope among tasks.")] = None,
    query: Annotated[
        str | None, Query(max_length=1000, description="Order each scope by relevance.")
    ] = None,
    budget: Annotated[
        int, Query(ge=1, le=MAX_BUDGET, description="Most tokens (offline estimate).")
    ] = DEFAULT_BUDGET,
    format: Annotated[Literal["json", "markdown"], Query()] = "json",
    include_expired: Annotated[bool, Query(description="List expired files too.")] = False,
) -> Response:
    """The caller's context: core files whole, skills, then an index of the other readable
    files by scope (task, agent, user, project, org), cut to ``budget`` estimated tokens with a
    closing line saying what was left out (docs/context.md). ``format=markdown`` answers the
    text itself. Byte-identical for the same store state, caller and parameters."""
    assembled = await ctx.call(
        ctx.service.context, store, project=project, task=task, query=query, budget=budget,
        include_expired=include_expired,
    )  # fmt: skip
    if format == "markdown":
        return Response(assembled.markdown, media_type="text/markdown; charset=utf-8")
    return render(assembled.to_json())


@router.get("/stores/{store}/stale", response_model=Page[StaleFile], summary="List stale files")
async def stale(
    ctx: Ctx,
    store: StoreName,
    prefix: Annotated[str, Query(max_length=1024, description="Only under this directory.")] = "/",
    days: Annotated[int, Query(ge=1, le=36500, description="Unread for this many days.")] = 30,
    reason: Annotated[
        list[Literal["expired", "review-due", "unread", "contradicted"]] | None,
        Query(description="Only files stale for one of these reasons (repeatable)."),
    ] = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Readable files that are expired, due for review, not read in ``days`` days, or
    contradicted by a dream, by scope (task, agent, user, project, org, other) then path; each
    with its reasons and last writer."""
    files = await ctx.call(ctx.service.stale, store, days=days, prefix=prefix, reasons=reason)
    order = {f.path: i for i, f in enumerate(files)}
    return render(keyed_page(files, lambda f: order[f.path], cursor, limit))
