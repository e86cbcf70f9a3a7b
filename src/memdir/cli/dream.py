"""Dreaming verbs: dream [run] | list | show | revert.

``memdir dream [OPTIONS]`` is ``memdir dream run [OPTIONS]``: a run reads the transcripts and
memory the acting principal may read, and queues proposals for review (it never writes memory).
"""

from __future__ import annotations

import datetime as dt
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, verb
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.cli.transcripts import _when
from memdir.core.dream_options import BACKTEST_SPLIT, HELP
from memdir.core.dream_options import DEFAULTS as D
from memdir.core.errors import InvalidInput

if TYPE_CHECKING:
    pass

#: Largest steering-instructions file accepted (they reach every model prompt).
MAX_INSTRUCTIONS_BYTES = 64 << 10


class _DefaultRun(click.Group):
    """A group whose bare invocation (or unknown first word) means its ``run`` verb."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("--help", "-h")):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@cli.group("dream", cls=_DefaultRun)
def dream() -> None:
    """Learn from transcripts: find recurring failures and rediscoveries, propose memory changes.

    `memdir dream [OPTIONS]` runs a dream (see `memdir dream run --help`); `list`, `show RUN`
    and `revert RUN` manage past runs. Proposals land in the review queue
    (`memdir proposals list`), each with evidence, statistics and a rationale.
    """


class _Bar:
    """One progress line on stderr per stage, redrawn at most every 0.2 s."""

    def __init__(self) -> None:
        self.last = 0.0

    def __call__(self, stage: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.last < 0.2 and done != total:
            return
        self.last = now
        label = {"read": "reading transcripts", "model": "model requests",
                 "propose": "queueing proposals"}.get(stage, stage)  # fmt: skip
        shown = f"{done:,}/{total:,} ({100 * done / total:.0f}%)" if total else f"{done:,}"
        sys.stderr.write(f"\r{label}: {shown}" + " " * 10)
        sys.stderr.flush()

    def close(self) -> None:
        sys.stderr.write("\r" + " " * 70 + "\r")


def _miners(value: str | None) -> tuple[str, ...] | None:
    return None if not value else tuple(m.strip() for m in value.split(",") if m.strip())


def _instructions(path: str | None) -> str | None:
    if path is None:
        return None
    data = Path(path).read_bytes()
    if len(data) > MAX_INSTRUCTIONS_BYTES:
        raise InvalidInput(
            f"instructions file {path} is {len(data)} bytes, over the limit of "
            f"{MAX_INSTRUCTIONS_BYTES}; keep steering short"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"instructions file {path} is not UTF-8 (byte {exc.start})") from None


@verb(dream, "run")
@click.option("--since", help=HELP["since"] + " ISO date or time.")
@click.option("--until", help=HELP["until"])
@click.option("--since-last", is_flag=True, help=HELP["since_last"])
@click.option("--agent", help=HELP["agent"])
@click.option("--project", help=HELP["project"])
@click.option(
    "--outcome", type=click.Choice(["success", "failure", "unknown"]), help=HELP["outcome"]
)
@click.option("--limit", type=click.IntRange(min=1), help=HELP["limit"])
@click.option("--model", default=D.model, show_default=True, help=HELP["model"])
@click.option(
    "--instructions",
    type=click.Path(exists=True, dir_okay=False),
    help=HELP["instructions"] + " A UTF-8 file.",
)
@click.option("--budget-tokens", type=click.IntRange(min=1), help=HELP["budget_tokens"])
@click.option("--budget-usd", type=click.FloatRange(min=0), help=HELP["budget_usd"])
@click.option("--batches", is_flag=True, help=HELP["batches"])
@click.option(
    "--min-sessions",
    type=click.IntRange(min=1),
    default=D.min_sessions,
    show_default=True,
    help=HELP["min_sessions"],
)
@click.option(
    "--min-prevalence",
    type=click.FloatRange(0, 1),
    default=D.min_prevalence,
    show_default=True,
    help=HELP["min_prevalence"],
)
@click.option("--miners", help="Comma-separated miners to run [default: all].")
@click.option("--dry-run", is_flag=True, help=HELP["dry_run"])
@click.option("--resume", "resume", metavar="RUN", help="Continue an interrupted run.")
@click.option("--report", "report_file", type=click.Path(dir_okay=False),
              help="Also write the markdown report to this file.")  # fmt: skip
@click.option("--progress/--no-progress", default=None,
              help="Progress on stderr [default: on a terminal].")  # fmt: skip
@click.option("--backtest", is_flag=True,
              help="Dream on earlier sessions, measure on later ones; queue nothing.")  # fmt: skip
@click.option(
    "--split",
    metavar="TIME|FRACTION",
    default=None,
    help=f"Backtest split: a fraction of the sessions [{BACKTEST_SPLIT}] or a time.",
)
@click.option("--keep", metavar="STORE", default=None,
              help="Keep the backtest's scratch copy as this new store.")  # fmt: skip
def dream_run(
    app: App, since: str | None, until: str | None, since_last: bool, agent: str | None,
    project: str | None, outcome: str | None, limit: int | None, model: str,
    instructions: str | None, budget_tokens: int | None, budget_usd: float | None,
    batches: bool, min_sessions: int, min_prevalence: float, miners: str | None,
    dry_run: bool, resume: str | None, report_file: str | None, progress: bool | None,
    backtest: bool, split: str | None, keep: str | None,
) -> None:  # fmt: skip
    """Run a dream over the transcripts you may read; queue its proposals for review.

    The run pins the store revision, records its selection and configuration, and ends with a
    report (patterns found with their statistics, what was proposed and why, what was left
    out and why). Interrupted, it resumes with --resume RUN without repeating finished work.
    """
    from memdir.dream.report import markdown
    from memdir.dreams import DreamConfig

    config = DreamConfig.build(
        since=_when(since, "--since"), until=_when(until, "--until"), since_last=since_last,
        agent=agent, project=project, outcome=outcome, limit=limit, model=model,
        instructions=_instructions(instructions), budget_tokens=budget_tokens,
        budget_usd=budget_usd, batches=batches, min_sessions=min_sessions,
        min_prevalence=min_prevalence, miners=_miners(miners), dry_run=dry_run,
    )  # fmt: skip
    show = progress if progress is not None else sys.stderr.isatty() and not app.as_json
    bar = _Bar() if show else None
    if (split is not None or keep is not None) and not backtest:
        raise InvalidInput("--split and --keep go with --backtest; add --backtest")
    try:
        if backtest:
            if resume is not None:
                raise InvalidInput("a backtest is not resumed; run `memdir dream --backtest` again")
            run = app.service().backtest(app.principal, app.store, config, split=split_value(split),
                                         keep=keep, progress=bar)  # fmt: skip
        else:
            run = app.service().dream(app.principal, app.store, config, resume=resume,
                                      progress=bar)  # fmt: skip
    finally:
        if bar is not None:
            bar.close()
    text = markdown(run.report or {})
    if report_file is not None:
        Path(report_file).write_text(text, encoding="utf-8")
    emit(app.as_json, run, text)


def split_value(text: str | None) -> float | dt.datetime:
    """``--split``: a fraction (``0.3``) or an ISO time (``2026-10-01``, UTC when no zone)."""
    if text is None:
        return BACKTEST_SPLIT
    try:
        return float(text)
    except ValueError:
        pass
    when = _when(text, "--split")
    if when is None:
        raise InvalidInput(f"--split takes a fraction or a time, received {text!r}")
    return when


@verb(dream, "list")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True)
def dream_list(app: App, limit: int) -> None:
    """Your dream runs (every run, for administrators), newest first."""
    runs = app.service().list_dream_runs(app.principal, app.store, limit=limit)
    lines = [
        f"{r.id}  {r.status:<11} {r.created_at:%Y-%m-%d %H:%M}  {r.principal}  "
        + (
            "(report withheld)"
            if r.withheld
            else f"{r.processed}/{r.selected} sessions  "
            + ("backtest" if (r.report or {}).get("backtest") else f"{len(r.proposals)} proposals")
        )
        for r in runs
    ]
    emit(app.as_json, runs, "\n".join(lines) or "no dream runs")


@verb(dream, "show")
@click.argument("run_id", metavar="RUN")
def dream_show(app: App, run_id: str) -> None:
    """A run's report (markdown; --json for the whole record)."""
    from memdir.dream.report import markdown

    run = app.service().get_dream_run(app.principal, app.store, run_id)
    if run.withheld:
        text = f"dream run {run.id} is {run.status}: {run.withheld}"
    elif run.report is None:
        text = (
            f"dream run {run.id} is {run.status}: {run.processed}/{run.selected} sessions read"
            + (f"; {run.error}" if run.error else "")
            + (f"\nresume it with `memdir dream --resume {run.id}`"
               if run.status != "finished" else "")
        )  # fmt: skip
    else:
        text = markdown(run.report)
    emit(app.as_json, run, text)


