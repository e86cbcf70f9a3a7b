"""``memdir``: the command-line surface.

Global options go before the verb: ``memdir [--db URL] [--store NAME] [--as PRINCIPAL] VERB``.
Every verb takes ``--json``. See ``docs/cli.md`` (generated from this code) for the reference.

Start-up is part of every call an agent makes, so a verb loads only what it needs: the root
group knows each verb's module by name (:data:`VERBS`) and imports it when the verb is
invoked (or listed, by ``--help``); the verb modules import the service, SQLAlchemy and the
dream engine inside their functions. ``memdir read`` never imports ``memdir serve``'s server.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import MutableMapping

import click

from memdir.cli.app import App
from memdir.cli.output import fail
from memdir.core.errors import MemdirError

__all__ = ["VERBS", "LazyGroup", "cli", "main"]

#: Every top-level verb (or verb group) and the module under ``memdir.cli`` that registers it
#: on :data:`cli` when imported (``tests/test_cli.py`` checks that the two agree).
VERBS: dict[str, str] = {
    "init": "admin", "migrate": "admin", "store": "admin", "backup": "admin",
    "export": "admin", "import": "admin",
    "ls": "browse", "glob": "browse", "grep": "browse", "search": "browse",
    "context": "context", "stale": "context",
    "checkout": "directory", "sync": "directory",
    "dream": "dream",
    "read": "files", "write": "files", "edit": "files", "insert": "files", "rm": "files",
    "mv": "files", "commit": "files",
    "principal": "governance", "token": "governance", "policy": "governance",
    "purge": "governance",
    "mcp": "mcp_cmd",
    "log": "past", "diff": "past", "revert": "past", "redact": "past",
    "propose": "review", "proposals": "review",
    "serve": "serve",
    "transcripts": "transcripts",
}  # fmt: skip


class LazyGroup(click.Group):
    """A group whose verbs register themselves when their module is first imported.

    ``get_command`` imports the one module a verb lives in; ``list_commands`` names every
    verb without importing any, so usage errors and dispatch cost one module import.
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(VERBS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        module = VERBS.get(cmd_name)
        if cmd_name not in self.commands and module is not None:
            importlib.import_module(f"memdir.cli.{module}")
        return self.commands.get(cmd_name)

    def load_all(self) -> MutableMapping[str, click.Command]:
        """Import every verb module; returns :attr:`commands`, now complete."""
        for module in sorted(set(VERBS.values())):
            importlib.import_module(f"memdir.cli.{module}")
        return self.commands


@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
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


def main() -> None:
    """Console entry point."""
    cli(prog_name="memdir")
