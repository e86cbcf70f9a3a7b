"""The web UI in a real browser: headless system Chromium (Playwright) against `memdir serve`'s
composed app on 127.0.0.1.

One server and one browser per module (each test gets a fresh browser context, so cookies do
not leak between tests); the service the tests seed and check is a second `MemoryService` over
the same SQLite file the server uses. Without Chromium the module skips locally and fails under
CI=true, as the PostgreSQL tests do.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir import OWNER, MemoryService
from memdir.core.model import Provenance, StrReplace, Write
from memdir.dreams import DreamConfig
from memdir.server import create_server_app
from memdir.settings import Settings
from memdir.transcripts.reader import Source
from test_api_live import ThreadedServer

STORE = "default"
CHROMIUM = os.environ.get("MEMDIR_TEST_CHROMIUM", "/usr/bin/chromium")


def _require_chromium() -> None:
    """Skip without Playwright or Chromium — except under CI=true, where that is a failure."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        reason = "the 'playwright' package is not installed (pip install -e '.[dev]')"
    else:
        found = Path(CHROMIUM).is_file() or shutil.which(CHROMIUM) is not None
        if found:
            return
        reason = f"Chromium not found at {CHROMIUM} (install Debian's 'chromium' package)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: the web UI tests must run, but {reason}", pytrace=False)
    pytest.skip(reason)


@dataclass
class Site:
    svc: MemoryService
    url: str  # the UI's base, e.g. http://127.0.0.1:PORT/ui
    root: str  # user:root (admins)
    bot: str  # agent:bot on project acme
    other: str  # agent:other on project zeta
    transcripts: dict[str, str]  # project -> transcript id


