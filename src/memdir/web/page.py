"""What every page handler shares: the app's state, the signed-in viewer, rendering.

Handlers are thin: authenticate (:func:`viewer`), call the service in the thread pool
(:meth:`Viewer.call`, as REST does), pass plain values to a template (:func:`page`). Templates
are Jinja2 with autoescaping on for every file, so memory text, transcripts and proposal
fields always reach the browser as text.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote, urlencode

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from memdir.core.errors import InvalidInput
from memdir.core.model import Principal
from memdir.service import MemoryService
from memdir.web.session import base_path, csrf_for, current_principal

__all__ = [
    "Pager",
    "Viewer",
    "WebState",
    "form_value",
    "int_param",
    "page",
    "paged",
    "templates",
    "viewer",
    "when_param",
]

P = ParamSpec("P")
T = TypeVar("T")


def templates() -> jinja2.Environment:
    """The template environment: package templates, autoescaping on for every template."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("memdir.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["q"] = lambda value: quote(str(value), safe="")
    env.filters["qpath"] = lambda value: quote(str(value), safe="/")
    env.filters["json"] = lambda value: json.dumps(value, ensure_ascii=False, indent=2, default=str)
    env.filters["merge"] = lambda params, **changes: urlencode({**params, **changes})
    env.filters["when"] = lambda value: value.strftime("%Y-%m-%d %H:%M:%S UTC") if value else "-"
    return env


@dataclass
class WebState:
    """What the web app holds for its lifetime (``app.state.web``)."""

    service: MemoryService
    store: str
    env: jinja2.Environment


@dataclass
class Viewer:
    """The signed-in principal of a request, its CSRF value and the service it calls."""

    service: MemoryService
    principal: Principal
    csrf: str

    async def call(
        self, method: Callable[Concatenate[Principal, P], T], *args: P.args, **kwargs: P.kwargs
    ) -> T:
        """``method(principal, *args, **kwargs)`` in the thread pool."""
        return await run_in_threadpool(method, self.principal, *args, **kwargs)


def state(request: Request) -> WebState:
    found: WebState = request.app.state.web
    return found


async def viewer(request: Request) -> Viewer:
    """The signed-in viewer (raises ``SignInRequired`` for the sign-in redirect)."""
    web = state(request)
    principal, token = await current_principal(request, web.service)
    return Viewer(web.service, principal, csrf_for(token))


def page(
    request: Request,
    template: str,
    who: Viewer | None,
    status: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render ``template`` with the shared context (base path, viewer, CSRF, store)."""
    web = state(request)
    store = context.pop("store", None) or request.path_params.get("store") or web.store
    html = web.env.get_template(template).render(
        base=base_path(request),
        who=who.principal.id if who else None,
        csrf=who.csrf if who else "",
        store=store,
        **context,
    )
    return HTMLResponse(html, status_code=status)


def form_value(form: Any, name: str) -> str | None:
    """A text field of a parsed form (None when absent or a file)."""
    value = form.get(name)
    return value if isinstance(value, str) else None


def int_param(request: Request, name: str, default: int, lowest: int, highest: int) -> int:
    """A whole-number query parameter in ``lowest..highest`` (``default`` when absent)."""
    raw = request.query_params.get(name) or str(default)
    if not raw.isdigit() or not lowest <= int(raw) <= highest:
        raise InvalidInput(f"{name} must be a number from {lowest} to {highest}, "
                           f"received {raw[:20]!r}")  # fmt: skip
    return int(raw)


@dataclass(frozen=True)
class Pager:
    """Where a page of a list stands, for ``_pager.html``: rows ``start + 1`` to
    ``start + shown`` (of ``total`` when the list was counted), with links that keep the
    page's other query parameters (``params``).

    Offset pages (``start``) are for lists the service returns whole or by offset; keyset
    lists (the queue, transcripts, the commit log) page by their cursors instead.
    """

    start: int
    limit: int
    shown: int
    more: bool
    total: int | None
    params: Mapping[str, str]

    def _href(self, **changes: Any) -> str:
        return "?" + urlencode({**self.params, "limit": self.limit, **changes})

    @property
    def prev_href(self) -> str | None:
        if self.start == 0:
            return None
        return self._href(start=max(0, self.start - self.limit))

    @property
    def next_href(self) -> str | None:
        return self._href(start=self.start + self.limit) if self.more else None

    @property
    def first_href(self) -> str:
        return self._href(start=0)  # explicit: a transcript's ``from`` picks a page otherwise


def paged(
    request: Request, items: Sequence[T], default: int, *, highest: int = 1000,
    params: Mapping[str, str] | None = None,
) -> tuple[Pager, Sequence[T]]:  # fmt: skip
    """The page of ``items`` (a whole list, already filtered by the service) that the query's
    ``start`` and ``limit`` ask for, and its :class:`Pager`."""
    limit = int_param(request, "limit", default, 1, highest)
    start = int_param(request, "start", 0, 0, max(0, len(items) - 1))
    shown = items[start : start + limit]
    kept = dict(params or {})
    return Pager(start, limit, len(shown), start + limit < len(items), len(items), kept), shown


def when_param(raw: str | None, name: str) -> dt.datetime | None:
    """A date or time query value (UTC unless it names a zone); None when empty."""
    if not raw:
        return None
    try:
        value = dt.datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidInput(f"{name} must be a date or time (2026-11-01, 2026-11-01T12:00), "
                           f"received {raw[:40]!r}") from None  # fmt: skip
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)
