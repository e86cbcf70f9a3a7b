"""Verbs that manage databases and stores: init, migrate, store, backup, export, import."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, verb
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput


@verb(cli, "init")
def init(app: App) -> None:
    """Create the database (migrated to the current schema) and the store."""
    svc = app.service(create=True)
    info = svc.create_store(app.principal, app.store, exist_ok=True)
    emit(
        app.as_json,
        {"db": svc.db.display_url, "store": info},
        f"memdir database ready at {svc.db.display_url}, store {info.name!r} "
        f"(revision {info.revision}, {info.files} files)",
    )


@verb(cli, "migrate")
def migrate(app: App) -> None:
    """Upgrade the database schema to this version of memdir (safe to run concurrently)."""
    svc = app.service(create=True)
    revision = svc.db.schema_revision()
    emit(app.as_json, {"db": svc.db.display_url, "schema": revision},
         f"schema of {svc.db.display_url} is at {revision}")  # fmt: skip


@cli.group("store")
def store() -> None:
    """Create, list, archive and delete stores."""


@verb(store, "create")
@click.argument("name")
def store_create(app: App, name: str) -> None:
    """Create a store."""
    info = app.service().create_store(app.principal, name)
    emit(app.as_json, info, f"created store {info.name!r}")


@verb(store, "list")
def store_list(app: App) -> None:
    """List stores with their revision and file count."""
    infos = app.service().list_stores(app.principal)
    lines = [
        f"{s.name}\trevision {s.revision}\t{s.files} files"
        + ("\tarchived" if s.archived_at else "")
        for s in infos
    ]
    emit(app.as_json, infos, "\n".join(lines))


@verb(store, "archive")
@click.argument("name")
def store_archive(app: App, name: str) -> None:
    """Make a store read-only for good."""
    info = app.service().archive_store(app.principal, name)
    emit(app.as_json, info, f"store {name!r} is archived (read-only)")


@verb(store, "rm")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Confirm: the store and all its history go.")
def store_rm(app: App, name: str, yes: bool) -> None:
    """Delete a store with all its files and history."""
    if not yes:
        raise InvalidInput(f"deleting store {name!r} removes all its history; add --yes")
    app.service().delete_store(app.principal, name)
    emit(app.as_json, {"deleted": name}, f"deleted store {name!r}")


@verb(cli, "backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def backup(app: App, file: Path) -> None:
    """Online backup of a SQLite database to FILE (writers may continue meanwhile)."""
    if file.exists():
        raise InvalidInput(f"{file} exists; back up to a new file", file=str(file))
    app.service().db.backup(file)
    emit(app.as_json, {"backup": str(file)}, f"backed up to {file}")


@verb(cli, "export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--prefix", default="/", help="Only files under this directory.")
@click.option(
    "--git",
    "as_git",
    is_flag=True,
    help="Write the full history as a git repository (re-run to append new commits).",
)
def export(app: App, directory: Path, prefix: str, as_git: bool) -> None:
    """Write the store's files (or a prefix) to DIRECTORY as plain markdown files; with
    --git, its whole history as a git repository, one git commit per store commit."""
    from memdir.transfer import export_tree

    if as_git:
        from memdir.checkout.gitexport import export_git

        report = export_git(app.service(), app.principal, app.store, directory, prefix=prefix)
        emit(app.as_json, report,
             f"exported {report.added} new commits to {directory} ({report.total} in all, "
             f"revision {report.revision})")  # fmt: skip
        return
    count = export_tree(app.service(), app.principal, app.store, prefix, directory)
    emit(app.as_json, {"files": count, "directory": str(directory)},
         f"exported {count} files to {directory}")  # fmt: skip


@verb(cli, "import")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.option("--prefix", default="/", help="Put the files under this directory.")
@click.option("--overwrite", is_flag=True, help="Replace files that exist with other content.")
@click.option(
    "--claude-md", is_flag=True,
    help="DIRECTORY is a Claude Code project: import its CLAUDE.md files, .claude/rules and "
    ".claude/skills as /projects/<project>/ memory (docs/context.md).",
)  # fmt: skip
@click.option("--project", help="With --claude-md: the project (default: DIRECTORY's name).")
@click.option("--user", help="With --claude-md: the user personal and user memory belong to.")
@click.option(
    "--user-dir", type=click.Path(file_okay=False, path_type=Path),
    help="With --claude-md: the user's ~/.claude, imported under /users/<user>/.",
)  # fmt: skip
@click.option(
    "--include-personal", is_flag=True,
    help="With --claude-md: also CLAUDE.local.md and .claude/settings*.json (to /users/<user>/).",
)  # fmt: skip
@provenance_options
def import_(
    app: App,
    directory: Path,
    prefix: str,
    overwrite: bool,
    claude_md: bool,
    project: str | None,
    user: str | None,
    user_dir: Path | None,
    include_personal: bool,
    **prov: Any,
) -> None:
    """Import a directory of files as one commit (all or nothing)."""
    from memdir.transfer import import_files, import_tree

    provenance = make_provenance(prov)
    if provenance.source_kind is None:
        from dataclasses import replace

        provenance = replace(provenance, source_kind="import")
    if claude_md:
        from memdir.claude_md import collect_claude_md

        if prefix != "/":
            raise InvalidInput(
                "--claude-md places files under /projects/ and /users/; drop --prefix"
            )
        files = collect_claude_md(
            directory, project=project, user=user, user_dir=user_dir,
            include_personal=include_personal,
        )  # fmt: skip
        report = import_files(
            app.service(), app.principal, app.store, files, overwrite=overwrite,
            provenance=provenance,
        )  # fmt: skip
    else:
        if project or user or user_dir or include_personal:
            raise InvalidInput(
                "--project, --user, --user-dir and --include-personal go with --claude-md"
            )
        report = import_tree(
            app.service(), app.principal, app.store, directory, prefix=prefix,
            overwrite=overwrite, provenance=provenance,
        )  # fmt: skip
    emit(app.as_json, report,
         f"imported {directory}: {report.created} created, {report.updated} updated, "
         f"{report.unchanged} unchanged")  # fmt: skip