@verb(dream, "revert")
@click.argument("run_id", metavar="RUN")
@provenance_options
def dream_revert(app: App, run_id: str, **prov: Any) -> None:
    """Undo every commit that came from the run's accepted proposals (newest first)."""
    results = app.service().revert_dream_run(
        app.principal, app.store, run_id, make_provenance(prov)
    )
    lines = [f"reverted into commit {r.commit} (revision {r.revision})" for r in results]
    emit(app.as_json, results, "\n".join(lines) or f"dream run {run_id} has no accepted commits")


@verb(dream, "replay")
@click.argument("transcripts", nargs=-1, required=True, metavar="TRANSCRIPT...")
@click.option("--model", required=True,
              help="anthropic:<model> | openai:<model>@<base_url> | fake.")  # fmt: skip
@click.option("--run", "run_id", metavar="RUN",
              help="Memory: what RUN's accepted proposals wrote [all dream notes].")  # fmt: skip
def dream_replay(app: App, transcripts: tuple[str, ...], model: str, run_id: str | None) -> None:
    """Replay failed sessions' openings without and with the accepted memory in context, and
    say whether the first failing call recurs (model calls: outside CI)."""
    report = app.service().replay_sessions(app.principal, app.store, list(transcripts), model,
                                           run=run_id)  # fmt: skip

    def arm(value: dict[str, Any] | None) -> str:
        if value is None:
            return "no answer (the model call failed)"
        return ("RECURS" if value["recurs"] else "avoided") + f": {value['tool']} {value['input']}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f} %"

    lines = [f"replayed {len(report['cases'])} sessions with {report['memory_files']} memory "
             f"files; first failing call recurs {pct(report['recurs_without_memory'])} without "
             f"memory, {pct(report['recurs_with_memory'])} with it"]  # fmt: skip
    for case in report["cases"]:
        lines += [f"- {case['transcript_id']}: failed `{case['failing_call']}`",
                  f"    without memory: {arm(case['without_memory'])}",
                  f"    with memory:    {arm(case['with_memory'])}"]  # fmt: skip
    if report["skipped"]:
        lines.append(f"skipped (no failing call): {', '.join(report['skipped'])}")
    emit(app.as_json, report, "\n".join(lines))
