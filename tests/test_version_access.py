"""Versions and changes answer only with what the caller may read.

Each test runs through the service (a fresh SQLite file), the REST app (ASGI, httpx) and,
where MCP has the verb, the MCP tools over stdio; ``tests/drivers.py`` maps each surface's
answers back to the service's types, so one assertion covers all three. The rules under test:

- content taken from a version needs read on the path that version was written under (read
  ``--version``, diff, revert of a file or a commit, history, redaction); a hidden version is
  reported exactly as a missing one, and no error names a hidden path or counts versions;
- writing, moving, editing or deleting a file needs read on it: without read every verb says
  "not found" before looking at the file, so 412/428 bodies and edit errors are no oracle;
- a change that leaves content and path as they are is refused (``NoChange``), after the
  precondition;
- store listings show only stores the caller may read something in, counting what it may read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memdir
from drivers import (
    AsgiSurface,
    McpDriver,
    McpSessions,
    Tokens,
    Unsupported,
    direct,
    reset,
    stdio_connect,
)
from helpers import STORE, sha, snapshot
from memdir import (
    OWNER,
    Forbidden,
    MemdirError,
    MemoryService,
    NoChange,
    NotFound,
    PreconditionFailed,
    Principal,
    Rename,
    StrReplace,
    Write,
)

ALPHA = Principal("agent:alpha", projects=("alpha",))
SURFACES = ["service", "asgi", "mcp"]

#: The default layout, with a hidden corner inside alpha's writable project.
DENY_POLICY = """\
version: 1
rules:
  - {id: admins, who: 'group:admins', paths: ['/**'], actions: [admin], reason: admins}
  - {id: projects, who: '*', paths: ['/projects/{project}/**'], actions: [read, write],
     reason: project members}
  - {id: hidden, who: '*', paths: ['/projects/alpha/secret/**'], actions: [read],
     effect: deny, reason: kept from agents}
"""
ALPHA_ADMIN = (
    "  - {id: alpha-admin, who: 'agent:alpha', paths: ['/projects/alpha/**'], actions: [admin],"
    " reason: alpha's keeper}\n"
)


@pytest.fixture(scope="module")
def asgi_surface(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiSurface]:
    surface = AsgiSurface(f"sqlite:///{tmp_path_factory.mktemp('asgi') / 'memdir.db'}")
    yield surface
    surface.close()


@pytest.fixture(scope="module")
def mcp_driver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpDriver]:
    url = f"sqlite:///{tmp_path_factory.mktemp('mcp') / 'memdir.db'}"
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


@pytest.fixture(params=SURFACES)
def svc(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The service, or a driver of the REST app or of the MCP tools, over a fresh store."""
    if request.param == "service":
        service = memdir.open(f"sqlite:///{tmp_path / 'memdir.db'}", create=True)
        service.create_store(OWNER, STORE)
        yield service
        service.db.close()
        return
    if request.param == "asgi":
        driver: Any = request.getfixturevalue("asgi_surface").driver()
    else:
        driver = request.getfixturevalue("mcp_driver")
    reset(direct(driver))
    yield driver


def refused(call: Callable[[], Any], kind: type[MemdirError] = NotFound) -> MemdirError:
    """The error ``call`` raises, of class ``kind`` exactly; skips a verb a surface lacks."""
    try:
        call()
    except Unsupported as exc:
        pytest.skip(str(exc))
    except MemdirError as exc:
        assert type(exc) is kind, f"expected {kind.__name__}: {exc!r}"
        return exc
    raise AssertionError(f"expected {kind.__name__}, the call succeeded")


def said(error: MemdirError) -> str:
    """Everything an error tells the caller: message and details, as the envelope has them."""
    return json.dumps(error.to_dict(), ensure_ascii=False)


def hides(error: MemdirError, *secrets: str) -> None:
    told = said(error)
    for secret in secrets:
        assert secret not in told, f"{secret!r} leaked in {told}"


def surface_has(svc: Any, verb: str) -> None:
    """Skip on MCP for verbs it has no tool for (the service and REST have them all)."""
    if isinstance(svc, McpDriver) and verb in {"revert", "diff", "version", "commit", "stores"}:
        pytest.skip(f"MCP has no tool for {verb}")


def moved_from_beta(svc: Any) -> None:
    """/projects/beta/x.md written twice, then moved to alpha by the owner and changed."""
    owner = direct(svc)
    owner.write(OWNER, STORE, "/projects/beta/x.md", "zebra beta one\n", if_absent=True)
    owner.str_replace(OWNER, STORE, "/projects/beta/x.md", "one", "two")
    owner.rename(OWNER, STORE, "/projects/beta/x.md", "/projects/alpha/x.md")  # v3
    owner.str_replace(OWNER, STORE, "/projects/alpha/x.md", "two", "alpha")  # v4


