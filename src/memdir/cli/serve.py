"""``memdir serve``: run the HTTP server (REST under /v1, /healthz, /readyz, /metrics) with uvicorn.

Before serving, the database is created and migrated if missing, the store is created, and on
the first start of a database that has no member of the ``admins`` group, the principal
``user:admin`` is registered in that group and a token is created for it and printed once on
stderr (only its hash is kept), as a notebook server does. Concurrent first starts cannot
create two: registering the principal checks and inserts in one write transaction, so the
second start is refused with a conflict, and only the start that registered it creates a token.

uvicorn loads the app by its import string, ``memdir.server:app_from_env``, in each worker: the
settings travel to the workers as ``MEMDIR_*`` environment variables.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

import click

from memdir.cli.app import App, verb
from memdir.cli.main import cli
from memdir.core.errors import Conflict, InvalidInput

if TYPE_CHECKING:
    from memdir.principals import TokenInfo
    from memdir.service import MemoryService
    from memdir.settings import Settings

ADMIN = "user:admin"
APP_FACTORY = "memdir.server:app_from_env"


def bootstrap_admin(svc: MemoryService) -> TokenInfo | None:
    """On a database without admins, register ``user:admin`` and return its new token."""
    import sqlalchemy.exc

    from memdir.core.model import OWNER

    if any("admins" in p.groups for p in svc.list_principals(OWNER)):
        return None
    try:
        svc.add_principal(OWNER, ADMIN, groups=("admins",))
    except (Conflict, sqlalchemy.exc.IntegrityError):
        # Another start registered it first (PostgreSQL reports that race as a unique-key
        # violation rather than the service's Conflict); that start prints the token.
        return None
    return svc.create_token(OWNER, ADMIN, name="first start of memdir serve")


def _ensure_store(svc: MemoryService, store: str) -> None:
    import sqlalchemy.exc

    from memdir.core.model import OWNER

    with contextlib.suppress(Conflict, sqlalchemy.exc.IntegrityError):
        svc.create_store(OWNER, store, exist_ok=True)  # a concurrent first start may win


def _export(settings: Settings) -> None:
    """Hand the settings to uvicorn's workers (which build the app from the environment)."""
    os.environ["MEMDIR_DB"] = settings.db
    os.environ["MEMDIR_STORE"] = settings.store
    os.environ["MEMDIR_MAX_FILE_BYTES"] = str(settings.max_file_bytes)
    os.environ["MEMDIR_POOL_SIZE"] = str(settings.pool_size)


@verb(cli, "serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=int, default=8420, show_default=True, help="Port to bind.")
@click.option("--workers", type=int, default=1, show_default=True, help="Server processes.")
@click.option("--access-log", is_flag=True, help="Log every request (off: faster).")
def serve(app: App, host: str, port: int, workers: int, access_log: bool) -> None:
    """Serve memdir over HTTP: REST under /v1 (bearer tokens), /healthz, /readyz, /metrics.

    Creates and migrates the database and the store when missing. On the first start of a
    database without admins it registers user:admin in group admins and prints its token
    once on stderr. Rate limits: MEMDIR_RATE_LIMIT (RATE/BURST per token, or off) and
    MEMDIR_AUTH_FAILURE_LIMIT (failed authentications per client address); proxy headers
    count only from MEMDIR_TRUSTED_PROXIES.
    """
    import uvicorn

    if workers < 1 or not 0 <= port <= 65535:
        raise InvalidInput(f"--workers must be >= 1 and --port 0-65535, received {workers}, {port}")
    svc = app.service(create=True)
    _ensure_store(svc, app.store)
    token = bootstrap_admin(svc)
    if token is not None:
        sys.stderr.write(
            f"memdir: first start: registered {ADMIN} in group admins; its token (shown once, "
            f"only its hash is kept — store it now):\n\n    {token.token}\n\n"
        )
    sys.stderr.write(
        f"memdir: serving http://{host}:{port} (REST /v1, OpenAPI /docs) on "
        f"{svc.db.display_url}, store {app.store!r}\n"
    )
    sys.stderr.flush()
    app.close()
    _export(app.settings)
    uvicorn.run(
        APP_FACTORY, factory=True, host=host, port=port, workers=workers,
        access_log=access_log, timeout_graceful_shutdown=5, log_level="warning",
        proxy_headers=False,  # the app honours them from MEMDIR_TRUSTED_PROXIES only
    )  # fmt: skip
