"""Liveness and readiness probes: ``/healthz`` never touches the database, ``/readyz`` says
whether the database can serve — and says it within ``READY_TIMEOUT_S`` even when the database
does not answer. (PostgreSQL outages: tests/test_pg_faults.py.)"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

import memdir
from memdir import OWNER, MemoryService
from memdir.api import create_app
from memdir.api.app import READY_TIMEOUT_S
from memdir.api.settings import ApiSettings
from memdir.settings import Settings
from memdir.storage.schema import HEAD_REVISION

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_file(tmp_path: Path) -> Path:
    return tmp_path / "memdir.db"


@pytest.fixture
def sqlite_svc(db_file: Path) -> MemoryService:
    svc = memdir.open(f"sqlite:///{db_file}", create=True)
    svc.create_store(OWNER, "default")
    return svc


@pytest.fixture
async def client(sqlite_svc: MemoryService) -> AsyncIterator[httpx2.AsyncClient]:
    # a rate of 0.1/s: the probes must never be limited (ten of them below in well under 10 s)
    app = create_app(Settings(), sqlite_svc, api_settings=ApiSettings(rate=0.1, burst=1))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as c:
        yield c
    sqlite_svc.db.close()


async def test_ready_when_the_database_answers_with_the_current_schema(
    client: httpx2.AsyncClient,
) -> None:
    for _ in range(5):
        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {
            "status": "ready",
            "version": memdir.__version__,
            "schema": HEAD_REVISION,
        }
        healthy = await client.get("/healthz")
        assert healthy.json() == {"status": "ok", "version": memdir.__version__}


async def test_a_schema_behind_is_not_ready_and_says_to_migrate(
    client: httpx2.AsyncClient, db_file: Path
) -> None:
    raw = sqlite3.connect(db_file)
    with raw:
        raw.execute("UPDATE alembic_version SET version_num = 'older'")
    raw.close()
    ready = await client.get("/readyz")
    assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
    body = ready.json()
    assert body["status"] == "unavailable"
    assert body["error"]["type"] == "backend_error"
    assert "memdir migrate" in body["error"]["message"]
    assert str(db_file) not in ready.text and "older" not in ready.text  # nothing internal
    assert (await client.get("/healthz")).status_code == 200  # alive all the same


async def test_a_database_that_does_not_answer_is_reported_in_bounded_time(
    client: httpx2.AsyncClient, sqlite_svc: MemoryService, db_file: Path
) -> None:
    # Another process holds the file in exclusive locking mode: a new connection of memdir's
    # waits in SQLite's busy handler (60 s) — the database is there but does not answer.
    # (memdir's connections are closed first: WAL mode allows no exclusive lock beside them;
    # its engine opens new ones on the next use.)
    sqlite_svc.db.close()
    holder = sqlite3.connect(db_file, isolation_level=None)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")
    holder.execute("UPDATE stores SET revision = revision")
    try:
        began = time.monotonic()
        ready = await client.get("/readyz")
        took = time.monotonic() - began
        assert ready.status_code == 503, ready.text
        assert READY_TIMEOUT_S - 0.5 <= took < READY_TIMEOUT_S + 2
        message = ready.json()["error"]["message"]
        assert f"did not answer within {READY_TIMEOUT_S:g} s" in message
        assert str(db_file) not in ready.text  # the unauthenticated caller learns no address
        assert (await client.get("/healthz")).status_code == 200
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert (await client.get("/readyz")).status_code == 200  # and ready again once released
