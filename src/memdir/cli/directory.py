"""Verbs for memory as a directory: checkout, sync (and sync --watch).

Both work through the SDK client (:mod:`memdir.checkout`): on the database given by ``--db``
(in-process, acting as ``--as`` or the owner) or, with ``--url``, on a ``memdir serve`` with
the token in ``MEMDIR_TOKEN``. A checkout remembers where it came from (the database URL made
absolute, or the server URL; never the token), so ``memdir sync DIR`` needs no options.
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.cli.output import emit, fail
from memdir.core.errors import InvalidInput, MemdirError, Unauthenticated

if TYPE_CHECKING:
    from memdir.sdk import Client

__all__ = ["checkout", "sync"]


def _absolute_db(url: str) -> str:
    """A SQLite URL with a relative path made absolute (a checkout is synced from anywhere)."""
    import sqlalchemy as sa

    try:
        parsed = sa.make_url(url)
    except sa.exc.ArgumentError:
        return url
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return url
    if parsed.database == ":memory:" or Path(parsed.database).is_absolute():
        return url
    absolute = parsed.set(database=str(Path(parsed.database).resolve()))
    return absolute.render_as_string(hide_password=False)


def _client(app: App, source: dict[str, Any], store: str) -> Client:
    import memdir

    url = source.get("url")
    if url:
        if not app.settings.token:
            raise Unauthenticated(
                f"syncing with {url} needs a token: set MEMDIR_TOKEN to the principal's token"
            )
        return memdir.Client(url, app.settings.token, store=store)
    as_principal = source.get("as")
    if as_principal is not None and app.settings.token:
        raise InvalidInput("give either --as or MEMDIR_TOKEN, not both")
    token = None if as_principal is not None else app.settings.token
    db = source.get("db") or app.settings.db  # a checkout made through the library
    return memdir.Client(db=db, principal=as_principal, token=token, store=store)


@verb(cli, "checkout")
@click.argument("args", nargs=-1, required=True, metavar="[PREFIX] DIR")
@click.option(
    "--url",
    metavar="URL",
    envvar="MEMDIR_URL",
    help="A `memdir serve` to check out from (token in MEMDIR_TOKEN) [env MEMDIR_URL].",
)
def checkout(app: App, args: tuple[str, ...], url: str | None) -> None:
    """Materialise the files you may read under PREFIX (default /) as plain files in DIR.

    DIR must be new or empty. Files you may not change are read-only; `.memdir-checkout.json`
    records each file's base sha256 and version. Edit with any tool, then `memdir sync DIR`.
    """
    from memdir.checkout import checkout as do_checkout

    if len(args) > 2:
        raise InvalidInput(f"checkout takes [PREFIX] DIR, received {len(args)} arguments")
    prefix, directory = (args[0], args[1]) if len(args) == 2 else ("/", args[0])
    source: dict[str, Any] = {"url": url} if url else {
        "db": _absolute_db(app.settings.db), "as": app.as_principal}  # fmt: skip
    with _client(app, source, app.store) as client:
        report = do_checkout(client, prefix, Path(directory), source=source)
    emit(app.as_json, report,
         f"checked out {report.files} files under {report.prefix} to {report.directory} at "
         f"revision {report.revision} ({report.read_only} read-only)")  # fmt: skip


@verb(cli, "sync")
@click.argument("directory", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--reason", help="Why these changes are made (kept in history).")
@click.option("--session", help="The agent session these changes come from.")
@click.option(
    "--watch",
    is_flag=True,
    help="Keep syncing: after local changes settle and when the store changes.",
)
@click.option(
    "--settle",
    default=300,
    show_default=True,
    metavar="MS",
    help="With --watch: milliseconds without a local change before a sync.",
)
def sync(
    app: App,
    directory: Path,
    reason: str | None,
    session: str | None,
    watch: bool,
    settle: int,
) -> None:
    """Send DIR's changes as one commit (If-Match on each file's base) and pull the store's.

    \b
    Conflicts keep both texts: yours in FILE, the store's in FILE.theirs; merge into FILE,
    delete FILE.theirs and sync again. Exit 3 while a conflict is open, 2 for files refused as
    invalid, 4 for changes to files you may only read, 6 when changes wait for review as
    proposals (one per file), else 0.
    """
    from memdir.checkout import sync as do_sync
    from memdir.checkout.state import State

    state = State.load(directory)
    with _client(app, state.source, state.store) as client:
        if watch:
            _watch(app, client, directory, reason, session, settle)
            return
        report = do_sync(client, directory, reason=reason, session=session)
    emit(app.as_json, report, "\n".join(report.lines()))
    if report.exit_code:
        sys.exit(report.exit_code)


def _watch(
    app: App, client: Client, directory: Path, reason: str | None, session: str | None,
    settle: int,
) -> None:  # fmt: skip
    import json

    from memdir.checkout.watch import watch
    from memdir.cli.output import to_jsonable

    def show(report: Any) -> None:
        if app.as_json:
            sys.stdout.write(json.dumps(to_jsonable(report), ensure_ascii=False) + "\n")
        elif report.sent or report.pulled or report.conflicts or report.proposals:
            sys.stdout.write("\n".join(report.lines()) + "\n")
        sys.stdout.flush()

    def error(problem: MemdirError) -> None:
        fail(False, problem)

    with contextlib.suppress(KeyboardInterrupt):
        watch(client, directory, reason=reason, session=session, settle_ms=settle,
              on_sync=show, on_error=error)  # fmt: skip