def _session(
    project: str, secret: str, session_id: str | None = None, tool: str = "npm ci"
) -> bytes:
    """One failing-then-recovering session: ``<tool> --frozen-lockfile`` fails, ``<tool>`` works."""
    lines = [
        {"type": "transcript", "format": "generic", "session_id": session_id or f"s-{project}",
         "project": project, "agent": "bot", "outcome": "failure"},
        {"type": "event", "kind": "message", "role": "user",
         "text": f"Run the tests for {project} <script>alert('t')</script>"},
        {"type": "event", "kind": "tool_call", "name": "bash", "call_id": "c1",
         "input": {"command": f"{tool} --frozen-lockfile"}},
        {"type": "event", "kind": "tool_result", "call_id": "c1", "is_error": True,
         "exit_code": 1, "output": f"npm ERR! lockfile out of date ({secret})"},
        {"type": "event", "kind": "tool_call", "name": "bash", "call_id": "c2",
         "input": {"command": tool}},
        {"type": "event", "kind": "tool_result", "call_id": "c2", "is_error": False,
         "exit_code": 0, "output": "added 812 packages"},
    ]  # fmt: skip
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    db = f"sqlite:///{tmp_path_factory.mktemp('web') / 'memdir.db'}"
    svc = memdir.open(db, create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    svc.add_principal(OWNER, "agent:other", projects=("zeta",))
    root, bot, other = (svc.create_token(OWNER, p).token or "" for p in
                        ("user:root", "agent:bot", "agent:other"))  # fmt: skip
    transcripts = {}
    for project in ("acme", "zeta"):
        source = Source.from_bytes(f"{project}.jsonl", _session(project, f"only-{project}"))
        report = svc.import_transcripts(OWNER, STORE, [source], format="generic")
        transcripts[project] = report.transcripts[0].id
    app = create_server_app(Settings(db=db, store=STORE))
    try:
        with ThreadedServer(app) as url:
            yield Site(svc, f"{url}/ui", root, bot, other, transcripts)
    finally:
        svc.db.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    _require_chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield launched
        finally:
            launched.close()


@dataclass
class Tab:
    """A page in a fresh browser context; every JavaScript dialog it opens is recorded."""

    page: Any
    context: Any
    dialogs: list[str]


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(10_000)
    dialogs: list[str] = []

    def record(dialog: Any) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", record)
    try:
        yield Tab(page, context, dialogs)
    finally:
        context.close()


def sign_in(tab: Tab, site: Site, token: str, then: str = "/") -> Any:
    """Sign in through the form (following the redirect to ``then``); the page's response."""
    tab.page.goto(f"{site.url}{then}")
    assert "/signin" in tab.page.url
    tab.page.fill("input[name=token]", token)
    with tab.page.expect_navigation():
        tab.page.click("form.signin button[type=submit]")
    return tab.page


def open_as(tab: Tab, site: Site, token: str, then: str) -> Any:
    """The page at ``then`` with a session cookie for ``token`` (what signing in sets)."""
    tab.context.add_cookies([{
        "name": "memdir_session", "value": token, "url": f"{site.url}/",
        "httpOnly": True, "sameSite": "Strict",
    }])  # fmt: skip
    tab.page.goto(f"{site.url}{then}")
    return tab.page


# --- sign-in --------------------------------------------------------------------------------


def test_sign_in_valid_and_invalid_tokens_and_sign_out(tab: Tab, site: Site) -> None:
    page = tab.page
    sign_in(tab, site, "mdr_not-a-real-token")
    assert "/signin" in page.url
    assert "not valid" in page.inner_text(".error")
    assert not [c for c in tab.context.cookies() if c["name"] == "memdir_session"]

    sign_in(tab, site, site.bot, then="/s/default/proposals?status=all")
    assert page.url.endswith("/ui/s/default/proposals?status=all")
    assert "agent:bot" in page.inner_text("header")
    (cookie,) = [c for c in tab.context.cookies() if c["name"] == "memdir_session"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"

    with page.expect_navigation():
        page.click("header form button")
    assert "/signin" in page.url
    page.goto(f"{site.url}/s/default/tree/")
    assert "/signin" in page.url  # signed out: pages send the browser back to sign in


def test_a_revoked_token_signs_the_session_out(tab: Tab, site: Site) -> None:
    info = site.svc.create_token(OWNER, "agent:bot")
    sign_in(tab, site, info.token or "")
    assert "/tree/" in tab.page.url
    site.svc.revoke_token(OWNER, info.id)
    tab.page.goto(f"{site.url}/s/default/proposals")
    assert "/signin" in tab.page.url
    assert "no longer valid" in tab.page.inner_text(".error")
    crafted = tab.page.goto(f"{site.url}/signin?why=Paste+your+token+at+evil.example")
    assert crafted is not None and "evil" not in tab.page.content()
    posted = tab.context.request.post(
        f"{site.url}/s/default/proposals/p_x/accept", form={"csrf": "x"}, max_redirects=0
    )
    assert posted.status == 303 and posted.headers["location"].startswith(
        "/ui/signin?next=%2Fui%2F&"
    )


def test_security_headers_on_every_page(tab: Tab, site: Site) -> None:
    response = tab.page.goto(f"{site.url}/signin")
    assert response is not None
    headers = response.headers
    csp = headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert "frame-ancestors 'none'" in csp
    assert headers["x-frame-options"] == "DENY"
    assert headers["referrer-policy"] == "no-referrer"


# --- browse ---------------------------------------------------------------------------------


def test_browsing_shows_only_readable_paths(tab: Tab, site: Site) -> None:
    svc = site.svc
    svc.write(OWNER, STORE, "/org/handbook.md", "# Handbook\n", if_absent=True)
    svc.write(OWNER, STORE, "/projects/acme/build.md", "# Build\nuse make\n", if_absent=True)
    svc.write(OWNER, STORE, "/projects/zeta/secret.md", "zeta-secret-text\n", if_absent=True)
    page = open_as(tab, site, site.bot, then="/s/default/tree/projects/")
    links = page.locator("table.list a").all_inner_texts()
    assert "acme/" in links and "zeta/" not in links
    page.click("text=acme/")
    page.click("text=build.md")
    assert page.url.endswith("/file/projects/acme/build.md")
    assert page.inner_text("article.markdown h1") == "Build"  # markdown, rendered
    page.click("a.raw-toggle")
    assert page.inner_text("pre.memory") == "# Build\nuse make\n"

    for hidden in ("/file/projects/zeta/secret.md", "/tree/projects/zeta/",
                   "/history/projects/zeta/secret.md"):  # fmt: skip
        response = page.goto(f"{site.url}/s/default{hidden}")
        assert response is not None and response.status == 404, hidden
        assert "zeta-secret-text" not in page.content()
    absent = page.goto(f"{site.url}/s/default/file/projects/zeta/nothing.md")
    assert absent is not None and absent.status == 404
    # the same page for "no right" and "no such file": nothing tells them apart but the path
    assert page.inner_text("h1") == "Not found"


def test_file_history_and_diff(tab: Tab, site: Site) -> None:
    svc = site.svc
    path = "/projects/acme/deploy.md"
    first = svc.write(OWNER, STORE, path, "---\ndescription: how we deploy\n---\nstep one\n",
                      if_absent=True)  # fmt: skip
    svc.str_replace(
        OWNER, STORE, path, "step one\n", "step one\nstep two\n",
        provenance=Provenance(session="sess-42", reason="add the second step",
                              source_kind="user-stated"),
    )  # fmt: skip
    assert first.results[0].version == 1
    page = open_as(tab, site, site.bot, then=f"/s/default/file{path}")
    assert page.inner_text("table.frontmatter td") == "how we deploy"
    assert "description:" not in page.inner_text("article.markdown")
    page.click("p.meta >> text=history")  # the file's history (not the store's, in the nav)
    rows = page.locator("table.history tbody tr")
    assert rows.count() == 2
    newest = rows.nth(0).inner_text()
    assert "sess-42" in newest and "add the second step" in newest and "user-stated" in newest
    assert "owner" in newest or "root" in newest or OWNER.id in newest
    with page.expect_navigation():
        page.click("text=Diff a → b")
    assert page.locator("pre.diff .add").all_inner_texts() == ["+step two"]
    assert "v1 → v2" in page.inner_text("h1")


# --- review queue ---------------------------------------------------------------------------


def _queue(site: Site, path: str, *, content: str = "# Lockfiles\nrun `npm ci`\n") -> str:
    """A proposal by agent:bot with statistics and evidence from both projects' transcripts."""
    bot = site.svc.resolve("agent:bot")
    evidence = [
        {"transcript_id": site.transcripts[p], "first_event": 2, "last_event": 3,
         "excerpt": f"npm ERR! lockfile out of date ({p} excerpt)", "scopes": {"project": p}}
        for p in ("acme", "zeta")
    ]  # fmt: skip
    statistics = {
        "miner": "recovery", "sessions": 12, "sessions_selected": 40, "prevalence": 0.3,
        "agents": 3, "first_seen": "2026-10-01T00:00:00+00:00",
        "last_seen": "2026-10-20T00:00:00+00:00", "confidence": 0.8,
        "variants": {"npm ci": 9, "pnpm install": 3},
    }  # fmt: skip
    proposal = site.svc.propose(
        bot, STORE, [Write(path, content, if_absent=True)], rationale="npm ci --frozen fails",
        evidence=evidence, statistics=statistics,
    )  # fmt: skip
    return proposal.id


def test_queue_shows_a_proposal_with_chart_and_evidence_then_accept_commits(
    tab: Tab, site: Site
) -> None:
    path = "/projects/acme/lockfiles.md"
    pid = _queue(site, path)
    page = open_as(tab, site, site.bot, then="/s/default/proposals")
    page.click(f"tr[data-id='{pid}'] a.proposal")
    assert f"/proposals/{pid}?in=" in page.url  # in the queue's review flow
    page.goto(page.url.split("?")[0])  # on its own: accepting returns to it
    assert page.url.endswith(f"/proposals/{pid}")
    facts = page.inner_text("section.stats table.facts")
    assert "12" in facts and "40" in facts and "30.0 %" in facts and "2026-10-20" in facts
    bars = page.locator("svg.chart rect.bar")
    widths = {
        page.locator("svg.chart text.label").nth(i).text_content(): float(
            bars.nth(i).get_attribute("width") or "nan"
        )
        for i in range(bars.count())
    }
    assert widths["sessions affected"] == pytest.approx(240 * 12 / 40)
    assert widths["confidence"] == pytest.approx(240 * 0.8)
    assert widths["npm ci"] == pytest.approx(240) and widths["pnpm install"] == 80
    # agent:bot may read acme's transcript, not zeta's: that excerpt is withheld
    evidence = page.inner_text("ol.evidence")
    assert "acme excerpt" in evidence and "zeta excerpt" not in evidence
    assert "hidden: from a transcript you may not read" in evidence
    assert page.locator("ol.evidence a.transcript").count() == 1
    assert page.locator("pre.diff .add").all_inner_texts() == ["+# Lockfiles", "+run `npm ci`"]

    page.click("ol.evidence a.transcript")
    assert f"/transcripts/{site.transcripts['acme']}" in page.url
    error = page.locator("li.event.tool-error")
    assert error.count() == 1 and "lockfile out of date" in error.inner_text()
    assert page.locator("li.event.marked").count() == 2  # the evidence's event range
    page.go_back()

    page.fill("form[action$='/accept'] input[name=comment]", "good catch")
    with page.expect_navigation():
        page.click("button.accept")
    assert "accepted" in page.inner_text(".ids")
    accepted = site.svc.get_proposal(OWNER, STORE, pid)
    assert accepted.status == "accepted" and accepted.reviewer == "agent:bot"
    assert accepted.commit is not None and accepted.review_comment == "good catch"
    assert page.inner_text(".meta .commit") == accepted.commit
    assert site.svc.read(OWNER, STORE, path).content == "# Lockfiles\nrun `npm ci`\n"
    (commit,) = [c for c in site.svc.history(OWNER, STORE, actor="agent:bot") if c.proposal == pid]
    assert commit.id == accepted.commit and commit.actor == "agent:bot"


def test_reject_records_the_comment(tab: Tab, site: Site) -> None:
    pid = _queue(site, "/projects/acme/rejected.md")
    page = open_as(tab, site, site.bot, then=f"/s/default/proposals/{pid}")
    page.fill("form[action$='/reject'] input[name=comment]", "not what we do here")
    with page.expect_navigation():
        page.click("button.reject")
    rejected = site.svc.get_proposal(OWNER, STORE, pid)
    assert rejected.status == "rejected" and rejected.review_comment == "not what we do here"
    assert "not what we do here" in page.inner_text("p.comment")
    assert page.locator("button.accept").count() == 0  # no longer reviewable
    page.goto(f"{site.url}/s/default/proposals?status=rejected&origin=agent")
    assert pid in page.inner_text("table.list")
    page.goto(f"{site.url}/s/default/proposals?status=open")
    assert pid not in page.content()


def test_a_conflict_or_a_refusal_is_shown_on_the_proposal(tab: Tab, site: Site) -> None:
    svc = site.svc
    path = "/projects/acme/conflict.md"
    svc.write(OWNER, STORE, path, "alpha\n", if_absent=True)
    bot = svc.resolve("agent:bot")
    pid = svc.propose(bot, STORE, [StrReplace(path, "alpha", "beta")]).id
    svc.write(OWNER, STORE, path, "gamma\n", if_match=svc.read(OWNER, STORE, path).sha256)
    org = svc.propose(bot, STORE, [Write("/org/idea.md", "idea\n", if_absent=True)]).id

    page = open_as(tab, site, site.bot, then=f"/s/default/proposals/{pid}")
    assert "does not apply to the current content" in page.inner_text(".op .note")
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("button.accept")
    assert posted.value.status == 409
    assert "conflicts with changes made since" in page.inner_text("p.error")
    assert svc.get_proposal(OWNER, STORE, pid).status == "conflicted"
    page.goto(f"{site.url}/s/default/proposals/{pid}")  # base, current, proposed side by side
    sides = [page.inner_text(f".sides .side-{part} pre") for part in ("base", "current",
                                                                        "proposed")]  # fmt: skip
    assert sides == ["alpha\n", "gamma\n", "beta\n"]
    assert page.evaluate("getComputedStyle(document.querySelector('.sides')).display") == "grid"

    page.goto(f"{site.url}/s/default/proposals/{org}")  # /org/ needs an admin to write
    with page.expect_response(lambda r: r.request.method == "POST") as posted:
        page.click("button.accept")
    assert posted.value.status == 403
    assert "agent:bot" in page.inner_text("p.error")
    assert svc.get_proposal(OWNER, STORE, org).status == "open"


def test_a_post_without_the_csrf_token_is_refused(tab: Tab, site: Site) -> None:
    pid = _queue(site, "/projects/acme/csrf.md")
    page = open_as(tab, site, site.bot, then=f"/s/default/proposals/{pid}")
    action = f"{site.url}/s/default/proposals/{pid}/accept"
    for form in ({"comment": "x"}, {"comment": "x", "csrf": "0" * 64}):
        refused = tab.context.request.post(action, form=form, max_redirects=0)
        assert refused.status == 403 and "CSRF" in refused.text()
    assert site.svc.get_proposal(OWNER, STORE, pid).status == "open"
    token = page.get_attribute("form[action$='/accept'] input[name=csrf]", "value")
    revision = page.get_attribute("form[action$='/accept'] input[name=revision]", "value")
    assert revision == site.svc.get_proposal(OWNER, STORE, pid).revision
    stale = tab.context.request.post(action, form={"csrf": token or "", "revision": "0" * 16},
                                     max_redirects=0)  # fmt: skip
    assert stale.status == 409 and "changed since you saw it" in stale.text()
    done = tab.context.request.post(action, form={"csrf": token or "", "revision": revision or ""},
                                    max_redirects=0)  # fmt: skip
    assert done.status == 303
    assert site.svc.get_proposal(OWNER, STORE, pid).status == "accepted"
    signout = tab.context.request.post(f"{site.url}/signout", form={}, max_redirects=0)
    assert signout.status == 403


# --- untrusted text -------------------------------------------------------------------------

HOSTILE = """---
description: "<script>alert('frontmatter')</script>"
---
# Notes <script>alert('body')</script>
<img src=x onerror="alert('img')">
[click me](javascript:alert('link'))
<a href="javascript:alert('anchor')">anchor</a>
"""


def test_hostile_memory_and_proposals_render_inert(tab: Tab, site: Site) -> None:
    svc = site.svc
    path = "/projects/acme/hostile.md"
    root = svc.resolve("user:root")
    svc.write(root, STORE, path, HOSTILE, if_absent=True)
    bot = svc.resolve("agent:bot")
    pid = svc.propose(
        bot, STORE, [Write("/projects/acme/hostile2.md", HOSTILE, if_absent=True)],
        rationale="<script>alert('rationale')</script>",
        evidence=[{"transcript_id": "javascript:alert(1)", "excerpt": "<b onmouseover=x>e</b>"}],
        statistics={"sessions": "<script>alert('s')</script>", "variants": {"<i>v</i>": 2}},
    ).id  # fmt: skip

    page = open_as(tab, site, site.bot, then=f"/s/default/file{path}?raw=1")
    assert page.inner_text("pre.memory") == HOSTILE.split("---\n", 2)[2]
    page.goto(f"{site.url}/s/default/file{path}")  # rendered: raw HTML and links stay text
    assert "<img src=x" in page.inner_text("article.markdown")
    assert page.locator("article.markdown a").count() == 0
    assert page.inner_text("table.frontmatter td") == "<script>alert('frontmatter')</script>"
    page.goto(f"{site.url}/s/default/proposals/{pid}")
    assert "<script>alert('rationale')</script>" in page.inner_text("section pre.text")
    # Evidence naming a transcript that does not exist is unverified, for admins only.
    assert "hidden" in page.inner_text("ol.evidence")
    page = open_as(tab, site, site.root, then=f"/s/default/proposals/{pid}")
    assert "<b onmouseover=x>e</b>" in page.inner_text("ol.evidence")
    assert "unverified" in page.inner_text("ol.evidence")
    assert page.locator("ol.evidence a").count() == 0  # an unsafe id never becomes a link
    assert "<script>alert('s')</script>" in page.inner_text("section.stats")
    page.goto(f"{site.url}/s/default/transcripts/{site.transcripts['acme']}")
    assert "<script>alert('t')</script>" in page.inner_text("ol.events")
    for url in (f"/s/default/file{path}", f"/s/default/proposals/{pid}"):
        page.goto(site.url + url)
        assert page.locator("script").count() == 0
        assert page.locator("img").count() == 0
        assert page.locator("[href^='javascript:' i]").count() == 0
        assert page.locator("[onerror], [onmouseover]").count() == 0
    page.wait_for_timeout(200)
    assert tab.dialogs == []


def test_transcripts_follow_the_transcripts_rule(tab: Tab, site: Site) -> None:
    page = open_as(tab, site, site.bot, then=f"/s/default/transcripts/{site.transcripts['acme']}")
    assert "only-acme" in page.inner_text("ol.events")
    response = page.goto(f"{site.url}/s/default/transcripts/{site.transcripts['zeta']}")
    assert response is not None and response.status == 404
    assert "only-zeta" not in page.content()


# --- dream runs -----------------------------------------------------------------------------


def test_dream_runs_and_their_report_link_to_their_proposals(tab: Tab, site: Site) -> None:
    svc = site.svc
    # a tool no memory mentions yet (memory written by earlier tests covers `npm ci`)
    fleet = b"".join(_session("acme", f"run {i}", f"dream-{i}", "yarn install") for i in range(12))
    svc.import_transcripts(OWNER, STORE, [Source.from_bytes("fleet.jsonl", fleet)])
    run = svc.dream(svc.resolve("user:root"), STORE)
    assert run.status == "finished" and run.proposals, run.report

    page = open_as(tab, site, site.root, then="/s/default/dreams")
    page.click(f"a.run:text-is('{run.id}')")
    assert run.id in page.inner_text("h1") and run.status in page.inner_text("h1")
    assert f"Proposed ({len(run.proposals)})" in page.inner_text("main")
    links = page.locator(".pattern a.proposal").all_inner_texts()
    assert links == list(run.proposals)
    assert "Left out" in page.inner_text("main")
    page.click(f".pattern a.proposal:text-is('{run.proposals[0]}')")
    assert page.url.endswith(f"/proposals/{run.proposals[0]}")
    assert "dream proposal" in page.inner_text("p.meta")
    assert page.locator(f"p.meta a[href$='/dreams/{run.id}']").count() == 1
    assert page.locator("svg.chart rect.bar").count() >= 2  # a dream's statistics, charted

    other = open_as(tab, site, site.bot, then="/s/default/dreams")  # not its run, not an admin
    assert run.id not in other.inner_text("main")
    response = other.goto(f"{site.url}/s/default/dreams/{run.id}")
    assert response is not None and response.status == 404


def test_the_quality_page_charts_coverage_and_shows_the_checks(tab: Tab, site: Site) -> None:
    svc = site.svc
    root = svc.resolve("user:root")
    fleet = b"".join(_session("acme", f"bt {i}", f"bt-{i}", "pnpm install") for i in range(16))
    svc.import_transcripts(OWNER, STORE, [Source.from_bytes("bt.jsonl", fleet)])
    run = svc.backtest(root, STORE, DreamConfig.build(min_sessions=3), split=0.5)
    assert run.report is not None
    back = run.report["backtest"]
    page = open_as(tab, site, site.root, then="/s/default/dreams")
    page.click("a.quality:text-is('Quality over runs')")
    assert page.url.endswith("/s/default/dreams/quality")
    assert page.locator("svg.trend polyline.series.cov").count() == 1
    assert page.locator("svg.trend circle.dot.cov").count() == 1  # one backtest so far
    row = page.locator(f"tr:has(a.quality:text-is('{run.id}'))")
    assert row.locator("td.coverage").inner_text() == f"{100 * back['coverage']:.1f} %"
    row.locator("a.quality").click()
    assert page.url.endswith(f"/dreams/{run.id}/quality")
    shown = page.locator("table.checks tbody tr").count()
    assert shown == len(run.report["proposed"]) > 0
    assert page.locator("script").count() == 0
    other = open_as(tab, site, site.bot, then="/s/default/dreams/quality")
    assert run.id not in other.inner_text("main")  # not its run, not an admin
    response = other.goto(f"{site.url}/s/default/dreams/{run.id}/quality")
    assert response is not None and response.status == 404


# --- the pure helpers behind the pages (no browser) ------------------------------------------


def test_operation_previews_chain_edits_on_one_path() -> None:
    from memdir.web.render import op_previews

    ops = [
        {"op": "str_replace", "path": "/a.md", "old": "one", "new": "two"},
        {"op": "insert", "path": "/a.md", "line": 1, "text": "three"},
        {"op": "str_replace", "path": "/a.md", "old": "missing", "new": "x"},
        {"op": "rename", "path": "/a.md", "new_path": "/b.md"},
        {"op": "delete", "path": "/b.md"},
        {"op": "write", "path": "/c.md", "content": "new\n"},
    ]
    first, second, third, rename, delete, write = op_previews(ops, {"/a.md": "one\n"}.get)
    assert [(k, line) for k, line in first.diff if k in ("add", "del")] == [
        ("del", "-one"), ("add", "+two"),
    ]  # fmt: skip
    assert [line for k, line in second.diff if k == "add"] == ["+three"]  # after the first
    assert third.diff == [] and third.note and "does not apply" in third.note
    assert rename.note == "rename to /b.md"
    assert [line for k, line in delete.diff if k == "del"] == ["-two", "-three"]
    assert write.diff[0] == ("meta", "--- (absent)") and ("add", "+new") in write.diff


def test_chart_bars_take_only_finite_numbers() -> None:
    from memdir.web.render import BAR_WIDTH, bars, safe_id

    shown = bars({
        "sessions": 5, "sessions_selected": 20, "prevalence": float("nan"),
        "confidence": "high", "variants": {"a": 4, "b": 1, "c": "x", "d": True},
    })  # fmt: skip
    assert [(b.label, b.width) for b in shown] == [
        ("sessions affected", BAR_WIDTH / 4), ("a", BAR_WIDTH), ("b", BAR_WIDTH / 4),
    ]  # fmt: skip
    assert bars("<script>") == [] and bars({"sessions": 3, "sessions_selected": 0})[0].width == 0
    assert safe_id("t_0123abcd") == "t_0123abcd"
    for bad in ("javascript:alert(1)", "../x", " a", "", None, "a" * 129):
        assert safe_id(bad) is None
