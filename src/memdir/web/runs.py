"""Dream runs (their reports, linking to the proposals they queued) and transcripts.

A transcript page is where evidence links lead: access is the service's (``get_transcript``
answers "not found" for a transcript the viewer may not read). Events are shown as text, tool
errors highlighted, each with an anchor (``#e<position>``) that evidence ranges point to.

Dream runs come from ``list_dream_runs`` / ``get_dream_run`` (the run's principal and
administrators see a run). The report is a JSON value written by the run; every field is
shown as text, and only ids matching :data:`~memdir.web.render.SAFE_ID` and valid memory paths
become links.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from memdir.core.errors import InvalidInput
from memdir.transcripts.model import Event
from memdir.web.page import Pager, int_param, page, paged, viewer
from memdir.web.render import facts, path_url, safe_id

__all__ = ["routes"]

#: Runs per page of the runs list, and patterns per page of a run's "proposed" list.
RUNS_PAGE = 50
PATTERNS_PAGE = 50
#: Events per page of a transcript.
EVENTS_PAGE = 500


async def dream_runs(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    limit = int_param(request, "limit", RUNS_PAGE, 1, 500)
    start = int_param(request, "start", 0, 0, 1_000_000)
    found = await who.call(who.service.list_dream_runs, store, limit=limit + 1, offset=start)
    shown = found[:limit]
    pager = Pager(start, limit, len(shown), len(found) > limit, None, {})
    return page(request, "dreams.html", who, runs=[(safe_id(r.id), r) for r in shown],
                pager=pager)  # fmt: skip


@dataclass(frozen=True)
class PatternRow:
    """One pattern of a report, ready to show (links only for safe ids and valid paths)."""

    title: str
    proposal: str | None
    paths: list[tuple[str, str | None]]
    facts: list[tuple[str, str]]
    rationale: str | None
    reason: str | None


def _patterns(entries: Any) -> list[PatternRow]:
    out: list[PatternRow] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping):
            continue
        paths = [str(p) for p in entry.get("paths") or [] if isinstance(p, str)]
        shown = {k: v for k, v in entry.items()
                 if k not in ("title", "proposal", "paths", "rationale", "reason", "decision",
                              "subject")}  # fmt: skip
        out.append(
            PatternRow(
                title=str(entry.get("title", "(untitled)")),
                proposal=safe_id(entry.get("proposal")),
                paths=[(p, path_url(p)) for p in paths],
                facts=facts(shown),
                rationale=str(entry["rationale"]) if entry.get("rationale") else None,
                reason=str(entry["reason"]) if entry.get("reason") else None,
            )
        )
    return out


async def dream_run(request: Request) -> Response:
    from memdir.dream.report import markdown

    who = await viewer(request)
    store = request.path_params["store"]
    run = await who.call(who.service.get_dream_run, store, request.path_params["run_id"])
    report: dict[str, Any] = run.report or {}
    summary = {k: v for k, v in report.items()
               if k not in ("proposed", "left_out", "usage", "sessions")}  # fmt: skip
    pager, proposed = paged(request, _patterns(report.get("proposed")), PATTERNS_PAGE)
    return page(
        request, "dream.html", who, run=run, summary=facts(summary),
        sessions=facts(report.get("sessions")), usage=facts(report.get("usage")),
        proposed=proposed, pager=pager, left_out=_patterns(report.get("left_out")),
        left_out_more=report.get("left_out_more") or 0,
        text=markdown(report) if report else None,
    )  # fmt: skip


# --- quality ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Series:
    """One line of the over-time chart: its name, CSS class and SVG points (``x,y ...``)."""

    name: str
    css: str
    points: str
    dots: list[tuple[float, float, str]]


CHART_W, CHART_H, CHART_PAD = 520, 160, 24


def series_chart(runs: list[Mapping[str, Any]]) -> list[Series]:
    """Coverage, bound and acceptance rate over runs (oldest left) as polylines in a
    ``CHART_W`` x ``CHART_H`` box; runs without a value leave a gap in that line only."""
    out = []
    n = len(runs)
    for key, name, css in (("coverage", "coverage", "cov"), ("bound", "oracle bound", "bnd"),
                           ("acceptance_rate", "acceptance", "acc")):  # fmt: skip
        dots = []
        for i, run in enumerate(runs):
            value = run.get(key)
            if not isinstance(value, int | float) or not 0 <= value <= 1:
                continue
            x = CHART_PAD + (CHART_W - 2 * CHART_PAD) * (i / (n - 1) if n > 1 else 0.5)
            y = CHART_H - CHART_PAD - (CHART_H - 2 * CHART_PAD) * float(value)
            dots.append((round(x, 1), round(y, 1), f"{run.get('run')!s}: {100 * value:.1f} %"))
        if dots:
            out.append(Series(name, css, " ".join(f"{x},{y}" for x, y, _ in dots), dots))
    return out


def _quality_row(summary: Mapping[str, Any]) -> dict[str, Any]:
    def pct(value: Any) -> str:
        return f"{100 * value:.1f} %" if isinstance(value, int | float) else "-"

    quality = summary.get("quality") or {}
    return {
        "link": safe_id(summary.get("run")), "run": str(summary.get("run")),
        "kind": str(summary.get("kind")), "created": str(summary.get("created_at") or "")[:16],
        "proposals": summary.get("proposals", 0), "acceptance": pct(summary.get("acceptance_rate")),
        "coverage": pct(summary.get("coverage")), "bound": pct(summary.get("bound")),
        "score": quality.get("score") if quality.get("score") is not None else "-",
        "parse": quality.get("parse_failures", 0),
        "loops": summary.get("feedback_loops") if summary.get("feedback_loops") is not None
        else "-",
        "cost": summary.get("cost_per_accepted") if summary.get("cost_per_accepted") is not None
        else "-",
    }  # fmt: skip


async def dreams_quality(request: Request) -> Response:
    """Quality over the viewer's runs: the chart and one row per run (JSON: REST)."""
    who = await viewer(request)
    store = request.path_params["store"]
    data = await who.call(who.service.dream_quality, store, limit=100)
    runs = list(data["runs"])
    return page(request, "quality.html", who, runs=[_quality_row(r) for r in reversed(runs)],
                chart=series_chart(runs), width=CHART_W, height=CHART_H, pad=CHART_PAD,
                one=None)  # fmt: skip


