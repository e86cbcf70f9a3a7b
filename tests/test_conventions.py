"""Every surface speaks one language: exit codes, operation names, next steps, diffs, HTTP.

Each test pins one convention a client already relies on — the README's exit-code table,
the memory tool's argument names, ``patch``/``git apply`` on memdir's diffs, RFC 9110's
``If-Match`` and ``HEAD``, representation-specific ETags — through the surfaces that have it.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp.client.client import Client

import memdir
from memdir import OWNER
from memdir.cli.main import cli
from memdir.core import errors
from memdir.core.edits import unified_diff
from memdir.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
STORE = "default"


def run(db: str, *args: str, input: str | bytes | None = None) -> Any:
    return CliRunner().invoke(cli, ["--db", db, *args], input=input)


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    assert run(url, "init").exit_code == 0
    return url


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# --- one table of error classes -------------------------------------------------------------

#: The README's words for each exit code, and the error classes that must exit with it.
README_CLASSES = {
    "usage or invalid input": (errors.InvalidInput, errors.InvalidPath, errors.InvalidContent,
                               errors.ContentTooLarge, errors.LimitExceeded),
    "precondition failed or required": (errors.PreconditionFailed, errors.PreconditionRequired),
    "forbidden": (errors.Forbidden, errors.Unauthenticated),
    "not found": (errors.NotFound,),
    "accepted as a proposal": (errors.Proposed,),
    "refused by screening": (errors.ScreeningRefused,),
    "error": (errors.MemdirError, errors.Conflict, errors.EditConflict, errors.BackendError),
}  # fmt: skip


def test_readme_exit_codes_are_the_code_s() -> None:
    text = (ROOT / "README.md").read_text()
    line = re.search(r"Exit codes: (.*?)\.(?:\s|$)", " ".join(text.split()))
    assert line, "README has no 'Exit codes:' line"
    documented = {
        m.group(2).strip(): int(m.group(1)) for m in re.finditer(r"(\d) ([^·]+)", line.group(1))
    }
    assert documented.pop("ok") == 0
    assert set(documented) == set(README_CLASSES), documented
    for meaning, classes in README_CLASSES.items():
        for cls in classes:
            assert cls.exit_code == documented[meaning], (cls.__name__, meaning)
    # every class is in the table, and each HTTP status is a real client/server status
    listed = {c for classes in README_CLASSES.values() for c in classes}
    named = {getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)}
    assert named - listed <= {errors.RevisionChanged, errors.PathConflict, errors.NoChange,
                              errors.IdempotencyMismatch}  # fmt: skip
    assert errors.RevisionChanged.exit_code == 3  # "precondition": the reviewer saw another text
    assert all(200 <= cls.http_status < 600 for cls in named)


def test_bad_content_exits_2_as_documented(db: str) -> None:
    assert run(db, "write", "/bin.md", "--create", input=b"\xff\xfe").exit_code == 2
    bad_yaml = "---\ntitle: [unclosed\n---\nbody\n"
    assert run(db, "write", "/y.md", "--create", input=bad_yaml).exit_code == 2
    big = "x" * 2048
    env = {"MEMDIR_MAX_FILE_BYTES": "1024"}
    result = CliRunner().invoke(cli, ["--db", db, "write", "/big.md", "--create"], input=big,
                                env=env)  # fmt: skip
    assert result.exit_code == 2, result.output
    assert run(db, "read", "/bin.md").exit_code == 5 and run(db, "read", "/big.md").exit_code == 5


# --- one operation schema -------------------------------------------------------------------


def test_commit_takes_the_memory_tool_names(db: str, tmp_path: Path) -> None:
    ops = tmp_path / "ops.json"
    run(db, "write", "/a.md", "--create", input="one\ntwo\n")
    ops.write_text(
        '[{"command": "str_replace", "path": "/a.md", "old_str": "two", "new_str": "2"},'
        ' {"command": "insert", "path": "/a.md", "insert_line": 0, "insert_text": "zero"},'
        ' {"command": "create", "path": "/b.md", "file_text": "b\\n"}]'
    )
    result = run(db, "commit", str(ops))
    assert result.exit_code == 0, result.output
    assert run(db, "read", "/a.md").stdout == "zero\none\n2\n"
    ops.write_text(
        '[{"op": "str_replace", "path": "/a.md", "old": "2", "old_str": "2", "new": "3"}]'
    )
    both = run(db, "commit", str(ops))
    assert both.exit_code == 2 and "two names for one field" in both.stderr
    ops.write_text('[{"path": "/a.md", "old": "2", "new": "3"}]')
    missing = run(db, "commit", str(ops))
    assert missing.exit_code == 2 and "has no 'op' field" in missing.stderr, missing.stderr
    assert "None" not in missing.stderr


@pytest.fixture
async def rest(tmp_path: Path) -> AsyncIterator[tuple[httpx2.AsyncClient, memdir.MemoryService]]:
    from memdir.api import create_app
    from memdir.api.settings import ApiSettings

    svc = memdir.open(f"sqlite:///{tmp_path / 'r.db'}", create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    token = svc.create_token(OWNER, "user:root").token
    app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None, auth_failure_rate=None))
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(transport=transport, base_url="http://m", headers=headers) as c:
        yield c, svc
    svc.db.close()


F = f"/v1/stores/{STORE}/files"


@pytest.mark.anyio
async def test_rest_takes_the_memory_tool_names(rest: Any) -> None:
    client, svc = rest
    assert (await client.put(f"{F}/a.md", content="one\ntwo\n")).status_code == 201
    r = await client.post(f"{F}/a.md:str_replace", json={"old_str": "two", "new_str": "2"})
    assert r.status_code == 200, r.text
    r = await client.post(f"{F}/a.md:insert", json={"insert_line": 0, "insert_text": "zero"})
    assert r.status_code == 200, r.text
    body = {"operations": [{"command": "create", "path": "/b.md", "file_text": "b\n"}]}
    assert (await client.post(f"/v1/stores/{STORE}/commits", json=body)).status_code == 201
    assert svc.read(OWNER, STORE, "/a.md").content == "zero\none\n2\n"
    assert svc.read(OWNER, STORE, "/b.md").content == "b\n"


# --- the next step, in the caller's words ---------------------------------------------------


@pytest.mark.anyio
async def test_precondition_required_speaks_each_surface(db: str, rest: Any) -> None:
    run(db, "write", "/a.md", "--create", input="1\n")
    cli_said = run(db, "write", "/a.md", input="2\n")
    assert cli_said.exit_code == 3 and "--if-match" in cli_said.stderr
    assert "memdir read /a.md --json" in cli_said.stderr
    client, _ = rest
    await client.put(f"{F}/a.md", content="1\n")
    r = await client.put(f"{F}/a.md", content="2\n")
    assert r.status_code == 428
    message = r.json()["error"]["message"]
    assert "If-Match" in message and "memdir" not in message and "--if-match" not in message
    assert r.json()["error"]["hint"] == "if_match"
    missing = (await client.get(f"{F}/nope.md")).json()["error"]["message"]
    assert "GET /v1/stores/default/tree" in missing and "memdir ls" not in missing


def test_sdk_and_adapter_say_their_own_words(tmp_path: Path) -> None:
    from anthropic.lib.tools import ToolError

    from memdir.integrations.anthropic import MemoryTool

    url = f"sqlite:///{tmp_path / 'a.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "agent:bot")
    svc.db.close()
    with memdir.Client(db=url, principal="agent:bot") as client:
        # the agent may not create anything under another agent's scratchpad
        tool = MemoryTool(client, prefix="/agents/other/memories")
        with pytest.raises(ToolError) as refused:
            tool.call({"command": "create", "path": "/memories/x.md", "file_text": "x"})
        said = str(refused.value)
        assert "/agents/other" not in said and "/memories/x.md" in said, said
        assert "memdir" not in said and "/memories" in said


def test_mcp_errors_name_tool_paths_and_tools(tmp_path: Path) -> None:
    from memdir.mcp import build_server

    svc = memdir.open(f"sqlite:///{tmp_path / 'm.db'}", create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    bot = memdir.Principal.parse("agent:bot")
    server = build_server(svc, lambda _ctx: bot, root="/agents/other")

    async def main() -> None:
        async with Client(server) as client:
            result = await client.call_tool(
                "create", {"path": "/memories/notes.md", "file_text": "n\n"}
            )
            text = getattr(result.content[0], "text", "")
            assert result.is_error and "/agents/other" not in text, text
            assert "/memories/notes.md" in text and "memdir ls" not in text, text
            meta = (result.meta or {}).get("memdir/error", {})
            assert meta.get("path") == "/memories/notes.md", meta

    anyio.run(main)
    svc.db.close()


# --- diffs that patch tools apply -----------------------------------------------------------

_LINE = st.text(alphabet="ab \t\r\u2028é", max_size=6)
_TEXT = st.lists(_LINE, max_size=8).map("\n".join) | st.lists(_LINE, max_size=8).map(
    lambda lines: "".join(line + "\n" for line in lines)
)


@pytest.mark.skipif(not shutil.which("patch") or not shutil.which("git"), reason="needs patch, git")
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(old=_TEXT, new=_TEXT)
def test_patch_and_git_apply_take_every_diff(tmp_path: Path, old: str, new: str) -> None:
    diff = unified_diff(old, new, "a/f.md", "b/f.md", a_date="version 1", b_date="version 2")
    if not diff:
        assert old == new
        return
    work = tmp_path / "w"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    target = work / "f.md"
    target.write_bytes(old.encode())
    (work / "d.patch").write_bytes(diff.encode())
    checked = subprocess.run(["git", "apply", "--check", "d.patch"], cwd=work,
                             capture_output=True, text=True)  # fmt: skip
    assert checked.returncode == 0, (checked.stderr, diff)
    applied = subprocess.run(["patch", "-s", "-p1", "-i", "d.patch"], cwd=work,
                             capture_output=True, text=True)  # fmt: skip
    assert applied.returncode == 0, (applied.stdout, applied.stderr, diff)
    assert target.read_bytes() == new.encode()


def test_memdir_diff_applies_with_git(db: str, tmp_path: Path) -> None:
    run(db, "write", "/p/f.md", "--create", input="a\nb")
    first = sha("a\nb")
    assert run(db, "write", "/p/f.md", "--if-match", first, input="a\nc").exit_code == 0
    diff = run(db, "diff", "/p/f.md", "1").stdout
    assert "\\ No newline at end of file" in diff and "-b+c" not in diff
    work = tmp_path / "g"
    (work / "p").mkdir(parents=True)
    (work / "p" / "f.md").write_text("a\nb")
    (work / "d.patch").write_text(diff)
    subprocess.run(["git", "apply", "d.patch"], cwd=work, check=True)
    assert (work / "p" / "f.md").read_text() == "a\nc"


# --- HTTP: If-Match lists, ETags per representation, HEAD, /mcp ------------------------------


@pytest.mark.anyio
async def test_if_match_lists_and_weak_tags(rest: Any) -> None:
    client, svc = rest
    await client.put(f"{F}/a.md", content="v1\n")
    current, v2 = sha("v1\n"), sha("v2\n")
    listed = {"If-Match": f'"{"0" * 64}", "{current}"'}
    r = await client.put(f"{F}/a.md", content="v2\n", headers=listed)
    assert r.status_code == 200, r.text
    weak = {"If-Match": f'W/"{v2}"'}  # weak tags never match If-Match
    r = await client.put(f"{F}/a.md", content="v3\n", headers=weak)
    assert r.status_code == 412 and r.json()["error"]["current_sha256"] == v2
    stale_list = {"If-Match": f'"{current}", W/"{v2}"'}
    assert (await client.put(f"{F}/a.md", content="v3\n", headers=stale_list)).status_code == 412
    json_tag = (await client.get(f"{F}/a.md", params={"format": "json"})).headers["etag"]
    r = await client.put(f"{F}/a.md", content="v3\n", headers={"If-Match": json_tag})
    assert r.status_code == 200  # the JSON view's ETag names the same content
    assert svc.read(OWNER, STORE, "/a.md").content == "v3\n"


@pytest.mark.anyio
async def test_representations_have_their_own_etags(rest: Any) -> None:
    client, _ = rest
    await client.put(f"{F}/a.md", content="x\n")
    md = await client.get(f"{F}/a.md")
    js = await client.get(f"{F}/a.md", headers={"Accept": "application/json"})
    assert md.headers["etag"] != js.headers["etag"]
    assert md.headers["vary"] == js.headers["vary"] == "Accept"
    again = await client.get(f"{F}/a.md", headers={"If-None-Match": md.headers["etag"],
                                                    "Accept": "application/json"})  # fmt: skip
    assert again.status_code == 200 and again.json()["content"] == "x\n"
    cached = await client.get(f"{F}/a.md", headers={"If-None-Match": js.headers["etag"],
                                                     "Accept": "application/json"})  # fmt: skip
    assert cached.status_code == 304


@pytest.mark.anyio
async def test_head_answers_every_get_route(rest: Any) -> None:
    client, _ = rest
    await client.put(f"{F}/a.md", content="hello\n")
    for url in (f"{F}/a.md", f"/v1/stores/{STORE}/tree", f"/v1/stores/{STORE}/commits",
                "/v1/stores", "/healthz", "/openapi.json"):  # fmt: skip
        got = await client.get(url)
        head = await client.head(url)
        assert head.status_code == got.status_code == 200, (url, head.status_code)
        assert head.content == b""
        assert head.headers.get("content-length") == got.headers.get("content-length"), url
        assert head.headers.get("etag") == got.headers.get("etag")
    missing = await client.head(f"{F}/nope.md")
    assert missing.status_code == 404 and missing.content == b""


@pytest.mark.anyio
async def test_head_on_the_event_stream_returns(rest: Any) -> None:
    client, _ = rest
    with anyio.fail_after(10):
        r = await client.head(f"/v1/stores/{STORE}/changes/stream")
    assert r.status_code == 200 and r.content == b""


@pytest.mark.anyio
async def test_mcp_answers_without_a_redirect(tmp_path: Path) -> None:
    from memdir.server import create_server_app

    url = f"sqlite:///{tmp_path / 's.db'}"
    memdir.open(url, create=True).create_store(OWNER, STORE)
    app = create_server_app(Settings(db=url))
    async with app.router.lifespan_context(app):
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="https://m") as client:
            bare = await client.post("/mcp", json={})
            slash = await client.post("/mcp/", json={})
    assert bare.status_code == slash.status_code and bare.status_code not in (307, 308)
    assert "location" not in bare.headers


def test_the_sha_write_prints_is_what_if_match_takes(db: str) -> None:
    printed = run(db, "write", "/s.md", "--create", input="a\n").stdout
    shown = re.search(r"sha256 ([0-9a-f]+)", printed)
    assert shown and shown.group(1) == sha("a\n"), printed
    assert run(db, "write", "/s.md", "--if-match", shown.group(1), input="b\n").exit_code == 0
    short = run(db, "write", "/s.md", "--if-match", sha("b\n")[:12], input="c\n")
    assert short.exit_code == 2 and "all 64 hex digits" in short.stderr and "prefix" in short.stderr
    assert "expected" not in short.stderr  # not worded like a failed match
