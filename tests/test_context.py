"""Context assembly, expiry, the stale report and last reads over a seeded store.

The store holds 1,000 files over every scope (two tasks, agents, users and projects, /org and
other paths), core files, skills, expired and review-due files. ``agent:bot`` (project acme,
task t1, acting for ana) and ``user:bob`` (project beta) read different parts of it; every
file either may not read carries a canary string, which must never appear in what it gets.
The expectations are recomputed here from the seed, not from the code under test.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import memdir
from memdir import OWNER, MemoryService
from memdir.cli.main import cli
from memdir.core.context import estimate_tokens
from memdir.core.model import Principal, Write
from memdir.storage.schema import file_reads, heads, versions

STORE = "default"
SCOPES = {
    "task": ["/tasks/t1", "/tasks/t2"],
    "agent": ["/agents/bot", "/agents/other"],
    "user": ["/users/ana", "/users/bob"],
    "project": ["/projects/acme", "/projects/beta"],
    "org": ["/org"],
    "other": ["/misc"],
}
ORDER = ["task", "agent", "user", "project", "org", "other"]
BOT_READS = {"/tasks/t1", "/agents/bot", "/users/ana", "/projects/acme", "/org", "/misc"}
BOB_READS = {"/users/bob", "/projects/beta", "/org", "/misc"}
POLICY = """\
version: 1
rules:
  - id: shared
    who: "*"
    paths: ["/org/**", "/misc/**"]
    actions: [read]
    reason: everyone reads shared memory
  - id: scopes
    who: "*"
    paths: ["/projects/{project}/**", "/tasks/{task}/**", "/agents/{principal}/**",
            "/users/{user}/**"]
    actions: [read, write]
    reason: principals read and write their own scopes
