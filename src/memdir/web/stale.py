"""The stale page: files expired, due for review, unread, or contradicted by a dream.

What the viewer sees is ``MemoryService.stale`` for the signed-in principal (readable files
only), by scope, each with its reasons and last writer; paths link to their file page.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memdir.core.errors import InvalidInput
from memdir.web.page import page, viewer

__all__ = ["routes"]


async def stale(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    raw = request.query_params.get("days", "30")
    if not raw.isdigit():
        raise InvalidInput(f"days must be a whole number, received {raw!r}", days=raw)
    days = int(raw)
    files = await who.call(who.service.stale, store, days=days)
    groups: dict[str, list[object]] = {}
    for f in files:
        groups.setdefault(f"{f.scope} {f.scope_name}".strip(), []).append(f)
    return page(request, "stale.html", who, groups=list(groups.items()), days=days)


routes = [Route("/s/{store}/stale", stale, name="stale")]
