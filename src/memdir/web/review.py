"""The review queue: a filtered, sorted, paged queue grouped by dream run, bulk review, a
proposal with its evidence, and accept / reject — one at a time or in a keyboard review flow.

Accept and reject call ``accept_proposal`` / ``reject_proposal`` as the signed-in principal;
the service decides (rights, protected files, conflicts). A refusal is shown on the proposal
page with its message and the HTTP status of its class (409 conflict, 403 forbidden, …); a
success redirects (303) to the proposal, which now shows its status, reviewer, the diff that
was applied and the commit — or, in the review flow, to the next proposal of the queue.

Bulk review applies one comment to every selected proposal, each through the service on its
own (so each accept is its own compare-and-swap commit, at the revision the queue showed),
and reports every outcome: a failure of one never hides or undoes the others.

The review flow needs no script: a queue's query travels as the ``in`` parameter; the
proposal page then offers *Accept*, *Reject* and *Next* with access keys (``a``, ``r``,
``n``), the *Accept* button has the focus when the page loads, and the focus ring is drawn
by the stylesheet (``:focus-visible``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from memdir.core.edits import unified_diff
from memdir.core.errors import Conflict, Forbidden, InvalidInput, MemdirError, NotFound
from memdir.dreams import DreamRun
from memdir.proposals import ORIGINS, STATUSES, Proposal
from memdir.review_queue import SORTS, QueueFilter, cursor_after, impact_of, proposal_title
from memdir.rows import utcnow
from memdir.web.page import Viewer, form_value, page, viewer
from memdir.web.render import (
    bars,
    diff_lines,
    evidence_items,
    facts,
    finding_items,
    op_previews,
    path_url,
    quality_items,
    safe_id,
)
from memdir.web.session import base_path, check_csrf

__all__ = ["routes"]

#: Proposals per queue page unless ``limit`` says otherwise (at most :data:`MAX_LIMIT`).
PAGE_SIZE = 50
MAX_LIMIT = 200

#: The query parameters a queue is defined by (what the review flow carries along).
QUEUE_PARAMS = ("status", "sort", "origin", "miner", "run", "scope", "author")


@dataclass(frozen=True)
class Queue:
    """A queue's definition, parsed from query parameters (and checked by the service)."""

    where: QueueFilter
    sort: str
    params: dict[str, str]

    @property
    def query(self) -> str:
        return urlencode(self.params)


def _queue(values: Any) -> Queue:
    raw = {k: str(values.get(k) or "").strip() for k in QUEUE_PARAMS}
    status = raw["status"] or "open"
    sort = raw["sort"] or "impact"
    if sort not in SORTS:
        raise InvalidInput(f"unknown sort {sort[:40]!r}; use {', '.join(SORTS)}")
    where = QueueFilter(
        status=None if status == "all" else status, origin=raw["origin"] or None,
        miner=raw["miner"] or None, run=raw["run"] or None, scope=raw["scope"] or None,
        author=raw["author"] or None,
    )  # fmt: skip
    where.check()
    params = {k: v for k, v in {**raw, "status": status, "sort": sort}.items() if v}
    return Queue(where, sort, params)


def _flow(raw: str | None) -> Queue | None:
    """The queue a review flow walks (its ``in`` parameter), or None outside a flow."""
    return _queue(dict(parse_qsl(raw or "", keep_blank_values=False))) if raw else None


def _limit(request: Request) -> int:
    raw = request.query_params.get("limit") or str(PAGE_SIZE)
    if not raw.isdigit() or not 1 <= int(raw) <= MAX_LIMIT:
        raise InvalidInput(f"limit must be a number from 1 to {MAX_LIMIT}, received {raw[:20]!r}")
    return int(raw)