"""


def _root(path: str) -> str:
    return (
        "/".join(path.split("/")[:3])
        if not path.startswith(("/org/", "/misc/"))
        else ("/" + path.split("/")[1])
    )


def _seed(url: str) -> dict[str, str]:
    """1,000 files; returns path → content (what was written)."""
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE, exist_ok=True)
    svc.add_principal(OWNER, "agent:bot", projects=("acme",), tasks=("t1",), acts_for="ana")
    svc.add_principal(OWNER, "user:bob", projects=("beta",))
    svc.set_policy(OWNER, STORE, POLICY)
    files: dict[str, str] = {}
    roots = [r for rs in SCOPES.values() for r in rs]
    for n in range(1000):
        root = roots[n % len(roots)]
        path = f"{root}/notes/n{n:04d}.md"
        files[path] = f"# Note {n} of {root}\n\nCANARY{n:04d}X lives in {root}.\n"
    for root in roots:
        files[f"{root}/core.md"] = (
            f"---\ncore: true\ndescription: core of {root}\n---\nCore fact for {root}: "
            f"CORECANARY{roots.index(root)}Z.\n"
        )
        files[f"{root}/skills/fix/SKILL.md"] = (
            f"---\nname: fix-{roots.index(root)}\ndescription: Fix things in {root}\n---\nSteps.\n"
        )
        files[f"{root}/old.md"] = f"---\nexpires: 2020-01-01\n---\n# Old {root} EXPIREDFACT\n"
        files[f"{root}/due.md"] = (
            f"---\nreview_after: 2020-06-01\nverify: run `check {root}`\n---\n# Due {root}\n"
        )
    ops = [Write(p, c, if_absent=True) for p, c in sorted(files.items())]
    for i in range(0, len(ops), 500):
        svc.commit(OWNER, STORE, ops[i : i + 500])
    svc.close()
    return files


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, str]]:
    url = f"sqlite:///{tmp_path_factory.mktemp('context') / 'memdir.db'}"
    return url, _seed(url)


@pytest.fixture
def svc(world: tuple[str, dict[str, str]]) -> Any:
    service = memdir.open(world[0])
    yield service
    service.close()


def _principal(svc: MemoryService, who: str) -> Principal:
    return svc.resolve(who)


def _unreadable(files: dict[str, str], reads: set[str]) -> list[str]:
    return [p for p in files if _root(p) not in reads]


def _canaries(files: dict[str, str], reads: set[str]) -> list[str]:
    out = []
    for path in _unreadable(files, reads):
        out += re.findall(r"(?:CORE)?CANARY\w+", files[path])
        out.append(path)
    return out


def test_seed_is_the_size_the_acceptance_asks_for(world: tuple[str, dict[str, str]]) -> None:
    assert len(world[1]) >= 1000 and {_root(p) for p in world[1]} == {
        r for rs in SCOPES.values() for r in rs
    }


@pytest.mark.parametrize("who,reads", [("agent:bot", BOT_READS), ("user:bob", BOB_READS)])
def test_order_scopes_core_skills_and_index(
    svc: Any, world: Any, who: str, reads: set[str]
) -> None:
    files = world[1]
    got = svc.context(_principal(svc, who), STORE, budget=200_000)
    live = [p for p in files if _root(p) in reads and not p.endswith("/old.md")]
    assert got.readable == len(live) and not got.omitted
    assert [i.path for i in got.core] == sorted(
        (p for p in live if p.endswith("/core.md")),
        key=lambda p: (ORDER.index(_kind(p)), p),
    )
    assert [i.skill_name for i in got.skills] == [
        f"fix-{[r for rs in SCOPES.values() for r in rs].index(_root(i.path))}" for i in got.skills
    ]
    kinds = [ORDER.index(_kind(i.path)) for i in got.index]
    assert kinds == sorted(kinds)  # task, agent, user, project, org, other
    assert {i.path for i in got.index} == {
        p for p in live if not p.endswith(("/core.md", "/SKILL.md"))
    }
    due = [i for i in got.index if i.path.endswith("/due.md")]
    assert due and all(i.review_due is not None for i in due)
    md = got.markdown
    assert "[review due since 2020-06-01]" in md and "[verify: run `check " in md
    assert md.index("## Core memory") < md.index("## Skills") < md.index("## Index")
    for canary in _canaries(files, reads):
        assert canary not in md


def _kind(path: str) -> str:
    root = path.split("/")[1]
    return {"tasks": "task", "agents": "agent", "users": "user", "projects": "project",
            "org": "org"}.get(root, "other")  # fmt: skip


def test_recent_use_and_query_order_within_a_scope(svc: Any) -> None:
    bot = _principal(svc, "agent:bot")
    before = svc.context(bot, STORE, budget=200_000)
    acme = [i.path for i in before.index if i.path.startswith("/projects/acme/")]
    changed = {e.path: svc.read(OWNER, STORE, e.path).updated_at for e in
               svc.ls(OWNER, STORE, "/projects/acme", depth=None)}  # fmt: skip
    assert acme == sorted(acme, key=lambda p: (-changed[p].timestamp(), p))  # newest first
    last = acme[-1]
    svc.write(bot, STORE, last, svc.read(bot, STORE, last).content + "zebra crossing\n",
              if_match=svc.read(bot, STORE, last).sha256)  # fmt: skip
    after = svc.context(bot, STORE, budget=200_000)
    assert next(i.path for i in after.index if i.path.startswith("/projects/acme/")) == last
    ranked = svc.context(bot, STORE, budget=200_000, query="CANARY0018X")  # /org/ holds n0018
    org = [i.path for i in ranked.index if i.path.startswith("/org/")]
    assert org[0] == "/org/notes/n0018.md" and org[1:] == [i.path for i in after.index
                                                          if i.path in org[1:]]  # fmt: skip


@pytest.mark.parametrize("budget", [170, 300, 800, 2000, 5000])
def test_budget_is_kept_and_the_rest_is_counted(svc: Any, world: Any, budget: int) -> None:
    bot = _principal(svc, "agent:bot")
    got = svc.context(bot, STORE, budget=budget)
    assert estimate_tokens(got.markdown) == got.tokens <= budget
    shown = len(got.core) + len(got.core_listed) + len(got.skills) + len(got.index)
    assert shown + got.omitted == got.readable
    closing = got.markdown.rstrip("\n").rsplit("\n", 1)[-1]
    if got.omitted:
        assert closing.startswith(f"Left out for the budget: {got.omitted} of {got.readable}")
        assert "`memdir read PATH`" in closing and "`memdir search QUERY`" in closing
    for canary in _canaries(world[1], BOT_READS):
        assert canary not in got.markdown
    assert "expired files are hidden" in closing  # six, one per readable root


def test_too_small_a_budget_says_the_minimum(svc: Any) -> None:
    with pytest.raises(memdir.InvalidInput, match=r"give --budget \d+ or more"):
        svc.context(_principal(svc, "agent:bot"), STORE, budget=10)


def test_determinism_across_calls_and_processes(svc: Any, world: Any) -> None:
    bot = _principal(svc, "agent:bot")
    first = svc.context(bot, STORE, budget=1500, project="acme")
    again = svc.context(bot, STORE, budget=1500, project="acme")
    other = memdir.open(world[0])
    try:
        third = other.context(other.resolve("agent:bot"), STORE, budget=1500, project="acme")
    finally:
        other.close()
    assert first.markdown.encode() == again.markdown.encode() == third.markdown.encode()


def test_expired_files_are_hidden_everywhere_but_reads(svc: Any, world: Any) -> None:
    bot = _principal(svc, "agent:bot")
    old = "/projects/acme/old.md"
    assert old not in svc.context(bot, STORE, budget=200_000).markdown
    assert old in svc.context(bot, STORE, budget=200_000, include_expired=True).markdown
    assert old not in [e.path for e in svc.ls(bot, STORE, "/projects/acme")]
    assert old in [e.path for e in svc.ls(bot, STORE, "/projects/acme", include_expired=True)]
    assert old not in svc.glob(bot, STORE, "/projects/acme/*.md")
    assert old in svc.glob(bot, STORE, "/projects/acme/*.md", include_expired=True)
    assert not svc.search(bot, STORE, "EXPIREDFACT")
    assert [h.path for h in svc.search(bot, STORE, "EXPIREDFACT", include_expired=True)] == [
        p for p in sorted(world[1]) if p.endswith("/old.md") and _root(p) in BOT_READS
    ] or {h.path for h in svc.search(bot, STORE, "EXPIREDFACT", include_expired=True)} == {
        p for p in world[1] if p.endswith("/old.md") and _root(p) in BOT_READS
    }
    assert not svc.grep(bot, STORE, "EXPIREDFACT")
    assert {m.path for m in svc.grep(bot, STORE, "EXPIREDFACT", include_expired=True)} == {
        p for p in world[1] if p.endswith("/old.md") and _root(p) in BOT_READS
    }
    view = svc.read(bot, STORE, old)
    assert view.expired_at == dt.datetime(2020, 1, 1, tzinfo=dt.UTC)


def test_task_scopes_expire_after_the_configured_days(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    svc.write(OWNER, STORE, "/tasks/t9/plan.md", "# plan\n", if_absent=True)
    svc.write(OWNER, STORE, "/tasks/t9/keep.md", "---\nexpires: never\n---\n# keep\n",
              if_absent=True)  # fmt: skip
    svc.write(OWNER, STORE, "/projects/p/x.md", "# x\n", if_absent=True)
    with svc.db.write() as repo:  # the files were last changed 40 days ago
        old = dt.datetime.now(dt.UTC) - dt.timedelta(days=40)
        repo.conn.execute(sa.update(heads).values(updated_at=old))
    assert [e.path for e in svc.ls(OWNER, STORE, "/", depth=None)] == [
        "/projects/p/x.md", "/tasks/t9/keep.md",
    ]  # fmt: skip
    assert svc.read(OWNER, STORE, "/tasks/t9/plan.md").expired_at is not None
    svc.close()
    kept = MemoryService(memdir.storage.database.Database(url), task_expiry_days=0)
    assert len(kept.ls(OWNER, STORE, "/", depth=None)) == 3
    kept.close()


def test_stale_report_and_last_reads(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'm.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    svc.write(OWNER, STORE, "/org/due.md", "---\nreview_after: 2020-01-01\n---\n# due\n",
              if_absent=True)  # fmt: skip
    svc.write(OWNER, STORE, "/org/fresh.md", "# fresh\n", if_absent=True)
    with svc.db.write() as repo:
        old = dt.datetime.now(dt.UTC) - dt.timedelta(days=90)
        repo.conn.execute(sa.update(heads).where(heads.c.path == "/org/fresh.md")
                          .values(updated_at=old))  # fmt: skip
    stale = {s.path: s for s in svc.stale(OWNER, STORE, days=30)}
    assert stale["/org/due.md"].reasons == ("review-due",)
    assert stale["/org/due.md"].last_writer == "owner"
    assert stale["/org/fresh.md"].reasons == ("unread",)
    with svc.db.read() as repo:
        count = lambda: repo.conn.execute(sa.select(sa.func.count()).select_from(versions))  # noqa: E731
        before = count().scalar_one()
    for _ in range(50):
        svc.read(OWNER, STORE, "/org/fresh.md")
    svc.search(OWNER, STORE, "due")
    with svc.db.read() as repo:
        assert (
            repo.conn.execute(sa.select(sa.func.count()).select_from(file_reads)).scalar_one() == 0
        )
    assert svc.reads.flush() == 2  # one row per file, however many reads
    with svc.db.read() as repo:
        assert (
            repo.conn.execute(sa.select(sa.func.count()).select_from(versions)).scalar_one()
            == before
        )
    assert "/org/fresh.md" not in {s.path for s in svc.stale(OWNER, STORE, days=30)}
    svc.close()


def _cli(url: str, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--db", url, *args], catch_exceptions=False)


def test_cli_rest_sdk_and_mcp_give_the_same_context(svc: Any, world: Any) -> None:
    url, files = world
    bot = _principal(svc, "agent:bot")
    expected = svc.context(bot, STORE, budget=1200, project="acme").markdown
    done = _cli(url, "--as", "agent:bot", "context", "--project", "acme", "--budget", "1200")
    assert done.exit_code == 0 and done.output == expected
    as_json = _cli(url, "--as", "agent:bot", "context", "--budget", "1200", "--project", "acme",
                   "--format", "json")  # fmt: skip
    assert json.loads(as_json.output)["markdown"] == expected
    with memdir.Client(db=url, principal="agent:bot") as client:
        assert client.context(project="acme", budget=1200) == expected
        data = client.context_data(project="acme", budget=1200)
        assert data["markdown"] == expected and data["tokens"] <= 1200
        raw = client._http.get("http://memdir/v1/stores/default/context",
                               params={"project": "acme", "budget": 1200, "format": "markdown"},
                               headers=client._headers)  # fmt: skip
        assert raw.status_code == 200 and raw.text == expected
        stale = client.stale(reasons=["review-due"])
        assert {s.path for s in stale} == {
            p for p in files if p.endswith("/due.md") and _root(p) in BOT_READS
        }
    for canary in _canaries(files, BOT_READS):
        assert canary not in expected
    from mcp import Client as McpClient

    from memdir.mcp import build_server

    server = build_server(svc, lambda _ctx: bot)

    async def main() -> None:
        async with McpClient(server) as client:
            prompt = await client.get_prompt("context", {"project": "acme", "budget": "1200"})
            assert prompt.messages[0].content.text == expected  # type: ignore[union-attr]
            resource = await client.read_resource("memdir://context/project/acme")
            full = svc.context(bot, STORE, project="acme").markdown
            assert resource.contents[0].text == full  # type: ignore[union-attr]
            view = await client.call_tool("view", {"path": "/"})
            text = view.content[0].text  # type: ignore[union-attr]
            assert text.startswith(svc.context(bot, STORE).markdown)
            for canary in _canaries(files, BOT_READS):
                assert canary not in text

    anyio.run(main)


def test_cli_stale_ls_and_search_flags(world: Any) -> None:
    url, _files = world
    done = _cli(url, "--as", "user:bob", "stale", "--reason", "review-due")
    assert done.exit_code == 0
    assert "/projects/beta/due.md\treview-due\tlast written by owner" in done.output
    assert "/projects/acme" not in done.output
    listing = _cli(url, "--as", "user:bob", "ls", "-R", "/projects/beta")
    assert "/projects/beta/old.md" not in listing.output
    listing = _cli(url, "--as", "user:bob", "ls", "-R", "--include-expired", "/projects/beta")
    assert "/projects/beta/old.md" in listing.output
    read = CliRunner().invoke(
        cli, ["--db", url, "--as", "user:bob", "read", "/projects/beta/old.md"]
    )
    assert read.exit_code == 0 and "EXPIREDFACT" in read.stdout and "expired" in read.stderr


def test_claude_md_import(tmp_path: Path) -> None:
    project = tmp_path / "acme"
    (project / "src").mkdir(parents=True)
    (project / ".claude" / "skills" / "lint").mkdir(parents=True)
    (project / ".claude" / "rules").mkdir(parents=True)
    (project / "CLAUDE.md").write_text("# Acme\nUse tabs.\n")
    (project / "src" / "CLAUDE.md").write_text("# src\nNo globals.\n")
    (project / "CLAUDE.local.md").write_text("my sandbox URL\n")
    (project / ".claude" / "settings.local.json").write_text("{}\n")
    (project / ".claude" / "rules" / "tests.md").write_text("Always run tests.\n")
    (project / ".claude" / "skills" / "lint" / "SKILL.md").write_text(
        "---\nname: lint\ndescription: Lint the code\n---\nRun ruff.\n"
    )
    home = tmp_path / "home"
    home.mkdir()
    (home / "CLAUDE.md").write_text("I like short answers.\n")
    url = f"sqlite:///{tmp_path / 'm.db'}"
    memdir.open(url, create=True).create_store(OWNER, STORE)
    done = _cli(
        url, "import", "--claude-md", str(project), "--user", "ana", "--user-dir", str(home)
    )
    assert done.exit_code == 0, done.output
    svc = memdir.open(url)
    paths = [e.path for e in svc.ls(OWNER, STORE, "/", depth=None)]
    assert paths == [
        "/projects/acme/CLAUDE.md", "/projects/acme/rules/tests.md",
        "/projects/acme/skills/lint/SKILL.md", "/projects/acme/src/CLAUDE.md",
        "/users/ana/CLAUDE.md",
    ]  # fmt: skip
    assert svc.read(OWNER, STORE, "/projects/acme/CLAUDE.md").content.startswith("---\ncore: true")
    context = svc.context(OWNER, STORE, project="acme").markdown
    assert "Use tabs." in context and "**lint** — Lint the code" in context
    assert "sandbox" not in context
    svc.close()
    done = _cli(url, "import", "--claude-md", str(project), "--user", "ana", "--include-personal")
    assert done.exit_code == 0, done.output
    svc = memdir.open(url)
    assert svc.read(OWNER, STORE, "/users/ana/projects/acme/CLAUDE.local.md").content == (
        "my sandbox URL\n"
    )
    assert svc.read(OWNER, STORE, "/users/ana/projects/acme/claude/settings.local.json")
    svc.close()


def test_web_stale_page_lists_review_due(world: Any, svc: Any) -> None:
    import httpx2

    from memdir.web.app import create_web_app

    token = svc.create_token(OWNER, "user:bob").token
    app = create_web_app(svc, store=STORE)

    async def main() -> None:
        transport = httpx2.ASGITransport(app=app)
        async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
            form = await client.get("/signin")
            csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
            data = {"token": token, **({"csrf": csrf.group(1)} if csrf else {})}
            await client.post("/signin", data=data)
            page = await client.get("/s/default/stale")
            assert page.status_code == 200, page.text
            assert (
                "/projects/beta/due.md" in page.text and "review due since 2020-06-01" in page.text
            )
            assert "/projects/acme/due.md" not in page.text

    anyio.run(main)


def test_the_documented_session_start_hook(tmp_path: Path) -> None:
    """The hook from docs/context.md injects the project's context from a live server."""
    import os
    import subprocess

    from tests.test_sdk import Server

    text = (Path(__file__).resolve().parent.parent / "docs" / "context.md").read_text()
    script = re.search(r"<!-- memdir-session-start-hook -->\n```sh\n(.*?)```", text, re.S)
    assert script is not None
    hook = tmp_path / "memdir-session-start.sh"
    hook.write_text(script.group(1), encoding="utf-8")
    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve")
    try:
        with memdir.Client(server.url, server.admin) as admin:
            admin.add_principal("agent:bot", projects=["acme"])
            token = admin.create_token("agent:bot").token
            admin.write(
                "/projects/acme/conventions.md",
                "---\ncore: true\n---\nRun `make check` before pushing.\n",
                if_absent=True,
            )
            admin.write("/projects/acme/notes.md", "# Deploys go through staging\n", if_absent=True)
            admin.write("/projects/beta/secret.md", "# BETASECRET\n", if_absent=True)
        with memdir.Client(server.url, token) as bot:
            expected = bot.context(project="acme")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
        env |= {"MEMDIR_URL": server.url, "MEMDIR_TOKEN": token or "",
                "MEMDIR_HOOK_LOG": str(tmp_path / "hook.log")}  # fmt: skip
        stdin = json.dumps({"session_id": "s1", "transcript_path": "/dev/null",
                            "cwd": "/home/ana/acme", "hook_event_name": "SessionStart",
                            "source": "startup"})  # fmt: skip
        done = subprocess.run(["bash", str(hook)], input=stdin, env=env, text=True,
                              capture_output=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        out = json.loads(done.stdout)["hookSpecificOutput"]
        assert out["hookEventName"] == "SessionStart"
        assert out["additionalContext"] == expected
        assert "Run `make check` before pushing." in expected and "Deploys go through" in expected
        assert "BETASECRET" not in expected
        env["MEMDIR_URL"] = "http://127.0.0.1:9"  # no server: the session still starts
        down = subprocess.run(["bash", str(hook)], input=stdin, env=env, text=True,
                              capture_output=True, timeout=60)  # fmt: skip
        assert down.returncode == 0 and down.stdout == ""
    finally:
        server.stop()


def test_reason_free_read_test_agrees_with_the_decision(svc: Any, world: Any) -> None:
    """Listings use CompiledPolicy.allows per row; it must decide as check does."""
    for who in ("agent:bot", "user:bob"):
        principal = _principal(svc, who)
        with svc.db.read() as repo:
            access = svc._access(repo, repo.store(STORE).id, principal)
            for path in [*world[1], "/.memdir/policy.yaml", "/", "/projects"]:
                for action in ("read", "write", "propose", "admin"):
                    assert access.allowed(action, path) == access.check(action, path).allowed


def test_memory_tool_adapter_offers_the_context_as_its_first_view(svc: Any, world: Any) -> None:
    from anthropic.types.beta import BetaMemoryTool20250818ViewCommand

    from memdir.integrations.anthropic import MemoryTool

    url, files = world
    view = BetaMemoryTool20250818ViewCommand(command="view", path="/memories")
    with memdir.Client(db=url, principal="agent:bot") as client:
        tool = MemoryTool(client, prefix="/agents/bot", context_budget=800)
        first, second = tool.view(view), tool.view(view)
        expected = svc.context(_principal(svc, "agent:bot"), STORE, budget=800).markdown
        assert first.startswith(expected) and first.endswith(second)
        assert not second.startswith("# Memory for")  # later views: the reference listing
        plain = MemoryTool(client, prefix="/agents/bot")
        assert plain.view(view) == second
    for canary in _canaries(files, BOT_READS):
        assert canary not in first


def test_expiry_context_and_reads_on_both_dialects(backend: str) -> None:
    svc = memdir.open(backend, create=True)
    try:
        svc.create_store(OWNER, STORE, exist_ok=True)
        svc.write(OWNER, STORE, "/org/core.md", "---\ncore: true\n---\nThe rule.\n", if_absent=True)
        svc.write(OWNER, STORE, "/org/old.md", "---\nexpires: 1h\n---\n# soon gone\n",
                  if_absent=True)  # fmt: skip
        svc.write(OWNER, STORE, "/org/gone.md", "---\nexpires: 2020-01-01\n---\n# gone\n",
                  if_absent=True)  # fmt: skip
        svc.write(OWNER, STORE, "/org/due.md", "---\nreview_after: 2020-01-01\n---\n# due\n",
                  if_absent=True)  # fmt: skip
        assert [e.path for e in svc.ls(OWNER, STORE, "/org")] == [
            "/org/core.md", "/org/due.md", "/org/old.md",
        ]  # fmt: skip
        got = svc.context(OWNER, STORE)
        assert [i.path for i in got.core] == ["/org/core.md"] and "The rule." in got.markdown
        assert [i.path for i in got.index] == ["/org/old.md", "/org/due.md"] or [
            i.path for i in got.index
        ] == ["/org/due.md", "/org/old.md"]
        assert {s.path: s.reasons for s in svc.stale(OWNER, STORE)} == {
            "/org/gone.md": ("expired",), "/org/due.md": ("review-due",),
        }  # fmt: skip
        svc.read(OWNER, STORE, "/org/due.md")
        svc.reads.record(10**9, [10**9])  # a file that does not exist is skipped
        assert svc.reads.flush() >= 1
        with svc.db.read() as repo:
            reads = repo.conn.execute(sa.select(file_reads.c.file_id)).scalars().all()
        assert len(reads) == 2  # core.md (shown whole by context) and due.md
        svc.delete_store(OWNER, STORE)
    finally:
        svc.close()
