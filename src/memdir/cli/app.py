"""The CLI's composition root and the decorators every verb shares.

Global options (``--db``, ``--store``, ``--as``) go before the verb and build one :class:`App`
per invocation; the service is opened lazily, on first use, so ``--help`` and usage errors
never touch a database. Each verb is a thin shell: parse, call the service, print.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memdir.cli.output import fail
from memdir.core.errors import MemdirError

if TYPE_CHECKING:
    from memdir.core.model import Principal, Provenance
    from memdir.service import MemoryService
    from memdir.settings import Settings

__all__ = ["App", "pass_app", "provenance_options", "read_content", "verb"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class App:
    """Per-invocation state: settings, who acts, output mode, the service.

    The acting principal is resolved on first use: ``--as ID`` names a registered principal
    (the local CLI has direct database access, so it may act as anyone); otherwise a token in
    ``MEMDIR_TOKEN`` authenticates one; otherwise the CLI acts as the database owner.
    """

    settings: Settings
    as_principal: str | None = None
    as_json: bool = False
    _service: MemoryService | None = field(default=None, repr=False)
    _principal: Principal | None = field(default=None, repr=False)

    @property
    def store(self) -> str:
        return self.settings.store

    @property
    def principal(self) -> Principal:
        if self._principal is None:
            from memdir.core.model import OWNER

            if self.as_principal is not None and self.settings.token:
                from memdir.core.errors import InvalidInput

                raise InvalidInput("give either --as or MEMDIR_TOKEN, not both")
            if self.as_principal is not None:
                self._principal = self.service().resolve(self.as_principal)
            elif self.settings.token:
                self._principal = self.service().authenticate(self.settings.token)
            else:
                self._principal = OWNER
        return self._principal

    def service(self, *, create: bool = False) -> MemoryService:
        """Open the database (creating and migrating it when ``create``) and the service."""
        if self._service is None or create:
            from memdir.service import MemoryService
            from memdir.storage.database import Database

            database = Database(self.settings.db, create=create, pool_size=self.settings.pool_size)
            self._service = MemoryService(database, **self.settings.service_limits())
        return self._service

    def close(self) -> None:
        if self._service is not None:
            self._service.close()


pass_app = click.make_pass_decorator(App)


def verb(group: click.Group, name: str | None = None, **kwargs: Any) -> Callable[[F], F]:
    """Register a verb on ``group`` with ``--json`` and the error → exit-code mapping."""

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, as_json: bool, **params: Any) -> None:
            app = click.get_current_context().find_object(App)
            assert app is not None
            app.as_json = as_json
            try:
                func(app, *args, **params)
            except MemdirError as error:
                sys.exit(fail(as_json, error))
            except BrokenPipeError:  # `memdir ls | head`
                sys.stderr.close()
            finally:
                app.close()

        run = click.option(
            "--json", "as_json", is_flag=True, help="Print one JSON document on stdout."
        )(run)
        group.command(name, **kwargs)(run)
        return func

    return decorate


def provenance_options(func: F) -> F:
    """Options every mutating verb takes: provenance and the idempotency key."""
    options = [
        click.option("--session", help="The agent session this change comes from."),
        click.option("--transcript", help="A reference to the session transcript."),
        click.option("--reason", help="Why this change is made (kept in history)."),
        click.option(
            "--source-kind",
            type=click.Choice(["user-stated", "tool-result", "agent-inferred", "dream", "import"]),
            help="Where the knowledge comes from.",
        ),
        click.option(
            "--idempotency-key",
            help="Retry-safe key: repeating it returns the first attempt's result.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def make_provenance(params: dict[str, Any]) -> Provenance:
    """Pop the provenance options out of a verb's parameters."""
    from memdir.core.model import Provenance

    return Provenance(
        session=params.pop("session"),
        transcript=params.pop("transcript"),
        reason=params.pop("reason"),
        source_kind=params.pop("source_kind"),
        idempotency_key=params.pop("idempotency_key"),
    )


def read_content(file: str | None) -> str:
    """Content from ``--file`` (``-`` or None: standard input), strictly UTF-8."""
    from memdir.core.content import decode_content

    if file is None or file == "-":
        return decode_content(sys.stdin.buffer.read(), source="standard input")
    try:
        with open(file, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        from memdir.core.errors import InvalidInput

        raise InvalidInput(f"cannot read {file}: {exc.strerror}", file=file) from None
    return decode_content(data, source=file)
