"""The store contract: what every backend and every surface must do.

Each test runs on the service over each backend (a fresh SQLite file, a fresh PostgreSQL
database) and through each surface over SQLite (``tests/drivers.py``): REST requests to the
real ASGI app (``asgi``), the SDK against a live ``memdir serve`` on 127.0.0.1 (``sdk``), and
MCP client sessions over stdio (``mcp-stdio``) and over streamable HTTP to that server's
``/mcp`` (``mcp-http``). Servers and sessions start once per module; every test gets a fresh
store. A test that has no meaning on a surface says so with :func:`not_on` and is skipped there
with the reason. Nothing is mocked.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa

import memdir
from drivers import (
    AsgiSurface,
    McpDriver,
    McpSessions,
    SdkDriver,
    Tokens,
    actor_id,
    direct,
    http_connect,
    reset,
    stdio_connect,
)
from helpers import STORE, assert_consistent, indexed, live_heads, sha, snapshot
from memdir import (
    OWNER,
    Conflict,
    ContentTooLarge,
    Delete,
    EditConflict,
    Forbidden,
    IdempotencyMismatch,
    Insert,
    InvalidInput,
    InvalidPath,
    MemoryService,
    NoChange,
    NotFound,
    PathConflict,
    PreconditionFailed,
    PreconditionRequired,
    Principal,
    Provenance,
    Rename,
    StrReplace,
    Write,
)
from memdir.storage.schema import blobs

F = TypeVar("F", bound=Callable[..., Any])

MCP = ("mcp-stdio", "mcp-http")
SURFACES = [
    pytest.param("sqlite", id="sqlite"),
    pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    pytest.param("asgi", id="asgi"),
    pytest.param("sdk", id="sdk"),
    pytest.param("mcp-stdio", id="mcp-stdio"),
    pytest.param("mcp-http", id="mcp-http"),
]


def not_on(*surfaces: str, reason: str) -> Callable[[F], F]:
    """Skip a test on ``surfaces`` (it has no meaning there), saying why."""

    def mark(test: F) -> F:
        skipped = dict(getattr(test, "not_on", {}))
        skipped.update(dict.fromkeys(surfaces, reason))
        test.not_on = skipped  # type: ignore[attr-defined]
        return test

    return mark


VIEW = (
    "MCP view shows content, sha256 and version: no file id, revision, time, older versions or "
    "exact line ranges"
)
NO_COMMIT_TOOL = "MCP has no tool for multi-operation commits, reverts, diffs or redaction"
NO_OTHER_STORES = "the MCP tools serve one store and do not manage stores"
NO_PROVENANCE = "the MCP tools take no provenance or idempotency key"
NO_LISTS = "MCP lists a directory as text, two levels deep (no ls, glob, grep context or limit)"
HISTORY = "MCP history of a store is text for reading, without filters"
SEARCH_SHA = "MCP search results show no sha256"
MCP_CREATE = (
    "MCP create without if_match is create-only: a blind overwrite is 'already exists' there, "
    "not a missing precondition"
)


@pytest.fixture(scope="module")
def asgi_surface(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiSurface]:
    url = f"sqlite:///{tmp_path_factory.mktemp('asgi') / 'memdir.db'}"
    surface = AsgiSurface(url)
    yield surface
    surface.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Tokens]]:
    """`memdir serve` on 127.0.0.1 (REST and /mcp) and tokens minted in its database."""
    from test_api_live import ServeProcess

    where = tmp_path_factory.mktemp("serve")
    db = f"sqlite:///{where / 'memdir.db'}"
    server = ServeProcess(db, where)
    try:
        server.wait_healthy(timeout=120)  # a loaded machine starts it slowly
        (admin_token,) = server.tokens()
        service = memdir.open(db)
        yield server.url, Tokens(service, owner_token=admin_token)
        service.db.close()
    finally:
        server.stop()


@pytest.fixture(scope="module")
def stdio_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpDriver]:
    url = f"sqlite:///{tmp_path_factory.mktemp('stdio') / 'memdir.db'}"
    service = memdir.open(url, create=True)
    service.create_store(OWNER, STORE)
    tokens = Tokens(service)  # registers the principals `--as` names
    sessions = McpSessions(stdio_connect(url))

    def call(principal: Principal, tool: str, arguments: dict[str, Any]) -> Any:
        if not principal.is_owner:
            tokens.token(principal)
        return sessions.call(principal, tool, arguments)

    yield McpDriver("mcp-stdio", service, call, lambda p: p.id)
    sessions.close()
    service.db.close()


@pytest.fixture(scope="module")
def http_sessions(live_server: tuple[str, Tokens]) -> Iterator[McpDriver]:
    url, tokens = live_server
    sessions = McpSessions(http_connect(f"{url}/mcp", tokens))
    yield McpDriver("mcp-http", tokens.service, sessions.call, lambda p: tokens.acting(p).id)
    sessions.close()


@pytest.fixture(scope="module")
def sdk_driver(live_server: tuple[str, Tokens]) -> Iterator[SdkDriver]:
    url, tokens = live_server
    driver = SdkDriver(tokens.service, url, tokens)
    yield driver
    driver.close()


def _service(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemoryService]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'memdir.db'}"
    else:
        from postgres_cluster import ENV_URL, create_database

        admin_url: str = request.getfixturevalue("postgres_admin_url")
        url = create_database(admin_url, f"memdir_t_{uuid.uuid4().hex[:16]}")
        if os.environ.get(ENV_URL):
            request.addfinalizer(lambda: _drop(admin_url, url))
    service = memdir.open(url, create=True)
    service.create_store(OWNER, STORE)
    try:
        yield service
    finally:
        service.db.close()


def _drop(admin_url: str, url: str) -> None:
    from sqlalchemy.engine import make_url

    from conftest import _drop_database

    _drop_database(admin_url, str(make_url(url).database))


@pytest.fixture(params=SURFACES)
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The service (on a backend) or a driver of a surface, over a fresh store ``default``."""
    surface: str = request.param
    skipped: dict[str, str] = getattr(request.function, "not_on", {})
    if surface in skipped:
        pytest.skip(f"not on {surface}: {skipped[surface]}")
    if surface in ("sqlite", "postgres"):
        yield from _service(request, tmp_path)
        return
    fixture = {"asgi": "asgi_surface", "sdk": "sdk_driver", "mcp-stdio": "stdio_sessions",
               "mcp-http": "http_sessions"}[surface]  # fmt: skip
    found = request.getfixturevalue(fixture)
    driver = found.driver() if isinstance(found, AsgiSurface) else found
    reset(direct(driver))
    yield driver


# Policy is not this suite's subject: the agents acting here are administrators (the default
# policy's ``admins`` group), so every call reaches the store and the actor is their own id.
ADMINS = frozenset({"admins"})
AGENT = Principal("agent:x", groups=ADMINS)
OTHER = Principal("agent:y", groups=ADMINS)


def create(svc: Any, path: str, content: str, store: str = STORE) -> str:
    """Create ``path`` and return its sha256."""
    result = svc.write(OWNER, store, path, content, if_absent=True)
    digest = result.results[0].sha256
    assert digest is not None
    return digest


# --- create / read / overwrite ---------------------------------------------------------------


@not_on(*MCP, reason=VIEW)
def test_create_and_read(svc: Any) -> None:
    content = "# Café rules\n\nAlways run the tests.\n"
    result = svc.write(OWNER, STORE, "/org/rules.md", content, if_absent=True)
    assert result.revision == 1
    assert not result.replayed
    [op] = result.results
    assert (op.op, op.path, op.version, op.operation) == ("write", "/org/rules.md", 1, "created")
    assert op.sha256 == sha(content)
    assert op.size == len(content.encode("utf-8"))
    view = svc.read(OWNER, STORE, "/org/rules.md")
    assert view.content == content
    assert (view.sha256, view.version, view.size) == (sha(content), 1, op.size)
    assert view.file_id == op.file_id
    assert view.revision == 1
    assert view.updated_at.tzinfo is not None
    assert (
        svc.read(OWNER, STORE, "/org/rules.md", lines=(3, 3)).content == "Always run the tests.\n"
    )
    assert svc.read(OWNER, STORE, "/org/rules.md", lines=(2, None)).content == (
        "\nAlways run the tests.\n"
    )