async def dream_quality(request: Request) -> Response:
    """One run's quality: proposals by origin, miner and scope, reviews, checks per proposal."""
    who = await viewer(request)
    store = request.path_params["store"]
    summary = await who.call(who.service.dream_quality, store, request.path_params["run_id"])
    checks = []
    for pattern, entry in sorted((summary.get("checks") or {}).items()):
        if not isinstance(entry, Mapping):
            continue
        cells = []
        for name in ("specificity", "failure_semantics", "fix_validated", "parse_sanity",
                     "stability", "duplicates", "feedback_loop"):  # fmt: skip
            found = entry.get(name)
            value: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
            mark = {True: "ok", False: "failed", None: "n/a"}.get(value.get("pass"), "n/a")
            cells.append((mark, str(value.get("detail") or "")))
        checks.append((str(pattern), cells, entry.get("quality")))
    numbers = {k: summary.get(k) for k in ("kind", "status", "proposals", "acceptance_rate",
                                            "coverage", "bound", "of_bound", "feedback_loops",
                                            "tokens", "cost_usd", "tokens_per_accepted",
                                            "cost_per_accepted")}  # fmt: skip
    return page(
        request, "quality.html", who, one=summary, link=safe_id(summary.get("run")),
        numbers=facts(numbers), by_origin=facts(summary.get("by_origin")),
        by_miner=facts(summary.get("by_miner")), by_scope=facts(summary.get("by_scope")),
        review=facts(summary.get("review")), score=facts(summary.get("quality", {}).get("checks")),
        quality=(summary.get("quality") or {}).get("score"), checks=checks,
        runs=[], chart=[], width=CHART_W, height=CHART_H, pad=CHART_PAD,
    )  # fmt: skip


