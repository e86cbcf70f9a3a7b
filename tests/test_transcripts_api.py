"""Transcripts over REST (the ASGI app through httpx) and the SDK's local transport: push a
session, list, show, export, purge; labels as scopes; errors in the envelope."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from tests.test_api import Env, auth, error, make_env
from tests.test_transcripts import DATA, needs_data

import memdir
from memdir import OWNER, MemoryService, NotFound

pytestmark = pytest.mark.anyio

T = "/v1/stores/default/transcripts"
TAU = DATA / "tau-bench-airline" / "gpt-4o-airline.json"
CLAUDE = DATA / "claude-code-samples" / "daaain_claude-code-log__representative_messages.jsonl"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def env(svc: MemoryService) -> Env:
    return make_env(svc)


@pytest.fixture
async def client(env: Env) -> AsyncIterator[httpx2.AsyncClient]:
    transport = httpx2.ASGITransport(app=env.app)
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as c:
        yield c


def tau_session(element: dict[str, Any]) -> bytes:
    """One τ-bench result (a list of one) as a file's bytes."""
    return json.dumps([element]).encode()


def generic(session: str, text: str, error_output: str | None = None) -> bytes:
    lines: list[dict[str, Any]] = [
        {"type": "transcript", "version": 1, "session_id": session},
        {"type": "event", "kind": "message", "role": "user", "text": text},
    ]
    if error_output is not None:
        lines += [
            {"type": "event", "kind": "tool_call", "name": "sh", "call_id": "c1",
             "input": {"cmd": "x"}},
            {"type": "event", "kind": "tool_result", "name": "sh", "call_id": "c1",
             "output": error_output, "is_error": True},
        ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@needs_data
async def test_push_tau_bench_session_list_show_export_delete(
    client: httpx2.AsyncClient, env: Env
) -> None:
    a = auth(env.admin)
    element = json.loads(TAU.read_text(encoding="utf-8"))[17]
    calls = sum(len(m.get("tool_calls") or []) for m in element["traj"])
    tool = [m for m in element["traj"] if m["role"] == "tool"]
    errors = sum(1 for m in tool if m["content"].startswith("Error: "))
    r = await client.post(T, content=tau_session(element), headers=a,
                          params={"project": "acme", "label": ["nightly"]})  # fmt: skip
    assert r.status_code == 200, r.text
    summary = r.json()
    assert (summary["new"], summary["tool_calls"], summary["tool_errors"]) == (1, calls, errors)
    assert summary["skipped"] == [] and summary["failed"] == []
    tid = summary["transcripts"][0]["id"]
    again = (await client.post(T, content=tau_session(element), headers=a)).json()
    assert (again["new"], again["unchanged"], again["events"]) == (0, 1, 0)

    page = (await client.get(T, headers=a, params={"project": "acme"})).json()
    assert [t["id"] for t in page["items"]] == [tid] and page["next_cursor"] is None
    item = page["items"][0]
    assert (item["score"], item["labels"], item["tool_calls"]) == (
        element["reward"],
        ["nightly"],
        calls,
    )
    assert (await client.get(T, headers=a, params={"project": "zeta"})).json()["items"] == []

    view = (await client.get(f"{T}/{tid}", headers=a)).json()
    results = [e for e in view["events"] if e["kind"] == "tool_result"]
    assert [(e["call_id"], e["output"]) for e in results] == [
        (m["tool_call_id"], m["content"]) for m in tool
    ]
    exported = await client.get(f"{T}/{tid}/export", headers=a)
    assert exported.headers["content-type"].startswith("application/x-ndjson")
    first = json.loads(exported.text.splitlines()[0])
    assert first["type"] == "transcript" and first["session_id"] == view["info"]["session_id"]

    gone = await client.delete(f"{T}/{tid}", headers=a)
    assert gone.status_code == 200 and gone.json()["id"] == tid
    error(await client.get(f"{T}/{tid}", headers=a), 404, "not_found")
    assert (await client.get(T, headers=a)).json()["items"] == []
    # the export re-imports to the same record
    back = await client.post(T, content=exported.content, headers=a, params={"format": "generic"})
    assert back.json()["new"] == 1


@needs_data
async def test_push_a_claude_code_session_file(client: httpx2.AsyncClient, env: Env) -> None:
    a = auth(env.admin)
    data = CLAUDE.read_bytes()
    r = await client.post(T, content=data, headers=a, params={"project": "acme",
                                                            "name": CLAUDE.name})  # fmt: skip
    assert r.status_code == 200, r.text
    summary = r.json()
    assert summary["new"] >= 1 and summary["events"] > 0
    assert all(t["format"] == "claude-code" for t in summary["transcripts"])
    # a grown session adds only its new lines
    lines = data.splitlines(keepends=True)
    svc = env.svc
    before = sum(t.events for t in svc.list_transcripts(OWNER, "default").items)
    assert before == summary["events"]
    again = await client.post(T, content=b"".join(lines), headers=a,
                              params={"project": "acme", "name": CLAUDE.name})  # fmt: skip
    assert again.json()["events"] == 0


async def test_project_principal_sees_only_its_project(
    client: httpx2.AsyncClient, env: Env
) -> None:
    a = auth(env.admin)
    for session, project in (("s-acme", "acme"), ("s-zeta", "zeta"), ("s-none", None)):
        params = {"project": project} if project else {}
        r = await client.post(T, content=generic(session, f"work on {project}", "boom"),
                              headers=a, params=params)  # fmt: skip
        assert r.json()["new"] == 1
    ids = {t["session_id"]: t["id"] for t in (await client.get(T, headers=a)).json()["items"]}
    assert set(ids) == {"s-acme", "s-zeta", "s-none"}

    bot = auth(env.bot)
    listed = (await client.get(T, headers=bot)).json()["items"]
    assert [t["session_id"] for t in listed] == ["s-acme"]
    assert listed[0]["tool_errors"] == 1
    erroring = (await client.get(T, headers=bot, params={"has_errors": "true"})).json()
    assert [t["session_id"] for t in erroring["items"]] == ["s-acme"]
    assert (await client.get(f"{T}/{ids['s-acme']}", headers=bot)).status_code == 200
    for hidden in ("s-zeta", "s-none"):
        error(await client.get(f"{T}/{ids[hidden]}", headers=bot), 404, "not_found")
        error(await client.get(f"{T}/{ids[hidden]}/export", headers=bot), 404, "not_found")
    other = (await client.get(T, headers=auth(env.other))).json()["items"]
    assert [t["session_id"] for t in other] == ["s-zeta"]
    # the bot may not push sessions labelled with another project
    r = await client.post(T, content=generic("s-bad", "x"), headers=bot,
                          params={"project": "zeta"})  # fmt: skip
    assert r.status_code in (400, 403), r.text


async def test_pagination_with_cursor(client: httpx2.AsyncClient, env: Env) -> None:
    a = auth(env.admin)
    body = b"".join(generic(f"s{i}", f"text {i}") for i in range(5))
    assert (await client.post(T, content=body, headers=a, params={"project": "acme"})).json()[
        "new"
    ] == 5
    seen: list[str] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = (await client.get(T, headers=a, params=params)).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 5


async def test_malformed_input_and_unauthenticated(client: httpx2.AsyncClient, env: Env) -> None:
    a = auth(env.admin)
    err = error(await client.post(T, content=b"not json at all\n", headers=a), 400,
                "invalid_input")  # fmt: skip
    assert err["file"] == "request-body" and err["reason"]
    err = error(await client.post(T, content=b"", headers=a), 400, "invalid_input")
    # a bad line is reported with its line and skipped; the rest imports
    lines = generic("s-ok", "fine").decode().splitlines()
    body = "\n".join([lines[0], "{broken", lines[1]]) + "\n"
    r = await client.post(T, content=body.encode(), headers=a, params={"name": "up.jsonl"})
    summary = r.json()
    assert r.status_code == 200 and summary["new"] == 1
    assert [(p["file"], p["line"]) for p in summary["skipped"]] == [("up.jsonl", 2)]
    error(await client.post(T, content=generic("s", "x"), params={"format": "nope"}, headers=a),
          400, "invalid_input")  # fmt: skip
    error(await client.get(T, params={"outcome": "meh"}, headers=a), 400, "invalid_input")
    error(await client.post(T, content=generic("s", "x")), 401, "unauthenticated")
    error(await client.get(T), 401, "unauthenticated")
    error(await client.get(f"{T}/abc"), 401, "unauthenticated")
    error(await client.delete(f"{T}/abc"), 401, "unauthenticated")


def test_sdk_local_transport(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    try:
        svc.create_store(OWNER, "default")
        svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    finally:
        svc.db.close()
    with memdir.Client(db=url) as admin:
        report = admin.import_transcript(generic("s-acme", "hello", "boom"), project="acme",
                                         labels=["nightly"])  # fmt: skip
        assert (report.new, report.tool_calls, report.tool_errors) == (1, 1, 1)
        assert report.transcripts[0].status == "new"
        admin.import_transcript(generic("s-zeta", "other"), "generic", project="zeta")
        assert {t.session_id for t in admin.transcripts()} == {"s-acme", "s-zeta"}
        tid = report.transcripts[0].id
        view = admin.transcript(tid)
        assert view.info.labels == ("nightly",) and view.events[-1].is_error is True
        exported = admin.export_transcript(tid)
        assert json.loads(exported.splitlines()[0])["session_id"] == "s-acme"
        again = admin.import_transcript(exported.encode())
        assert again.unchanged == 1
    with memdir.Client(db=url, principal="agent:bot") as bot:
        assert [t.session_id for t in bot.transcripts(has_errors=True)] == ["s-acme"]
    with memdir.Client(db=url) as admin:
        zeta = admin.transcripts(project="zeta")[0].id
        assert admin.delete_transcript(zeta).session_id == "s-zeta"
        with pytest.raises(NotFound):
            admin.transcript(zeta)

    async def main() -> list[str]:
        async with memdir.AsyncClient(db=url) as a:
            await a.import_transcript(generic("s-async", "x"), project="acme")
            return sorted(t.session_id for t in await a.transcripts(project="acme"))

    import anyio

    assert anyio.run(main) == ["s-acme", "s-async"]
