"""The review queue: open proposals, a proposal with its evidence, accept and reject.

Accept and reject call ``accept_proposal`` / ``reject_proposal`` as the signed-in principal;
the service decides (rights, protected files, conflicts). A refusal is shown on the proposal
page with its message and the HTTP status of its class (409 conflict, 403 forbidden, …); a
success redirects (303) to the proposal, which now shows its status, reviewer and commit.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memdir.core.errors import Conflict, Forbidden, InvalidInput, MemdirError, NotFound
from memdir.proposals import ORIGINS, STATUSES, Proposal
from memdir.web.page import Viewer, form_value, page, viewer
from memdir.web.render import bars, evidence_items, facts, op_previews, safe_id
from memdir.web.session import base_path, check_csrf

__all__ = ["routes"]

#: How many proposals the queue page lists (newest first).
QUEUE_LIMIT = 200


async def queue(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    status = request.query_params.get("status") or "open"
    origin = request.query_params.get("origin") or ""
    if status != "all" and status not in STATUSES:
        raise InvalidInput(f"unknown status {status[:40]!r}; use all, {', '.join(STATUSES)}")
    if origin and origin not in ORIGINS:
        raise InvalidInput(f"unknown origin {origin[:40]!r}; use {', '.join(ORIGINS)}")
    found = await who.call(
        who.service.list_proposals, store, status=None if status == "all" else status,
        limit=QUEUE_LIMIT,
    )  # fmt: skip
    items = [p for p in found if not origin or p.origin == origin]
    return page(request, "proposals.html", who, proposals=items, wanted=status, origin=origin,
                statuses=("all", *STATUSES), origins=ORIGINS)  # fmt: skip


def _current(who: Viewer, store: str, path: str) -> str | None:
    """The content at ``path`` now as the viewer may read it (None: absent or unreadable)."""
    try:
        return who.service.read(who.principal, store, path).content
    except NotFound:
        return None


async def _proposal_page(
    request: Request, who: Viewer, store: str, pid: str, *, error: MemdirError | None = None,
    status: int = 200,
) -> Response:  # fmt: skip
    prop: Proposal = await who.call(who.service.get_proposal, store, pid)

    ops = await run_in_threadpool(
        op_previews, prop.operations, lambda path: _current(who, store, path)
    )
    return page(
        request, "proposal.html", who, status, p=prop, ops=ops, facts=facts(prop.statistics),
        bars=bars(prop.statistics), evidence=evidence_items(prop.evidence),
        run=safe_id(prop.run), commit=safe_id(prop.commit), error=error,
        reviewable=prop.status in ("open", "conflicted"),
    )  # fmt: skip


async def proposal(request: Request) -> Response:
    who = await viewer(request)
    return await _proposal_page(
        request, who, request.path_params["store"], request.path_params["pid"]
    )


def _status(error: MemdirError) -> int:
    if isinstance(error, Conflict):
        return 409
    if isinstance(error, Forbidden):
        return 403
    return 400


async def _review(request: Request, accept: bool) -> Response:
    who = await viewer(request)
    store, pid = request.path_params["store"], request.path_params["pid"]
    form = await request.form()
    check_csrf(request, form_value(form, "csrf"))
    comment = (form_value(form, "comment") or "").strip() or None
    revision = form_value(form, "revision") or ""  # the revision the page showed; required
    try:
        if accept:
            await who.call(who.service.accept_proposal, store, pid, comment, revision=revision)
        else:
            await who.call(who.service.reject_proposal, store, pid, comment)
    except NotFound:
        raise
    except MemdirError as error:
        return await _proposal_page(request, who, store, pid, error=error, status=_status(error))
    target = f"{base_path(request)}/s/{quote(store, safe='')}/proposals/{quote(pid, safe='')}"
    return RedirectResponse(target, 303)


async def accept(request: Request) -> Response:
    return await _review(request, True)


async def reject(request: Request) -> Response:
    return await _review(request, False)


routes = [
    Route("/s/{store}/proposals", queue, name="proposals"),
    Route("/s/{store}/proposals/{pid}", proposal, name="proposal"),
    Route("/s/{store}/proposals/{pid}/accept", accept, methods=["POST"], name="accept"),
    Route("/s/{store}/proposals/{pid}/reject", reject, methods=["POST"], name="reject"),
]