# --- versions written where the caller cannot read ------------------------------------------


def test_versions_written_under_a_hidden_path_are_missing(svc: Any) -> None:
    moved_from_beta(svc)
    before = snapshot(direct(svc))
    path = "/projects/alpha/x.md"
    # history shows the readable versions only, without the hidden origin of the move
    shown = svc.file_history(ALPHA, STORE, path)
    assert [(v.version, v.path, v.old_path) for v in shown] == [(4, path, None), (3, path, None)]
    surface_has(svc, "version")
    assert svc.read(ALPHA, STORE, path, version=3).content == "zebra beta two\n"  # moved in
    hidden = refused(lambda: svc.read(ALPHA, STORE, path, version=1))
    absent = refused(lambda: svc.read(ALPHA, STORE, path, version=99))
    assert hidden.message == absent.message.replace("99", "1")  # the same answer, no count
    for error in (hidden, absent):
        hides(error, "beta", "1..", "zebra beta one")
    hides(refused(lambda: svc.diff(ALPHA, STORE, path, 1)), "beta", "zebra")
    hides(refused(lambda: svc.diff(ALPHA, STORE, path, 3, 2)), "beta", "zebra")
    assert "+zebra beta alpha" in svc.diff(ALPHA, STORE, path, 3)
    for number in (1, 2, 99):
        hides(refused(lambda n=number: svc.revert_file(ALPHA, STORE, path, n)), "beta", "zebra")
    assert snapshot(direct(svc)) == before
    assert direct(svc).read(OWNER, STORE, path).content == "zebra beta alpha\n"


def test_revert_of_a_file_that_moved_out_of_sight_is_missing(svc: Any) -> None:
    surface_has(svc, "revert")
    owner = direct(svc)
    owner.write(OWNER, STORE, "/projects/alpha/y.md", "first\n", if_absent=True)
    owner.str_replace(OWNER, STORE, "/projects/alpha/y.md", "first", "second")
    owner.rename(OWNER, STORE, "/projects/alpha/y.md", "/projects/beta/y.md")
    before = snapshot(owner)
    # version 1 was written at alpha, so it may be read; the file now lives at beta
    assert svc.read(ALPHA, STORE, "/projects/alpha/y.md", version=1).content == "first\n"
    error = refused(lambda: svc.revert_file(ALPHA, STORE, "/projects/alpha/y.md", 1))
    hides(error, "beta")
    assert error.details["path"] == "/projects/alpha/y.md"
    assert snapshot(owner) == before


def test_revert_of_a_commit_checks_every_path_it_touched(svc: Any) -> None:
    surface_has(svc, "commit")
    owner = direct(svc)
    mixed = owner.commit(OWNER, STORE, [
        Write("/projects/alpha/a.md", "a\n", if_absent=True),
        Write("/projects/beta/b.md", "zebra b\n", if_absent=True),
    ])  # fmt: skip
    hidden = owner.write(OWNER, STORE, "/projects/beta/c.md", "zebra c\n", if_absent=True)
    before = snapshot(owner)
    error = refused(lambda: svc.revert_commit(ALPHA, STORE, mixed.commit[:8]), Forbidden)
    hides(error, "beta", "zebra")
    # a commit with nothing readable is no commit at all, by id or by prefix
    for commit_id in (hidden.commit, hidden.commit[:6]):
        gone = refused(lambda c=commit_id: svc.revert_commit(ALPHA, STORE, c))
        absent = refused(lambda c=commit_id: svc.revert_commit(ALPHA, STORE, "ffffff" + c[6:]))
        assert gone.message.replace(commit_id, "ID") == absent.message.replace(
            "ffffff" + commit_id[6:], "ID"
        )
        hides(gone, "beta")
    assert snapshot(owner) == before
    mine = owner.write(OWNER, STORE, "/projects/alpha/m.md", "m\n", if_absent=True)
    done = svc.revert_commit(ALPHA, STORE, mine.commit[:10])
    assert [(r.path, r.operation) for r in done.results] == [("/projects/alpha/m.md", "deleted")]


