"""Verbs over agent session transcripts: transcripts import|list|show|export|rm."""

from __future__ import annotations

import datetime as dt
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput

if TYPE_CHECKING:
    from memdir.transcripts.model import Event, ImportReport, TranscriptInfo, TranscriptView

_FORMATS = (
    "claude-code, codex, anthropic-messages, openai-chat, openai-responses, otel-genai, generic"
)
#: Inputs larger than this show a progress line on a terminal (unless --no-progress).
_PROGRESS_BYTES = 4 << 20


def _when(value: str | None, option: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"invalid {option} {value!r}: use an ISO date or time such as 2026-11-29"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@cli.group("transcripts")
def transcripts() -> None:
    """Agent session transcripts: import, list, show, export and purge them.

    A transcript is readable by a principal that may read every scope its labels name
    (--project P: /projects/P, --user U: /users/U, --agent A: /agents/A, --task T: /tasks/T);
    an unlabelled one by administrators only. Secrets are redacted at import.
    """


class _Progress:
    """A one-line byte counter on stderr, redrawn at most every 0.2 s."""

    def __init__(self, total: int) -> None:
        self.total, self.done, self.last = max(total, 1), 0, 0.0

    def __call__(self, nbytes: int) -> None:
        self.done += nbytes
        now = time.monotonic()
        if now - self.last >= 0.2:
            self.last = now
            percent = min(100.0, 100.0 * self.done / self.total)
            sys.stderr.write(f"\rreading {self.done / 1e6:,.1f} / {self.total / 1e6:,.1f} MB "
                             f"({percent:.0f}%)")  # fmt: skip
            sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 60 + "\r")


@verb(transcripts, "import")
@click.argument("paths", nargs=-1, required=True, metavar="FILE|DIR...")
@click.option("--format", "format_", metavar="FORMAT", help=f"Skip detection: {_FORMATS}.")
@click.option("--project", help="Label every new session with this project (a scope).")
@click.option("--agent", help="Label every new session with this agent (a scope).")
@click.option("--user", help="Label every new session with this user (a scope).")
@click.option("--task", help="Label every new session with this task (a scope).")
@click.option(
    "--label", "tags", multiple=True, help="A free label (repeatable; no access meaning)."
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Show reading progress on stderr [default: on a terminal, for inputs over 4 MB].",
)
def transcripts_import(
    app: App, paths: tuple[str, ...], format_: str | None, tags: tuple[str, ...],
    progress: bool | None, **scopes: str | None,
) -> None:  # fmt: skip
    """Import agent sessions from files or directories (searched for .jsonl/.ndjson/.json).

    Formats are detected per file. Re-importing a session is a no-op; a session file that
    has grown adds only its new events. Bad records are reported with file and line and
    skipped. Exits 1 when a session could not be stored (the rest is imported).
    """
    from memdir.transcripts.model import Labels
    from memdir.transcripts.reader import sources_from_paths

    sources, passed = sources_from_paths(list(paths))
    total = sum(s.size or 0 for s in sources)
    show = progress if progress is not None else sys.stderr.isatty() and total > _PROGRESS_BYTES
    bar = _Progress(total) if show else None
    try:
        report = app.service().import_transcripts(
            app.principal, app.store, sources, format=format_,
            labels=Labels(**scopes, tags=tags), progress=bar,
        )  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    report.skipped[:0] = passed
    emit(app.as_json, {**_jsonable(report), "skipped_records": len(report.skipped)},
         _summary(report))  # fmt: skip
    if report.failed:
        sys.exit(1)


def _jsonable(report: ImportReport) -> dict[str, Any]:
    from dataclasses import asdict

    data = asdict(report)
    data["skipped"] = [str(p) for p in report.skipped]
    data["failed"] = [str(p) for p in report.failed]
    data["warnings"] = [str(p) for p in report.warnings]
    return data


def _summary(report: ImportReport) -> str:
    lines = [
        f"{report.sessions} sessions from {report.files} files: {report.new} new, "
        f"{report.grown} grown, {report.unchanged} unchanged, {len(report.failed)} failed",
        f"{report.events:,} events added: {report.tool_calls:,} tool calls, "
        f"{report.tool_errors:,} tool errors",
        f"{report.redactions} secrets redacted"
        + (
            ": " + ", ".join(f"{k} {v}" for k, v in report.redactions_by_rule.items())
            if report.redactions
            else ""
        ),
        f"{len(report.skipped)} records skipped, {report.ignored_records} ignored",
    ]
    lines += [f"  skipped {p}" for p in report.skipped[:50]]
    if len(report.skipped) > 50:
        lines.append(f"  ... and {len(report.skipped) - 50} more (--json lists all)")
    lines += [f"  FAILED {p}" for p in report.failed]
    lines += [f"  warning {p}" for p in report.warnings]
    return "\n".join(lines)


