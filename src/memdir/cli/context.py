"""Verbs that bring memory back into a session: context, stale."""

from __future__ import annotations

import json

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.context import DEFAULT_BUDGET


@verb(cli, "context")
@click.option("--project", metavar="P", help="Only this project's scope among the projects.")
@click.option("--task", metavar="T", help="Only this task's scope among the tasks.")
@click.option("--query", "-q", metavar="Q", help="Order each scope by relevance to Q.")
@click.option(
    "--budget", type=int, default=DEFAULT_BUDGET, show_default=True,
    help="Most tokens, by memdir's offline estimate (docs/context.md).",
)  # fmt: skip
@click.option(
    "--format", "fmt", type=click.Choice(["markdown", "json"]), default="markdown",
    show_default=True, help="markdown for an agent's context, json for programs.",
)  # fmt: skip
@click.option("--include-expired", is_flag=True, help="List expired files too (marked).")
def context(
    app: App,
    project: str | None,
    task: str | None,
    query: str | None,
    budget: int,
    fmt: str,
    include_expired: bool,
) -> None:
    """Print the memory to start a session with: core files whole, skills, an index.

    Only files you may read; ordered by scope (task, agent, user, project, org), then by
    relevance to --query or recent use; cut to --budget with a closing line saying what was
    left out. The same store, principal and options print the same bytes.
    """
    assembled = app.service().context(
        app.principal, app.store, project=project, task=task, query=query, budget=budget,
        include_expired=include_expired,
    )  # fmt: skip
    if app.as_json or fmt == "json":
        click.echo(json.dumps(assembled.to_json(), ensure_ascii=False, indent=2))
    else:
        click.echo(assembled.markdown, nl=False)


@verb(cli, "stale")
@click.argument("prefix", default="/")
@click.option(
    "--days", type=int, default=30, show_default=True,
    help="A file not read (else not changed) in this many days is 'unread'.",
)  # fmt: skip
@click.option(
    "--reason", "reasons", multiple=True,
    type=click.Choice(["expired", "review-due", "unread", "contradicted"]),
    help="Only files stale for this reason (repeatable).",
)  # fmt: skip
def stale(app: App, prefix: str, days: int, reasons: tuple[str, ...]) -> None:
    """List stale files under PREFIX by scope: expired, due for review, unread in --days
    days, or contradicted by a dream; each with its last writer and the reason."""
    files = app.service().stale(
        app.principal, app.store, days=days, prefix=prefix, reasons=reasons or None
    )
    lines: list[str] = []
    scope = None
    for f in files:
        heading = f"{f.scope} {f.scope_name}".strip()
        if heading != scope:
            lines.append(f"# {heading}")
            scope = heading
        lines.append(
            f"{f.path}\t{', '.join(f.reasons)}\tlast written by {f.last_writer or 'unknown'} "
            f"{f.updated_at.date().isoformat()}\t{'; '.join(f.details)}"
        )
    emit(app.as_json, files, "\n".join(lines) if lines else "nothing is stale")