def test_sha256_is_of_the_raw_bytes(svc: Any) -> None:
    for index, content in enumerate(
        ["a\r\nb", "a\nb\n", "e\u0301", "\u00e9", "", "\ttab\x01\x7f", "\ufeffbom"]
    ):
        path = f"/raw/{index}.md"
        assert create(svc, path, content) == sha(content)
        assert svc.read(OWNER, STORE, path).content == content


def test_write_to_a_new_path_needs_no_precondition(svc: Any) -> None:
    result = svc.write(OWNER, STORE, "/a.md", "one")
    assert result.results[0].operation == "created"


def test_if_absent_on_an_existing_file_fails_with_the_current_sha(svc: Any) -> None:
    digest = create(svc, "/a.md", "one")
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionFailed) as info:
        svc.write(OWNER, STORE, "/a.md", "two", if_absent=True)
    assert info.value.details["current_sha256"] == digest
    assert snapshot(direct(svc)) == before


@not_on(*MCP, reason=MCP_CREATE)
def test_blind_overwrite_is_refused(svc: Any) -> None:
    create(svc, "/a.md", "one")
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionRequired) as info:
        svc.write(OWNER, STORE, "/a.md", "two")
    assert "/a.md" in info.value.message
    assert snapshot(direct(svc)) == before
    assert svc.read(OWNER, STORE, "/a.md").content == "one"


@not_on(*MCP, reason=VIEW)
def test_overwrite_with_if_match(svc: Any) -> None:
    digest = create(svc, "/a.md", "one")
    result = svc.write(OWNER, STORE, "/a.md", "two", if_match=digest)
    [op] = result.results
    assert (op.version, op.operation, op.sha256) == (2, "modified", sha("two"))
    assert result.revision == 2
    view = svc.read(OWNER, STORE, "/a.md")
    assert (view.content, view.version, view.revision) == ("two", 2, 2)
    # Rewriting the same content changes nothing: refused, no empty version (one rule for
    # every verb, after the precondition — a stale if_match still fails first).
    before = snapshot(direct(svc))
    with pytest.raises(NoChange) as unchanged:
        svc.write(OWNER, STORE, "/a.md", "two", if_match=sha("two"))
    assert unchanged.value.details["path"] == "/a.md"
    with pytest.raises(PreconditionFailed):
        svc.write(OWNER, STORE, "/a.md", "two", if_match=sha("one"))
    assert snapshot(direct(svc)) == before


def test_wrong_if_match_reports_the_current_sha(svc: Any) -> None:
    create(svc, "/a.md", "one")
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionFailed) as info:
        svc.write(OWNER, STORE, "/a.md", "two", if_match=sha("something else"))
    assert info.value.details["current_sha256"] == sha("one")
    assert sha("one") in info.value.message
    assert snapshot(direct(svc)) == before


def test_precondition_fails_even_when_content_equals_the_request(svc: Any) -> None:
    old = create(svc, "/a.md", "v1")
    svc.write(OWNER, STORE, "/a.md", "v2", if_match=old)  # client A
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionFailed) as info:  # client B computed the same change
        svc.write(OWNER, STORE, "/a.md", "v2", if_match=old)
    assert info.value.details["current_sha256"] == sha("v2")
    assert snapshot(direct(svc)) == before


def test_if_match_on_a_missing_file_fails(svc: Any) -> None:
    with pytest.raises(PreconditionFailed) as info:
        svc.write(OWNER, STORE, "/a.md", "x", if_match=sha("x"))
    assert info.value.details["current_sha256"] is None
    assert snapshot(direct(svc)).revision == 0


@not_on("sqlite", "postgres", "asgi", "sdk", reason="about the MCP tools' arguments")
def test_arguments_outside_a_tool_schema_are_a_one_line_error(svc: Any) -> None:
    create(svc, "/a.md", "a\n")
    for tool, arguments in [
        ("insert", {"path": "/a.md", "insert_line": "two", "insert_text": "x"}),
        ("view", {"path": "/a.md", "view_range": "1-2"}),
        ("create", {"path": "/b.md"}),
        ("str_replace", {"path": "/a.md", "old_str": 1, "new_str": None, "extra": True}),
    ]:
        text, is_error, meta = svc.raw(OWNER, tool, arguments)
        assert is_error and "\n" not in text and text.startswith("invalid argument "), text
        assert (meta or {})["memdir/error"]["type"] == "invalid_input", meta
    assert svc.read(OWNER, STORE, "/a.md").version == 1  # nothing ran


# --- edits -----------------------------------------------------------------------------------


def test_str_replace(svc: Any) -> None:
    create(svc, "/a.md", "alpha\nbeta\ngamma\n")
    result = svc.str_replace(OWNER, STORE, "/a.md", "beta", "BETA")
    assert (result.results[0].op, result.results[0].version) == ("str_replace", 2)
    assert svc.read(OWNER, STORE, "/a.md").content == "alpha\nBETA\ngamma\n"
    # with a matching and a stale if_match
    svc.str_replace(OWNER, STORE, "/a.md", "gamma", "G", if_match=sha("alpha\nBETA\ngamma\n"))
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionFailed) as info:
        svc.str_replace(OWNER, STORE, "/a.md", "alpha", "A", if_match=sha("alpha\nbeta\ngamma\n"))
    assert info.value.details["current_sha256"] == sha("alpha\nBETA\nG\n")
    assert snapshot(direct(svc)) == before


def test_str_replace_refuses_absent_or_ambiguous_text(svc: Any) -> None:
    create(svc, "/a.md", "x = 1\ny = 2\nx = 1\n")
    before = snapshot(direct(svc))
    with pytest.raises(EditConflict) as info:
        svc.str_replace(OWNER, STORE, "/a.md", "x = 1", "x = 3")
    assert info.value.details["lines"] == [1, 3]
    with pytest.raises(EditConflict):
        svc.str_replace(OWNER, STORE, "/a.md", "z = 9", "z = 3")
    with pytest.raises(EditConflict):
        svc.str_replace(OWNER, STORE, "/a.md", "", "z")
    with pytest.raises(NotFound):
        svc.str_replace(OWNER, STORE, "/missing.md", "x", "y")
    assert snapshot(direct(svc)) == before


def test_insert(svc: Any) -> None:
    create(svc, "/a.md", "one\ntwo\n")
    svc.insert(OWNER, STORE, "/a.md", 0, "zero")
    assert svc.read(OWNER, STORE, "/a.md").content == "zero\none\ntwo\n"
    svc.insert(OWNER, STORE, "/a.md", 2, "one and a half\n")
    assert svc.read(OWNER, STORE, "/a.md").content == "zero\none\none and a half\ntwo\n"
    svc.insert(OWNER, STORE, "/a.md", 4, "three")
    view = svc.read(OWNER, STORE, "/a.md")
    assert view.content == "zero\none\none and a half\ntwo\nthree\n"
    assert view.version == 4
    create(svc, "/b.md", "no newline")
    svc.insert(OWNER, STORE, "/b.md", 1, "next")
    assert svc.read(OWNER, STORE, "/b.md").content == "no newline\nnext\n"
    before = snapshot(direct(svc))
    with pytest.raises(EditConflict):
        svc.insert(OWNER, STORE, "/b.md", 3, "far")
    with pytest.raises(EditConflict):
        svc.insert(OWNER, STORE, "/b.md", -1, "before")
    with pytest.raises(PreconditionFailed):
        svc.insert(OWNER, STORE, "/b.md", 0, "x", if_match=sha("no newline"))
    with pytest.raises(NotFound):
        svc.insert(OWNER, STORE, "/nope.md", 0, "x")
    assert snapshot(direct(svc)) == before
    svc.insert(OWNER, STORE, "/b.md", 0, "top", if_match=sha("no newline\nnext\n"))
    assert svc.read(OWNER, STORE, "/b.md").content == "top\nno newline\nnext\n"


