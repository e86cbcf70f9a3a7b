"""Administration under attack: one admin decision narrowed by the token, replays after checks,
failed authentications limited per client address, `memdir mcp` never the owner by default,
and the last administrator stays.

Principals (default policy): ``user:admin`` in group ``admins`` with three tokens — ``full``
(unnarrowed), ``read`` (every path, action ``read`` only) and ``org`` (every action on
``/org/**`` only) — and ``agent:bot`` on project ``acme``.
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from click.testing import CliRunner

import memdir
from memdir import OWNER, MemoryService
from memdir.api import create_app
from memdir.api.settings import ApiSettings
from memdir.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from memdir.core.model import Principal, Provenance
from memdir.settings import Settings
from memdir.transcripts.reader import Source

pytestmark = pytest.mark.anyio

STORE = "default"
S = f"/v1/stores/{STORE}"
ADMIN = "user:admin"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def auth(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


def error(response: httpx2.Response, status: int, type_: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["type"] == type_ and "\n" not in body["message"], body
    return dict(body)


@dataclass
class Env:
    svc: MemoryService
    tokens: dict[str, str]  # full, read, org, bot, bot_read

    def principal(self, name: str) -> Principal:
        return self.svc.authenticate(self.tokens[name])


def _token(svc: MemoryService, who: str, **scope: Any) -> str:
    return svc.create_token(OWNER, who, **scope).token or ""


@pytest.fixture
def env(svc: MemoryService) -> Env:
    svc.add_principal(OWNER, ADMIN, groups=("admins",))
    svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    return Env(svc, {
        "full": _token(svc, ADMIN),
        "read": _token(svc, ADMIN, paths=("/**",), actions=("read",)),
        "org": _token(svc, ADMIN, paths=("/org/**",)),
        "bot": _token(svc, "agent:bot"),
        "bot_read": _token(svc, "agent:bot", paths=("/projects/acme/**",), actions=("read",)),
    })  # fmt: skip


@pytest.fixture
async def client(env: Env) -> AsyncIterator[httpx2.AsyncClient]:
    app = create_app(Settings(), env.svc, api_settings=ApiSettings(rate=None))
    transport = httpx2.ASGITransport(app=app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as c:
        yield c


def _state(svc: MemoryService) -> tuple[Any, ...]:
    """What a refused administration must leave as it was."""
    return (
        [(p.id, p.groups) for p in svc.list_principals(OWNER)],
        [(t.id, t.revoked_at) for t in svc.list_tokens(OWNER)],
        [s.name for s in svc.list_stores(OWNER)],
    )


# --- 1. a narrowed admin token is not an administrator ------------------------------------------


@pytest.mark.parametrize(
    ("narrowing", "reason"),
    [("read", "the token does not allow admin"), ("org", "the token is limited to /org/**")],
)
async def test_a_narrowed_admin_token_administers_nothing(
    client: httpx2.AsyncClient, env: Env, narrowing: str, reason: str
) -> None:
    svc = env.svc
    run = svc.dream(OWNER, STORE)  # a run by someone else (the owner)
    before = _state(svc)
    h = auth(env.tokens[narrowing])
    refused = [
        await client.post("/v1/tokens", json={"principal": ADMIN}, headers=h),
        await client.post("/v1/principals", json={"id": "user:evil", "groups": ["admins"]},
                          headers=h),
        await client.delete("/v1/principals/agent:bot", headers=h),
        await client.get("/v1/tokens", headers=h),
        await client.get("/v1/principals", headers=h),
        await client.get("/v1/principals/agent:bot", headers=h),
        await client.post("/v1/tokens/" + svc.list_tokens(OWNER)[0].id + "/revoke", headers=h),
        await client.post("/v1/stores", json={"name": "evil"}, headers=h),
        await client.post(f"{S}/archive", headers=h),
        await client.delete(S, headers=h),
        await client.get("/metrics", headers=h),
    ]  # fmt: skip
    for response in refused:
        assert reason in error(response, 403, "forbidden")["message"], response.request.url
    assert _state(svc) == before
    # Others' dream runs stay the owner's: not listed, not found.
    listed = await client.get(f"{S}/dreams", headers=h)
    assert listed.status_code == 200 and listed.json()["items"] == []
    error(await client.get(f"{S}/dreams/{run.id}", headers=h), 404, "not_found")

    # The service decides it, whatever the surface.
    narrowed = env.principal(narrowing)
    with pytest.raises(Forbidden, match=re.escape(reason)):
        svc.create_token(narrowed, ADMIN)
    with pytest.raises(Forbidden, match=re.escape(reason)):
        svc.add_principal(narrowed, "user:evil", groups=("admins",))
    with pytest.raises(Forbidden, match=re.escape(reason)):
        svc.remove_principal(narrowed, "agent:bot")
    with pytest.raises(Forbidden, match=re.escape(reason)):
        svc.create_store(narrowed, "evil")
    assert svc.list_dream_runs(narrowed, STORE) == []
    with pytest.raises(NotFound):
        svc.get_dream_run(narrowed, STORE, run.id)
    assert _state(svc) == before

    # The same principal with its unnarrowed token administers (the refusals are the token's).
    full = auth(env.tokens["full"])
    assert (await client.get("/v1/tokens", headers=full)).status_code == 200
    assert (await client.get("/metrics", headers=full)).status_code == 200
    assert [r["id"] for r in (await client.get(f"{S}/dreams", headers=full)).json()["items"]] == [
        run.id
    ]
    created = await client.post("/v1/stores", json={"name": "ok"}, headers=full)
    assert created.status_code == 201


async def test_policy_check_explains_database_administration(
    client: httpx2.AsyncClient, env: Env
) -> None:
    svc = env.svc
    path = "/.memdir/db/tokens"
    full = svc.check_policy(OWNER, STORE, env.principal("full"), "admin", path)
    assert full.allowed and full.rule == "database-admins" and "admins group" in full.reason
    org = svc.check_policy(OWNER, STORE, env.principal("org"), "admin", path)
    assert not org.allowed and org.reason == "the token is limited to /org/**"
    bot = svc.check_policy(OWNER, STORE, env.principal("bot"), "admin", path)
    assert not bot.allowed and "'admins' group" in bot.reason
    checked = await client.get(
        f"{S}/policy/check", params={"action": "admin", "path": path},
        headers=auth(env.tokens["read"]),
    )  # fmt: skip
    assert checked.status_code == 200
    assert checked.json()["allowed"] is False
    assert checked.json()["reason"] == "the token does not allow admin"


async def test_no_store_policy_makes_a_database_administrator(
    client: httpx2.AsyncClient, env: Env
) -> None:
    svc = env.svc
    policy = (
        "version: 1\nrules:\n  - id: bot-owns-the-store\n    who: agent:bot\n"
        '    paths: ["/**"]\n    actions: [admin]\n'
    )
    svc.set_policy(OWNER, STORE, policy)
    bot = env.principal("bot")
    assert svc.check_policy(bot, STORE, bot, "admin", "/org/x.md").allowed  # the store's admin
    decision = svc.check_policy(bot, STORE, bot, "admin", "/.memdir/db/principals")
    assert not decision.allowed and decision.rule is None
    before = _state(svc)
    response = await client.post(
        "/v1/principals", json={"id": "user:evil", "groups": ["admins"]},
        headers=auth(env.tokens["bot"]),
    )  # fmt: skip
    error(response, 403, "forbidden")
    assert _state(svc) == before


async def test_a_narrowed_token_mints_no_wider_token(client: httpx2.AsyncClient, env: Env) -> None:
    svc = env.svc
    scoped = _token(svc, ADMIN, paths=("/projects/**", "/.memdir/db/**"),
                    actions=("read", "admin"))  # fmt: skip
    h = auth(scoped)
    before = _state(svc)
    for body in (
        {"principal": "agent:bot", "paths": ["/**"], "actions": ["read"]},
        {"principal": "agent:bot", "paths": ["/org/**"], "actions": ["read"]},
        {"principal": "agent:bot", "paths": ["/projects*/**"], "actions": ["read"]},
        {"principal": "agent:bot", "paths": ["/projects/acme/**"], "actions": ["write"]},
        {"principal": "agent:bot", "paths": ["/projects/acme/**"], "actions": ["propose"]},
    ):
        message = error(await client.post("/v1/tokens", json=body, headers=h), 403, "forbidden")
        assert "may not be wider" in message["message"]
    assert _state(svc) == before

    made = await client.post(
        "/v1/tokens",
        json={"principal": "agent:bot", "paths": ["/projects/acme/**"], "actions": ["read"]},
        headers=h,
    )
    assert made.status_code == 201, made.text
    minted = svc.authenticate(made.json()["token"])
    assert minted.scope is not None and minted.scope.paths == ("/projects/acme/**",)

    # Without paths or actions, a narrowed token's own scope is the default (REST and service).
    inherits = await client.post("/v1/tokens", json={"principal": "agent:bot"}, headers=h)
    assert inherits.status_code == 201, inherits.text
    assert inherits.json()["paths"] == ["/projects/**", "/.memdir/db/**"]
    assert inherits.json()["actions"] == ["admin", "read"]
    narrowed = svc.authenticate(scoped)
    info = svc.create_token(narrowed, "agent:bot", paths=("/projects/acme/x.md",))
    assert (info.paths, info.actions) == (("/projects/acme/x.md",), ("admin", "read"))
    with pytest.raises(Forbidden, match="may not be wider"):
        svc.create_token(narrowed, "agent:bot", actions=("write",))
    # A token that may write may mint one that proposes; an unnarrowed admin mints any scope.
    writer = svc.authenticate(_token(svc, ADMIN, actions=("write", "admin")))
    assert svc.create_token(writer, "agent:bot", actions=("propose",)).actions == ("propose",)
    assert svc.create_token(env.principal("full"), "agent:bot").actions == (
        "admin", "propose", "read", "write",
    )  # fmt: skip


async def test_unlabelled_transcripts_follow_the_admin_decision(
    client: httpx2.AsyncClient, env: Env
) -> None:
    svc = env.svc
    data = (
        json.dumps({"type": "transcript", "format": "generic", "session_id": "s-unlabelled"})
        + "\n"
        + json.dumps({"type": "event", "kind": "message", "role": "user", "text": "hello"})
        + "\n"
    ).encode()
    report = svc.import_transcripts(OWNER, STORE, [Source.from_bytes("s.jsonl", data)],
                                    format="generic")  # fmt: skip
    assert report.new == 1

    def listed(token: str) -> list[str]:
        return [t.session_id for t in svc.list_transcripts(svc.authenticate(token), STORE).items]

    assert listed(env.tokens["full"]) == ["s-unlabelled"]
    assert listed(env.tokens["read"]) == ["s-unlabelled"]  # reading, with a token that reads
    assert listed(env.tokens["org"]) == []  # the token does not reach /.memdir/db/transcripts
    assert listed(env.tokens["bot"]) == []
    # The one decision: a token reaching the resource (not necessarily every path) reads them.
    resource = _token(svc, ADMIN, paths=("/.memdir/db/**",), actions=("read",))
    assert listed(resource) == ["s-unlabelled"]
    over_rest = await client.get(f"{S}/transcripts", headers=auth(env.tokens["org"]))
    assert over_rest.status_code == 200 and over_rest.json()["items"] == []


# --- 2. idempotency replays only after the checks -----------------------------------------------


async def test_a_replayed_commit_is_refused_to_a_token_that_lost_the_right(
    client: httpx2.AsyncClient, env: Env
) -> None:
    svc = env.svc
    url = f"{S}/files/projects/acme/a.md"
    first = await client.put(url, content="one\n", headers=auth(
        env.tokens["bot"], **{"If-None-Match": "*", "Idempotency-Key": "k-1"}))  # fmt: skip
    assert first.status_code == 201
    replay = await client.put(url, content="one\n", headers=auth(
        env.tokens["bot"], **{"If-None-Match": "*", "Idempotency-Key": "k-1"}))  # fmt: skip
    assert replay.status_code == 201 and replay.headers["idempotent-replayed"] == "true"

    # Same principal, same key, same request: a read-only token is refused, not replayed.
    refused = await client.put(url, content="one\n", headers=auth(
        env.tokens["bot_read"], **{"If-None-Match": "*", "Idempotency-Key": "k-1"}))  # fmt: skip
    body = error(refused, 403, "forbidden")
    assert "idempotent-replayed" not in refused.headers and "commit" not in body

    # Service: the same decision for a key replayed after the policy took the right away.
    def write() -> Any:
        return svc.write(env.principal("bot"), STORE, "/projects/acme/b.md", "two\n",
                         if_absent=True, provenance=Provenance(idempotency_key="k-2"))  # fmt: skip

    assert not write().replayed and write().replayed
    svc.set_policy(OWNER, STORE, "version: 1\nrules: []\n")
    revision = svc.store_info(OWNER, STORE).revision
    with pytest.raises(NotFound, match="does not exist"):
        write()
    assert svc.store_info(OWNER, STORE).revision == revision


async def test_a_replayed_administration_is_refused_to_a_token_that_lost_the_right(
    client: httpx2.AsyncClient, env: Env
) -> None:
    svc = env.svc
    key = {"Idempotency-Key": "k-store"}
    made = await client.post("/v1/stores", json={"name": "s1"}, headers=auth(env.tokens["full"],
                                                                            **key))  # fmt: skip
    assert made.status_code == 201
    again = await client.post("/v1/stores", json={"name": "s1"},
                              headers=auth(env.tokens["full"], **key))  # fmt: skip
    assert again.headers.get("idempotent-replayed") == "true"
    refused = await client.post("/v1/stores", json={"name": "s1"},
                                headers=auth(env.tokens["read"], **key))  # fmt: skip
    error(refused, 403, "forbidden")
    assert "idempotent-replayed" not in refused.headers

    body = {"principal": "agent:bot", "name": "t"}
    token_key = {"Idempotency-Key": "k-token"}
    assert (
        await client.post("/v1/tokens", json=body, headers=auth(env.tokens["full"], **token_key))
    ).status_code == 201
    refused = await client.post("/v1/tokens", json=body,
                                headers=auth(env.tokens["org"], **token_key))  # fmt: skip
    error(refused, 403, "forbidden")
    assert [t.name for t in svc.list_tokens(OWNER, "agent:bot")].count("t") == 1

    # The service's keyed mutations take the check as an argument: it runs before a replay.
    def refuse(_: Any) -> None:
        raise Forbidden("no longer allowed")

    assert svc.idempotent(OWNER, "k-x", ["x"], lambda: 1, str, int, authorize=refuse) == (1, False)
    with pytest.raises(Forbidden, match="no longer allowed"):
        svc.idempotent(OWNER, "k-x", ["x"], lambda: 2, str, int, authorize=refuse)


async def test_a_replayed_proposal_is_refused_to_a_token_that_lost_the_right(
    client: httpx2.AsyncClient, env: Env
) -> None:
    body = {"operations": [{"op": "write", "path": "/org/idea.md", "content": "x\n",
                            "if_absent": True}], "rationale": "an idea"}  # fmt: skip
    key = {"Idempotency-Key": "k-propose"}
    first = await client.post(f"{S}/proposals", json=body, headers=auth(env.tokens["bot"], **key))
    assert first.status_code == 201, first.text
    refused = await client.post(f"{S}/proposals", json=body,
                                headers=auth(env.tokens["bot_read"], **key))  # fmt: skip
    assert refused.status_code in (403, 404), refused.text
    assert "idempotent-replayed" not in refused.headers
    assert first.json()["id"] not in refused.text


# --- 3. failed authentications per client address; proxies only when trusted -------------------


def _app(svc: MemoryService, **settings: Any) -> Any:
    """The app with 3 failed authentications per address, refilling too slowly to matter."""
    api = ApiSettings(rate=None, auth_failure_rate=0.001, auth_failure_burst=3, **settings)
    return create_app(Settings(), svc, api_settings=api)


async def _get(app: Any, peer: str, token: str, **headers: str) -> httpx2.Response:
    """``GET /v1/me`` from the socket peer ``peer``."""
    transport = httpx2.ASGITransport(app=app, client=(peer, 4000))
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
        return await client.get("/v1/me", headers=auth(token, **headers))


async def _as(app: Any, peer: str, token: str, **headers: str) -> int:
    return (await _get(app, peer, token, **headers)).status_code


async def test_invented_tokens_share_their_address_bucket(env: Env) -> None:
    app = _app(env.svc)
    invented = ["mdr_" + secrets.token_urlsafe(32) for _ in range(5)]
    statuses = [await _as(app, "192.0.2.1", t) for t in invented]
    assert statuses == [401, 401, 401, 429, 429]
    limited = await _get(app, "192.0.2.1", invented[0])
    assert limited.headers["retry-after"] and "failed authentications" in limited.text
    # A valid token from the same address still works: a misconfigured client sharing an
    # address (127.0.0.1, a NAT) must not lock the others out.
    assert await _as(app, "192.0.2.1", env.tokens["full"]) == 200
    assert await _as(app, "192.0.2.1", invented[1]) == 429  # its failures still wait
    assert await _as(app, "192.0.2.2", env.tokens["full"]) == 200
    assert await _as(app, "192.0.2.2", invented[0]) == 401


async def test_forwarded_for_counts_only_from_a_trusted_proxy(env: Env) -> None:
    from memdir.api.ratelimit import parse_networks

    app = _app(env.svc)  # no trusted proxies: the header is only the client's word
    bad = "mdr_" + secrets.token_urlsafe(32)
    statuses = [await _as(app, "192.0.2.9", bad, **{"X-Forwarded-For": f"10.1.0.{i}"})
                for i in range(5)]  # fmt: skip
    assert statuses == [401, 401, 401, 429, 429]

    app = _app(env.svc, trusted_proxies=parse_networks(["198.51.100.0/24"]))
    proxy = "198.51.100.7"
    for _ in range(3):
        assert await _as(app, proxy, bad, **{"X-Forwarded-For": "203.0.113.5"}) == 401
    # The client the proxy names is limited, not the proxy or its other clients ...
    assert await _as(app, proxy, bad, **{"X-Forwarded-For": "203.0.113.5"}) == 429
    assert await _as(app, proxy, bad, **{"X-Forwarded-For": "203.0.113.6"}) == 401
    # ... and a client cannot choose its address through the proxy: the rightmost untrusted hop.
    assert await _as(app, proxy, bad, **{"X-Forwarded-For": "203.0.113.77, 203.0.113.5"}) == 429
    assert await _as(app, proxy, env.tokens["full"], **{"X-Forwarded-For": "203.0.113.8"}) == 200


def test_failure_limit_and_trusted_proxies_settings() -> None:
    parsed = ApiSettings.from_env({"MEMDIR_AUTH_FAILURE_LIMIT": "2/5",
                                   "MEMDIR_TRUSTED_PROXIES": "10.0.0.1, fd00::/8"})  # fmt: skip
    assert (parsed.auth_failure_rate, parsed.auth_failure_burst) == (2.0, 5)
    assert [str(n) for n in parsed.trusted_proxies] == ["10.0.0.1/32", "fd00::/8"]
    assert ApiSettings.from_env({}).trusted_proxies == ()
    assert ApiSettings.from_env({"MEMDIR_AUTH_FAILURE_LIMIT": "off"}).auth_failure_rate is None
    with pytest.raises(InvalidInput, match=r"MEMDIR_TRUSTED_PROXIES.*'nope'"):
        ApiSettings.from_env({"MEMDIR_TRUSTED_PROXIES": "10.0.0.1,nope"})


async def test_failed_mcp_and_rest_authentications_share_the_bucket(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memdir.server import create_server_app

    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    memdir.open(url, create=True).db.close()
    monkeypatch.setenv("MEMDIR_AUTH_FAILURE_LIMIT", "0.001/2")
    app = create_server_app(Settings(db=url))
    transport = httpx2.ASGITransport(app=app, client=("192.0.2.50", 1))
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
        bad = auth("mdr_" + secrets.token_urlsafe(32))
        mcp = {**bad, "Accept": "application/json, text/event-stream"}
        assert (await client.post("/mcp/", json={}, headers=mcp)).status_code == 401
        assert (await client.post("/mcp/", json={}, headers=mcp)).status_code == 401
        assert (await client.get("/v1/me", headers=bad)).status_code == 429
        assert (await client.post("/mcp/", json={}, headers=mcp)).status_code == 429
    # The web UI's invalid session cookie counts too (it redirects to sign in, not 401).
    transport = httpx2.ASGITransport(app=app, client=("192.0.2.51", 1))
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
        cookie = {"Cookie": "memdir_session=mdr_" + secrets.token_urlsafe(32)}
        first = [
            (await client.get("/ui/s/default/tree/", headers=cookie)).status_code for _ in range(2)
        ]
        assert all(status != 429 for status in first), first
        assert (await client.get("/ui/s/default/tree/", headers=cookie)).status_code == 429


# --- 4. memdir mcp is not the owner by default --------------------------------------------------


def test_memdir_mcp_refuses_to_start_as_the_owner_by_default(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    svc.db.close()
    done = subprocess.run(
        [sys.executable, "-m", "memdir.cli", "--db", url, "mcp"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "MEMDIR_TOKEN" in lines[0] and "--as-owner" in lines[0]
    both = subprocess.run(
        [sys.executable, "-m", "memdir.cli", "--db", url, "--as", "owner", "mcp", "--as-owner"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert both.returncode == 2 and "not both" in both.stderr


def test_the_memory_tool_refuses_an_owner_client(tmp_path: Path) -> None:
    from memdir.integrations.anthropic import MemoryTool

    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(db, create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    svc.db.close()
    with memdir.Client(db=db) as owner:
        assert owner.acts_as_owner
        with pytest.raises(InvalidInput, match="acts as the database owner"):
            MemoryTool(owner, prefix="/agents/bot")
        MemoryTool(owner, prefix="/agents/bot", as_owner=True)  # asked for explicitly
    with memdir.Client(db=db, principal="agent:bot") as agent:
        assert not agent.acts_as_owner
        MemoryTool(agent, prefix="/agents/bot")


# --- 5. the last administrator stays ------------------------------------------------------------


async def test_the_last_administrator_cannot_be_removed(
    client: httpx2.AsyncClient, env: Env, tmp_path: Path
) -> None:
    svc = env.svc
    before = _state(svc)
    refused = await client.delete(f"/v1/principals/{ADMIN}", headers=auth(env.tokens["full"]))
    message = error(refused, 409, "conflict")["message"]
    assert "last member of the 'admins' group" in message and "--group admins" in message
    assert _state(svc) == before
    assert (await client.get("/v1/me", headers=auth(env.tokens["full"]))).status_code == 200
    with pytest.raises(Conflict, match="last member"):
        svc.remove_principal(OWNER, ADMIN)  # not even the owner leaves the database without one

    svc.add_principal(OWNER, "user:second", groups=("admins",))
    gone = await client.delete("/v1/principals/user:second", headers=auth(env.tokens["full"]))
    assert gone.status_code == 204
    assert svc.remove_principal(OWNER, "agent:bot") is None  # others go as before


def test_the_cli_refuses_to_remove_the_last_administrator(tmp_path: Path) -> None:
    from memdir.cli.main import cli

    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    svc.add_principal(OWNER, ADMIN, groups=("admins",))
    svc.db.close()
    result = CliRunner().invoke(cli, ["--db", url, "principal", "rm", ADMIN, "--json"])
    assert result.exit_code == 1, result.output
    assert json.loads(result.stdout)["error"]["type"] == "conflict"


def _remove_each_other(svc: MemoryService, a: str, b: str) -> list[str]:
    """``a`` removes ``b`` while ``b`` removes ``a``, at once; what each got."""
    outcomes: list[str] = []
    barrier = threading.Barrier(2)
    actors = {a: svc.resolve(a), b: svc.resolve(b)}

    def remove(actor: str, target: str) -> None:
        barrier.wait()
        try:
            svc.remove_principal(actors[actor], target)
            outcomes.append("removed")
        except (Conflict, NotFound) as exc:
            outcomes.append(type(exc).__name__)

    threads = [threading.Thread(target=remove, args=(a, b)),
               threading.Thread(target=remove, args=(b, a))]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return outcomes


def test_two_administrators_removing_each_other_leave_one(svc: MemoryService) -> None:
    for rounds in range(3):
        a, b = f"user:a{rounds}", f"user:b{rounds}"
        svc.add_principal(OWNER, a, groups=("admins",))
        svc.add_principal(OWNER, b, groups=("admins",))
        for p in [p.id for p in svc.list_principals(OWNER) if p.id not in (a, b)]:
            svc.remove_principal(OWNER, p)
        outcomes = _remove_each_other(svc, a, b)
        admins = [p.id for p in svc.list_principals(OWNER) if "admins" in p.groups]
        assert len(admins) == 1 and sorted(outcomes) == ["Conflict", "removed"], outcomes
