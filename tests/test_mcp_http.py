"""The MCP surface over streamable HTTP: `http_app` under uvicorn on 127.0.0.1, real MCP SDK
client sessions with bearer tokens (the same contract as over stdio, see test_mcp.py)."""

from __future__ import annotations

import random
import re
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.routing import Mount

from memdir import OWNER, MemoryService
from memdir.mcp import http_app
from test_mcp import (
    STORE,
    TOOL_NAMES,
    Call,
    Reference,
    caller,
    check_agent,
    check_contract,
    check_lookups,
    make_db,
    sha_of,
)


@contextmanager
def serve(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread on a free port; yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="auto", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


@dataclass
class Served:
    svc: MemoryService
    url: str  # the MCP endpoint
    tokens: dict[str, str]  # principal id -> bearer token


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    _, svc = make_db(tmp_path)
    tokens = {pid: svc.create_token(OWNER, pid).token or "" for pid in ("agent:bot", "user:ana")}
    try:
        with serve(http_app(svc)) as base:
            yield Served(svc, f"{base}/mcp", tokens)
    finally:
        svc.db.close()


@asynccontextmanager
async def http_session(url: str, token: str, mode: Any = "auto") -> AsyncIterator[Call]:
    headers = {"Authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(
            streamable_http_client(url, http_client=http), read_timeout_seconds=30, mode=mode
        ) as client,
    ):
        yield caller(client)


def test_http_tools_contract_and_lookups(tmp_path: Path) -> None:
    _, svc = make_db(tmp_path, seed=False)  # empty, like the reference's fresh directory
    svc.add_principal(OWNER, "user:ana", groups=("admins",))
    token = svc.create_token(OWNER, "user:ana").token or ""
    reference = Reference(tmp_path / "reference")

    async def main(url: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            tools = await client.list_tools()
            assert {t.name for t in tools.tools} == TOOL_NAMES
            call = caller(client)
            await check_contract(call, reference)
            await check_lookups(call)

    with serve(http_app(svc)) as base:
        anyio.run(main, f"{base}/mcp")
    [version, *_] = svc.file_history(OWNER, STORE, "/projects/acme/deploy.md")
    assert version.actor == "user:ana"  # the bearer token's principal
    svc.db.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28, or the initialize handshake
def test_http_agent_permissions(served: Served, mode: str) -> None:
    async def main() -> None:
        async with http_session(served.url, served.tokens["agent:bot"], mode) as call:
            await check_agent(call)

    anyio.run(main)
    [version] = served.svc.file_history(OWNER, STORE, "/agents/bot/todo.md")
    assert version.actor == "agent:bot"


def test_http_without_a_valid_token_is_401(served: Served) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    for headers in (
        {},
        {"Authorization": "Bearer mdr_not-a-real-token"},
        {"Authorization": "Basic dXNlcjpwdw=="},
    ):
        response = httpx2.post(served.url, json=body, headers={**accept, **headers}, timeout=10)
        assert response.status_code == 401, headers
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["error"]["type"] == "unauthenticated"

    async def connect() -> None:
        async with http_session(served.url, "mdr_not-a-real-token") as call:
            await call("view", path="/")

    assert_mcp_error(connect)

    # a revoked token stops working at once, mid-session
    info = served.svc.create_token(OWNER, "agent:bot")

    async def revoked() -> None:
        async with http_session(served.url, info.token or "") as call:
            _, error = await call("view", path="/org/rules.md")
            assert not error
            served.svc.revoke_token(OWNER, info.id)
            await call("view", path="/org/rules.md")

    assert_mcp_error(revoked)


def assert_mcp_error(func: Callable[[], Awaitable[None]]) -> None:
    """Running ``func`` fails with the SDK's MCPError (how its client reports an HTTP 401)."""
    with pytest.raises(BaseException) as raised:
        anyio.run(func)
    errors: list[BaseException] = [raised.value]
    while isinstance(errors[-1], BaseExceptionGroup):
        errors.append(errors[-1].exceptions[0])
    assert isinstance(errors[-1], MCPError), repr(raised.value)


def test_http_app_mounted_in_a_parent_app(tmp_path: Path) -> None:
    """Mounted at /mcp without lifespan wiring: the session manager starts on first use."""
    _, svc = make_db(tmp_path)
    token = svc.create_token(OWNER, "user:ana").token or ""
    parent = Starlette(routes=[Mount("/mcp", app=http_app(svc))])

    async def main(url: str) -> None:
        async with http_session(url, token) as call:
            text, error = await call("view", path="/org/rules.md")
            assert not error and "be kind" in text

    with serve(parent) as base:
        anyio.run(main, f"{base}/mcp/")
        anyio.run(main, f"{base}/mcp")  # redirected to /mcp/ by the parent (same origin)
    svc.db.close()


def test_http_concurrent_increments_lose_no_update(served: Served) -> None:
    """8 MCP sessions each add 1 to one counter 25 times with view + str_replace + if_match."""
    sessions, increments = 8, 25
    served.svc.write(OWNER, STORE, "/projects/acme/counter.md", "count: 0\n", if_absent=True)
    retries = 0

    async def worker() -> None:
        nonlocal retries
        async with http_session(served.url, served.tokens["agent:bot"]) as call:
            done = 0
            while done < increments:
                text, error = await call("view", path="/projects/acme/counter.md")
                assert not error, text
                found = re.search(r"^\s+1\tcount: (\d+)$", text, flags=re.M)
                assert found, text
                count = int(found.group(1))
                text, error = await call(
                    "str_replace",
                    path="/projects/acme/counter.md",
                    old_str=f"count: {count}",
                    new_str=f"count: {count + 1}",
                    if_match=sha_of(text),
                )
                if error:
                    assert text.startswith("Precondition failed"), text
                    retries += 1
                    await anyio.sleep(random.uniform(0, 0.005 * sessions))  # jittered retry
                else:
                    done += 1

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(sessions):
                group.start_soon(worker)

    started = time.monotonic()
    anyio.run(main)
    elapsed = time.monotonic() - started
    final = served.svc.read(OWNER, STORE, "/projects/acme/counter.md")
    assert final.content == f"count: {sessions * increments}\n"
    assert final.version == sessions * increments + 1
    print(f"{sessions * increments} increments, {retries} retries, {elapsed:.1f}s")