@not_on(*MCP, reason=VIEW)
def test_delete(svc: Any) -> None:
    digest = create(svc, "/a.md", "one")
    before = snapshot(direct(svc))
    with pytest.raises(PreconditionFailed):
        svc.delete(OWNER, STORE, "/a.md", if_match=sha("two"))
    with pytest.raises(NotFound):
        svc.delete(OWNER, STORE, "/b.md")
    assert snapshot(direct(svc)) == before
    result = svc.delete(OWNER, STORE, "/a.md", if_match=digest)
    [op] = result.results
    assert (op.operation, op.version, op.sha256) == ("deleted", 2, None)
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/a.md")
    assert svc.read(OWNER, STORE, "/a.md", version=1).content == "one"
    assert svc.ls(OWNER, STORE) == []
    # the path is free again: a new file, with its own id and numbering
    again = svc.write(OWNER, STORE, "/a.md", "new", if_absent=True).results[0]
    assert again.version == 1 and again.file_id != op.file_id


@not_on(*MCP, reason=VIEW)
def test_rename(svc: Any) -> None:
    create(svc, "/a.md", "content")
    file_id = svc.read(OWNER, STORE, "/a.md").file_id
    result = svc.rename(OWNER, STORE, "/a.md", "/dir/b.md")
    [op] = result.results
    assert (op.operation, op.path, op.old_path, op.version) == ("renamed", "/dir/b.md", "/a.md", 2)
    assert op.file_id == file_id and op.sha256 == sha("content")
    view = svc.read(OWNER, STORE, "/dir/b.md")
    assert (view.content, view.file_id, view.version) == ("content", file_id, 2)
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/a.md")
    svc.rename(OWNER, STORE, "/dir/b.md", "/c.md", if_match=sha("content"))
    assert svc.read(OWNER, STORE, "/c.md").file_id == file_id


def test_rename_never_overwrites(svc: Any) -> None:
    create(svc, "/a.md", "a")
    create(svc, "/b.md", "b")
    create(svc, "/d/x.md", "x")
    before = snapshot(direct(svc))
    with pytest.raises(PathConflict):
        svc.rename(OWNER, STORE, "/a.md", "/b.md")
    with pytest.raises(NoChange):  # onto itself: nothing would change
        svc.rename(OWNER, STORE, "/a.md", "/a.md")
    with pytest.raises(PathConflict):  # /d is a directory
        svc.rename(OWNER, STORE, "/a.md", "/d")
    with pytest.raises(PathConflict):  # /b.md is a file
        svc.rename(OWNER, STORE, "/a.md", "/b.md/a.md")
    with pytest.raises(PreconditionFailed):
        svc.rename(OWNER, STORE, "/a.md", "/e.md", if_match=sha("b"))
    with pytest.raises(NotFound):
        svc.rename(OWNER, STORE, "/zz.md", "/e.md")
    assert snapshot(direct(svc)) == before


@not_on(
    *MCP,
    reason="the memory tool refuses a rename onto an existing path, its own directory "
    "included, as the reference tool does (tests/test_memory_tool_differential.py)",
)
def test_a_file_can_move_into_its_own_former_directory_name(svc: Any) -> None:
    create(svc, "/d/x.md", "x")
    svc.rename(OWNER, STORE, "/d/x.md", "/d")  # /d held only the moving file
    assert svc.read(OWNER, STORE, "/d").content == "x"
    svc.rename(OWNER, STORE, "/d", "/d/y.md")
    assert svc.read(OWNER, STORE, "/d/y.md").version == 3


# --- commits ---------------------------------------------------------------------------------


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_multi_operation_commit(svc: Any) -> None:
    create(svc, "/old.md", "old")
    result = svc.commit(
        AGENT,
        STORE,
        [
            Write("/a.md", "alpha\n", if_absent=True),
            StrReplace("/a.md", "alpha", "ALPHA"),
            Insert("/a.md", 1, "beta"),
            Rename("/old.md", "/new.md"),
            Delete("/new.md"),
        ],
        Provenance(reason="batch", session="s1", source_kind="agent-inferred"),
    )
    assert result.revision == 2
    assert [(r.op, r.operation, r.version) for r in result.results] == [
        ("write", "created", 1),
        ("str_replace", "modified", 2),
        ("insert", "modified", 3),
        ("rename", "renamed", 2),
        ("delete", "deleted", 3),
    ]
    assert svc.read(OWNER, STORE, "/a.md").content == "ALPHA\nbeta\n"
    [info] = svc.history(OWNER, STORE, limit=1)
    assert (info.id, info.revision, info.actor) == (result.commit, 2, "agent:x")
    assert (info.reason, info.session, info.source_kind) == ("batch", "s1", "agent-inferred")
    assert len(info.changes) == 5
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_COMMIT_TOOL)
@pytest.mark.parametrize(
    ("third", "error"),
    [
        (Write("/exists.md", "x", if_absent=True), PreconditionFailed),
        (Write("/exists.md", "x"), PreconditionRequired),
        (Write("/exists.md", "x", if_match=sha("nope")), PreconditionFailed),
        (StrReplace("/exists.md", "absent text", "y"), EditConflict),
        (StrReplace("/missing.md", "a", "b"), NotFound),
        (Insert("/exists.md", 99, "x"), EditConflict),
        (Rename("/exists.md", "/one.md"), PathConflict),
        (Delete("/missing.md"), NotFound),
        (Write("/exists.md/child.md", "x", if_absent=True), PathConflict),
        (Write("/bad//path.md", "x", if_absent=True), InvalidPath),
        (Write("/big.md", "x" * 200_000, if_absent=True), ContentTooLarge),
        (Write("/fm.md", "---\nkey: [unclosed\n---\n", if_absent=True), InvalidInput),
    ],
)
def test_a_failing_operation_leaves_nothing_of_its_commit(
    svc: Any, third: Write | StrReplace | Insert | Rename | Delete, error: type
) -> None:
    create(svc, "/exists.md", "exists\n")
    before = snapshot(direct(svc))
    index_before = indexed(direct(svc))
    with pytest.raises(error):
        svc.commit(
            OWNER,
            STORE,
            [
                Write("/one.md", "one", if_absent=True),
                StrReplace("/exists.md", "exists", "changed"),
                third,
            ],
        )
    assert snapshot(direct(svc)) == before
    assert indexed(direct(svc)) == index_before
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/one.md")
    assert svc.read(OWNER, STORE, "/exists.md").content == "exists\n"
    assert len(svc.history(OWNER, STORE)) == 1
    assert_consistent(direct(svc))
    # and the next successful commit takes the very next revision
    assert svc.write(OWNER, STORE, "/one.md", "one", if_absent=True).revision == 2


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_an_empty_commit_is_refused(svc: Any) -> None:
    with pytest.raises(InvalidInput):
        svc.commit(OWNER, STORE, [])
    assert snapshot(direct(svc)).revision == 0


@not_on(*MCP, reason=HISTORY)
def test_revisions_are_gap_free(svc: Any) -> None:
    expected = 0
    for index in range(12):
        path = f"/f{index % 3}.md"
        try:
            svc.write(OWNER, STORE, path, f"v{index}", if_absent=True)
            expected += 1
        except PreconditionFailed:
            pass
        try:  # every other one fails: stale if_match
            svc.write(OWNER, STORE, path, f"w{index}", if_match=sha(f"v{index - 1}"))
            expected += 1
        except PreconditionFailed:
            pass
        svc.str_replace(OWNER, STORE, path, svc.read(OWNER, STORE, path).content, f"r{index}")
        expected += 1
    commits = svc.history(OWNER, STORE, limit=1000)
    assert [c.revision for c in reversed(commits)] == list(range(1, expected + 1))
    assert svc.store_info(OWNER, STORE).revision == expected
    assert_consistent(direct(svc))


