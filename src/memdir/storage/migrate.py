"""Alembic migrations, run programmatically under a lock.

One migration history serves both dialects (``memdir/storage/migrations``). ``upgrade`` runs
inside one transaction that first takes a lock — ``BEGIN IMMEDIATE`` on SQLite (whose DDL is
transactional), a transaction-scoped advisory lock on PostgreSQL — so two processes starting
together cannot both migrate: the second waits, then finds the schema at head and does nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

    from memdir.storage.database import Database

__all__ = ["MIGRATION_LOCK_ID", "alembic_config", "check", "upgrade"]

#: The PostgreSQL advisory lock key held while migrating ("memdir" in ASCII).
MIGRATION_LOCK_ID = 0x6D656D646972

_SCRIPTS = Path(__file__).with_name("migrations")


def alembic_config(connection: Connection) -> Config:
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_SCRIPTS))
    config.attributes["connection"] = connection
    return config


def _lock(connection: Connection) -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_ID}
        )


def upgrade(database: Database, revision: str = "head") -> None:
    """Upgrade the schema to ``revision`` (default: head) under the migration lock."""
    from alembic import command

    with database.engine.connect().execution_options(memdir_write=True) as conn, conn.begin():
        _lock(conn)
        command.upgrade(alembic_config(conn), revision)


def check(database: Database) -> None:
    """Raise if the models and the migrated schema disagree (``alembic check``)."""
    from alembic import command

    with database.engine.connect() as conn, conn.begin():
        command.check(alembic_config(conn))
