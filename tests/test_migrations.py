"""One migration history for both dialects: models and migrations agree (``alembic check``),
a database created at the first migration upgrades to head with its data, concurrent
migrations are serialised, and an outdated schema is refused with what to do."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
import sqlalchemy as sa
from alembic import command

import memdir
from memdir import OWNER
from memdir.core.errors import BackendError
from memdir.storage.database import Database, normalize_url
from memdir.storage.migrate import alembic_config, check
from memdir.storage.schema import HEAD_REVISION


def _upgrade_raw(url: str, revision: str) -> None:
    engine = sa.create_engine(normalize_url(url))
    try:
        with engine.begin() as conn:
            command.upgrade(alembic_config(conn), revision)
    finally:
        engine.dispose()


def test_models_and_migrations_agree(backend: str) -> None:
    database = Database(backend, create=True)
    try:
        check(database)  # raises when autogenerate would find differences
        assert database.schema_revision() == HEAD_REVISION
    finally:
        database.close()


def test_first_migration_upgrades_to_head_with_data(backend: str) -> None:
    _upgrade_raw(backend, "0001")
    engine = sa.create_engine(normalize_url(backend))
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO stores (name, revision, created_at) VALUES ('old', 0, :t)"),
            {"t": dt.datetime.now(dt.UTC)},
        )
    engine.dispose()
    with pytest.raises(BackendError, match="memdir migrate"):
        Database(backend)
    svc = memdir.open(backend, create=True)  # what `memdir migrate` does
    try:
        assert svc.db.schema_revision() == HEAD_REVISION
        svc.write(OWNER, "old", "/kept.md", "still here", if_absent=True)
        assert svc.read(OWNER, "old", "/kept.md").content == "still here"
        assert svc.grep(OWNER, "old", "still")[0].path == "/kept.md"
    finally:
        svc.db.close()


def test_concurrent_migrations_are_serialised(backend: str) -> None:
    errors: list[BaseException] = []

    def migrate() -> None:
        try:
            Database(backend, create=True).close()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=migrate) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    database = Database(backend)
    assert database.schema_revision() == HEAD_REVISION
    database.close()
