"""The past of a store: versions of a file, commits, diffs, reverts, atomic commits."""

from __future__ import annotations

import datetime as dt
from typing import Annotated

from fastapi import Query
from fastapi.responses import Response

from memdir.api.deps import (
    Ctx,
    Cursor,
    FilePath,
    Limit,
    Prov,
    StoreName,
    commit_response,
    cursor_key,
    keyed_page,
    merged,
    render,
    v1_router,
)
from memdir.api.errors import ErrorEnvelope
from memdir.api.models import CommitBody, DiffView, Page, ProvenanceFields
from memdir.core.limits import MAX_INT64
from memdir.core.model import CommitInfo, CommitResult, VersionInfo, operation_from_dict
from memdir.history import CommitDetail

__all__ = ["router"]

router = v1_router("history")


@router.get(
    "/stores/{store}/versions/{path:path}",
    response_model=Page[VersionInfo],
    summary="Versions of a file",
)
async def file_versions(
    ctx: Ctx, store: StoreName, path: FilePath, cursor: Cursor = None, limit: Limit = 100
) -> Response:
    """Every version of the file at ``path`` (following renames), newest first."""
    versions = await ctx.call(ctx.service.file_history, store, "/" + path)
    return render(keyed_page(versions, lambda v: v.version, cursor, limit, descending=True))


@router.get("/stores/{store}/commits", response_model=Page[CommitInfo], summary="History")
async def commits(
    ctx: Ctx,
    store: StoreName,
    actor: Annotated[str | None, Query(description="Only commits by this principal.")] = None,
    session: Annotated[str | None, Query(description="Only commits of this session.")] = None,
    prefix: Annotated[str | None, Query(description="Only commits under this directory.")] = None,
    since: Annotated[dt.datetime | None, Query(description="At or after (ISO 8601).")] = None,
    until: Annotated[dt.datetime | None, Query(description="Before (ISO 8601).")] = None,
    cursor: Cursor = None,
    limit: Limit = 50,
) -> Response:
    """Commits of the store, newest first, with the changes the caller may see; filters
    combine."""
    before = cursor_key(cursor, int)
    found = await ctx.call(
        ctx.service.history, store, actor=actor, session=session, prefix=prefix, since=since,
        until=until, before_revision=before, limit=limit + 1,
    )  # fmt: skip
    return render(keyed_page(found, lambda c: c.revision, None, limit))


@router.post(
    "/stores/{store}/commits",
    response_model=CommitResult,
    status_code=201,
    responses={202: {"model": ErrorEnvelope, "description": "Queued for review."}},
    summary="Commit several operations atomically",
)
async def commit(ctx: Ctx, store: StoreName, body: CommitBody, prov: Prov) -> Response:
    """Apply ``operations`` atomically, each against its own precondition: all or none."""
    operations = [operation_from_dict(op.model_dump()) for op in body.operations]
    result = await ctx.call(ctx.service.commit, store, operations, merged(prov, body))
    return commit_response(result, 201)


@router.get("/stores/{store}/commits/{commit_id}", response_model=CommitDetail, summary="A commit")
async def commit_detail(ctx: Ctx, store: StoreName, commit_id: str) -> Response:
    """A commit (its id, or a prefix of 6+ characters) with its provenance and, for each
    change on a path the caller may read, the text before and after; the other changes are
    not listed. 404 when it has no change the caller may read."""
    return render(await ctx.call(ctx.service.commit_detail, store, commit_id))


@router.post(
    "/stores/{store}/commits/{commit_id}/revert",
    response_model=CommitResult,
    status_code=201,
    summary="Revert a commit",
)
async def revert_commit(
    ctx: Ctx, store: StoreName, commit_id: str, prov: Prov, body: ProvenanceFields | None = None
) -> Response:
    """Undo every change of a commit as a new commit (409 if a file changed since)."""
    provenance = merged(prov, body) if body is not None else prov
    result = await ctx.call(ctx.service.revert_commit, store, commit_id, provenance)
    return commit_response(result, 201)


@router.get("/stores/{store}/diff/{path:path}", response_model=DiffView, summary="Diff")
async def diff(
    ctx: Ctx,
    store: StoreName,
    path: FilePath,
    a: Annotated[int, Query(ge=1, le=MAX_INT64, description="From this version.")],
    b: Annotated[
        int | None, Query(ge=1, le=MAX_INT64, description="To this version (default: now).")
    ] = None,
) -> Response:
    """A unified diff of a file from version ``a`` to version ``b``."""
    text = await ctx.call(ctx.service.diff, store, "/" + path, a, b)
    return render(DiffView(path="/" + path, a=a, b=b, diff=text))
