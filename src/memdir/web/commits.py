"""Commits: the store's log (newest first, paged by revision) and one commit's page — who,
when, with what provenance, and what it changed on each file, as diffs.

Both are ``MemoryService.history`` / ``commit_detail`` for the signed-in viewer: a commit
exists for a viewer only with a change it may read, and its page lists, counts and diffs only
those changes — a file the viewer may not read is neither named nor counted nor diffed.
Accepted proposals and history rows link here.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memdir.core.edits import unified_diff
from memdir.core.model import CommitInfo
from memdir.history import CommitChange
from memdir.web.page import int_param, page, viewer, when_param
from memdir.web.render import FindingItem, diff_lines, finding_items, path_url, safe_id

__all__ = ["routes"]

#: Commits per log page unless ``limit`` says otherwise.
LOG_PAGE = 50


async def log(request: Request) -> Response:
    """The store's commits, newest first; ``before`` (a revision) is the page's cursor."""
    who = await viewer(request)
    store = request.path_params["store"]
    params = {k: (request.query_params.get(k) or "").strip()
              for k in ("prefix", "actor", "session", "since", "until")}  # fmt: skip
    limit = int_param(request, "limit", LOG_PAGE, 1, 500)
    raw_before = request.query_params.get("before") or ""
    before = int_param(request, "before", 0, 1, 2**62) if raw_before else None
    found: list[CommitInfo] = await who.call(
        who.service.history, store, actor=params["actor"] or None,
        session=params["session"] or None, prefix=params["prefix"] or None,
        since=when_param(params["since"], "since"), until=when_param(params["until"], "until"),
        before_revision=before, limit=limit + 1,
    )  # fmt: skip
    shown = found[:limit]
    rows = [(safe_id(c.id), c, [(v, path_url(v.path)) for v in c.changes]) for c in shown]
    following = shown[-1].revision if len(found) > limit else None
    return page(request, "commits.html", who, rows=rows, params=params, limit=limit,
                paged=before is not None, following=following,
                query={k: v for k, v in params.items() if v})  # fmt: skip


@dataclass(frozen=True)
class ChangeView:
    """One readable change of a commit, ready to show."""

    c: CommitChange
    link: str | None
    old_link: str | None
    diff: list[tuple[str, str]]
    note: str | None
    findings: list[FindingItem]


def _change_view(c: CommitChange) -> ChangeView:
    v = c.change
    note = "a version was redacted since: its text is gone" if c.redacted else None
    after_name = "(deleted)" if v.operation == "deleted" else f"{v.path}@{v.version}"
    before_name = f"{c.before_path}@{v.version - 1}" if c.before_path else "(absent)"
    text = unified_diff(c.before or "", c.after or "", before_name, after_name)
    findings = list(finding_items(list(v.findings), []))
    old_link = path_url(v.old_path) if v.old_path else None
    return ChangeView(c, path_url(v.path), old_link, diff_lines(text), note, findings)


async def commit(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    found = await who.call(who.service.commit_detail, store, request.path_params["commit_id"])
    info = found.commit
    changes = [_change_view(c) for c in found.changes]
    transcripts = _transcripts(info.transcript)
    return page(request, "commit.html", who, c=info, changes=changes,
                proposal=safe_id(info.proposal), transcripts=transcripts)  # fmt: skip


def _transcripts(raw: str | None) -> list[tuple[str, str | None]]:
    """The transcript ids a commit's provenance names (a comma-separated list, as dream runs
    record the sessions behind a proposal), each with its link id when it is a plain id."""
    ids = [t.strip() for t in (raw or "").split(",") if t.strip()]
    return [(t, safe_id(t)) for t in ids]


routes = [
    Route("/s/{store}/commits", log, name="commits"),
    Route("/s/{store}/commits/{commit_id}", commit, name="commit"),
]