def test_redaction_plans_name_only_what_the_caller_administers(svc: Any) -> None:
    surface_has(svc, "commit")
    owner = direct(svc)
    owner.set_policy(OWNER, STORE, DENY_POLICY + ALPHA_ADMIN)
    leak = "zebra token\n"
    first = owner.write(OWNER, STORE, "/projects/alpha/a.md", leak, if_absent=True)
    owner.write(OWNER, STORE, "/projects/alpha/a.md", "clean\n", if_match=sha(leak))
    owner.write(OWNER, STORE, "/projects/beta/b.md", leak, if_absent=True)  # live, hidden
    assert first.results[0].sha256 == sha(leak)
    plan = svc.redact(ALPHA, STORE, "/projects/alpha/a.md", 1, dry_run=True)
    assert [(v.path, v.version) for v in plan.versions] == [("/projects/alpha/a.md", 1)]
    done = svc.redact(ALPHA, STORE, "/projects/alpha/a.md", 1)
    assert [(v.path, v.version) for v in done.versions] == [("/projects/alpha/a.md", 1)]
    # the hidden copy is untouched: still live, still readable by those who may
    assert owner.read(OWNER, STORE, "/projects/beta/b.md").content == leak
    assert owner.read(OWNER, STORE, "/projects/beta/b.md", version=1).content == leak
    hides(refused(lambda: svc.read(ALPHA, STORE, "/projects/alpha/a.md", version=1)), "beta")


def test_purge_does_not_reach_history_kept_elsewhere(svc: Any) -> None:
    surface_has(svc, "commit")
    owner = direct(svc)
    owner.set_policy(OWNER, STORE, DENY_POLICY + ALPHA_ADMIN)
    moved_from_beta(svc)
    before = snapshot(owner)

    def purge() -> Any:
        if isinstance(svc, MemoryService):
            return svc.purge(ALPHA, STORE, "/projects/alpha/x.md")
        url = f"/v1/stores/{STORE}/files/projects/alpha/x.md:purge"
        return svc._send(ALPHA, "POST", url)

    hides(refused(purge, Forbidden), "beta", "zebra")
    assert snapshot(owner) == before
    assert len(owner.file_history(OWNER, STORE, "/projects/alpha/x.md")) == 4
    owner.write(OWNER, STORE, "/projects/alpha/own.md", "own\n", if_absent=True)
    if isinstance(svc, MemoryService):
        svc.purge(ALPHA, STORE, "/projects/alpha/own.md")  # wholly alpha's: allowed
    else:
        svc._send(ALPHA, "POST", f"/v1/stores/{STORE}/files/projects/alpha/own.md:purge")
    refused(lambda: owner.file_history(OWNER, STORE, "/projects/alpha/own.md"))


# --- no read, no change -----------------------------------------------------------------------


SECRET = "/projects/alpha/secret/s.md"
NOWHERE = "/projects/alpha/secret/none.md"


def _same_answer(hidden: MemdirError, absent: MemdirError) -> None:
    """The answer about the hidden file is the answer about a missing one, path aside."""
    assert said(hidden).replace(SECRET, "P") == said(absent).replace(NOWHERE, "P")
    hides(hidden, "zebra", sha("zebra one\nzebra one\n"), "2 lines", "2 times")


def test_deny_read_stops_every_verb(svc: Any) -> None:
    owner = direct(svc)
    owner.set_policy(OWNER, STORE, DENY_POLICY)
    owner.write(OWNER, STORE, SECRET, "zebra one\nzebra one\n", if_absent=True)
    current = sha("zebra one\nzebra one\n")
    before = snapshot(owner)
    calls: list[Callable[[str], Any]] = [
        lambda p: svc.rename(ALPHA, STORE, p, "/projects/alpha/open.md"),
        lambda p: svc.str_replace(ALPHA, STORE, p, "zebra one", "zebra one"),
        lambda p: svc.str_replace(ALPHA, STORE, p, "zebra", "x"),  # "occurs 2 times"
        lambda p: svc.str_replace(ALPHA, STORE, p, "absent", "x"),
        lambda p: svc.insert(ALPHA, STORE, p, 99, "x"),  # "the file has 2 lines"
        lambda p: svc.delete(ALPHA, STORE, p),
        lambda p: svc.delete(ALPHA, STORE, p, if_match=current),
        lambda p: svc.write(ALPHA, STORE, p, "x", if_match=sha("guess")),  # 412 with the sha
        lambda p: svc.write(ALPHA, STORE, p, "x", if_match=current),
    ]
    for call in calls:
        _same_answer(refused(lambda c=call: c(SECRET)), refused(lambda c=call: c(NOWHERE)))
    assert snapshot(owner) == before
    assert owner.file_history(OWNER, STORE, SECRET)[0].version == 1
    hides(refused(lambda: svc.file_history(ALPHA, STORE, SECRET)), "zebra")


