"""Verbs that look around: ls, glob, grep, search."""

from __future__ import annotations

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.cli.output import emit


@verb(cli, "ls")
@click.argument("prefix", default="/")
@click.option("--depth", type=int, default=1, show_default=True, help="Levels to list.")
@click.option("-R", "--recursive", is_flag=True, help="List every file under PREFIX.")
@click.option("--include-expired", is_flag=True, help="List expired files too.")
def ls(app: App, prefix: str, depth: int, recursive: bool, include_expired: bool) -> None:
    """List files and directories under PREFIX (directories show their file count)."""
    entries = app.service().ls(
        app.principal, app.store, prefix, depth=None if recursive else depth,
        include_expired=include_expired,
    )  # fmt: skip
    lines = [
        f"{e.path}/\t{e.files} file{'s' if e.files != 1 else ''}"
        if e.kind == "dir"
        else f"{e.path}\t{e.size} B\tv{e.version}\t{(e.sha256 or '')[:12]}"
        for e in entries
    ]
    emit(app.as_json, entries, "\n".join(lines))


@verb(cli, "glob")
@click.argument("pattern")
@click.option("--include-expired", is_flag=True, help="Match expired files too.")
def glob(app: App, pattern: str, include_expired: bool) -> None:
    """List files matching PATTERN ('*' within a segment, '**' across segments)."""
    paths = app.service().glob(app.principal, app.store, pattern, include_expired=include_expired)
    emit(app.as_json, paths, "\n".join(paths))


@verb(cli, "grep")
@click.argument("pattern")
@click.argument("prefix", default="/")
@click.option("-i", "--ignore-case", is_flag=True, help="Match case-insensitively.")
@click.option("-C", "--context", type=int, default=0, help="Lines of context around matches.")
@click.option("--limit", type=int, default=1000, show_default=True, help="Most matches shown.")
@click.option("--include-expired", is_flag=True, help="Search expired files too.")
def grep(
    app: App,
    pattern: str,
    prefix: str,
    ignore_case: bool,
    context: int,
    limit: int,
    include_expired: bool,
) -> None:
    """Search current content for a regular expression (Python syntax, run by RE2), by line."""
    matches = app.service().grep(
        app.principal,
        app.store,
        pattern,
        prefix=prefix,
        ignore_case=ignore_case,
        context=context,
        limit=limit,
        include_expired=include_expired,
    )
    lines: list[str] = []
    for m in matches:
        start = m.line - len(m.before)
        lines.extend(f"{m.path}-{start + i}-{text}" for i, text in enumerate(m.before))
        lines.append(f"{m.path}:{m.line}:{m.text}")
        lines.extend(f"{m.path}-{m.line + 1 + i}-{text}" for i, text in enumerate(m.after))
        if context:
            lines.append("--")
    emit(app.as_json, matches, "\n".join(lines))
    if not matches:
        raise SystemExit(1)  # like grep: nothing found


@verb(cli, "search")
@click.argument("query")
@click.option("--prefix", default="/", help="Only files under this directory.")
@click.option("--limit", type=int, default=10, show_default=True, help="Most results.")
@click.option("--include-expired", is_flag=True, help="Search expired files too.")
def search(app: App, query: str, prefix: str, limit: int, include_expired: bool) -> None:
    """Ranked full-text search: plain words match any term; "phrases" and prefix* work."""
    hits = app.service().search(
        app.principal, app.store, query, prefix=prefix, limit=limit,
        include_expired=include_expired,
    )  # fmt: skip
    lines = [f"{h.rank}\t{h.path}\n    {' '.join(h.snippet.split())}" for h in hits]
    emit(app.as_json, hits, "\n".join(lines))