def _age(when: dt.datetime) -> str:
    seconds = max(0, int((utcnow() - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


@dataclass(frozen=True)
class Row:
    """One queue row, ready to show."""

    p: Proposal
    title: str
    sessions: str
    lift: str
    quality: list[tuple[str, str, bool | None]]
    age: str


def _row(p: Proposal) -> Row:
    impact = impact_of(p.statistics)
    sessions = "-"
    if "sessions" in impact:
        sessions = f"{impact['sessions']:g}"
        if "sessions_selected" in impact:
            sessions += f" / {impact['sessions_selected']:g}"
    lift = f"{impact['lift']:+.2f}" if "lift" in impact else "-"
    quality = quality_items(p.statistics.get("quality") if isinstance(p.statistics, dict) else None)
    return Row(p, proposal_title(p), sessions, lift, quality, _age(p.created_at))


@dataclass(frozen=True)
class Group:
    """The rows of one dream run (``run`` None: proposals from agents and quarantine)."""

    run: str | None
    link: str | None
    summary: str | None
    rows: list[Row]


def _run_summary(found: DreamRun | None) -> str | None:
    if found is None:
        return None
    if getattr(found, "withheld", None):
        return f"{found.status} · {found.withheld}"
    report = found.report or {}
    parts = [
        found.status,
        f"{found.processed} of {found.selected} sessions read",
        f"{len(found.proposals)} proposals",
        f"started {found.created_at:%Y-%m-%d %H:%M}",
    ]
    left = report.get("left_out") if isinstance(report, dict) else None
    if isinstance(left, list):
        parts.insert(3, f"{len(left) + int(report.get('left_out_more') or 0)} patterns left out")
    return " · ".join(parts)


def _groups(who: Viewer, store: str, items: list[Proposal]) -> list[Group]:
    order: list[str | None] = []
    rows: dict[str | None, list[Row]] = {}
    for p in items:
        if p.run not in rows:
            order.append(p.run)
            rows[p.run] = []
        rows[p.run].append(_row(p))
    runs = who.service.dream_runs_of(who.principal, store, [r for r in order if r])
    return [
        Group(run, safe_id(run), _run_summary(runs.get(run)) if run else None, rows[run])
        for run in order
    ]


async def queue(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    q = _queue(request.query_params)
    cursor = request.query_params.get("cursor") or None
    limit = _limit(request)
    found = await who.call(who.service.proposal_queue, store, q.where, sort=q.sort,
                           limit=limit, cursor=cursor)  # fmt: skip
    groups = await run_in_threadpool(_groups, who, store, found.items)
    return page(request, "proposals.html", who, groups=groups, q=q, count=len(found.items),
                next_cursor=found.next_cursor, paged=cursor is not None, limit=limit,
                statuses=("all", *STATUSES), origins=ORIGINS, sorts=SORTS)  # fmt: skip


# --- bulk review ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    pid: str
    link: str | None
    ok: bool
    message: str


async def bulk(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    form = await request.form()
    check_csrf(request, form_value(form, "csrf"))
    action = form_value(form, "action")
    if action not in ("accept", "reject"):
        raise InvalidInput(f"bulk review needs action accept or reject, received {action!r}")
    ids = [v for v in form.getlist("ids") if isinstance(v, str)]
    if not ids:
        raise InvalidInput("select at least one proposal (the check boxes) to review in bulk")
    comment = (form_value(form, "comment") or "").strip() or None
    outcomes: list[Outcome] = []
    for pid in ids[:MAX_LIMIT]:
        revision = form_value(form, f"rev.{pid}") or ""
        try:
            if action == "accept":
                result = await who.call(who.service.accept_proposal, store, pid, comment,
                                        revision=revision)  # fmt: skip
                message = f"accepted: commit {result.commit}"
            else:
                await who.call(who.service.reject_proposal, store, pid, comment)
                message = "rejected"
            outcomes.append(Outcome(pid, safe_id(pid), True, message))
        except MemdirError as error:
            outcomes.append(Outcome(pid, safe_id(pid), False, error.message))
    flow = _flow(form_value(form, "in"))
    failed = sum(not o.ok for o in outcomes)
    return page(request, "bulk.html", who, 207 if failed and failed < len(outcomes) else
                (409 if failed else 200), outcomes=outcomes, action=action, failed=failed,
                back=flow.query if flow else "")  # fmt: skip


# --- one proposal ---------------------------------------------------------------------------


def _current(who: Viewer, store: str, path: str) -> str | None:
    """The content at ``path`` now as the viewer may read it (None: absent or unreadable)."""
    try:
        return who.service.read(who.principal, store, path).content
    except NotFound:
        return None


@dataclass(frozen=True)
class Applied:
    """What an accepted proposal changed on one path, as a diff against the version before."""

    path: str
    link: str | None
    version: int
    diff: list[tuple[str, str]]
    note: str | None


def _applied(who: Viewer, store: str, pid: str) -> list[Applied]:
    out = []
    for change in who.service.applied_changes(who.principal, store, pid):
        note = "a version was redacted since: its text is gone" if change.redacted else None
        text = unified_diff(change.before or "", change.after or "",
                            f"{change.path}@{change.version - 1}" if change.before is not None
                            else "(absent)", f"{change.path}@{change.version}")  # fmt: skip
        out.append(Applied(change.path, path_url(change.path), change.version,
                           diff_lines(text), note))  # fmt: skip
    return out


def _next_in(who: Viewer, store: str, flow: Queue, prop: Proposal) -> str | None:
    """The proposal after ``prop`` in the flow's queue (None at its end)."""
    found = who.service.proposal_queue(
        who.principal, store, flow.where, sort=flow.sort, limit=1,
        cursor=cursor_after(prop, flow.sort),
    )  # fmt: skip
    return found.items[0].id if found.items else None


async def _proposal_page(
    request: Request, who: Viewer, store: str, pid: str, *, error: MemdirError | None = None,
    status: int = 200, flow: Queue | None = None,
) -> Response:  # fmt: skip
    prop: Proposal = await who.call(who.service.get_proposal, store, pid)
    reviewable = prop.status in ("open", "conflicted")
    ops = await run_in_threadpool(
        op_previews, prop.operations, lambda path: _current(who, store, path)
    )
    applied = await run_in_threadpool(_applied, who, store, pid)
    following = await run_in_threadpool(_next_in, who, store, flow, prop) if flow else None
    return page(
        request, "proposal.html", who, status, p=prop, title=proposal_title(prop),
        ops=ops if reviewable or not applied else [], applied=applied,
        facts=facts({k: v for k, v in (prop.statistics or {}).items() if k != "quality"}
                    if isinstance(prop.statistics, dict) else prop.statistics),
        quality=quality_items(prop.statistics.get("quality")
                              if isinstance(prop.statistics, dict) else None),
        bars=bars(prop.statistics), evidence=evidence_items(prop.evidence),
        findings=finding_items(prop.findings, prop.operations),
        run=safe_id(prop.run), commit=safe_id(prop.commit), error=error,
        reviewable=reviewable, flow=flow.query if flow else "", following=safe_id(following),
    )  # fmt: skip


async def proposal(request: Request) -> Response:
    who = await viewer(request)
    return await _proposal_page(
        request, who, request.path_params["store"], request.path_params["pid"],
        flow=_flow(request.query_params.get("in")),
    )  # fmt: skip


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
    flow = _flow(form_value(form, "in"))
    try:
        if accept:
            await who.call(who.service.accept_proposal, store, pid, comment, revision=revision)
        else:
            await who.call(who.service.reject_proposal, store, pid, comment)
    except NotFound:
        raise
    except MemdirError as error:
        return await _proposal_page(request, who, store, pid, error=error, status=_status(error),
                                    flow=flow)  # fmt: skip
    here = f"{base_path(request)}/s/{quote(store, safe='')}"
    if flow is not None:
        prop = await who.call(who.service.get_proposal, store, pid)
        following = safe_id(await run_in_threadpool(_next_in, who, store, flow, prop))
        if following is None:
            return RedirectResponse(f"{here}/proposals?{flow.query}", 303)
        nxt = f"{here}/proposals/{quote(following, safe='')}?in={quote(flow.query, safe='')}"
        return RedirectResponse(nxt, 303)
    return RedirectResponse(f"{here}/proposals/{quote(pid, safe='')}", 303)


async def accept(request: Request) -> Response:
    return await _review(request, True)


async def reject(request: Request) -> Response:
    return await _review(request, False)


routes = [
    Route("/s/{store}/proposals", queue, name="proposals"),
    Route("/s/{store}/proposals/bulk", bulk, methods=["POST"], name="bulk"),
    Route("/s/{store}/proposals/{pid}", proposal, name="proposal"),
    Route("/s/{store}/proposals/{pid}/accept", accept, methods=["POST"], name="accept"),
    Route("/s/{store}/proposals/{pid}/reject", reject, methods=["POST"], name="reject"),
]
