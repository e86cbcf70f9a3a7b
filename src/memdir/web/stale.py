"""The stale page: files expired, due for review, unread, or contradicted by a dream.

What the viewer sees is ``MemoryService.stale`` for the signed-in principal (readable files
only), by scope, each with its reasons and last writer; paths link to their file page.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memdir.core.errors import InvalidInput
from memdir.web.page import page, paged, viewer

__all__ = ["routes"]

#: Files per page of the stale list.
STALE_PAGE = 100


async def stale(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    raw = request.query_params.get("days", "30")
    if not raw.isdigit():
        raise InvalidInput(f"days must be a whole number, received {raw!r}", days=raw)
    days = int(raw)
    found = await who.call(who.service.stale, store, days=days)
    pager, files = paged(request, found, STALE_PAGE, params={"days": str(days)})
    groups: dict[str, list[object]] = {}
    for f in files:  # the page's files, by scope (a scope may continue on the next page)
        groups.setdefault(f"{f.scope} {f.scope_name}".strip(), []).append(f)
    return page(request, "stale.html", who, groups=list(groups.items()), days=days, pager=pager)


routes = [Route("/s/{store}/stale", stale, name="stale")]