# --- versions and history --------------------------------------------------------------------


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_version_numbers_continue_across_rename_and_delete_and_revert(svc: Any) -> None:
    first = create(svc, "/a.md", "v1")
    file_id = svc.read(OWNER, STORE, "/a.md").file_id
    svc.write(OWNER, STORE, "/a.md", "v2", if_match=first)  # 2
    svc.rename(OWNER, STORE, "/a.md", "/b.md")  # 3
    svc.str_replace(OWNER, STORE, "/b.md", "v2", "v4")  # 4
    svc.delete(OWNER, STORE, "/b.md")  # 5
    result = svc.revert_file(OWNER, STORE, "/b.md", 4)  # 6: back to life at /b.md
    [op] = result.results
    assert (op.op, op.operation, op.version, op.path, op.file_id) == (
        "revert",
        "created",
        6,
        "/b.md",
        file_id,
    )
    view = svc.read(OWNER, STORE, "/b.md")
    assert (view.content, view.version, view.file_id) == ("v4", 6, file_id)
    history = svc.file_history(OWNER, STORE, "/b.md")
    assert [(v.version, v.operation, v.path) for v in history] == [
        (6, "created", "/b.md"),
        (5, "deleted", "/b.md"),
        (4, "modified", "/b.md"),
        (3, "renamed", "/b.md"),
        (2, "modified", "/a.md"),
        (1, "created", "/a.md"),
    ]
    assert history[3].old_path == "/a.md"
    assert svc.read(OWNER, STORE, "/b.md", version=1).content == "v1"
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_file_restores_content_not_paths(svc: Any) -> None:
    create(svc, "/a.md", "a")
    svc.rename(OWNER, STORE, "/a.md", "/b.md")
    svc.str_replace(OWNER, STORE, "/b.md", "a", "b")
    # a live file keeps its current path
    result = svc.revert_file(OWNER, STORE, "/b.md", 1)
    assert [(r.path, r.operation, r.version) for r in result.results] == [("/b.md", "modified", 4)]
    assert svc.read(OWNER, STORE, "/b.md").content == "a"
    # a deleted file comes back where it was when deleted
    svc.rename(OWNER, STORE, "/b.md", "/c.md")
    svc.delete(OWNER, STORE, "/c.md")
    result = svc.revert_file(OWNER, STORE, "/a.md", 3)
    assert [(r.path, r.operation, r.version) for r in result.results] == [("/c.md", "created", 7)]
    assert svc.read(OWNER, STORE, "/c.md").content == "b"
    assert svc.ls(OWNER, STORE) == svc.ls(OWNER, STORE, "/c.md")
    assert_consistent(direct(svc))


def test_history_follows_a_file_across_renames(svc: Any) -> None:
    create(svc, "/a.md", "x")
    svc.rename(OWNER, STORE, "/a.md", "/b.md")
    svc.rename(OWNER, STORE, "/b.md", "/c/d.md")
    create(svc, "/a.md", "a new file at the old path")
    old = svc.file_history(OWNER, STORE, "/c/d.md")
    assert [(v.version, v.path, v.old_path) for v in old] == [
        (3, "/c/d.md", "/b.md"),
        (2, "/b.md", "/a.md"),
        (1, "/a.md", None),
    ]
    # /b.md is nobody's now: it names the file that last lived there
    assert [v.version for v in svc.file_history(OWNER, STORE, "/b.md")] == [3, 2, 1]
    # /a.md is live again: the new file
    assert [v.version for v in svc.file_history(OWNER, STORE, "/a.md")] == [1]
    with pytest.raises(NotFound):
        svc.file_history(OWNER, STORE, "/never.md")


@not_on(*MCP, reason=HISTORY)
def test_history_filters(svc: Any) -> None:
    svc.write(AGENT, STORE, "/p/a.md", "a", if_absent=True, provenance=Provenance(session="s1"))
    time.sleep(0.01)
    middle = dt.datetime.now(dt.UTC)
    time.sleep(0.01)
    svc.write(OWNER, STORE, "/q/b.md", "b", if_absent=True, provenance=Provenance(session="s2"))
    svc.write(OTHER, STORE, "/q/c.md", "c", if_absent=True, provenance=Provenance(session="s1"))
    svc.rename(AGENT, STORE, "/p/a.md", "/r/a.md", provenance=Provenance(session="s3"))
    everything = svc.history(OWNER, STORE)
    assert [c.revision for c in everything] == [4, 3, 2, 1]
    assert [c.actor for c in everything] == ["agent:x", "agent:y", actor_id(svc, OWNER), "agent:x"]
    assert [c.revision for c in svc.history(OWNER, STORE, actor="agent:x")] == [4, 1]
    assert [c.revision for c in svc.history(OWNER, STORE, actor="agent:nobody")] == []
    assert [c.revision for c in svc.history(OWNER, STORE, session="s1")] == [3, 1]
    assert [c.revision for c in svc.history(OWNER, STORE, session="s1", actor="agent:y")] == [3]
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/q")] == [3, 2]
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/q/")] == [3, 2]
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/p")] == [4, 1]  # old path
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/r")] == [4]
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/q/b.md")] == [2]
    assert [c.revision for c in svc.history(OWNER, STORE, prefix="/")] == [4, 3, 2, 1]
    assert [c.revision for c in svc.history(OWNER, STORE, since=middle)] == [4, 3, 2]
    assert [c.revision for c in svc.history(OWNER, STORE, until=middle)] == [1]
    assert [c.revision for c in svc.history(OWNER, STORE, limit=2)] == [4, 3]
    [rename] = svc.history(OWNER, STORE, prefix="/r")
    [change] = rename.changes
    assert (change.operation, change.path, change.old_path, change.actor) == (
        "renamed",
        "/r/a.md",
        "/p/a.md",
        "agent:x",
    )


@not_on("asgi", "sdk", *MCP, reason="HTTP pages commits by an opaque cursor, not a revision")
def test_history_before_a_revision(svc: Any) -> None:
    for name in "abcd":
        create(svc, f"/{name}.md", name)
    assert [c.revision for c in svc.history(OWNER, STORE, before_revision=3)] == [2, 1]
    assert [c.revision for c in svc.history(OWNER, STORE, before_revision=1)] == []


@not_on(*MCP, reason=HISTORY)
def test_history_time_filters_respect_time_zones(svc: Any) -> None:
    create(svc, "/a.md", "a")
    time.sleep(0.01)
    middle = dt.datetime.now(dt.UTC)
    time.sleep(0.01)
    create(svc, "/b.md", "b")
    for zone in (dt.timezone(dt.timedelta(hours=5)), dt.timezone(dt.timedelta(hours=-7))):
        local = middle.astimezone(zone)
        assert [c.revision for c in svc.history(OWNER, STORE, since=local)] == [2], zone
        assert [c.revision for c in svc.history(OWNER, STORE, until=local)] == [1], zone


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_diff(svc: Any) -> None:
    first = create(svc, "/a.md", "one\ntwo\nthree\n")
    svc.write(OWNER, STORE, "/a.md", "one\n2\nthree\n", if_match=first)
    svc.rename(OWNER, STORE, "/a.md", "/b.md")
    text = svc.diff(OWNER, STORE, "/b.md", 1, 2)
    assert text.splitlines() == [
        "--- a/a.md\tversion 1",
        "+++ b/a.md\tversion 2",
        "@@ -1,3 +1,3 @@",
        " one",
        "-two",
        "+2",
        " three",
    ]
    to_current = svc.diff(OWNER, STORE, "/b.md", 1)
    assert "+++ b/b.md\tversion 3" in to_current and "-two" in to_current
    assert svc.diff(OWNER, STORE, "/b.md", 2, 3) == ""
    with pytest.raises(NotFound):
        svc.diff(OWNER, STORE, "/b.md", 1, 9)


