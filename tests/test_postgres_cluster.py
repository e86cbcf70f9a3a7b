"""The PostgreSQL test infrastructure: throwaway cluster, pg_trgm, isolated databases.

Obeys the suite's rule: with no ``MEMDIR_TEST_POSTGRES_URL`` and no server binaries
these tests skip, except under ``CI=true`` where they fail; a cluster that cannot
start always fails.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine, make_url

from postgres_cluster import (
    DATABASE_NAME,
    ENV_URL,
    Cluster,
    create_database,
    find_pg_bin,
    is_ci,
    postgres_test_url,
)

pytestmark = pytest.mark.postgres


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    yield from postgres_test_url()


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    eng = create_engine(postgres_url)
    yield eng
    eng.dispose()


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:12]}"


def _drop(admin_url: str, name: str) -> None:
    eng = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        eng.dispose()


def _gone(pid: int, timeout: float = 10.0) -> bool:
    """Whether process ``pid`` has exited (a zombie awaiting its reaper counts)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in {"Z", "X"}:
            return True
        time.sleep(0.05)
    return False


def test_find_pg_bin_returns_a_directory_with_the_server_programs() -> None:
    pg_bin = find_pg_bin()
    if pg_bin is None:
        if is_ci() and not os.environ.get(ENV_URL):
            pytest.fail("CI=true but no PostgreSQL server binaries were found")
        pytest.skip("no PostgreSQL server binaries on this machine")
    for program in ("initdb", "pg_ctl", "postgres"):
        assert (pg_bin / program).is_file(), program
        assert os.access(pg_bin / program, os.X_OK), program


def test_select_one(engine: Engine) -> None:
    with engine.connect() as conn:
        assert conn.execute(text("select 1")).scalar_one() == 1


def test_url_uses_the_psycopg_driver(postgres_url: str) -> None:
    assert make_url(postgres_url).drivername == "postgresql+psycopg"


def test_pg_trgm_is_available(engine: Engine) -> None:
    with engine.connect() as conn:
        available = conn.execute(
            text("select count(*) from pg_available_extensions where name = 'pg_trgm'")
        ).scalar_one()
        assert available == 1, "pg_trgm is missing: install PostgreSQL's contrib modules"
        if not os.environ.get(ENV_URL):
            # The throwaway cluster creates the extension in memdir_test.
            assert make_url(str(engine.url)).database == DATABASE_NAME
            installed = conn.execute(
                text("select count(*) from pg_extension where extname = 'pg_trgm'")
            ).scalar_one()
            assert installed == 1


def test_create_database_gives_an_isolated_working_database(postgres_url: str) -> None:
    name_a, name_b = _unique("iso_a"), _unique("iso_b")
    url_a = create_database(postgres_url, name_a)
    url_b = create_database(postgres_url, name_b)
    try:
        assert make_url(url_a).database == name_a
        assert make_url(url_a).drivername == "postgresql+psycopg"
        eng_a, eng_b = create_engine(url_a), create_engine(url_b)
        try:
            with eng_a.begin() as conn:
                conn.execute(text("create extension if not exists pg_trgm"))
                conn.execute(text("create table notes (body text)"))
                conn.execute(text("insert into notes values ('memories of agents')"))
                score = conn.execute(
                    text("select similarity(body, 'memory') from notes")
                ).scalar_one()
                assert score > 0
            with eng_b.connect() as conn:
                assert conn.execute(text("select to_regclass('notes')")).scalar_one() is None
        finally:
            eng_a.dispose()
            eng_b.dispose()
    finally:
        _drop(postgres_url, name_a)
        _drop(postgres_url, name_b)


def test_create_database_recreates_an_existing_database(postgres_url: str) -> None:
    name = _unique("again")
    url = create_database(postgres_url, name)
    try:
        eng = create_engine(url)
        try:
            with eng.begin() as conn:
                conn.execute(text("create table leftover (x int)"))
            # An open connection must not stop the drop (WITH (FORCE)); the drop
            # terminates it, so it is thrown away rather than returned to the pool.
            held = eng.connect()
            held.execute(text("select 1"))
            assert create_database(postgres_url, name) == url
            held.invalidate()
            held.close()
        finally:
            eng.dispose()
        eng = create_engine(url)
        try:
            with eng.connect() as conn:
                assert conn.execute(text("select to_regclass('leftover')")).scalar_one() is None
        finally:
            eng.dispose()
    finally:
        _drop(postgres_url, name)


def test_create_database_refuses_the_admin_database(postgres_url: str) -> None:
    admin_db = make_url(postgres_url).database
    assert admin_db
    with pytest.raises(ValueError):
        create_database(postgres_url, admin_db)


def test_cluster_lifecycle_leaves_nothing_behind() -> None:
    """A second cluster starts beside the session one and is cleaned up on stop."""
    pg_bin = find_pg_bin()
    if pg_bin is None:
        if is_ci():
            pytest.fail("CI=true but no PostgreSQL server binaries were found")
        pytest.skip("no PostgreSQL server binaries on this machine")
    with Cluster(pg_bin) as cluster:
        base = cluster.base_dir
        port = cluster.port
        assert base is not None and port is not None
        assert cluster.startup_seconds is not None
        eng = create_engine(cluster.url)
        try:
            with eng.connect() as conn:
                assert conn.execute(text("select current_user")).scalar_one() == "postgres"
                assert conn.execute(text("show fsync")).scalar_one() == "off"
                assert conn.execute(text("show max_connections")).scalar_one() == "200"
                encoding = conn.execute(text("show server_encoding")).scalar_one()
                assert encoding == "UTF8"
        finally:
            eng.dispose()
        pid = int((base / "data" / "postmaster.pid").read_text().splitlines()[0])
    assert not Path(base).exists()
    assert cluster.base_dir is None
    assert _gone(pid)
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0
