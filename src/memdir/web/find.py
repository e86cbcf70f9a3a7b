"""Finding things: full-text search and grep (the same service calls and pages as REST's
``/search`` and ``/grep``), the store switcher, and the transcripts index.

Search and grep page the way REST does — the service is asked for ``start + limit + 1``
results and the page shows ``limit`` of them from ``start`` — so a page here lists exactly
what the API's page with the same query, limit and offset lists. Transcripts page by the
service's keyset cursor (``list_transcripts``), never by slicing a full listing.
"""

from __future__ import annotations

from typing import Final
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memdir.core.errors import InvalidInput
from memdir.core.model import validate_store_name
from memdir.transcripts.model import OUTCOMES
from memdir.web.page import int_param, page, paged, viewer, when_param
from memdir.web.render import path_url, safe_id
from memdir.web.session import base_path

__all__ = ["routes"]

#: Results per page (search's REST default is 10; grep's 100).
SEARCH_PAGE: Final = 10
GREP_PAGE: Final = 100
TRANSCRIPT_PAGE: Final = 50
STORES_PAGE: Final = 100
#: Deepest offset a page may start at (as REST: deep pages of a ranking are not computed).
MAX_START: Final = 1000


def _prefix(request: Request) -> str:
    prefix = (request.query_params.get("prefix") or "/").strip() or "/"
    return prefix if prefix.startswith("/") else "/" + prefix


async def search(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    text = (request.query_params.get("q") or "").strip()
    start = int_param(request, "start", 0, 0, MAX_START)
    limit = int_param(request, "limit", SEARCH_PAGE, 1, 100)
    prefix = _prefix(request)
    expired = request.query_params.get("include_expired") in ("1", "true", "on")
    hits = []
    if text:
        found = await who.call(who.service.search, store, text, prefix=prefix,
                               limit=start + limit + 1, include_expired=expired)  # fmt: skip
        hits = [(h, path_url(h.path)) for h in found[start : start + limit]]
        more = len(found) > start + limit
    else:
        more = False
    return page(request, "search.html", who, q=text, prefix=prefix, hits=hits, start=start,
                limit=limit, more=more)  # fmt: skip


async def grep(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    pattern = request.query_params.get("pattern") or ""
    ignore_case = request.query_params.get("ignore_case") in ("1", "true", "on")
    context = int_param(request, "context", 0, 0, 20)
    start = int_param(request, "start", 0, 0, 100_000)
    limit = int_param(request, "limit", GREP_PAGE, 1, 1000)
    prefix = _prefix(request)
    matches = []
    more = False
    if pattern:
        found = await who.call(who.service.grep, store, pattern, prefix=prefix,
                               ignore_case=ignore_case, context=context,
                               limit=start + limit + 1)  # fmt: skip
        matches = [(m, path_url(m.path)) for m in found[start : start + limit]]
        more = len(found) > start + limit
    return page(request, "grep.html", who, pattern=pattern, prefix=prefix, matches=matches,
                ignore_case=ignore_case, context=context, start=start, limit=limit,
                more=more)  # fmt: skip


async def stores(request: Request) -> Response:
    who = await viewer(request)
    found = await who.call(who.service.list_stores)
    chosen = request.query_params.get("store")
    if chosen:  # the switcher's form: go to that store's tree (404 there if unknown)
        validate_store_name(chosen)
        return RedirectResponse(f"{base_path(request)}/s/{quote(chosen, safe='')}/tree/", 303)
    here = request.query_params.get("from") or ""
    pager, shown = paged(request, found, STORES_PAGE, params={"from": here} if here else None)
    return page(request, "stores.html", who, stores=shown, every=found, current=here or None,
                pager=pager)  # fmt: skip


async def transcripts(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    params = {k: (request.query_params.get(k) or "").strip()
              for k in ("agent", "project", "outcome", "since", "until")}  # fmt: skip
    if params["outcome"] and params["outcome"] not in OUTCOMES:
        raise InvalidInput(f"outcome must be one of {', '.join(OUTCOMES)}, "
                           f"received {params['outcome'][:40]!r}")  # fmt: skip
    limit = int_param(request, "limit", TRANSCRIPT_PAGE, 1, 500)
    cursor = request.query_params.get("cursor") or None
    found = await who.call(
        who.service.list_transcripts, store, agent=params["agent"] or None,
        project=params["project"] or None, outcome=params["outcome"] or None,
        since=when_param(params["since"], "since"), until=when_param(params["until"], "until"),
        limit=limit, cursor=cursor,
    )  # fmt: skip
    rows = [(safe_id(t.id), t) for t in found.items]
    return page(request, "transcripts.html", who, rows=rows, params=params, outcomes=OUTCOMES,
                next_cursor=found.next_cursor, paged=cursor is not None, limit=limit,
                query={k: v for k, v in params.items() if v})  # fmt: skip


routes = [
    Route("/stores", stores, name="stores"),
    Route("/s/{store}/search", search, name="search"),
    Route("/s/{store}/grep", grep, name="grep"),
    Route("/s/{store}/transcripts", transcripts, name="transcripts"),
]
