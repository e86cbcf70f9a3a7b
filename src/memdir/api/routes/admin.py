"""Stores, principals, tokens and policy.

Managing stores, principals and tokens needs a member of the ``admins`` group whose token
allows ``admin`` on the resource (one decision: :func:`memdir.access.database_check`); a
store's policy needs the ``admin`` right in that store. Anyone may list stores and see themselves.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response

from memdir.access import PRINCIPALS, STORES, TOKENS
from memdir.api.deps import (
    Caller,
    Ctx,
    Cursor,
    IdempotencyKey,
    Limit,
    Prov,
    StoreName,
    commit_response,
    keyed_page,
    merged,
    offset_of,
    offset_page,
    once,
    render,
    v1_router,
)
from memdir.api.models import Page, PolicyBody, PolicyView, PrincipalBody, StoreBody, TokenBody
from memdir.core.model import CommitResult, Principal, StoreInfo
from memdir.core.policy import Decision
from memdir.principals import PrincipalInfo, TokenInfo
from memdir.service import MemoryService

__all__ = ["router"]

router = v1_router()
Action = Annotated[Literal["read", "propose", "write", "admin"], Query()]


def _admin(ctx: Caller, resource: str, what: str) -> Callable[[Any], None]:
    """A replay's check for a database-wide mutation: the caller administers ``resource``."""
    return lambda _recorded: ctx.service.require_admin(ctx.principal, resource, what)


# --- stores ----------------------------------------------------------------------------------


@router.get("/stores", response_model=Page[StoreInfo], tags=["stores"], summary="Stores")
async def list_stores(ctx: Ctx, cursor: Cursor = None, limit: Limit = 100) -> Response:
    """Every store, by name, with its revision and file count."""
    stores = sorted(await ctx.call(ctx.service.list_stores), key=lambda s: s.name)
    return render(keyed_page(stores, lambda s: s.name, cursor, limit))


@router.post("/stores", response_model=StoreInfo, status_code=201, tags=["stores"],
             summary="Create a store")  # fmt: skip
async def create_store(ctx: Ctx, body: StoreBody, key: IdempotencyKey = None) -> Response:
    return await once(
        ctx, key, ["create_store", body.model_dump()],
        lambda: ctx.service.create_store(ctx.principal, body.name, exist_ok=body.exist_ok),
        authorize=_admin(ctx, STORES, "create stores"),
        status=201, headers=lambda info: {"Location": f"/v1/stores/{info['name']}"},
    )  # fmt: skip


@router.get("/stores/{store}", response_model=StoreInfo, tags=["stores"], summary="A store")
async def show_store(ctx: Ctx, store: StoreName) -> Response:
    return render(await ctx.call(ctx.service.store_info, store))


@router.post("/stores/{store}/archive", response_model=StoreInfo, tags=["stores"],
             summary="Archive a store")  # fmt: skip
async def archive_store(ctx: Ctx, store: StoreName, key: IdempotencyKey = None) -> Response:
    """Make the store read-only for good (there is no unarchive)."""
    run = lambda: ctx.service.archive_store(ctx.principal, store)  # noqa: E731
    return await once(
        ctx, key, ["archive_store", store], run, authorize=_admin(ctx, STORES, "archive stores")
    )


@router.delete("/stores/{store}", status_code=204, tags=["stores"], summary="Delete a store")
async def delete_store(ctx: Ctx, store: StoreName, key: IdempotencyKey = None) -> Response:
    """Delete the store with all its files, history and proposals."""
    run = lambda: ctx.service.delete_store(ctx.principal, store)  # noqa: E731
    check = _admin(ctx, STORES, "delete stores")
    return await once(ctx, key, ["delete_store", store], run, authorize=check, status=204)


# --- principals and tokens ---------------------------------------------------------------------


@router.get("/me", response_model=PrincipalInfo, tags=["principals"], summary="Who am I")
async def me(ctx: Ctx) -> Response:
    """The principal the bearer token stands for."""
    return render(await ctx.call(ctx.service.principal_info, ctx.principal.id))


@router.get("/principals", response_model=Page[PrincipalInfo], tags=["principals"],
            summary="Principals")  # fmt: skip
async def list_principals(ctx: Ctx, cursor: Cursor = None, limit: Limit = 100) -> Response:
    found = await ctx.call(ctx.service.list_principals)
    return render(keyed_page(found, lambda p: p.id, cursor, limit))


@router.post("/principals", response_model=PrincipalInfo, status_code=201, tags=["principals"],
             summary="Register a principal")  # fmt: skip
async def add_principal(ctx: Ctx, body: PrincipalBody, key: IdempotencyKey = None) -> Response:
    def run() -> PrincipalInfo:
        return ctx.service.add_principal(
            ctx.principal, body.id, groups=tuple(body.groups), projects=tuple(body.projects),
            tasks=tuple(body.tasks), acts_for=body.acts_for,
        )  # fmt: skip

    check = _admin(ctx, PRINCIPALS, "register principals")
    return await once(
        ctx, key, ["add_principal", body.model_dump()], run, authorize=check, status=201
    )