# --- reverts ---------------------------------------------------------------------------------


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_file(svc: Any) -> None:
    first = create(svc, "/a.md", "good")
    svc.write(OWNER, STORE, "/a.md", "bad", if_match=first)
    result = svc.revert_file(AGENT, STORE, "/a.md", 1, Provenance(reason="undo"))
    [op] = result.results
    assert (op.op, op.operation, op.version, op.sha256) == ("revert", "modified", 3, first)
    assert svc.read(OWNER, STORE, "/a.md").content == "good"
    [info] = svc.history(OWNER, STORE, limit=1)
    assert (info.actor, info.reason) == ("agent:x", "undo")
    before = snapshot(direct(svc))
    with pytest.raises(NoChange):  # already that content: nothing to commit
        svc.revert_file(OWNER, STORE, "/a.md", 1)
    with pytest.raises(NotFound) as info_nf:
        svc.revert_file(OWNER, STORE, "/a.md", 7)
    assert info_nf.value.details["version"] == 7
    with pytest.raises(NotFound):
        svc.revert_file(OWNER, STORE, "/nothing.md", 1)
    assert snapshot(direct(svc)) == before


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_file_refuses_a_taken_path(svc: Any) -> None:
    create(svc, "/a.md", "a")
    svc.rename(OWNER, STORE, "/a.md", "/b.md")
    svc.delete(OWNER, STORE, "/b.md")
    create(svc, "/b.md", "squatter")
    before = snapshot(direct(svc))
    with pytest.raises(PathConflict):  # the old file would come back at /b.md
        svc.revert_file(OWNER, STORE, "/a.md", 1)
    create(svc, "/d/x.md", "x")
    svc.delete(OWNER, STORE, "/d/x.md")
    create(svc, "/d", "now a file")
    with pytest.raises(PathConflict):  # /d is a file, so /d/x.md cannot be
        svc.revert_file(OWNER, STORE, "/d/x.md", 1)
    assert snapshot(direct(svc)).files == {**before.files, "/d": snapshot(direct(svc)).files["/d"]}


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_commit(svc: Any) -> None:
    keep = create(svc, "/keep.md", "keep v1\n")
    create(svc, "/old.md", "to be moved\n")
    create(svc, "/gone.md", "to be deleted\n")
    ids = {f.path: f.file_id for f in svc.iter_files(OWNER, STORE)}
    change = svc.commit(
        AGENT,
        STORE,
        [
            Write("/new.md", "brand new\n", if_absent=True),
            Rename("/old.md", "/moved/old.md"),
            Delete("/gone.md"),
            Write("/keep.md", "keep v2\n", if_match=keep),
        ],
    )
    before_revert = snapshot(direct(svc))
    result = svc.revert_commit(OWNER, STORE, change.commit[:8])
    assert result.revision == before_revert.revision + 1
    state = {f.path: (f.content, f.file_id) for f in svc.iter_files(OWNER, STORE)}
    assert state == {
        "/keep.md": ("keep v1\n", ids["/keep.md"]),
        "/old.md": ("to be moved\n", ids["/old.md"]),
        "/gone.md": ("to be deleted\n", ids["/gone.md"]),
    }
    assert {(r.path, r.operation, r.version) for r in result.results} == {
        ("/new.md", "deleted", 2),
        ("/old.md", "renamed", 3),
        ("/gone.md", "created", 3),
        ("/keep.md", "modified", 3),
    }
    assert_consistent(direct(svc))
    # reverting the revert re-applies the change
    svc.revert_commit(OWNER, STORE, result.commit)
    assert {f.path for f in svc.iter_files(OWNER, STORE)} == {
        "/keep.md",
        "/moved/old.md",
        "/new.md",
    }
    assert svc.read(OWNER, STORE, "/keep.md").content == "keep v2\n"
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_commit_is_refused_when_a_file_changed_since(svc: Any) -> None:
    first = create(svc, "/a.md", "1")
    change = svc.write(OWNER, STORE, "/a.md", "2", if_match=first)
    svc.write(OWNER, STORE, "/a.md", "3", if_match=sha("2"))
    before = snapshot(direct(svc))
    with pytest.raises(Conflict) as info:
        svc.revert_commit(OWNER, STORE, change.commit)
    assert info.value.details["path"] == "/a.md"
    assert snapshot(direct(svc)) == before
    # a deleted-then-recreated file also counts as changed
    made = svc.write(OWNER, STORE, "/b.md", "b", if_absent=True)
    svc.delete(OWNER, STORE, "/b.md")
    with pytest.raises(Conflict):
        svc.revert_commit(OWNER, STORE, made.commit)
    gone = svc.delete(OWNER, STORE, "/a.md")
    svc.revert_file(OWNER, STORE, "/a.md", 3)
    with pytest.raises(Conflict):
        svc.revert_commit(OWNER, STORE, gone.commit)


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_revert_commit_ids(svc: Any) -> None:
    create(svc, "/a.md", "a")
    with pytest.raises(NotFound) as info:
        svc.revert_commit(OWNER, STORE, "ffffffffffff")
    assert "ffffffffffff" in info.value.message
    with pytest.raises(InvalidInput):
        svc.revert_commit(OWNER, STORE, "abc")
    assert snapshot(direct(svc)).revision == 1


# --- redaction -------------------------------------------------------------------------------


def _blob_exists(svc: Any, digest: str) -> bool:
    with direct(svc).db.read() as repo:
        return (
            repo.conn.execute(sa.select(blobs.c.sha256).where(blobs.c.sha256 == digest)).first()
            is not None
        )


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_redaction(svc: Any) -> None:
    secret = "token=hunter2 zebrasecret\n"
    leaked = create(svc, "/a.md", secret)
    svc.write(OWNER, STORE, "/a.md", "clean\n", if_match=leaked)
    create(svc, "/b.md", secret)  # the same secret pasted elsewhere
    with pytest.raises(Conflict) as info:  # current in /b.md
        svc.redact(OWNER, STORE, "/a.md", 1)
    assert info.value.details["current_in"] == ["/b.md"]
    with pytest.raises(Conflict):  # the current version itself
        svc.redact(OWNER, STORE, "/b.md", 1)
    svc.write(OWNER, STORE, "/b.md", "also clean\n", if_match=leaked)
    before = snapshot(direct(svc))
    plan = svc.redact(OWNER, STORE, "/a.md", 1, dry_run=True)
    assert not plan.done and plan.sha256 == leaked
    assert [(v.path, v.version) for v in plan.versions] == [("/a.md", 1), ("/b.md", 1)]
    assert svc.read(OWNER, STORE, "/b.md", version=1).content == secret  # dry run
    done = svc.redact(AGENT, STORE, "/a.md", 1)
    assert done.done and [(v.path, v.version) for v in done.versions] == [
        ("/a.md", 1),
        ("/b.md", 1),
    ]
    assert snapshot(direct(svc)) == before  # no commit, no revision
    for path in ("/a.md", "/b.md"):
        with pytest.raises(NotFound):
            svc.read(OWNER, STORE, path, version=1)
        with pytest.raises(NotFound):
            svc.diff(OWNER, STORE, path, 1)
        with pytest.raises(NotFound):
            svc.revert_file(OWNER, STORE, path, 1)
        [v2, v1] = svc.file_history(OWNER, STORE, path)
        assert (v1.redacted, v1.sha256, v1.actor) == (True, None, actor_id(svc, OWNER))
        assert (v2.redacted, v2.sha256) == (False, svc.read(OWNER, STORE, path).sha256)
    assert not _blob_exists(svc, leaked)
    assert svc.search(OWNER, STORE, "zebrasecret") == []
    assert svc.grep(OWNER, STORE, "hunter2") == []
    with pytest.raises(Conflict):  # already redacted
        svc.redact(OWNER, STORE, "/a.md", 1)
    with pytest.raises(NotFound):
        svc.redact(OWNER, STORE, "/a.md", 5)
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_redaction_of_a_deleted_files_last_content(svc: Any) -> None:
    create(svc, "/a.md", "personal data\n")
    svc.delete(OWNER, STORE, "/a.md")
    with pytest.raises(Conflict):  # the deletion version has no content
        svc.redact(OWNER, STORE, "/a.md", 2)
    svc.redact(OWNER, STORE, "/a.md", 1)
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/a.md", version=1)
    with pytest.raises(NotFound):
        svc.revert_file(OWNER, STORE, "/a.md", 1)
    # the same content written again is a new, readable version
    create(svc, "/a.md", "personal data\n")
    assert svc.read(OWNER, STORE, "/a.md").content == "personal data\n"
    assert_consistent(direct(svc))


