"""The REST surface over real sockets: Server-Sent Events through uvicorn on every backend, and
`memdir serve` as a process (first-start admin, once even when two servers start together)."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn

import memdir
from memdir import OWNER, MemoryService
from memdir.api.settings import ApiSettings
from test_api import Env, auth, make_env

TOKEN_LINE = re.compile(r"^\s+(mdr_\S+)\s*$")


class ThreadedServer:
    """uvicorn serving an app on a free 127.0.0.1 port, in a thread of the test process."""

    def __init__(self, app: Any) -> None:
        config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.01)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def live(svc: MemoryService) -> Iterator[tuple[Env, str]]:
    env = make_env(svc)
    with ThreadedServer(env.app) as url:
        yield env, url


def _events(lines: Iterator[str], count: int) -> list[dict[str, Any]]:
    """Read ``count`` SSE events (id, event, data) from a stream's lines."""
    out: list[dict[str, Any]] = []
    event: dict[str, Any] = {}
    for line in lines:
        if line.startswith(("id:", "event:", "data:")):
            key, _, value = line.partition(":")
            event[key] = value.strip()
        elif line == "" and event:
            if "data" in event:
                event["data"] = json.loads(event["data"])
            out.append(event)
            event = {}
            if len(out) == count:
                return out
    raise AssertionError(f"the stream ended after {len(out)} events")


def test_sse_stream_follows_the_feed_with_read_rights_and_resumes(
    live: tuple[Env, str],
) -> None:
    env, url = live
    a = auth(env.admin)
    feed = f"{url}/v1/stores/default/changes/stream"
    with httpx2.Client(timeout=10) as client:
        client.put(f"{url}/v1/stores/default/files/projects/acme/one.md", content="1", headers=a)
        with client.stream("GET", f"{feed}?after=0", headers=auth(env.bot)) as stream:
            assert stream.status_code == 200
            assert stream.headers["content-type"].startswith("text/event-stream")
            lines = stream.iter_lines()
            first = _events(lines, 1)[0]
            assert (first["id"], first["event"]) == ("1", "commit")
            assert first["data"]["changes"][0]["path"] == "/projects/acme/one.md"
            for path in ("projects/zeta/hidden.md", "projects/acme/two.md"):
                client.put(f"{url}/v1/stores/default/files/{path}", content="x", headers=a)
            second = _events(lines, 1)[0]  # the zeta commit (revision 2) is never sent
            assert second["id"] == "3"
            assert second["data"]["changes"][0]["path"] == "/projects/acme/two.md"
        resume = {**auth(env.admin), "Last-Event-ID": "1"}
        with client.stream("GET", feed, headers=resume) as stream:
            assert [e["id"] for e in _events(stream.iter_lines(), 2)] == ["2", "3"]
        missing = client.get(f"{url}/v1/stores/nope/changes/stream", headers=a)
        assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found"


def test_sse_stream_ends_when_its_token_is_revoked(svc: MemoryService) -> None:
    env = make_env(svc, ApiSettings(rate=None, token_cache_seconds=0.2))
    info = svc.create_token(OWNER, "agent:bot")
    with ThreadedServer(env.app) as url, httpx2.Client(timeout=10) as client:
        feed = f"{url}/v1/stores/default/changes/stream"
        with client.stream("GET", feed, headers=auth(info.token or "")) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "retry: 1000"
            svc.revoke_token(OWNER, info.id)
            (event,) = _events(lines, 1)
            assert event["event"] == "error"
            assert event["data"]["error"]["type"] == "unauthenticated"


# --- memdir serve ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServeProcess:
    """`memdir --db URL serve --port P` with its stderr collected in the background."""

    def __init__(self, db: str, cwd: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "MEMDIR_RATE_LIMIT": "off"}
        env.pop("MEMDIR_TOKEN", None)
        command = [
            sys.executable,
            "-m",
            "memdir.cli",
            "--db",
            db,
            "serve",
            "--port",
            str(self.port),
        ]
        self.proc = subprocess.Popen(
            command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._collect, daemon=True)
        self.reader.start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait_healthy(self, timeout: float = 180) -> None:
        # A slow start on a loaded machine is not a failure; a crash is seen at once (poll).
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "".join(self.stderr)
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx2.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("memdir serve did not become healthy:\n" + "".join(self.stderr))

    def tokens(self) -> list[str]:
        return [m.group(1) for line in self.stderr if (m := TOKEN_LINE.match(line))]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)


def test_memdir_serve_creates_the_database_and_prints_an_admin_token(
    tmp_path: Path,
) -> None:
    db = f"sqlite:///{tmp_path / 'new' / 'memdir.db'}"
    server = ServeProcess(db, tmp_path)
    try:
        server.wait_healthy()
        (token,) = server.tokens()
        assert any("serving http://127.0.0.1:" in line for line in server.stderr)
        files = f"{server.url}/v1/stores/default/files/org/live.md"
        with httpx2.Client(headers=auth(token), timeout=10) as client:
            created = client.put(files, content="live\n")
            assert created.status_code == 201
            etag = created.headers["etag"]
            assert client.get(files).text == "live\n"
            stale = client.put(files, content="x", headers={"If-Match": '"' + "0" * 64 + '"'})
            assert (
                stale.status_code == 412 and f'"{stale.json()["error"]["current_sha256"]}"' == etag
            )
            assert client.get(f"{server.url}/v1/me").json()["groups"] == ["admins"]
            metrics = client.get(f"{server.url}/metrics")
            assert metrics.status_code == 200 and "memdir_cas_conflicts_total" in metrics.text
        assert httpx2.get(files).status_code == 401
    finally:
        server.stop()


def test_two_first_starts_together_create_one_admin(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    servers = [ServeProcess(db, tmp_path) for _ in range(2)]
    try:
        for server in servers:
            server.wait_healthy()
    finally:
        for server in servers:
            server.stop()
    printed = [t for s in servers for t in s.tokens()]
    assert len(printed) == 1, [s.stderr for s in servers]
    svc = memdir.open(db)
    try:
        admins = [p.id for p in svc.list_principals(OWNER) if "admins" in p.groups]
        assert admins == ["user:admin"]
        assert len(svc.list_tokens(OWNER)) == 1
        assert svc.authenticate(printed[0]).id == "user:admin"
    finally:
        svc.db.close()
