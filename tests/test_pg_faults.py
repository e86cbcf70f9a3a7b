"""PostgreSQL faults: the server restarts or drops connections under memdir, memdir recovers.

- Connections killed by the server (``pg_terminate_backend``, what a restart does to every
  session): the next read of a file answers, through the service and through REST — the hot
  read path's per-thread connection is discarded and the statement run once more.
- The acceptance run: two `memdir serve` over one cluster, 16 SDK clients reading and
  compare-and-swapping counters, and PostgreSQL stopped (``fast``, then ``immediate``) and
  started again in the middle. While it is down ``/readyz`` says so on both servers (503 with
  the reason) and ``/healthz`` stays 200; within 5 s of PostgreSQL accepting connections every
  file read answers 200 on both servers; the SDK's retries bridge the outage (no client sees
  an error) and no acknowledged write is lost (each counter equals its acknowledged updates,
  revisions gap-free).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import psycopg
import pytest

import memdir
from memdir import OWNER, MemoryService
from test_api import auth, make_env
from test_api_live import ServeProcess

pytestmark = pytest.mark.postgres

COUNTERS = 4
CLIENTS = 16
RECOVERY_S = 5.0


def _terminate_other_sessions(url: str) -> int:
    """Kill every other session on ``url``'s database, as a server restart does."""
    from postgres_cluster import _psycopg_conninfo

    with psycopg.connect(_psycopg_conninfo(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def pg_svc(postgres_admin_url: str) -> Iterator[tuple[MemoryService, str]]:
    from postgres_cluster import create_database

    url = create_database(postgres_admin_url, "memdir_pg_faults")
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, "default")
    try:
        yield svc, url
    finally:
        svc.db.close()


def test_reads_recover_from_connections_the_server_killed(
    pg_svc: tuple[MemoryService, str],
) -> None:
    svc, url = pg_svc
    svc.write(OWNER, "default", "/org/a.md", "alpha\n", if_absent=True)
    readers = 4  # several threads, each with its own hot-path connection

    def read_in_threads() -> list[str]:
        found: list[str] = []
        errors: list[BaseException] = []

        def one() -> None:
            try:
                found.append(svc.read(OWNER, "default", "/org/a.md").content)
            except BaseException as exc:  # reported below
                errors.append(exc)

        threads = [threading.Thread(target=one) for _ in range(readers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        return found

    assert read_in_threads() == ["alpha\n"] * readers
    assert svc.read(OWNER, "default", "/org/a.md").content == "alpha\n"
    assert _terminate_other_sessions(url) >= 1
    assert svc.read(OWNER, "default", "/org/a.md").content == "alpha\n"  # this thread's
    assert read_in_threads() == ["alpha\n"] * readers  # fresh threads, fresh connections
    # the pool recovers too (pool_pre_ping), and so does a write
    current = svc.read(OWNER, "default", "/org/a.md").sha256
    svc.write(OWNER, "default", "/org/a.md", "beta\n", if_match=current)
    assert svc.read(OWNER, "default", "/org/a.md").content == "beta\n"


@pytest.mark.anyio
async def test_rest_reads_recover_from_connections_the_server_killed(
    pg_svc: tuple[MemoryService, str],
) -> None:
    svc, url = pg_svc
    env = make_env(svc)
    transport = httpx2.ASGITransport(app=env.app)
    file_url = "/v1/stores/default/files/org/r.md"
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
        created = await client.put(file_url, content="rest\n", headers=auth(env.admin))
        assert created.status_code == 201
        for _ in range(8):  # spread over the thread pool's threads
            assert (await client.get(file_url, headers=auth(env.admin))).status_code == 200
        assert _terminate_other_sessions(url) >= 1
        statuses = [
            (await client.get(file_url, headers=auth(env.admin))).status_code for _ in range(16)
        ]
        assert statuses == [200] * 16
        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "ready"


# --- the acceptance run -----------------------------------------------------------------------

# The clients run in a process of their own, so the probes below time the servers, not this
# process's GIL. Each client alternates between the two servers' halves of the fleet: a read of
# one counter, then a read-modify-CAS update of another; it prints one line per acknowledged
# update and, once stdin closes, a JSON summary (per-counter acknowledgements, errors).
CLIENTS_SCRIPT = textwrap.dedent(
    """
    import json, sys, threading
    import memdir

    urls, token = sys.argv[1].split(","), sys.argv[2]
    counters, clients = int(sys.argv[3]), int(sys.argv[4])
    stop = threading.Event()
    acks = [0] * counters
    lock = threading.Lock()
    errors = []

    def client(index):
        path = f"/org/c{index % counters}.md"
        try:
            with memdir.Client(urls[index % len(urls)], token, max_retries=7) as sdk:
                while not stop.is_set():
                    sdk.read(f"/org/c{(index + 1) % counters}.md")
                    sdk.update(path, lambda text: str(int(text) + 1), max_attempts=500)
                    with lock:
                        acks[index % counters] += 1
                        print("ack", flush=True)
        except BaseException as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    sys.stdin.read()
    stop.set()
    for thread in threads:
        thread.join()
    print(json.dumps({"acks": acks, "errors": errors}), flush=True)
    """
)


def _get(client: httpx2.Client, url: str) -> httpx2.Response | None:
    """One request without retries; None when the server cannot be reached."""
    try:
        return client.get(url)
    except httpx2.TransportError:
        return None


def _accepting(conninfo: str) -> bool:
    try:
        with psycopg.connect(conninfo, connect_timeout=2):
            return True
    except psycopg.OperationalError:
        return False


class Fleet:
    """The clients' process and a count of the updates it acknowledged so far."""

    def __init__(self, urls: list[str], token: str, script: Path) -> None:
        argv = [sys.executable, str(script), ",".join(urls), token, str(COUNTERS), str(CLIENTS)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.acknowledged = 0
        self.summary: dict[str, list[object]] | None = None
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.strip() == "ack":
                self.acknowledged += 1
            elif line.startswith("{"):
                self.summary = json.loads(line)

    def progress(self, more: int) -> None:
        goal = self.acknowledged + more
        deadline = time.monotonic() + 30
        while self.acknowledged < goal:
            assert self.proc.poll() is None, self.stderr()
            assert time.monotonic() < deadline, f"stuck at {self.acknowledged} updates"
            time.sleep(0.05)

    def finish(self) -> dict[str, list[object]]:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(60)
        self.reader.join(10)
        assert self.summary is not None, self.stderr()
        return self.summary

    def stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        assert self.proc.stderr is not None
        return self.proc.stderr.read()


def test_two_servers_ride_out_postgres_restarts(tmp_path: Path) -> None:
    from postgres_cluster import Cluster, ClusterError, _psycopg_conninfo, create_database, is_ci

    try:
        cluster = Cluster()
        cluster.start()
    except ClusterError as exc:
        if is_ci():
            pytest.fail(f"CI=true: could not start a PostgreSQL cluster: {exc}", pytrace=False)
        pytest.skip(f"no throwaway PostgreSQL cluster: {exc}")
    servers: list[ServeProcess] = []
    fleet: Fleet | None = None
    probe = httpx2.Client(timeout=10)
    try:
        db = create_database(cluster.url, "memdir_restarts")
        conninfo = _psycopg_conninfo(db)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            # the suite's clusters trade durability for speed; an immediate stop must not lose
            # commits that were acknowledged, so this database commits synchronously
            conn.execute("ALTER DATABASE memdir_restarts SET synchronous_commit = on")
        servers += [ServeProcess(db, tmp_path), ServeProcess(db, tmp_path)]  # started together
        for server in servers:
            server.wait_healthy(timeout=120)
        (admin_token,) = [t for s in servers for t in s.tokens()]
        with memdir.Client(servers[0].url, admin_token) as admin:
            for index in range(COUNTERS):
                admin.write(f"/org/c{index}.md", "0", if_absent=True)
        probe.headers.update(auth(admin_token))
        script = tmp_path / "clients.py"
        script.write_text(CLIENTS_SCRIPT)
        fleet = Fleet([s.url for s in servers], admin_token, script)

        fleet.progress(30)
        for mode in ("fast", "immediate"):
            cluster.stop_server(mode)
            # --- the outage: readiness says so on both servers, liveness does not ----------
            down_until = time.monotonic() + 1.5
            reported = [False, False]
            while time.monotonic() < down_until:
                for i, server in enumerate(servers):
                    began = time.monotonic()
                    ready = _get(probe, f"{server.url}/readyz")
                    assert ready is not None and time.monotonic() - began < 4.0
                    if ready.status_code == 503:
                        body = ready.json()
                        assert body["status"] == "unavailable", body
                        assert body["error"]["type"] == "backend_error", body
                        assert "database" in body["error"]["message"], body
                        reported[i] = True
                    healthy = _get(probe, f"{server.url}/healthz")
                    assert healthy is not None and healthy.status_code == 200
                time.sleep(0.1)
            assert reported == [True, True], mode
            cluster.start_server()
            assert _accepting(conninfo)
            accepted = time.monotonic()
            # --- recovery: reads answer within 5 s on both servers, on every thread ---------
            for server in servers:
                file_url = f"{server.url}/v1/stores/default/files/org/c0.md"
                while (answer := _get(probe, file_url)) is None or answer.status_code != 200:
                    assert time.monotonic() - accepted < RECOVERY_S, (mode, answer and answer.text)
                    time.sleep(0.05)
                with ThreadPoolExecutor(16) as pool:  # at once: many of the server's threads
                    later = list(pool.map(_get, [probe] * 48, [file_url] * 48))
                assert [r and r.status_code for r in later] == [200] * 48, mode
                ready = _get(probe, f"{server.url}/readyz")
                assert ready is not None and ready.status_code == 200
                assert ready.json()["status"] == "ready"
            fleet.progress(30)  # the run goes on
        summary = fleet.finish()
        assert summary["errors"] == []  # the SDK's retries bridged both outages
        acks = summary["acks"]
        assert sum(int(str(a)) for a in acks) == fleet.acknowledged

        svc = memdir.open(db)
        try:
            for index in range(COUNTERS):
                path = f"/org/c{index}.md"
                assert svc.read(OWNER, "default", path).content == str(acks[index]), path
                versions = svc.file_history(OWNER, "default", path)
                assert [v.operation for v in versions].count("modified") == acks[index]
            revisions = sorted(c.revision for c in svc.history(OWNER, "default", limit=10_000))
            assert revisions == list(range(1, len(revisions) + 1))
        finally:
            svc.db.close()
    finally:
        probe.close()
        if fleet is not None and fleet.proc.poll() is None:
            fleet.proc.kill()
            fleet.proc.wait()
        for server in servers:
            server.stop()
        cluster.stop()