def test_a_create_over_a_hidden_file_reveals_nothing(svc: Any) -> None:
    owner = direct(svc)
    owner.set_policy(OWNER, STORE, DENY_POLICY)
    owner.write(OWNER, STORE, SECRET, "zebra one\nzebra one\n", if_absent=True)
    before = snapshot(owner)
    over = refused(lambda: svc.write(ALPHA, STORE, SECRET, "mine", if_absent=True))
    fresh = refused(lambda: svc.write(ALPHA, STORE, NOWHERE, "mine", if_absent=True))
    _same_answer(over, fresh)
    assert over.message.startswith(f"cannot create {SECRET}:"), over.message
    assert "does not exist" not in over.message
    # a rename onto the hidden path, and into another project, say the same
    owner.write(OWNER, STORE, "/projects/alpha/mine.md", "mine\n", if_absent=True)
    before = snapshot(owner)
    for target in (SECRET, NOWHERE, "/projects/beta/new.md"):
        error = refused(lambda t=target: svc.rename(ALPHA, STORE, "/projects/alpha/mine.md", t))
        assert error.message.startswith(f"cannot create {target}:"), error.message
    assert snapshot(owner) == before


def test_a_refused_create_elsewhere_says_it_cannot_be_created(svc: Any) -> None:
    error = refused(lambda: svc.write(ALPHA, STORE, "/projects/beta/new.md", "x", if_absent=True))
    assert error.message.startswith("cannot create /projects/beta/new.md:"), error.message
    assert "does not exist" not in error.message
    assert snapshot(direct(svc)).revision == 0


def test_errors_of_the_file_directory_rule_do_not_name_hidden_files(svc: Any) -> None:
    owner = direct(svc)
    owner.set_policy(OWNER, STORE, DENY_POLICY.replace("/projects/alpha/secret/**", "/**/*.md"))
    owner.write(OWNER, STORE, "/projects/alpha/d/s.md", "zebra\n", if_absent=True)
    owner.write(OWNER, STORE, "/projects/alpha/f.md", "zebra\n", if_absent=True)
    before = snapshot(owner)
    # the directory /projects/alpha/d and what would be below the file f.md are readable
    for path in ("/projects/alpha/d", "/projects/alpha/f.md/x"):
        error = refused(
            lambda p=path: svc.write(ALPHA, STORE, p, "x", if_absent=True), memdir.PathConflict
        )
        hides(error, "s.md", "f.md:", "zebra")
        assert not error.details.get("holds") and "file" not in error.details, said(error)
    assert snapshot(owner) == before


# --- no-op changes ----------------------------------------------------------------------------


def test_a_change_that_changes_nothing_is_refused(svc: Any) -> None:
    owner = direct(svc)
    path = "/projects/alpha/n.md"
    owner.write(OWNER, STORE, path, "same\n", if_absent=True)
    before = snapshot(owner)
    calls: list[Callable[[], Any]] = [
        lambda: svc.write(ALPHA, STORE, path, "same\n", if_match=sha("same\n")),
        lambda: svc.str_replace(ALPHA, STORE, path, "same", "same"),
        lambda: svc.rename(ALPHA, STORE, path, path),
    ]
    for call in calls:
        error = refused(call, NoChange)
        assert error.details.get("path") == path, said(error)
        assert "nothing to change" in error.message
    # a failed precondition still fails first, even when the content would be the same
    refused(
        lambda: svc.write(ALPHA, STORE, path, "same\n", if_match=sha("old")), PreconditionFailed
    )
    assert snapshot(owner) == before
    surface_has(svc, "commit")
    refused(lambda: svc.revert_file(ALPHA, STORE, path, 1), NoChange)
    ops = [
        Write("/projects/alpha/other.md", "new\n", if_absent=True),
        StrReplace(path, "same", "same"),
    ]
    refused(lambda: svc.commit(ALPHA, STORE, ops), NoChange)  # all or nothing
    refused(lambda: svc.commit(ALPHA, STORE, [Rename(path, path)]), NoChange)
    assert snapshot(owner) == before


# --- store listings ---------------------------------------------------------------------------


