"""A checkout listing: every readable file under a prefix with its sha256, version and the
caller's rights, in one snapshot per page (``memdir checkout`` and ``memdir sync`` read it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel, Field

from memdir.api.deps import Ctx, StoreName, render, v1_router
from memdir.directory import MAX_CHECKOUT_PAGE, CheckoutPage, Rights

__all__ = ["router"]

router = v1_router("browse")


@router.get("/stores/{store}/checkout", response_model=CheckoutPage, summary="Checkout listing")
async def checkout(
    ctx: Ctx,
    store: StoreName,
    prefix: Annotated[str, Query(description="Only under this directory.", max_length=1024)] = "/",
    after: Annotated[
        str | None, Query(description="Files after this path (`next_after`).", max_length=1024)
    ] = None,
    content: Annotated[bool, Query(description="Include each file's content.")] = False,
    limit: Annotated[int, Query(ge=1, le=MAX_CHECKOUT_PAGE)] = MAX_CHECKOUT_PAGE,
) -> Response:
    """Readable live files under ``prefix`` after ``after`` in path order, each with its
    ``rights``: ``write`` (changes apply), ``propose`` (changes become proposals: propose-only
    rights or a protected file) or ``read``; ``revision`` is the store's at this snapshot."""
    page = await ctx.call(
        ctx.service.checkout_files, store, prefix, after=after, limit=limit, content=content
    )
    return render(page)


class RightsBody(BaseModel):
    """Paths to ask about (at most 1000)."""

    paths: list[str] = Field(max_length=MAX_CHECKOUT_PAGE)


class RightsView(BaseModel):
    """One entry per path asked, in order: ``write``, ``propose``, ``read``, or null where the
    caller may not read the path (nothing may be created there)."""

    rights: list[Rights | None]


@router.post("/stores/{store}/checkout/rights", response_model=RightsView,
             summary="Rights on paths")  # fmt: skip
async def rights(ctx: Ctx, store: StoreName, body: RightsBody) -> Response:
    """What a commit by the caller would do to each path now (a read: changes nothing)."""
    found = await ctx.call(ctx.service.path_rights, store, body.paths)
    return render({"rights": found})