# --- idempotency -----------------------------------------------------------------------------


@not_on(*MCP, reason=NO_PROVENANCE)
def test_idempotent_retry_returns_the_first_result(svc: Any) -> None:
    key = Provenance(idempotency_key="k-1", reason="first")
    first = svc.write(OWNER, STORE, "/a.md", "one", if_absent=True, provenance=key)
    again = svc.write(OWNER, STORE, "/a.md", "one", if_absent=True, provenance=key)
    assert again.replayed and not first.replayed
    assert dataclasses.replace(again, replayed=False) == first
    assert svc.store_info(OWNER, STORE).revision == 1
    assert len(svc.file_history(OWNER, STORE, "/a.md")) == 1
    # even after the file moved on, the retry is answered from the record, not re-applied
    svc.write(OWNER, STORE, "/a.md", "two", if_match=sha("one"))
    third = svc.write(OWNER, STORE, "/a.md", "one", if_absent=True, provenance=key)
    assert dataclasses.replace(third, replayed=False) == first
    assert svc.read(OWNER, STORE, "/a.md").content == "two"
    # a multi-operation commit replays too
    ops = [Write("/b.md", "b", if_absent=True), Rename("/a.md", "/c.md")]
    made = svc.commit(OWNER, STORE, ops, Provenance(idempotency_key="k-2"))
    replay = svc.commit(OWNER, STORE, ops, Provenance(idempotency_key="k-2"))
    assert replay.replayed and dataclasses.replace(replay, replayed=False) == made
    assert svc.store_info(OWNER, STORE).revision == 3
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_PROVENANCE)
def test_idempotency_key_reused_for_another_request(svc: Any) -> None:
    key = Provenance(idempotency_key="k")
    svc.write(OWNER, STORE, "/a.md", "one", if_absent=True, provenance=key)
    before = snapshot(direct(svc))
    with pytest.raises(IdempotencyMismatch) as info:
        svc.write(OWNER, STORE, "/a.md", "other", if_absent=True, provenance=key)
    assert "'k'" in info.value.message
    with pytest.raises(IdempotencyMismatch):
        svc.write(OWNER, STORE, "/b.md", "one", if_absent=True, provenance=key)
    with pytest.raises(IdempotencyMismatch):
        svc.delete(OWNER, STORE, "/a.md", provenance=key)
    assert snapshot(direct(svc)) == before


@not_on(*MCP, reason=NO_PROVENANCE)
def test_idempotency_keys_are_scoped_by_principal_and_store(svc: Any) -> None:
    key = Provenance(idempotency_key="shared")
    first = svc.write(AGENT, STORE, "/a.md", "one", if_absent=True, provenance=key)
    mine = svc.write(OTHER, STORE, "/b.md", "two", if_absent=True, provenance=key)
    assert not mine.replayed and mine.commit != first.commit
    # the other principal's identical request is not a replay of the first: it really runs
    with pytest.raises(PreconditionFailed):
        svc.write(OWNER, STORE, "/a.md", "one", if_absent=True, provenance=key)
    svc.create_store(OWNER, "second")
    elsewhere = svc.write(AGENT, "second", "/a.md", "one", if_absent=True, provenance=key)
    assert not elsewhere.replayed and elsewhere.revision == 1
    assert svc.store_info(OWNER, STORE).revision == 2


@not_on(*MCP, reason=NO_PROVENANCE)
def test_a_failed_attempt_does_not_consume_the_key(svc: Any) -> None:
    create(svc, "/a.md", "a")
    key = Provenance(idempotency_key="retry-me")
    with pytest.raises(PreconditionFailed):
        svc.write(OWNER, STORE, "/a.md", "b", if_match=sha("x"), provenance=key)
    result = svc.write(OWNER, STORE, "/a.md", "b", if_match=sha("a"), provenance=key)
    assert not result.replayed and result.revision == 2


# --- grep ------------------------------------------------------------------------------------


@not_on(*MCP, reason=NO_LISTS)
def test_grep(svc: Any) -> None:
    create(svc, "/p/a.md", "one\nTODO: first\nthree\nfour\ntodo second\n")
    create(svc, "/p/b.md", "nothing here\n")
    create(svc, "/q/c.md", "TODO elsewhere\n")
    hits = svc.grep(OWNER, STORE, "TODO")
    assert [(m.path, m.line, m.text) for m in hits] == [
        ("/p/a.md", 2, "TODO: first"),
        ("/q/c.md", 1, "TODO elsewhere"),
    ]
    folded = svc.grep(OWNER, STORE, "todo", ignore_case=True, prefix="/p")
    assert [(m.path, m.line) for m in folded] == [("/p/a.md", 2), ("/p/a.md", 5)]
    [ctx] = svc.grep(OWNER, STORE, "^three$", context=2)
    assert (ctx.before, ctx.after) == (("one", "TODO: first"), ("four", "todo second"))
    [edge] = svc.grep(OWNER, STORE, "^one$", context=1)
    assert (edge.before, edge.after) == ((), ("TODO: first",))
    assert len(svc.grep(OWNER, STORE, ".", limit=3)) == 3
    assert svc.grep(OWNER, STORE, "TODO", prefix="/q/") == hits[1:]
    assert svc.grep(OWNER, STORE, "absent") == []
    with pytest.raises(InvalidInput) as info:
        svc.grep(OWNER, STORE, "([unclosed")
    assert "([unclosed" in info.value.message


# --- search ----------------------------------------------------------------------------------


@pytest.fixture
def corpus(svc: Any) -> Any:
    docs = {
        "/kb/all.md": "Deploying the kubernetes cluster needs a helm chart and a rollout.\n",
        "/kb/two.md": "The kubernetes cluster is managed by the platform team.\n",
        "/kb/one.md": "A cluster of grapes.\n",
        "/kb/run.md": "We were running the integration tests nightly.\n",
        "/kb/phrase.md": "Always use a red apple for the demo.\n",
        "/kb/reversed.md": "The apple is not red here, but green.\n",
        "/other/ops.md": "kubernetes operations handbook\n",
        "/kb/fillers.md": "The the the of and a an is are.\n",
    }
    for path, body in docs.items():
        create(svc, path, body)
    return svc


@not_on(*MCP, reason=SEARCH_SHA)
def test_search_ranks_documents_matching_more_terms_first(corpus: Any) -> None:
    hits = corpus.search(OWNER, STORE, "kubernetes cluster helm")
    paths = [h.path for h in hits]
    assert paths[0] == "/kb/all.md"
    assert set(paths) >= {"/kb/all.md", "/kb/two.md", "/kb/one.md", "/other/ops.md"}  # any term
    assert paths.index("/kb/two.md") < paths.index("/kb/one.md")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    top = hits[0]
    assert top.sha256 == sha(corpus.read(OWNER, STORE, "/kb/all.md").content)
    assert top.version == 1 and top.snippet


def test_search_stems(corpus: Any) -> None:
    assert "/kb/run.md" in [h.path for h in corpus.search(OWNER, STORE, "run")]
    assert "/kb/all.md" in [h.path for h in corpus.search(OWNER, STORE, "deploy")]
    assert "/kb/two.md" in [h.path for h in corpus.search(OWNER, STORE, "manage")]


def test_search_ignores_stop_words(corpus: Any) -> None:
    paths = [h.path for h in corpus.search(OWNER, STORE, "the grapes")]
    assert paths == ["/kb/one.md"]
    assert corpus.search(OWNER, STORE, "what is the") is not None  # only stop words: no error