def test_stores_are_listed_by_what_the_caller_may_read(svc: Any) -> None:
    surface_has(svc, "stores")
    owner: MemoryService = direct(svc)
    owner.write(OWNER, STORE, "/projects/alpha/a.md", "a\n", if_absent=True)
    owner.write(OWNER, STORE, "/projects/beta/b.md", "b\n", if_absent=True)
    owner.write(OWNER, STORE, "/projects/beta/c.md", "c\n", if_absent=True)
    owner.create_store(OWNER, "vault")
    owner.set_policy(OWNER, "vault", DENY_POLICY.split("  - {id: projects")[0])  # admins only
    owner.write(OWNER, "vault", "/projects/vault-keepers/k.md", "k\n", if_absent=True)
    listed = svc.list_stores(ALPHA)
    assert [(s.name, s.files) for s in listed] == [(STORE, 1)]
    assert svc.store_info(ALPHA, STORE).files == 1
    vault = refused(lambda: svc.store_info(ALPHA, "vault"))
    absent = refused(lambda: svc.store_info(ALPHA, "nostore"))
    assert vault.message.replace("vault", "S") == absent.message.replace("nostore", "S")
    admin = Principal("user:root", groups=frozenset({"admins"}))
    shown = {s.name: s.files for s in svc.list_stores(admin)}
    assert shown == {STORE: 3, "vault": 2}  # the policy file is a file


# --- transcripts ------------------------------------------------------------------------------


def test_a_refused_transcript_import_names_no_hidden_label(svc: Any) -> None:
    from memdir.transcripts.model import Labels
    from memdir.transcripts.reader import Source

    surface_has(svc, "commit")
    owner = direct(svc)
    lines = [
        {"type": "transcript", "version": 1, "session_id": "s-shared"},
        {"type": "event", "kind": "message", "role": "user", "text": "zebra words"},
    ]
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    first = owner.import_transcripts(
        OWNER, STORE, [Source.from_bytes("s.jsonl", data)], labels=Labels(project="beta-x")
    )
    assert first.new == 1
    if isinstance(svc, MemoryService):
        report = svc.import_transcripts(
            ALPHA, STORE, [Source.from_bytes("s.jsonl", data)], labels=Labels(project="alpha")
        )
        assert report.new == 0 and len(report.failed) == 1
        told = report.failed[0].reason
    else:
        told = said(
            refused(
                lambda: svc._send(
                    ALPHA, "POST", f"/v1/stores/{STORE}/transcripts", content=data,
                    params={"project": "alpha", "name": "s.jsonl"},
                    headers={"Content-Type": "application/x-ndjson"},
                ),
                memdir.InvalidInput,
            )
        )  # fmt: skip
    assert "s-shared" in told and "beta-x" not in told, told


# --- history ----------------------------------------------------------------------------------


def test_history_pages_count_only_visible_commits(svc: Any) -> None:
    surface_has(svc, "commit")
    owner = direct(svc)
    for i in range(3):
        owner.write(OWNER, STORE, f"/projects/alpha/{i}.md", "a\n", if_absent=True)
        for j in range(3):
            owner.write(OWNER, STORE, f"/projects/beta/{i}-{j}.md", "b\n", if_absent=True)
    owner.write(OWNER, STORE, "/projects/beta/z.md", "z\n", if_absent=True)
    owner.rename(OWNER, STORE, "/projects/beta/z.md", "/projects/alpha/z.md")
    newest = svc.history(ALPHA, STORE, limit=2)
    assert [[v.path for v in c.changes] for c in newest] == [
        ["/projects/alpha/z.md"],
        ["/projects/alpha/2.md"],
    ]
    assert newest[0].changes[0].old_path is None  # the hidden origin of the move
    assert len(svc.history(ALPHA, STORE, limit=4)) == 4  # a full page despite hidden commits
    assert svc.history(ALPHA, STORE, prefix="/projects/beta") == []  # not even the move
    assert len(svc.history(ALPHA, STORE, prefix="/projects/alpha", limit=3)) == 3


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_revert_and_edits_follow_the_same_rules(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memdir.cli.main import cli

    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    service = memdir.open(url, create=True)
    service.create_store(OWNER, STORE)
    service.add_principal(OWNER, ALPHA.id, projects=ALPHA.projects)
    moved_from_beta(service)
    service.db.close()

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--db", url, "--as", ALPHA.id, *args, "--json"])

    path = "/projects/alpha/x.md"
    for args in (
        ("revert", path, "--to-version", "1"),
        ("read", path, "--version", "1"),
        ("diff", path, "1"),
    ):
        result = run(*args)
        assert result.exit_code == 5, (args, result.output)
        assert "beta" not in result.stdout and "zebra beta one" not in result.output
    result = run("edit", path, "--old", "alpha", "--new", "alpha")
    assert result.exit_code == 1 and json.loads(result.stdout)["error"]["type"] == "no_change"
    reopened = memdir.open(url)
    assert reopened.read(OWNER, STORE, path).version == 4
    reopened.db.close()
