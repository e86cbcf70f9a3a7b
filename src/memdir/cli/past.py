"""Verbs over history: log, diff, revert, redact."""

from __future__ import annotations

import datetime as dt
from typing import Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, verb
from memdir.cli.files import report
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput


def _when(value: str | None, option: str) -> dt.datetime | None:
    if value is None:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidInput(
            f"invalid {option} {value!r}: use an ISO date or time such as 2026-11-29 or "
            "2026-11-29T14:00:00Z"
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


@verb(cli, "log")
@click.argument("path", required=False)
@click.option("--actor", help="Only commits by this principal.")
@click.option("--session", help="Only commits from this session.")
@click.option("--prefix", help="Only commits touching files under this directory.")
@click.option("--since", help="Only commits at or after this time (ISO 8601).")
@click.option("--until", help="Only commits before this time (ISO 8601).")
@click.option("--limit", type=int, default=50, show_default=True)
def log(
    app: App,
    path: str | None,
    actor: str | None,
    session: str | None,
    prefix: str | None,
    since: str | None,
    until: str | None,
    limit: int,
) -> None:
    """History of one file (across renames), or of the store's commits."""
    svc = app.service()
    if path is not None:
        versions = svc.file_history(app.principal, app.store, path, limit=limit)
        lines = [
            f"v{v.version}\t{v.operation}\t{v.path}"
            + (f" (from {v.old_path})" if v.old_path else "")
            + f"\t{(v.sha256 or ('redacted' if v.redacted else '-'))[:12]}"
            + f"\t{v.actor}\t{v.created_at:%Y-%m-%d %H:%M:%S}\tr{v.revision} {v.commit[:12]}"
            + (f"\t{v.reason}" if v.reason else "")
            for v in versions
        ]
        emit(app.as_json, versions, "\n".join(lines))
        return
    commits = svc.history(
        app.principal,
        app.store,
        actor=actor,
        session=session,
        prefix=prefix,
        since=_when(since, "--since"),
        until=_when(until, "--until"),
        limit=limit,
    )
    lines = []
    for c in commits:
        lines.append(f"commit {c.id} (revision {c.revision})")
        lines.append(f"  by {c.actor} at {c.created_at:%Y-%m-%d %H:%M:%S}Z")
        for label, value in (("session", c.session), ("transcript", c.transcript),
                             ("source", c.source_kind), ("reason", c.reason)):  # fmt: skip
            if value:
                lines.append(f"  {label}: {value}")
        lines.extend(f"    {v.operation} {v.path} v{v.version}" for v in c.changes)
    emit(app.as_json, commits, "\n".join(lines))


@verb(cli, "diff")
@click.argument("path")
@click.argument("a", type=int)
@click.argument("b", type=int, required=False)
def diff(app: App, path: str, a: int, b: int | None) -> None:
    """Unified diff of PATH from version A to version B (default: current)."""
    text = app.service().diff(app.principal, app.store, path, a, b)
    emit(app.as_json, {"path": path, "a": a, "b": b, "diff": text}, text)


@verb(cli, "revert")
@click.argument("path", required=False)
@click.option("--to-version", type=int, help="Put PATH back to this version.")
@click.option("--commit", "commit_id", help="Undo every change of this commit.")
@provenance_options
def revert(
    app: App, path: str | None, to_version: int | None, commit_id: str | None, **prov: Any
) -> None:
    """Revert a file to a version, or a whole commit, as a new commit."""
    provenance = make_provenance(prov)
    svc = app.service()
    if commit_id is not None and path is None and to_version is None:
        result = svc.revert_commit(app.principal, app.store, commit_id, provenance)
    elif path is not None and to_version is not None and commit_id is None:
        result = svc.revert_file(app.principal, app.store, path, to_version, provenance)
    else:
        raise InvalidInput("use `memdir revert PATH --to-version N` or `memdir revert --commit ID`")
    report(app, result)


@verb(cli, "redact")
@click.argument("path")
@click.option("--version", "version", type=int, required=True, help="The version to redact.")
@click.option("--yes", is_flag=True, help="Do it; without --yes only list what would go.")
def redact(app: App, path: str, version: int, yes: bool) -> None:
    """Remove a version's content from history, with every version holding the same content.

    Lists the affected versions first; the content and its sha256 are gone for good once
    run with --yes. Who changed what and when stays.
    """
    plan = app.service().redact(app.principal, app.store, path, version, dry_run=not yes)
    lines = [f"{'redacted' if plan.done else 'would redact'} content sha256 {plan.sha256} from:"]
    lines.extend(
        f"  {v.path} v{v.version} ({v.actor}, {v.created_at:%Y-%m-%d})" for v in plan.versions
    )
    if not plan.done:
        lines.append("re-run with --yes to redact")
    emit(app.as_json, plan, "\n".join(lines))
