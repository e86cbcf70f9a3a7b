"""Request builders for context and the stale report, shared by both clients.

``context`` answers the markdown an agent reads (``GET …/context?format=markdown``);
``context_data`` the same selection as JSON (core files, skills, index, what was left out).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memdir.core.context import DEFAULT_BUDGET
from memdir.core.results import StaleFile
from memdir.sdk._base import _BaseClient
from memdir.sdk._wire import Call, Plan, single
from memdir.sdk._wire import json_body as _json

__all__: list[str] = []


def _params(
    project: str | None,
    task: str | None,
    query: str | None,
    budget: int,
    include_expired: bool,
    fmt: str,
) -> dict[str, Any]:
    params: dict[str, Any] = {"budget": budget, "format": fmt}
    for key, value in (("project", project), ("task", task), ("query", query)):
        if value is not None:
            params[key] = value
    if include_expired:
        params["include_expired"] = "true"
    return params


def _context(
    self: _BaseClient,
    *,
    project: str | None = None,
    task: str | None = None,
    query: str | None = None,
    budget: int = DEFAULT_BUDGET,
    include_expired: bool = False,
    store: str | None = None,
) -> Plan[str]:
    """The caller's context as markdown: core files whole, skills, an index by scope, cut to
    ``budget`` estimated tokens (docs/context.md)."""
    params = _params(project, task, query, budget, include_expired, "markdown")
    request = self._request("GET", self._store_url(store, "/context"), params=params)
    return single(Call(request, lambda response: response.text))


def _context_data(
    self: _BaseClient,
    *,
    project: str | None = None,
    task: str | None = None,
    query: str | None = None,
    budget: int = DEFAULT_BUDGET,
    include_expired: bool = False,
    store: str | None = None,
) -> Plan[dict[str, Any]]:
    """The same context as data: ``core``, ``skills``, ``index``, ``omitted``, ``markdown``."""
    params = _params(project, task, query, budget, include_expired, "json")
    request = self._request("GET", self._store_url(store, "/context"), params=params)
    return single(Call(request, _dict))


def _dict(response: Any) -> dict[str, Any]:
    return dict(_json(response))


def _stale(
    self: _BaseClient,
    *,
    prefix: str = "/",
    days: int = 30,
    reasons: Sequence[str] | None = None,
    limit: int | None = None,
    store: str | None = None,
) -> Plan[list[StaleFile]]:
    """Readable stale files (expired, review-due, unread in ``days`` days, contradicted by a
    dream) by scope, each with its reasons and last writer."""
    params: dict[str, Any] = {"prefix": prefix, "days": days}
    if reasons:
        params["reason"] = list(reasons)
    return self._pages(self._store_url(store, "/stale"), StaleFile, params, limit)
