"""What every page handler shares: the app's state, the signed-in viewer, rendering.

Handlers are thin: authenticate (:func:`viewer`), call the service in the thread pool
(:meth:`Viewer.call`, as REST does), pass plain values to a template (:func:`page`). Templates
are Jinja2 with autoescaping on for every file, so memory text, transcripts and proposal
fields always reach the browser as text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import quote, urlencode

import jinja2
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse

from memdir.core.model import Principal
from memdir.service import MemoryService
from memdir.web.session import base_path, csrf_for, current_principal

__all__ = ["Viewer", "WebState", "form_value", "page", "templates", "viewer"]

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