@verb(transcripts, "list")
@click.option("--since", help="Active at or after this time (ISO 8601).")
@click.option("--until", help="Started before this time (ISO 8601).")
@click.option("--agent", help="Only this agent's sessions.")
@click.option("--project", help="Only this project's sessions.")
@click.option("--user", help="Only this user's sessions.")
@click.option("--task", help="Only this task's sessions.")
@click.option("--outcome", type=click.Choice(["success", "failure", "unknown"]))
@click.option("--has-errors", is_flag=True, default=None, help="Only sessions with tool errors.")
@click.option("--format", "format_", metavar="FORMAT", help="Only sessions of this format.")
@click.option("--limit", type=int, default=50, show_default=True)
@click.option("--cursor", help="Continue after a previous page (its next_cursor).")
def transcripts_list(
    app: App, since: str | None, until: str | None, format_: str | None, **filters: Any
) -> None:
    """List the transcripts you may read, newest first."""
    filters["has_errors"] = filters["has_errors"] or None
    page = app.service().list_transcripts(
        app.principal, app.store, since=_when(since, "--since"), until=_when(until, "--until"),
        format=format_, **filters,
    )  # fmt: skip
    lines = [_row(t) for t in page.items]
    if page.next_cursor:
        lines.append(f"more: --cursor '{page.next_cursor}'")
    emit(app.as_json, {"items": page.items, "next_cursor": page.next_cursor}, "\n".join(lines))


def _labels(info: TranscriptInfo) -> str:
    pairs = [f"{k}={v}" for k, v in info.scopes().items()] + list(info.labels)
    return " ".join(pairs) or "(unlabelled)"


def _row(t: TranscriptInfo) -> str:
    started = f"{t.started_at:%Y-%m-%d %H:%M}" if t.started_at else "-"
    score = "" if t.score is None else f" {t.score:g}"
    counts = f"{t.events} events\t{t.tool_calls} calls\t{t.tool_errors} errors"
    return (
        f"{t.id}\t{started}\t{t.format}\t{t.outcome}{score}\t{counts}\t{_labels(t)}\t{t.session_id}"
    )


@verb(transcripts, "show")
@click.argument("transcript_id", metavar="ID")
@click.option("--full", is_flag=True, help="Do not shorten long texts.")
def transcripts_show(app: App, transcript_id: str, full: bool) -> None:
    """Show a transcript event by event; tool errors are highlighted."""
    view = app.service().get_transcript(app.principal, app.store, transcript_id)
    if app.as_json:
        emit(True, view)
        return
    click.echo(_render(view, full))


def _render(view: TranscriptView, full: bool) -> str:
    t = view.info
    score = "" if t.score is None else f" (score {t.score:g})"
    lines = [
        f"transcript {t.id}  {t.format}  session {t.session_id}",
        f"  labels: {_labels(t)}   outcome: {t.outcome}{score}",
        f"  {t.started_at or '-'} .. {t.ended_at or '-'}   {t.events} events, {t.tool_calls} "
        f"tool calls, {t.tool_errors} tool errors, {t.redactions} redactions",
    ]
    if view.parent:
        lines.append(f"  parent: {view.parent}")
    if view.children:
        lines.append(f"  sub-agents: {', '.join(view.children)}")
    lines.extend(_event_line(i, e, full) for i, e in enumerate(view.events))
    return "\n".join(lines)


def _short(text: str | None, full: bool, limit: int = 160) -> str:
    text = text or ""
    if full:
        return text.replace("\n", "\n        ")
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _event_line(index: int, e: Event, full: bool) -> str:
    import json

    when = f"{e.ts:%H:%M:%S}" if e.ts else "        "
    head = f"{index:4} {when} "
    if e.kind == "message":
        return f"{head}{e.role or '?':9} {_short(e.text, full)}"
    if e.kind == "thinking":
        return f"{head}{'thinking':9} {_short(e.text, full)}"
    if e.kind == "tool_call":
        args = json.dumps(e.input, ensure_ascii=False)
        return f"{head}{'call':9} {e.name or '?'} {_short(args, full)}"
    if e.kind == "tool_result":
        code = f" exit {e.exit_code}" if e.exit_code is not None else ""
        took = f" {e.duration_ms:.0f}ms" if e.duration_ms is not None else ""
        line = f"{head}{'result':9} {e.name or '?'}{code}{took} {_short(e.output, full)}"
        if e.is_error:
            return click.style(f"{head}{'ERROR':9} {line[len(head) + 10 :]}", fg="red", bold=True)
        return line
    usage = ", ".join(f"{k} {v}" for k, v in (e.usage or {}).items())
    return f"{head}{'usage':9} {usage}"


@verb(transcripts, "export")
@click.argument("transcript_id", metavar="ID")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file.")
def transcripts_export(app: App, transcript_id: str, output: str | None) -> None:
    """Write a transcript in the generic JSONL form (re-importable, see docs/transcripts.md)."""
    lines = app.service().export_transcript(app.principal, app.store, transcript_id)
    if output is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        return
    with open(output, "w", encoding="utf-8") as handle:
        count = sum(handle.write(line + "\n") > 0 for line in lines)
    emit(app.as_json, {"output": output, "lines": count}, f"wrote {count} lines to {output}")


@verb(transcripts, "rm")
@click.argument("transcript_id", metavar="ID")
def transcripts_rm(app: App, transcript_id: str) -> None:
    """Purge a transcript: it and all its events are deleted for good (admin on its scopes)."""
    info = app.service().purge_transcript(app.principal, app.store, transcript_id)
    emit(app.as_json, info, f"purged transcript {info.id} (session {info.session_id})")
