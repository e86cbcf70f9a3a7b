"""The review queue: propose, list, show, accept, reject, rebase.

A proposal is visible to whoever may read every path it touches, by the caller's rights now
(its author also on a path it may only propose to).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import Query
from fastapi.responses import Response

from memdir.api.deps import (
    Caller,
    Ctx,
    Cursor,
    IdempotencyKey,
    Limit,
    Prov,
    StoreName,
    commit_headers,
    commit_paths,
    merged,
    offset_of,
    offset_page,
    once,
    render,
    v1_router,
)
from memdir.api.models import AcceptBody, Page, ProposeBody, RebaseBody, ReviewBody
from memdir.core.model import CommitResult, operation_from_dict
from memdir.proposals import Proposal

__all__ = ["router"]

router = v1_router("proposals")

ONE = "/stores/{store}/proposals/{proposal_id}"
Status = Literal["open", "accepted", "rejected", "conflicted", "superseded", "all"]


def _reviewer(ctx: Caller, store: str) -> Callable[[Any], None]:
    """A replayed review's check: the caller may still write every path of the proposal."""
    return lambda recorded: ctx.service.authorize(ctx.principal, store, "write", recorded["paths"])


@router.get("/stores/{store}/proposals", response_model=Page[Proposal], summary="Proposals")
async def list_proposals(
    ctx: Ctx,
    store: StoreName,
    status: Annotated[Status, Query(description="Only proposals in this state.")] = "open",
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Proposals the caller may see, newest first."""
    start = offset_of(cursor)
    found = await ctx.call(
        ctx.service.list_proposals, store, status=None if status == "all" else status,
        limit=start + limit + 1,
    )  # fmt: skip
    return render(offset_page(found, start, limit))


@router.post(
    "/stores/{store}/proposals", response_model=Proposal, status_code=201, summary="Propose"
)
async def propose(ctx: Ctx, store: StoreName, body: ProposeBody, prov: Prov) -> Response:
    """Queue operations for review instead of applying them (needs ``propose`` rights)."""
    operations = [operation_from_dict(op.model_dump()) for op in body.operations]

    def run() -> Proposal:
        return ctx.service.propose(
            ctx.principal, store, operations, rationale=body.rationale, evidence=body.evidence,
            statistics=body.statistics, provenance=merged(prov, body),
        )  # fmt: skip

    def check(recorded: Any) -> None:
        ctx.service.authorize(ctx.principal, store, "propose", recorded["paths"])

    return await once(
        ctx, prov.idempotency_key, ["propose", store, body.model_dump(mode="json")], run,
        authorize=check, status=201,
        headers=lambda p: {"Location": f"/v1/stores/{store}/proposals/{p['id']}"},
    )  # fmt: skip


@router.get(ONE, response_model=Proposal, summary="Show a proposal")
async def show_proposal(ctx: Ctx, store: StoreName, proposal_id: str) -> Response:
    """Operations, findings, notes — and base, current and proposed text when conflicted."""
    return render(await ctx.call(ctx.service.get_proposal, store, proposal_id))


@router.post(ONE + "/accept", response_model=CommitResult, summary="Accept a proposal")
async def accept(
    ctx: Ctx,
    store: StoreName,
    proposal_id: str,
    body: AcceptBody | None = None,
    key: IdempotencyKey = None,
) -> Response:
    """Apply an open proposal as a commit (409, and ``conflicted``, if it no longer applies).

    Send ``revision`` (the proposal's ``revision`` as shown): 409 if it changed since — a
    rebase or new screening findings — so what lands is what was reviewed."""
    comment = body.comment if body is not None else None
    revision = body.revision if body is not None else None
    return await once(
        ctx, key, ["accept_proposal", store, proposal_id, comment, revision],
        lambda: ctx.service.accept_proposal(
            ctx.principal, store, proposal_id, comment, revision=revision
        ),
        authorize=lambda done: ctx.service.authorize(
            ctx.principal, store, "write", commit_paths(done)
        ),
        headers=commit_headers,
    )  # fmt: skip


@router.post(ONE + "/reject", response_model=Proposal, summary="Reject a proposal")
async def reject(
    ctx: Ctx,
    store: StoreName,
    proposal_id: str,
    body: ReviewBody | None = None,
    key: IdempotencyKey = None,
) -> Response:
    """Reject an open or conflicted proposal."""
    comment = body.comment if body is not None else None
    return await once(
        ctx, key, ["reject_proposal", store, proposal_id, comment],
        lambda: ctx.service.reject_proposal(ctx.principal, store, proposal_id, comment),
        authorize=_reviewer(ctx, store),
    )  # fmt: skip


@router.post(ONE + "/rebase", response_model=Proposal, summary="Rebase a proposal")
async def rebase(
    ctx: Ctx,
    store: StoreName,
    proposal_id: str,
    body: RebaseBody | None = None,
    key: IdempotencyKey = None,
) -> Response:
    """Rebase onto the current files, optionally replacing a one-file change by ``content``."""
    content = body.content if body is not None else None
    return await once(
        ctx, key, ["rebase_proposal", store, proposal_id, content],
        lambda: ctx.service.rebase_proposal(ctx.principal, store, proposal_id, content=content),
        authorize=_reviewer(ctx, store),
    )  # fmt: skip