# --- transcripts ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EventRow:
    """One transcript event as text: a heading, the body, and whether it is a tool error."""

    index: int
    kind: str
    heading: str
    body: str
    error: bool
    marked: bool


def _event_row(index: int, event: Event, marked: bool) -> EventRow:
    error = bool(event.is_error)
    if event.kind == "tool_call":
        heading = f"tool call {event.name or ''}".strip()
        body = json.dumps(event.input, ensure_ascii=False, indent=2, default=str)
    elif event.kind == "tool_result":
        heading = f"tool result {event.name or ''}".strip()
        if event.exit_code is not None:
            heading += f" (exit {event.exit_code})"
        if error:
            heading += " — error"
        body = event.output or ""
    elif event.kind == "usage":
        heading = "usage"
        body = json.dumps(event.usage or {}, ensure_ascii=False)
    else:
        heading = event.kind if event.role is None else f"{event.kind} · {event.role}"
        body = event.text or ""
    if event.ts is not None:
        heading += f" · {event.ts:%Y-%m-%d %H:%M:%S}"
    return EventRow(index, event.kind, heading, body, error, marked)


def _range(request: Request) -> tuple[int, int] | None:
    raw = (request.query_params.get("from"), request.query_params.get("to"))
    if raw[0] is None:
        return None
    values = [r if r is not None else raw[0] for r in raw]
    if not all(v.isdigit() for v in values):
        raise InvalidInput(f"from and to must be event positions, received {raw!r}"[:200])
    return int(values[0]), int(values[1])


async def transcript(request: Request) -> Response:
    who = await viewer(request)
    store = request.path_params["store"]
    marked = _range(request)
    found = await who.call(who.service.get_transcript, store, request.path_params["tid"])
    limit = int_param(request, "limit", EVENTS_PAGE, 1, 5000)
    # an evidence link (from=N) opens the page holding event N, so its #eN anchor is there
    first = min((marked[0] // limit) * limit, max(0, len(found.events) - 1)) if marked else 0
    start = int_param(request, "start", first, 0, max(0, len(found.events) - 1))
    events = [
        _event_row(i, e, marked is not None and marked[0] <= i <= marked[1])
        for i, e in enumerate(found.events[start : start + limit], start)
    ]
    kept = {k: v for k in ("from", "to") if (v := request.query_params.get(k))}
    pager = Pager(start, limit, len(events), start + limit < len(found.events),
                  len(found.events), kept)  # fmt: skip
    info = found.info
    labels = facts({
        "format": info.format, "session": info.session_id, "project": info.project,
        "agent": info.agent, "user": info.user, "task": info.task, "outcome": info.outcome,
        "started": info.started_at.isoformat() if info.started_at else None,
        "events": info.events, "tool calls": info.tool_calls, "tool errors": info.tool_errors,
        "redactions": info.redactions,
    })  # fmt: skip
    children = [safe_id(c) for c in found.children]
    return page(request, "transcript.html", who, t=info, labels=labels, events=events,
                parent=safe_id(found.parent), children=children, pager=pager)  # fmt: skip


routes = [
    Route("/s/{store}/dreams", dream_runs, name="dreams"),
    Route("/s/{store}/dreams/quality", dreams_quality, name="dreams_quality"),
    Route("/s/{store}/dreams/{run_id}/quality", dream_quality, name="dream_quality"),
    Route("/s/{store}/dreams/{run_id}", dream_run, name="dream"),
    Route("/s/{store}/transcripts/{tid}", transcript, name="transcript"),
]
