"""Request builders for checkouts, shared by both clients (see :mod:`memdir.sdk._base`).

``GET /v1/stores/{store}/checkout`` lists the readable files under a prefix with their
sha256, version and the caller's rights (``write``, ``propose``, ``read``), a page per
snapshot; :func:`_checkout_files` follows ``next_after`` to the end. The store revision it
returns is the first page's, the earliest: following the change feed from there replays
anything that landed while the later pages were read, never misses it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.core.results import MAX_CHECKOUT_PAGE, CheckoutFile, CheckoutPage, Rights
from memdir.sdk._base import _BaseClient
from memdir.sdk._wire import Call, Plan
from memdir.sdk._wire import parser as _parser

__all__ = ["_checkout_files", "_path_rights"]

_page = _parser(CheckoutPage)


def _checkout_files(
    self: _BaseClient,
    prefix: str = "/",
    *,
    content: bool = False,
    page_size: int = 1000,
    store: str | None = None,
) -> Plan[CheckoutPage]:
    """Every readable file under ``prefix`` (with ``content`` if asked) and the caller's
    rights on each; ``revision`` is the store's when the listing began."""
    url = self._store_url(store, "/checkout")
    files: list[CheckoutFile] = []
    after: str | None = None
    revision: int | None = None
    while True:
        params = {"prefix": prefix, "after": after, "content": content or None,
                  "limit": page_size}  # fmt: skip
        page: CheckoutPage = yield Call(self._request("GET", url, params=params), _page)
        revision = page.revision if revision is None else revision
        files.extend(page.files)
        after = page.next_after
        if after is None:
            return CheckoutPage(revision, tuple(files), None)


def _path_rights(
    self: _BaseClient, paths: Sequence[str], *, store: str | None = None
) -> Plan[list[Rights | None]]:
    """What a commit by you would do to each path now: ``write``, ``propose``, ``read``, or
    None where you may not read it (asked in batches of 1000)."""
    url = self._store_url(store, "/checkout/rights")
    out: list[Rights | None] = []
    for start in range(0, len(paths), MAX_CHECKOUT_PAGE):
        body = {"paths": list(paths[start : start + MAX_CHECKOUT_PAGE])}
        request = self._request("POST", url, json=body)
        found = yield Call(request, lambda response: list(response.json()["rights"]))
        out.extend(found)
    return out
