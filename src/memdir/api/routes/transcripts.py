"""Agent session transcripts: push a session (import), list, show, export, purge.

A transcript is readable by a principal that may read every scope its labels name; an
unlabelled one by administrators only (the service decides). ``POST`` takes a transcript
file's bytes as the body, exactly as on disk.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict
from typing import Annotated, Any, Literal

from fastapi import Query, Request
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from memdir.api.deps import Ctx, Cursor, Limit, StoreName, render, v1_router
from memdir.api.models import Page, TranscriptImportSummary
from memdir.core.errors import InvalidInput
from memdir.transcripts.model import ImportReport, Labels, TranscriptInfo

__all__ = ["router"]

router = v1_router("transcripts")

ALL = "/stores/{store}/transcripts"
ONE = ALL + "/{transcript_id}"

_RAW_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "A transcript file's bytes, as on disk (JSONL or JSON).",
        "content": {
            "application/x-ndjson": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {"schema": {"type": "string", "format": "binary"}},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}
Label = Annotated[str | None, Query(max_length=200)]


async def _body(request: Request) -> bytes:
    """The body; its size limit (``max_transcript_bytes``) is the bounds middleware's."""
    return await request.body()


def _summary(report: ImportReport) -> dict[str, Any]:
    data = asdict(report)
    data["skipped"] = [asdict(p) for p in report.skipped]
    data["failed"] = [asdict(p) for p in report.failed]
    data["warnings"] = [asdict(p) for p in report.warnings]
    data["skipped_records"] = len(report.skipped)
    return data


@router.post(
    ALL,
    response_model=TranscriptImportSummary,
    openapi_extra=_RAW_BODY,
    summary="Import (push) a transcript",
)
async def import_transcript(
    ctx: Ctx,
    request: Request,
    store: StoreName,
    format: Annotated[str | None, Query(description="Skip detection: the importer's name.")] = None,
    name: Annotated[
        str | None,
        Query(max_length=500, description="The file name (some formats take the session from it)."),
    ] = None,
    project: Label = None,
    agent: Label = None,
    user: Label = None,
    task: Label = None,
    label: Annotated[list[str] | None, Query(description="Free labels (repeatable).")] = None,
) -> Response:
    """Import the sessions in the body; the summary says what was new, grown or unchanged.

    Re-posting a session is a no-op; a session file that has grown adds only its new events.
    Bad records are skipped and listed (``skipped``: file, line, reason); when nothing in the
    body could be imported the answer is 400 with those problems.
    """
    from memdir.transcripts.reader import Source

    data = await _body(request)
    if not data.strip():
        raise InvalidInput("the body is empty: send a transcript file's bytes")
    source = Source.from_bytes(name or "request-body", data)
    labels = Labels(project=project, agent=agent, user=user, task=task, tags=tuple(label or ()))
    report = await ctx.call(
        ctx.service.import_transcripts, store, [source], format=format, labels=labels
    )
    problems = report.skipped + report.failed
    if not report.transcripts and problems:
        shown = [asdict(p) for p in problems[:50]]
        first = problems[0]
        raise InvalidInput(
            f"nothing imported: {first}" + (f" (and {len(problems) - 1} more problems)"
                                             if len(problems) > 1 else ""),
            file=first.file, line=first.line, reason=first.reason, problems=shown,
        )  # fmt: skip
    return render(_summary(report))


@router.get(ALL, response_model=Page[TranscriptInfo], summary="List transcripts")
async def list_transcripts(
    ctx: Ctx,
    store: StoreName,
    since: Annotated[dt.datetime | None, Query(description="Active at or after this time.")] = None,
    until: Annotated[dt.datetime | None, Query(description="Started before this time.")] = None,
    agent: Label = None,
    project: Label = None,
    user: Label = None,
    task: Label = None,
    outcome: Annotated[Literal["success", "failure", "unknown"] | None, Query()] = None,
    has_errors: Annotated[bool | None, Query(description="Only sessions with tool errors.")] = None,
    format: Annotated[str | None, Query(description="Only sessions of this format.")] = None,
    cursor: Cursor = None,
    limit: Limit = 100,
) -> Response:
    """The transcripts the caller may read, newest first."""
    page = await ctx.call(
        ctx.service.list_transcripts, store, since=since, until=until, agent=agent,
        project=project, user=user, task=task, outcome=outcome,
        has_errors=True if has_errors else None, format=format, limit=limit, cursor=cursor,
    )  # fmt: skip
    return render({"items": page.items, "next_cursor": page.next_cursor})


@router.get(ONE, summary="Show a transcript")
async def show_transcript(ctx: Ctx, store: StoreName, transcript_id: str) -> Response:
    """The normalised record: header, meta, events, parent and readable sub-agent sessions."""
    view = await ctx.call(ctx.service.get_transcript, store, transcript_id)
    return render(view)


@router.get(
    ONE + "/export",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {"schema": {"type": "string"}}}}},
    summary="Export a transcript",
)
async def export_transcript(ctx: Ctx, store: StoreName, transcript_id: str) -> Response:
    """The transcript in the generic JSONL form (re-importable; see docs/transcripts.md)."""
    lines = await ctx.call(ctx.service.export_transcript, store, transcript_id)
    body = await run_in_threadpool(lambda: "".join(line + "\n" for line in lines).encode())
    return Response(body, media_type="application/x-ndjson")


@router.delete(ONE, response_model=TranscriptInfo, summary="Purge a transcript")
async def purge_transcript(ctx: Ctx, store: StoreName, transcript_id: str) -> Response:
    """Delete a transcript and all its events for good (``admin`` on its scopes)."""
    return render(await ctx.call(ctx.service.purge_transcript, store, transcript_id))