def test_search_phrase_and_prefix(corpus: Any) -> None:
    assert [h.path for h in corpus.search(OWNER, STORE, '"red apple"')] == ["/kb/phrase.md"]
    assert {h.path for h in corpus.search(OWNER, STORE, "apple red")} == {
        "/kb/phrase.md",
        "/kb/reversed.md",
    }
    assert {h.path for h in corpus.search(OWNER, STORE, "kuber*")} == {
        "/kb/all.md",
        "/kb/two.md",
        "/other/ops.md",
    }
    assert corpus.search(OWNER, STORE, "zzzqqq*") == []


def test_search_path_prefix_and_limit(corpus: Any) -> None:
    assert [h.path for h in corpus.search(OWNER, STORE, "kubernetes", prefix="/other")] == [
        "/other/ops.md"
    ]
    assert {h.path for h in corpus.search(OWNER, STORE, "kubernetes", prefix="/kb/")} == {
        "/kb/all.md",
        "/kb/two.md",
    }
    assert len(corpus.search(OWNER, STORE, "kubernetes", limit=1)) == 1
    with pytest.raises(InvalidInput):
        corpus.search(OWNER, STORE, "kubernetes", limit=0)


HOSTILE_QUERIES = [
    "don't",
    "it's kubernetes' cluster",
    "e-mail",
    "-x",
    "--",
    "a:b",
    "path:/kb/all.md",
    'unbalanced "quote',
    '"',
    '""',
    '"""',
    "AND",
    "OR",
    "NOT",
    "NEAR",
    "kubernetes AND cluster",
    "kubernetes OR NOT cluster",
    "NEAR(kubernetes cluster, 2)",
    "*",
    "**",
    "kuber**",
    "*kuber",
    "",
    "   ",
    "(",
    ")",
    "(kubernetes",
    "^",
    "^kubernetes",
    "+",
    "{kubernetes}",
    "[kubernetes]",
    "col:umn:",
    "\\",
    "'",
    "''",
    ";",
    "'; DROP TABLE heads; --",
    "&|!<->:*",
    "kubernetes & cluster | !helm",
    "ünïcödé 日本語 emoji 🚀",
    "\u200b\u202e",
    "\x00",
    "a" * 500,
    "kubernetes " * 100,
]


def test_hostile_queries_do_not_raise(corpus: Any) -> None:
    failures: dict[str, str] = {}
    for query in HOSTILE_QUERIES:
        if "\x00" in query and getattr(corpus, "name", None) in ("asgi", "sdk"):
            with pytest.raises(InvalidInput):  # HTTP refuses NUL in any query parameter
                corpus.search(OWNER, STORE, query)
            continue
        try:
            hits = corpus.search(OWNER, STORE, query)
            assert all(h.path.startswith("/") for h in hits)
        except Exception as exc:
            failures[query[:40]] = f"{type(exc).__name__}: {exc}"[:300]
        for prefix in ("/kb", "/kb/"):
            corpus.search(OWNER, STORE, query, prefix=prefix, limit=3)
    assert not failures
    assert_consistent(direct(corpus))  # and a failed query left no broken transaction behind


def test_hostile_query_words_still_match(corpus: Any) -> None:
    assert "/kb/two.md" in [h.path for h in corpus.search(OWNER, STORE, "kubernetes AND (")]
    assert "/kb/all.md" in [h.path for h in corpus.search(OWNER, STORE, "helm:chart")]
    assert "/kb/all.md" in [h.path for h in corpus.search(OWNER, STORE, '"helm chart')]


@not_on(*MCP, reason=NO_COMMIT_TOOL)
def test_search_index_follows_every_change(svc: Any) -> None:
    first = create(svc, "/a.md", "original walrus\n")
    create(svc, "/b.md", "bystander\n")
    assert indexed(direct(svc)) == live_heads(direct(svc))
    svc.write(OWNER, STORE, "/a.md", "changed narwhal\n", if_match=first)
    assert svc.search(OWNER, STORE, "walrus") == []
    assert [h.path for h in svc.search(OWNER, STORE, "narwhal")] == ["/a.md"]
    assert indexed(direct(svc)) == live_heads(direct(svc))
    svc.str_replace(OWNER, STORE, "/a.md", "narwhal", "dolphin")
    assert svc.search(OWNER, STORE, "narwhal") == []
    svc.rename(OWNER, STORE, "/a.md", "/sea/a.md")
    [hit] = svc.search(OWNER, STORE, "dolphin")
    assert (hit.path, hit.version) == ("/sea/a.md", 4)
    assert indexed(direct(svc)) == live_heads(direct(svc))
    svc.delete(OWNER, STORE, "/sea/a.md")
    assert svc.search(OWNER, STORE, "dolphin") == []
    assert indexed(direct(svc)) == live_heads(direct(svc))
    svc.revert_file(OWNER, STORE, "/sea/a.md", 1)
    assert [h.path for h in svc.search(OWNER, STORE, "walrus")] == ["/sea/a.md"]
    assert indexed(direct(svc)) == live_heads(direct(svc))
    assert_consistent(direct(svc))


@not_on(*MCP, reason=NO_OTHER_STORES)
def test_search_is_scoped_to_the_store(svc: Any) -> None:
    svc.create_store(OWNER, "other")
    create(svc, "/a.md", "platypus here\n")
    create(svc, "/a.md", "platypus there\n", store="other")
    assert [h.snippet for h in svc.search(OWNER, "other", "platypus")] != []
    [hit] = svc.search(OWNER, STORE, "platypus")
    assert hit.sha256 == sha("platypus here\n")


# --- tree: ls and glob -----------------------------------------------------------------------


@pytest.fixture
def tree(svc: Any) -> Any:
    for path in [
        "/README.md",
        "/org/rules.md",
        "/org/team/alice.md",
        "/org/team/bob.md",
        "/projects/acme/conventions.md",
        "/projects/acme/notes.txt",
        "/projects/acme/deep/er/file.md",
        "/projects/zeta/a.md",
    ]:
        create(svc, path, f"content of {path}\n")
    return svc


@not_on(*MCP, reason=NO_LISTS)
def test_ls(tree: Any) -> None:
    top = tree.ls(OWNER, STORE)
    assert [(e.path, e.kind, e.files) for e in top] == [
        ("/README.md", "file", 0),
        ("/org", "dir", 3),
        ("/projects", "dir", 4),
    ]
    readme = top[0]
    assert readme.sha256 == sha("content of /README.md\n") and readme.version == 1
    assert readme.size == len("content of /README.md\n")
    acme = tree.ls(OWNER, STORE, "/projects/acme")
    assert [(e.path, e.kind, e.files) for e in acme] == [
        ("/projects/acme/conventions.md", "file", 0),
        ("/projects/acme/deep", "dir", 1),
        ("/projects/acme/notes.txt", "file", 0),
    ]
    assert tree.ls(OWNER, STORE, "/projects/acme/") == acme
    deep = tree.ls(OWNER, STORE, "/projects", depth=2)
    assert [(e.path, e.kind) for e in deep] == [
        ("/projects/acme/conventions.md", "file"),
        ("/projects/acme/deep", "dir"),
        ("/projects/acme/notes.txt", "file"),
        ("/projects/zeta/a.md", "file"),
    ]
    everything = tree.ls(OWNER, STORE, depth=None)
    assert [e.path for e in everything] == sorted(f.path for f in tree.iter_files(OWNER, STORE))
    assert all(e.kind == "file" for e in everything) and len(everything) == 8
    [single] = tree.ls(OWNER, STORE, "/org/rules.md")
    assert (single.path, single.kind) == ("/org/rules.md", "file")
    with pytest.raises(NotFound):
        tree.ls(OWNER, STORE, "/nope")
    with pytest.raises(NotFound):  # a prefix is a directory, not a string prefix
        tree.ls(OWNER, STORE, "/proj")


@not_on(*MCP, reason=NO_LISTS)
def test_ls_of_an_empty_store(svc: Any) -> None:
    assert svc.ls(OWNER, STORE) == []
    assert svc.ls(OWNER, STORE, depth=None) == []


