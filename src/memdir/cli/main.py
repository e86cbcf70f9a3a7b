"""``memdir``: the command-line surface.

Global options go before the verb: ``memdir [--db URL] [--store NAME] [--as PRINCIPAL] VERB``.
Every verb takes ``--json``. See ``docs/cli.md`` (generated from this code) for the reference.
"""

from __future__ import annotations

import sys

import click

from memdir.cli.app import App
from memdir.cli.output import fail
from memdir.core.errors import MemdirError

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--db",
    metavar="URL",
    help="Database URL [env MEMDIR_DB; default sqlite:///./.memdir/memdir.db].",
)
@click.option(
    "--store", metavar="NAME", help="Store to act on [env MEMDIR_STORE; default 'default']."
)
@click.option(
    "--as",
    "as_principal",
    metavar="PRINCIPAL",
    help="Act as this registered principal (default: the principal of MEMDIR_TOKEN, else "
    "the database owner).",
)
@click.version_option(package_name="memdir", prog_name="memdir")
@click.pass_context
def cli(ctx: click.Context, db: str | None, store: str | None, as_principal: str | None) -> None:
    """memdir: versioned, permissioned memory for fleets of AI agents.

    Memory is a tree of markdown files. Every change is a version with provenance; full
    overwrites need --if-match SHA256 (or --create), so concurrent writers never lose an update.

    \b
    Exit codes: 0 ok, 1 error, 2 usage or invalid input, 3 precondition failed/required,
    4 forbidden, 5 not found, 6 accepted as a proposal, 7 refused by screening.
    """
    from memdir.core.model import Principal
    from memdir.settings import Settings

    try:
        settings = Settings.load({"db": db, "store": store})
        if as_principal is not None:
            Principal.parse(as_principal)
    except MemdirError as error:
        sys.exit(fail(False, error))
    ctx.obj = App(settings=settings, as_principal=as_principal)


def _register() -> None:
    from memdir.cli import (  # noqa: F401  (verbs register on import)
        admin,
        browse,
        context,
        directory,
        dream,
        files,
        governance,
        mcp_cmd,
        past,
        review,
        serve,
        transcripts,
    )


_register()


def main() -> None:
    """Console entry point."""
    cli(prog_name="memdir")
