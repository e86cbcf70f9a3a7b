"""Dream runs: start (or resume) one, list, show (JSON or markdown), revert.

A run acts as the caller and reads only what the caller may read; its proposals enter the
review queue (``/proposals``). ``POST`` runs the dream to the end before answering (a run over
a few thousand sessions takes seconds offline); an interrupted run is continued with
``POST …/dreams/{run}/resume``. Runs are visible to the principal that ran them and to
administrators.
"""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Literal

from fastapi import Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from memdir.api.deps import (
    Ctx,
    Cursor,
    Limit,
    Prov,
    StoreName,
    offset_of,
    offset_page,
    render,
    v1_router,
)
from memdir.api.models import Page
from memdir.core.dream_options import BACKTEST_SPLIT, HELP
from memdir.core.dream_options import DEFAULTS as D
from memdir.core.errors import InvalidInput
from memdir.core.limits import MAX_INT64
from memdir.dreams import DreamConfig, DreamRun

__all__ = ["router"]

router = v1_router("dreams")

ALL = "/stores/{store}/dreams"
ONE = ALL + "/{run_id}"


class DreamBody(BaseModel):
    """What a run reads and how it decides (every field optional)."""

    model_config = ConfigDict(extra="forbid")

    since: dt.datetime | None = Field(D.since, description=HELP["since"])
    until: dt.datetime | None = Field(D.until, description=HELP["until"])
    since_last: bool = Field(D.since_last, description=HELP["since_last"])
    agent: str | None = Field(D.agent, max_length=200, description=HELP["agent"])
    project: str | None = Field(D.project, max_length=200, description=HELP["project"])
    outcome: Literal["success", "failure", "unknown"] | None = Field(
        D.outcome, description=HELP["outcome"]
    )
    limit: int | None = Field(D.limit, ge=1, le=MAX_INT64, description=HELP["limit"])
    model: str = Field(D.model, max_length=500, description=HELP["model"])
    instructions: str | None = Field(
        D.instructions, max_length=65536, description=HELP["instructions"]
    )
    budget_tokens: int | None = Field(
        D.budget_tokens, ge=1, le=MAX_INT64, description=HELP["budget_tokens"]
    )
    budget_usd: float | None = Field(D.budget_usd, ge=0, description=HELP["budget_usd"])
    batches: bool = Field(D.batches, description=HELP["batches"])
    min_sessions: int = Field(D.min_sessions, ge=1, le=MAX_INT64, description=HELP["min_sessions"])
    min_prevalence: float = Field(D.min_prevalence, ge=0, le=1, description=HELP["min_prevalence"])
    miners: list[str] | None = Field(None, description=HELP["miners"])
    dry_run: bool = Field(D.dry_run, description=HELP["dry_run"])
    backtest: bool = Field(
        False, description="Dream over the earlier sessions, measure on the later ones."
    )
    split: float | dt.datetime | None = Field(
        None,
        description=f"Backtest split: a fraction of the sessions ({BACKTEST_SPLIT}) or a time.",
    )
    keep: str | None = Field(
        None, max_length=200, description="Keep the backtest's scratch copy as this new store."
    )


@router.post(ALL, response_model=DreamRun, status_code=201, summary="Run a dream")
async def start_dream(ctx: Ctx, store: StoreName, body: DreamBody) -> Response:
    """Run a dream over the transcripts the caller may read; its proposals enter the queue."""
    options = body.model_dump()
    backtest, split, keep = options.pop("backtest"), options.pop("split"), options.pop("keep")
    config = DreamConfig.build(**options)
    if backtest:
        run = await ctx.call(
            ctx.service.backtest,
            store,
            config,
            split=BACKTEST_SPLIT if split is None else split,
            keep=keep,
        )
    elif split is not None or keep is not None:
        raise InvalidInput("split and keep go with backtest: true; add it to the body")
    else:
        run = await ctx.call(ctx.service.dream, store, config)
    return render(run, 201)


@router.get(ALL + "/quality", summary="Dream quality over time")
async def dreams_quality(ctx: Ctx, store: StoreName, limit: Limit = 50) -> Response:
    """The caller's last runs, oldest first, with what the quality page charts: coverage,
    bound, acceptance rate, quality score, checks, tokens and cost per accepted proposal."""
    data = await ctx.call(ctx.service.dream_quality, store, limit=limit)
    return render(data)


@router.get(ALL, response_model=Page[DreamRun], summary="Dream runs")
async def list_dreams(
    ctx: Ctx, store: StoreName, cursor: Cursor = None, limit: Limit = 50
) -> Response:
    """The caller's runs (every run, for administrators), newest first."""
    start = offset_of(cursor)
    runs = await ctx.call(ctx.service.list_dream_runs, store, limit=start + limit + 1)
    page = offset_page(runs, start, limit)
    return render(page)


@router.get(
    ONE,
    response_model=DreamRun,
    responses={200: {"content": {"text/markdown": {"schema": {"type": "string"}}}}},
    summary="Show a dream run",
)
async def show_dream(
    ctx: Ctx,
    store: StoreName,
    run_id: str,
    format: Annotated[Literal["json", "markdown"], Query(description="The report form.")] = "json",
) -> Response:
    """The run with its report (``format=markdown``: the report for people)."""
    run = await ctx.call(ctx.service.get_dream_run, store, run_id)
    if format == "markdown":
        from memdir.dream.report import markdown

        text = (
            markdown(run.report) if run.report
            else f"dream run {run.id} is {run.status}: {run.withheld}\n" if run.withheld
            else f"dream run {run.id} is {run.status}\n"
        )  # fmt: skip
        return Response(text, media_type="text/markdown; charset=utf-8")
    return render(run)


@router.get(ONE + "/quality", summary="A dream run's quality")
async def dream_quality(ctx: Ctx, store: StoreName, run_id: str) -> Response:
    """One run's quality summary (see ``GET …/dreams/quality``)."""
    data = await ctx.call(ctx.service.dream_quality, store, run_id)
    return render(data)


@router.post(ONE + "/resume", response_model=DreamRun, summary="Resume a dream run")
async def resume_dream(ctx: Ctx, store: StoreName, run_id: str) -> Response:
    """Continue an interrupted or failed run where its last checkpoint left it."""
    run = await ctx.call(ctx.service.dream, store, None, resume=run_id)
    return render(run)


@router.post(ONE + "/revert", summary="Revert a dream run")
async def revert_dream(ctx: Ctx, store: StoreName, run_id: str, prov: Prov) -> Response:
    """Revert every commit that came from the run's accepted proposals, newest first."""
    results = await ctx.call(ctx.service.revert_dream_run, store, run_id, prov)
    return render({"commits": [r.to_dict() for r in results]})