@router.get("/principals/{principal_id}", response_model=PrincipalInfo, tags=["principals"],
            summary="A principal")  # fmt: skip
async def show_principal(ctx: Ctx, principal_id: str) -> Response:
    return render(await ctx.call(ctx.service.principal_info, principal_id))


@router.delete("/principals/{principal_id}", status_code=204, tags=["principals"],
               summary="Remove a principal")  # fmt: skip
async def remove_principal(ctx: Ctx, request: Request, principal_id: str) -> Response:
    """Remove a principal and revoke its tokens (its commits keep naming it)."""
    await ctx.call(ctx.service.remove_principal, principal_id)
    request.app.state.memdir.tokens.clear()  # its tokens stop working here at once
    return Response(status_code=204)


@router.get("/tokens", response_model=Page[TokenInfo], tags=["tokens"], summary="Tokens")
async def list_tokens(
    ctx: Ctx,
    principal: Annotated[str | None, Query(description="Only this principal's tokens.")] = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """Tokens, oldest first (never their secrets)."""
    start = offset_of(cursor)
    return render(offset_page(await ctx.call(ctx.service.list_tokens, principal), start, limit))


@router.post("/tokens", response_model=TokenInfo, status_code=201, tags=["tokens"],
             summary="Create a token")  # fmt: skip
async def create_token(ctx: Ctx, body: TokenBody, key: IdempotencyKey = None) -> Response:
    """Create a token; the secret (``token``) is in this response only — store it now.

    A repeat with the same ``Idempotency-Key`` returns the token's metadata with ``token``
    null: only the secret's hash is kept, so if the first response was lost, revoke that token
    and create another."""
    expires = dt.timedelta(seconds=body.expires_in) if body.expires_in else None

    def run() -> TokenInfo:
        return ctx.service.create_token(
            ctx.principal, body.principal, name=body.name,
            paths=tuple(body.paths) if body.paths is not None else None,
            actions=tuple(body.actions) if body.actions is not None else None,
            expires_in=expires,
        )  # fmt: skip

    return await once(
        ctx, key, ["create_token", body.model_dump()], run, status=201,
        authorize=_admin(ctx, TOKENS, "create tokens"),
        headers=lambda _: {"Cache-Control": "no-store"}, keep_out=("token",),
    )  # fmt: skip


@router.post("/tokens/{token_id}/revoke", response_model=TokenInfo, tags=["tokens"],
             summary="Revoke a token")  # fmt: skip
async def revoke_token(ctx: Ctx, request: Request, token_id: str) -> Response:
    """Revoke a token: it stops working at once (on other servers within the token cache
    time, ``MEMDIR_TOKEN_CACHE_SECONDS``)."""
    info = await ctx.call(ctx.service.revoke_token, token_id)
    request.app.state.memdir.tokens.clear()
    return render(info)


# --- policy ----------------------------------------------------------------------------------


@router.get("/stores/{store}/policy", response_model=PolicyView, tags=["policy"],
            summary="The policy")  # fmt: skip
async def show_policy(ctx: Ctx, store: StoreName) -> Response:
    """The policy in force (YAML), and whether it is the built-in default. Admin only."""
    text, default = await ctx.call(ctx.service.policy_text, store)
    return render(PolicyView(policy=text, default=default))


@router.put("/stores/{store}/policy", response_model=CommitResult, tags=["policy"],
            summary="Replace the policy")  # fmt: skip
async def set_policy(ctx: Ctx, store: StoreName, body: PolicyBody, prov: Prov) -> Response:
    """Replace the whole policy; a malformed one is refused and the old one stays."""
    result = await ctx.call(ctx.service.set_policy, store, body.policy, merged(prov, body))
    return commit_response(result)


def _subject(actor: Principal, principal_id: str, service: MemoryService) -> Principal:
    """The principal to explain: others only for admins (403 before any 404, so a caller
    learns nothing about which principals exist)."""
    service.principal_info(actor, principal_id)
    return service.resolve(principal_id)


@router.get("/stores/{store}/policy/check", response_model=Decision, tags=["policy"],
            summary="Explain a decision")  # fmt: skip
async def check_policy(
    ctx: Ctx,
    store: StoreName,
    action: Action,
    path: Annotated[str, Query(description="The memory path.")],
    principal: Annotated[str | None, Query(description="Whose rights (default: yours).")] = None,
) -> Response:
    """Whether ``principal`` may do ``action`` on ``path``: the decision, rule and reason."""
    subject = ctx.principal
    if principal is not None and principal != ctx.principal.id:
        subject = await ctx.call(_subject, principal, ctx.service)
    decision = await ctx.call(ctx.service.check_policy, store, subject, action, path)
    return render(decision)
