"""Shared fixtures: one fresh database per test, on every backend.

``backend`` is parametrised over ``sqlite`` (a file in ``tmp_path``) and ``postgres`` (a fresh
database on a session-scoped server), so every test that asks for it — directly or through
``svc`` — runs on both. The PostgreSQL server is only started when a postgres test runs:

* ``MEMDIR_TEST_POSTGRES_URL`` set: that server is used (fresh databases are dropped after
  each test);
* otherwise a throwaway cluster from :mod:`postgres_cluster` is started once per session (per
  xdist worker);
* when PostgreSQL cannot be started the postgres tests are skipped with the reason — except
  under ``CI=true``, where they fail.

Deselect the PostgreSQL runs with ``-m "not postgres"``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import NoReturn

import pytest

import memdir
from memdir import OWNER, MemoryService

STORE = "default"

BACKENDS = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
]


def _unavailable(reason: str) -> NoReturn:
    from postgres_cluster import ENV_URL, is_ci

    if is_ci():
        pytest.fail(f"CI=true: PostgreSQL tests must run, but {reason}", pytrace=False)
    pytest.skip(
        f"PostgreSQL unavailable: {reason}; install the 'postgresql' server package or set "
        f"{ENV_URL} (under CI=true this is a failure)"
    )


@pytest.fixture(scope="session")
def postgres_admin_url() -> Iterator[str]:
    """URL of a database on a running PostgreSQL server that may create databases."""
    from postgres_cluster import ENV_URL, Cluster, ClusterError, find_pg_bin

    external = os.environ.get(ENV_URL)
    if external:
        yield external
        return
    pg_bin = find_pg_bin()
    if pg_bin is None:
        _unavailable(
            "the server binaries (initdb, pg_ctl, postgres) are not on PATH or in "
            "/usr/lib/postgresql/*/bin"
        )
    try:
        cluster = Cluster(pg_bin)
        cluster.start()
    except ClusterError as exc:
        _unavailable(f"a throwaway cluster could not be started: {exc}")
    try:
        yield cluster.url
    finally:
        cluster.stop()


def _drop_database(admin_url: str, name: str) -> None:
    import psycopg
    from psycopg import sql
    from sqlalchemy.engine import make_url

    admin = make_url(admin_url).set(drivername="postgresql")
    with psycopg.connect(admin.render_as_string(hide_password=False), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database URL for a fresh, empty database (not yet migrated)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'memdir.db'}"
        return
    from postgres_cluster import ENV_URL, create_database

    admin_url: str = request.getfixturevalue("postgres_admin_url")
    name = f"memdir_t_{uuid.uuid4().hex[:16]}"
    url = create_database(admin_url, name)
    yield url
    if os.environ.get(ENV_URL):  # a throwaway cluster is removed whole at the end
        _drop_database(admin_url, name)


@pytest.fixture
def svc(backend: str) -> Iterator[MemoryService]:
    """The service over a freshly created database holding the empty store ``default``."""
    service = memdir.open(backend, create=True)
    service.create_store(OWNER, STORE)
    try:
        yield service
    finally:
        service.db.close()
