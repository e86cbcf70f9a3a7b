"""Verbs that read and change files: read, write, edit, insert, rm, mv, commit."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, read_content, verb
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput

if TYPE_CHECKING:
    from memdir.core.model import CommitResult, Operation

if_match_option = click.option(
    "--if-match",
    metavar="SHA256",
    help="Only change the file if its current sha256 is this (else exit 3).",
)


def _parse_lines(value: str | None) -> tuple[int, int | None] | None:
    if value is None:
        return None
    first, sep, last = value.partition("-")
    try:
        start = int(first)
        if not sep:
            return start, start
        return start, int(last) if last else None
    except ValueError:
        raise InvalidInput(
            f"invalid line range {value!r}: use N, N-M or N- (1-based)", lines=value
        ) from None


def report(app: App, result: CommitResult) -> None:
    """Print a commit's result: ``path sha256 version revision commit`` per operation."""
    if app.as_json:
        first = result.results[0]
        emit(
            True,
            {
                "path": first.path,
                "sha256": first.sha256,
                "version": first.version,
                "operation": first.operation,
                "revision": result.revision,
                "commit": result.commit,
                "replayed": result.replayed,
                "results": result.results,
            },
        )
        return
    lines = []
    for r in result.results:
        sha = r.sha256 or "-"  # whole: it is what --if-match takes
        moved = f" (from {r.old_path})" if r.old_path else ""
        lines.append(f"{r.operation} {r.path}{moved} version {r.version} sha256 {sha}")
    note = " (replayed: this key was already applied)" if result.replayed else ""
    lines.append(f"revision {result.revision} commit {result.commit[:12]}{note}")
    emit(False, None, "\n".join(lines))


def parse_operations(text: str) -> list[Operation]:
    """A JSON list of operation objects (see `memdir commit --help`)."""
    from memdir.core.model import operation_from_dict

    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"operations are not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise InvalidInput(
            "operations are nested too deeply to read; send a flat JSON list of objects"
        ) from None
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise InvalidInput("operations must be a JSON list of objects with an 'op' field")
    return [operation_from_dict(d, i) for i, d in enumerate(data, 1)]


@verb(cli, "read")
@click.argument("path")
@click.option("--version", "version", type=int, help="Read this version instead of the current.")
@click.option("--lines", metavar="N-M", help="Only lines N to M (1-based; 'N-' to the end).")
@click.option("-n", "--number", is_flag=True, help="Prefix each line with its number.")
def read(app: App, path: str, version: int | None, lines: str | None, number: bool) -> None:
    """Print a file (current content, or a given --version)."""
    from memdir.core.edits import numbered

    span = _parse_lines(lines)
    view = None
    if version is None:  # the common case, answered without the service when it can be
        from memdir.cli.fast import read_current

        view = read_current(app, path, span)
    if view is None:
        view = app.service().read(app.principal, app.store, path, version=version, lines=span)
    if view.expired_at is not None and not app.as_json:
        click.echo(
            f"memdir: {view.path} expired {view.expired_at.isoformat()}; it is hidden from "
            "ls, search and context (see them with --include-expired)",
            err=True,
        )
    if app.as_json:
        emit(True, view)
    elif number:
        emit(False, None, numbered(view.content, span[0] if span else 1))
    else:
        click.echo(view.content, nl=False)


@verb(cli, "write")
@click.argument("path")
@click.option("--file", "file", metavar="FILE", help="Read content from FILE (default: stdin).")
@if_match_option
@click.option("--create", is_flag=True, help="Create only: fail (exit 3) if the file exists.")
@provenance_options
def write(
    app: App, path: str, file: str | None, if_match: str | None, create: bool, **prov: Any
) -> None:
    """Create or overwrite a file with content from stdin or --file.

    Overwriting an existing file needs --if-match with its current sha256 (see
    `memdir read PATH --json`); --create refuses to touch an existing file.
    """
    if if_match and create:
        raise InvalidInput("--if-match and --create exclude each other; use one")
    content = read_content(file)
    result = app.service().write(
        app.principal,
        app.store,
        path,
        content,
        if_match=if_match,
        if_absent=create,
        provenance=make_provenance(prov),
    )
    report(app, result)


@verb(cli, "edit")
@click.argument("path")
@click.option("--old", required=True, help="Exact text to replace; must occur exactly once.")
@click.option("--new", required=True, help="Replacement text.")
@if_match_option
@provenance_options
def edit(app: App, path: str, old: str, new: str, if_match: str | None, **prov: Any) -> None:
    """Replace the one occurrence of --old by --new, atomically."""
    result = app.service().str_replace(
        app.principal, app.store, path, old, new, if_match=if_match,
        provenance=make_provenance(prov),
    )  # fmt: skip
    report(app, result)


@verb(cli, "insert")
@click.argument("path")
@click.option("--line", type=int, required=True, help="Insert after this line (0 = at the top).")
@click.option("--text", required=True, help="Text to insert as its own line(s).")
@if_match_option
@provenance_options
def insert(app: App, path: str, line: int, text: str, if_match: str | None, **prov: Any) -> None:
    """Insert --text after line --line, atomically."""
    result = app.service().insert(
        app.principal, app.store, path, line, text, if_match=if_match,
        provenance=make_provenance(prov),
    )  # fmt: skip
    report(app, result)


@verb(cli, "rm")
@click.argument("path")
@if_match_option
@provenance_options
def rm(app: App, path: str, if_match: str | None, **prov: Any) -> None:
    """Delete a file (its history stays; `memdir revert` brings it back)."""
    result = app.service().delete(
        app.principal, app.store, path, if_match=if_match, provenance=make_provenance(prov)
    )
    report(app, result)


@verb(cli, "mv")
@click.argument("path")
@click.argument("new_path")
@if_match_option
@provenance_options
def mv(app: App, path: str, new_path: str, if_match: str | None, **prov: Any) -> None:
    """Rename a file; it keeps its id and history. Never overwrites NEW_PATH."""
    result = app.service().rename(
        app.principal, app.store, path, new_path, if_match=if_match,
        provenance=make_provenance(prov),
    )  # fmt: skip
    report(app, result)


@verb(cli, "commit")
@click.argument("ops_file", metavar="FILE", default="-")
@provenance_options
def commit(app: App, ops_file: str, **prov: Any) -> None:
    """Apply several operations atomically: all or none.

    FILE (default stdin) holds a JSON list of operations, each an object with "op" (create,
    write, str_replace, insert, delete, rename) and its fields, e.g.
    [{"op": "create", "path": "/a.md", "content": "hi"},
    {"op": "str_replace", "path": "/b.md", "old": "x", "new": "y", "if_match": "SHA"}].
    """
    operations = parse_operations(read_content(ops_file))
    result = app.service().commit(app.principal, app.store, operations, make_provenance(prov))
    report(app, result)
