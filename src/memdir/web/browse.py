"""Browse pages: the store tree, a file, its history, and a diff between two versions.

Every list pages: a directory's entries and a file's versions by offset (``start`` and
``limit``); a history row links to its commit's page (:mod:`memdir.web.commits`).

What a viewer may not read does not exist for it: the service filters the tree and answers
"not found" for a path outside the viewer's rights, and these pages turn that into the same
404 page an absent path gets.
"""

from __future__ import annotations

from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memdir.core.errors import InvalidInput
from memdir.web.page import Pager, int_param, page, paged, viewer
from memdir.web.render import diff_lines, markdown_html, memory_marks, memory_page
from memdir.web.session import base_path

__all__ = ["routes"]

#: Entries of a directory and versions of a file per page, unless ``limit`` says otherwise.
TREE_PAGE = 200
HISTORY_PAGE = 50


def _memory_path(request: Request) -> str:
    return "/" + str(request.path_params.get("path", "")).strip("/")


def _crumbs(path: str) -> list[tuple[str, str]]:
    """(name, directory path) for each ancestor of ``path``, the root first."""
    parts = [p for p in path.split("/") if p]
    return [("/", "/")] + [(p, "/" + "/".join(parts[: i + 1])) for i, p in enumerate(parts)]


async def tree(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    directory = _memory_path(request)
    entries = await who.call(who.service.ls, store, directory, depth=1)
    if len(entries) == 1 and entries[0].kind == "file" and entries[0].path == directory:
        target = f"{base_path(request)}/s/{quote(store, safe='')}/file{quote(directory)}"
        return RedirectResponse(target, 303)
    pager, shown = paged(request, entries, TREE_PAGE)
    return page(request, "tree.html", who, directory=directory, entries=shown, pager=pager,
                crumbs=_crumbs(directory))  # fmt: skip


def _version(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidInput(f"{name} must be a version number (1, 2, …), received {raw[:40]!r}")
    return int(raw)


async def file(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    path = _memory_path(request)
    found = await who.call(who.service.read, store, path, version=_version(request, "version"))
    view = memory_page(found.content)
    raw = request.query_params.get("raw") == "1" or not path.endswith(".md")
    version = request.query_params.get("version")
    return page(request, "file.html", who, file=found, view=view,
                crumbs=_crumbs(path.rsplit("/", 1)[0] or "/"), old=version is not None,
                raw=raw, html=None if raw else markdown_html(view.body),
                marks=memory_marks(view.frontmatter),
                here=f"?version={version}&" if version else "?")  # fmt: skip


async def history(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    path = _memory_path(request)
    limit = int_param(request, "limit", HISTORY_PAGE, 1, 500)
    start = int_param(request, "start", 0, 0, 100_000)
    # newest first: the service reads only as far as this page (and one more, for "next")
    found = await who.call(who.service.file_history, store, path, limit=start + limit + 1)
    versions = found[start : start + limit]
    pager = Pager(start, limit, len(versions), len(found) > start + limit, None, {})
    return page(request, "history.html", who, path=path, versions=versions, pager=pager)


async def diff(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    path = _memory_path(request)
    a = _version(request, "a")
    if a is None:
        raise InvalidInput("a diff needs ?a=<version> (and optionally &b=<version>)")
    b = _version(request, "b")
    text = await who.call(who.service.diff, store, path, a, b)
    return page(request, "diff.html", who, path=path, a=a, b=b, lines=diff_lines(text))


routes = [
    Route("/s/{store}/tree/{path:path}", tree, name="tree"),
    Route("/s/{store}/file/{path:path}", file, name="file"),
    Route("/s/{store}/history/{path:path}", history, name="history"),
    Route("/s/{store}/diff/{path:path}", diff, name="diff"),
]