@not_on(*MCP, reason=NO_LISTS)
def test_glob(tree: Any) -> None:
    assert tree.glob(OWNER, STORE, "/*.md") == ["/README.md"]
    assert tree.glob(OWNER, STORE, "/org/*") == ["/org/rules.md"]
    assert tree.glob(OWNER, STORE, "/org/**") == [
        "/org/rules.md",
        "/org/team/alice.md",
        "/org/team/bob.md",
    ]
    assert tree.glob(OWNER, STORE, "/**/*.txt") == ["/projects/acme/notes.txt"]
    assert len(tree.glob(OWNER, STORE, "/**/*.md")) == 7
    assert tree.glob(OWNER, STORE, "/projects/*/a.md") == ["/projects/zeta/a.md"]
    assert tree.glob(OWNER, STORE, "/projects/**/file.md") == ["/projects/acme/deep/er/file.md"]
    assert tree.glob(OWNER, STORE, "/org/team/???.md") == ["/org/team/bob.md"]
    assert tree.glob(OWNER, STORE, "/org/team/?????.md") == ["/org/team/alice.md"]
    assert tree.glob(OWNER, STORE, "org/team/b*") == ["/org/team/bob.md"]
    assert tree.glob(OWNER, STORE, "/none/**") == []
    with pytest.raises(InvalidInput):
        tree.glob(OWNER, STORE, "")


# --- stores ----------------------------------------------------------------------------------


@not_on(*MCP, reason=NO_OTHER_STORES)
def test_archived_store_refuses_writes_but_reads_work(svc: Any) -> None:
    first = create(svc, "/a.md", "searchable archive words\n")
    svc.write(OWNER, STORE, "/a.md", "searchable archive words\nmore\n", if_match=first)
    info = svc.archive_store(OWNER, STORE)
    assert info.archived_at is not None
    assert svc.archive_store(OWNER, STORE).archived_at == info.archived_at
    before = snapshot(direct(svc))
    current = sha("searchable archive words\nmore\n")
    attempts = [
        lambda: svc.write(OWNER, STORE, "/b.md", "x", if_absent=True),
        lambda: svc.write(OWNER, STORE, "/a.md", "x", if_match=current),
        lambda: svc.str_replace(OWNER, STORE, "/a.md", "more", "less"),
        lambda: svc.insert(OWNER, STORE, "/a.md", 0, "top"),
        lambda: svc.delete(OWNER, STORE, "/a.md"),
        lambda: svc.rename(OWNER, STORE, "/a.md", "/c.md"),
        lambda: svc.commit(OWNER, STORE, [Write("/d.md", "d", if_absent=True)]),
        lambda: svc.revert_file(OWNER, STORE, "/a.md", 1),
    ]
    for attempt in attempts:
        with pytest.raises(Forbidden) as exc:
            attempt()
        assert STORE in exc.value.message
    assert snapshot(direct(svc)) == before
    assert svc.read(OWNER, STORE, "/a.md").version == 2
    assert svc.read(OWNER, STORE, "/a.md", version=1).content == "searchable archive words\n"
    assert [e.path for e in svc.ls(OWNER, STORE)] == ["/a.md"]
    assert [h.path for h in svc.search(OWNER, STORE, "archive")] == ["/a.md"]
    assert len(svc.grep(OWNER, STORE, "more")) == 1
    assert len(svc.history(OWNER, STORE)) == 2
    assert svc.diff(OWNER, STORE, "/a.md", 1)
    assert svc.glob(OWNER, STORE, "/*.md") == ["/a.md"]
    [listed] = [s for s in svc.list_stores(OWNER) if s.name == STORE]
    assert listed.archived_at is not None


@not_on(*MCP, reason=NO_OTHER_STORES)
def test_stores(svc: Any) -> None:
    svc.create_store(OWNER, "b-store")
    svc.create_store(OWNER, "a.store")
    with pytest.raises(Conflict):
        svc.create_store(OWNER, "b-store")
    assert svc.create_store(OWNER, "b-store", exist_ok=True).name == "b-store"
    for bad in ["", "Upper", "-dash", "has space", "a/b", "x" * 64]:
        with pytest.raises(InvalidInput):
            svc.create_store(OWNER, bad)
    create(svc, "/a.md", "shared words in default\n")
    create(svc, "/a.md", "shared words in b\n", store="b-store")
    create(svc, "/b.md", "only in b\n", store="b-store")
    listed = {s.name: (s.revision, s.files, s.archived_at) for s in svc.list_stores(OWNER)}
    assert listed == {"a.store": (0, 0, None), "b-store": (2, 2, None), "default": (1, 1, None)}
    assert [s.name for s in svc.list_stores(OWNER)] == ["a.store", "b-store", "default"]
    assert svc.read(OWNER, STORE, "/a.md").content == "shared words in default\n"
    svc.delete_store(OWNER, "b-store")
    assert [s.name for s in svc.list_stores(OWNER)] == ["a.store", "default"]
    for call in [
        lambda: svc.read(OWNER, "b-store", "/a.md"),
        lambda: svc.store_info(OWNER, "b-store"),
        lambda: svc.delete_store(OWNER, "b-store"),
        lambda: svc.write(OWNER, "b-store", "/c.md", "c", if_absent=True),
    ]:
        with pytest.raises(NotFound):
            call()
    assert [h.path for h in svc.search(OWNER, STORE, "shared")] == ["/a.md"]
    with direct(svc).db.read() as repo:
        assert {p for _, p in repo.dialect.indexed_files(repo.conn)} == {"/a.md"}
    assert_consistent(direct(svc))
    # the name can be used again, starting from nothing
    svc.create_store(OWNER, "b-store")
    assert svc.store_info(OWNER, "b-store").revision == 0
    assert svc.ls(OWNER, "b-store") == []


# --- content ---------------------------------------------------------------------------------


def test_frontmatter_is_kept_verbatim(svc: Any) -> None:
    content = (
        "---\n"
        "description:   Deploy rules   # a comment\n"
        "tags: [ops,  deploy]\n"
        "custom_key: {nested: [1, 2]}\n"
        "core: true\n"
        "---\n"
        "\n"
        "# Body\n"
    )
    assert create(svc, "/fm.md", content) == sha(content)
    assert svc.read(OWNER, STORE, "/fm.md").content == content
    empty = "---\n---\nbody\n"
    create(svc, "/empty.md", empty)
    assert svc.read(OWNER, STORE, "/empty.md").content == empty
    dots = "---\ntitle: x\n...\nbody\n"
    create(svc, "/dots.md", dots)
    assert svc.read(OWNER, STORE, "/dots.md").content == dots
    not_frontmatter = "----\nnot: [frontmatter\n"
    create(svc, "/rule.md", not_frontmatter)
    assert svc.read(OWNER, STORE, "/rule.md").content == not_frontmatter


@not_on(*MCP, reason=VIEW)
def test_file_id_is_stable_across_rename_and_revert(svc: Any) -> None:
    create(svc, "/a.md", "x")
    file_id = svc.read(OWNER, STORE, "/a.md").file_id
    svc.rename(OWNER, STORE, "/a.md", "/b/c.md")
    svc.str_replace(OWNER, STORE, "/b/c.md", "x", "y")
    svc.rename(OWNER, STORE, "/b/c.md", "/a.md")
    svc.delete(OWNER, STORE, "/a.md")
    svc.revert_file(OWNER, STORE, "/a.md", 3)
    view = svc.read(OWNER, STORE, "/a.md")
    assert (view.file_id, view.content, view.version) == (file_id, "y", 6)
    assert {v.file_id for v in svc.file_history(OWNER, STORE, "/a.md")} == {file_id}
    assert svc.ls(OWNER, STORE) == [svc.ls(OWNER, STORE, "/a.md")[0]]


@not_on(*MCP, reason=VIEW)
def test_reads_of_unknown_things(svc: Any) -> None:
    create(svc, "/a.md", "a")
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/b.md")
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/a.md", version=2)
    with pytest.raises(NotFound):
        svc.read(OWNER, "nostore", "/a.md")
    with pytest.raises(NotFound):
        svc.file_history(OWNER, STORE, "/b.md")
