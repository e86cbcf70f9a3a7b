"""Review at fleet scale, in a real browser: headless Chromium (Playwright) against the composed
`memdir serve` app on 127.0.0.1, over two dream runs of real fleets from ../shared/data — the
τ-bench airline sessions (project ``airline``) and the SWE-agent trajectories (project ``swe``).

Expected figures are recounted here from the raw files, independently of the dream code.
Every page the tests open is screenshotted into the run's artifacts directory (a pytest tmp
directory, printed at the end; ``MEMDIR_TEST_ARTIFACTS`` chooses another), and every test
fails on a console error or a failed request of its pages.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest

import memdir
import test_web
from memdir import OWNER, MemoryService
from memdir.core.model import Provenance, Write
from memdir.dream.model import Thresholds
from memdir.dream.selection import Selection
from memdir.dreams import DreamConfig
from memdir.server import create_server_app
from memdir.settings import Settings
from memdir.transcripts.model import Labels
from memdir.transcripts.reader import Source
from test_api_live import ThreadedServer

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
browser = test_web.browser  # the module-scoped headless Chromium fixture, shared
TAU = DATA / "tau-bench-airline" / "gpt-4o-airline.json"
SWE = DATA / "swe-agent-trajectories" / "trajectories"
STORE = "default"

pytestmark = pytest.mark.skipif(  # under CI=true missing shared data is a failure, not a skip
    not TAU.is_file() and os.environ.get("CI") != "true", reason=f"shared data not found at {TAU}"
)


@dataclass
class Fleet:
    svc: MemoryService
    url: str
    root: str  # user:root, an administrator
    swe: str  # agent:swe-bot: reads project swe only
    nobody: str  # user:nobody: no project at all
    runs: dict[str, str]  # project -> dream run id
    artifacts: Path


def _recount_tau_payment_sessions() -> int:
    """Sessions of the raw τ-bench file where book_reservation answers 'payment amount does
    not add up' — the most prevalent recurring tool error, read straight from the JSON."""
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    count = 0
    for element in raw:
        names: dict[str, str] = {}
        hit = False
        for message in element["traj"]:
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
            if (message["role"] == "tool" and "payment amount does not add up"
                    in message["content"] and names.get(message["tool_call_id"])
                    == "book_reservation"):  # fmt: skip
                hit = True
        count += hit
    return count


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    db = f"sqlite:///{tmp_path_factory.mktemp('review') / 'memdir.db'}"
    svc = memdir.open(db, create=True)
    svc.create_store(OWNER, STORE)
    svc.create_store(OWNER, "second")
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    svc.add_principal(OWNER, "agent:swe-bot", projects=("swe",))
    svc.add_principal(OWNER, "user:nobody")
    root, swe, nobody = (svc.create_token(OWNER, p).token or "" for p in
                         ("user:root", "agent:swe-bot", "user:nobody"))  # fmt: skip
    svc.import_transcripts(OWNER, STORE, [Source.from_path(TAU)], labels=Labels(project="airline"))
    trajectories = sorted(SWE.rglob("*.traj"))
    svc.import_transcripts(OWNER, STORE, [Source.from_path(p) for p in trajectories],
                           labels=Labels(project="swe"))  # fmt: skip
    low = Thresholds(min_sessions=2, min_prevalence=0.005)
    runs = {
        project: svc.dream(OWNER, STORE, DreamConfig(selection=Selection(project=project),
                                                      thresholds=low)).id
        for project in ("airline", "swe")
    }  # fmt: skip
    svc.write(OWNER, STORE, "/projects/airline/policy.md",
              "---\nexpires: 2020-01-01\nreview_after: 2020-01-01\n---\n# Airline policy\n\n"
              "Refunds need a *reservation* id. <b>raw</b>\n", if_absent=True)  # fmt: skip
    svc.write(
        OWNER,
        STORE,
        "/projects/airline/refunds.md",
        "# Refunds\n\nRefunds go back to the original payment method.\n",
        if_absent=True,
    )
    svc.write(OWNER, "second", "/projects/second/notes.md", "# Second store\n", if_absent=True)
    chosen = os.environ.get("MEMDIR_TEST_ARTIFACTS")
    artifacts = Path(chosen) if chosen else tmp_path_factory.mktemp("artifacts")
    artifacts.mkdir(parents=True, exist_ok=True)
    app = create_server_app(Settings(db=db, store=STORE))
    try:
        with ThreadedServer(app) as url:
            yield Fleet(svc, url, root, swe, nobody, runs, artifacts)
    finally:
        print(f"\nweb review screenshots: {artifacts}")
        svc.db.close()


@dataclass
class Tab:
    page: Any
    context: Any
    fleet: Fleet
    name: str
    errors: list[str] = field(default_factory=list)
    shots: int = 0

    def shot(self, label: str, *, full: bool = True) -> None:
        self.shots += 1
        path = self.fleet.artifacts / f"{self.name}-{self.shots:02d}-{label}.png"
        self.page.screenshot(path=str(path), full_page=full, timeout=60_000)

    def go(self, path: str, label: str) -> Any:
        response = self.page.goto(f"{self.fleet.url}{path}")
        self.shot(label)
        return response

    def follow(self, selector: str) -> None:
        """Click a link and wait until the new page has loaded everything it asks for (so
        the next click does not abort a request of this one, such as its icon)."""
        with self.page.expect_navigation():
            self.page.click(selector)
        self.page.wait_for_load_state("networkidle")

    def go_refused(self, path: str, label: str, status: int) -> Any:
        """:meth:`go` to a page that must answer ``status``: the browser's console line for
        that status (and only it) is expected, not an error of the page."""
        before = len(self.errors)
        response = self.go(path, label)
        assert response is not None and response.status == status
        expected = (
            f"console: Failed to load resource: the server responded with a status of {status}"
        )
        self.errors[before:] = [e for e in self.errors[before:] if not e.startswith(expected)]
        return response


def _as(tab_factory: Any, token: str) -> Tab:
    tab: Tab = tab_factory(token)
    return tab


@pytest.fixture
def open_tab(browser: Any, fleet: Fleet, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A factory: a fresh context signed in with a token (or none), recording console errors
    and failed requests; the test fails if any page it opened had one."""
    tabs: list[Tab] = []

    def make(token: str | None, *, offline: bool = False) -> Tab:
        context = browser.new_context()
        if token:
            context.add_cookies([{"name": "memdir_session", "value": token,
                                  "url": f"{fleet.url}/ui/", "httpOnly": True,
                                  "sameSite": "Strict"}])  # fmt: skip
        if offline:  # the network is gone: only this server answers
            context.route("**/*", lambda route: route.continue_()
                          if urlparse(route.request.url).hostname == "127.0.0.1"
                          else route.abort())  # fmt: skip
        page = context.new_page()
        page.set_default_timeout(15_000)
        tab = Tab(page, context, fleet, request.node.name.removeprefix("test_")[:40])
        page.on("console", lambda m: m.type == "error" and tab.errors.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: tab.errors.append(f"page error: {e}"))
        page.on("requestfailed",
                lambda r: tab.errors.append(f"failed: {r.url} {r.failure}"))  # fmt: skip
        tabs.append(tab)
        return tab

    yield make
    errors = [e for t in tabs for e in t.errors]
    for t in tabs:
        t.context.close()
    assert not errors, errors


def _sessions(page: Any) -> list[float]:
    cells = page.locator("tr.proposal-row td.sessions").all_inner_texts()
    return [float(c.split("/")[0]) for c in cells]


def _open_ids(svc: MemoryService, run: str | None = None) -> list[str]:
    return [p.id for p in svc.list_proposals(OWNER, STORE, limit=1000)
            if run is None or p.run == run]  # fmt: skip


# --- the queue ------------------------------------------------------------------------------


def test_queue_sorts_by_impact_filters_by_run_and_groups_by_run(
    open_tab: Any, fleet: Fleet
) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/proposals?status=all", "queue-impact")
    page = tab.page
    sessions = _sessions(page)
    assert len(sessions) == len(fleet.svc.list_proposals(OWNER, STORE, status=None)) >= 6
    groups = page.locator("tbody.group")
    tops = []
    for i in range(groups.count()):  # impact first (the default), within each run's group
        inside = [float(c.split("/")[0]) for c in
                  groups.nth(i).locator("td.sessions").all_inner_texts()]  # fmt: skip
        assert inside == sorted(inside, reverse=True)
        tops.append(inside[0])
    assert tops == sorted(tops, reverse=True)  # groups in the order of their top proposal
    top = page.locator("tr.proposal-row").first.inner_text()
    assert sessions[0] == _recount_tau_payment_sessions() == 13
    assert "book_reservation" in top and "payment amount does not add up" in top
    assert page.locator("tr.group-head").count() >= 2  # grouped by dream run
    assert "sessions read" in page.locator(".run-summary").first.inner_text()

    page.click("a.sort-time")
    tab.shot("queue-time")
    assert "sort=time" in page.url
    page.click("a.sort-scope")
    targets = page.locator("tr.proposal-row td.target").all_inner_texts()
    assert targets == sorted(targets)

    swe_run = fleet.runs["swe"]
    page.fill("input[name=run]", swe_run)
    with page.expect_navigation():
        page.click("form.filters button")
    tab.shot("queue-run")
    heads = page.locator("tr.group-head").all_inner_texts()
    assert len(heads) == 1 and swe_run in heads[0]
    shown = page.locator("tr.proposal-row").count()
    assert shown == len(fleet.svc.get_dream_run(OWNER, STORE, swe_run).proposals) >= 1
    assert all("/projects/swe/" in t for t in page.locator("td.target").all_inner_texts())


def test_queue_pages_by_cursor(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/proposals?status=all&limit=4", "queue-page-1")
    page = tab.page
    seen: list[str] = []
    while True:
        ids = page.locator("tr.proposal-row").evaluate_all("rows => rows.map(r => r.dataset.id)")
        assert 0 < len(ids) <= 4
        seen += ids
        if page.locator("a.next-page").count() == 0:
            break
        page.click("a.next-page")
        tab.shot("queue-page-next")
    everything = fleet.svc.list_proposals(OWNER, STORE, status=None, limit=1000)
    assert sorted(seen) == sorted(p.id for p in everything) and len(set(seen)) == len(seen)


def test_open_a_proposal_accept_it_and_see_the_applied_diff_and_commit(
    open_tab: Any, fleet: Fleet
) -> None:
    tab = open_tab(fleet.root)
    run = fleet.runs["airline"]
    tab.go(f"/ui/s/default/proposals?run={run}", "queue-airline")
    page = tab.page
    title = page.locator("a.proposal").first.inner_text()
    page.locator("a.proposal").first.click()
    assert "in=" in page.url  # opened from the queue: in its review flow, with a next link
    assert page.locator("a.next").count() == 1
    page.goto(page.url.split("?")[0])  # the proposal on its own: accept returns to it
    tab.shot("proposal-open")
    assert page.inner_text("h1.title") == title
    assert page.locator("ol.evidence li").count() >= 1
    link = page.locator("a.transcript").first
    href = link.get_attribute("href") or ""
    first = int(re.search(r"from=(\d+)", href).group(1))  # type: ignore[union-attr]
    pid = page.url.split("/proposals/")[1].split("?")[0]

    with page.expect_navigation():
        page.click("button.accept")
    tab.shot("proposal-accepted")
    prop = fleet.svc.get_proposal(OWNER, STORE, pid)
    assert prop.status == "accepted" and prop.commit
    assert "accepted" in page.inner_text(".ids")
    applied = page.inner_text("section.applied")
    assert prop.commit in applied
    written = fleet.svc.read(OWNER, STORE, prop.paths[0]).content
    added = page.locator("section.applied pre.diff .add").all_inner_texts()
    assert added and "\n".join(a[1:] for a in added) == written.rstrip("\n")
    assert "no change against the current content" not in page.content()
    tab.follow("a.commit")  # the commit's own page: who, when, provenance, what it changed
    tab.shot("commit")
    assert page.inner_text("h1 code.commit-id") == prop.commit
    assert page.inner_text("code.actor") == "user:root"
    assert page.get_attribute("a.proposal", "href").endswith(f"/proposals/{pid}")  # type: ignore[union-attr]
    changed = page.locator("div.change .changed-file").all_inner_texts()
    assert changed == list(prop.paths)
    added = page.locator("div.change pre.diff .add").all_inner_texts()
    assert "\n".join(a[1:] for a in added) == written.rstrip("\n")
    tab.follow("div.change a.history")
    tab.shot("history-commit")
    assert page.locator(f"tr[id='c-{prop.commit}']").count() == 1
    tab.follow(f"tr[id='c-{prop.commit}'] a.commit")  # and history links back to the commit
    assert page.url.endswith(f"/commits/{prop.commit}")

    page.goto(f"{fleet.url}{href}")
    tab.shot("transcript-evidence")
    marked = page.locator("li.event.marked")
    assert marked.count() >= 1
    assert marked.first.get_attribute("id") == f"e{first}"


def test_bulk_reject_three_with_one_comment(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/proposals", "bulk-before")
    page = tab.page
    boxes = page.locator("input[name=ids]")
    assert boxes.count() >= 3
    chosen = [boxes.nth(i).get_attribute("value") for i in range(3)]
    for i in range(3):
        boxes.nth(i).check()
    page.fill("p.bulk-actions input[name=comment]", "not worth remembering")
    with page.expect_navigation():
        page.click("button[value=reject]")
    tab.shot("bulk-result")
    assert page.inner_text("h1") == "Bulk reject: 3 of 3 done"
    for pid in chosen:
        assert pid is not None
        prop = fleet.svc.get_proposal(OWNER, STORE, pid)
        assert prop.status == "rejected" and prop.review_comment == "not worth remembering"
        assert prop.reviewer == "user:root"


def test_bulk_accept_reports_each_failure(open_tab: Any, fleet: Fleet) -> None:
    """A proposal rejected behind the page's back fails on its own; the others still go."""
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/proposals?sort=time", "bulk-accept-before")
    page = tab.page
    boxes = page.locator("input[name=ids]")
    assert boxes.count() >= 2
    ids = [boxes.nth(i).get_attribute("value") or "" for i in range(2)]
    fleet.svc.reject_proposal(OWNER, STORE, ids[0], "rejected elsewhere")
    boxes.nth(0).check()
    boxes.nth(1).check()
    with page.expect_navigation():
        page.click("button[value=accept]")
    tab.shot("bulk-accept-result")
    assert page.inner_text("h1") == "Bulk accept: 1 of 2 done"
    failed = page.locator("li.failed").inner_text()
    assert ids[0] in failed and "rejected" in failed
    assert fleet.svc.get_proposal(OWNER, STORE, ids[1]).status == "accepted"


def test_keyboard_only_review_of_five_proposals(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    page = tab.page
    clicks: list[str] = []
    page.expose_binding("__click", lambda source, t: clicks.append(t))
    page.add_init_script(
        "document.addEventListener('mousedown', e => window.__click(e.type), true)"
    )  # a mouse event would be recorded (none is sent)
    # the module's other tests decide the dream's proposals: queue five of this test's own
    for index in range(5):
        note = Write(f"/projects/swe/keyboard/{index}.md", f"note {index}\n", if_absent=True)
        fleet.svc.propose(OWNER, STORE, [note], rationale=f"keyboard review {index}")
    open_before = _open_ids(fleet.svc)
    assert len(open_before) >= 5
    tab.go("/ui/s/default/proposals", "keyboard-queue")
    for _ in range(60):  # Tab through the page to the first proposal of the queue
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.matches('a.proposal')"):
            break
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline not in ("none", ""), "the focused row link shows no focus ring"
    tab.shot("keyboard-focus")
    decided: list[tuple[str, str]] = []
    with page.expect_navigation():
        page.keyboard.press("Enter")
    page.wait_for_load_state("networkidle")
    for index in range(5):
        pid = page.url.split("/proposals/")[1].split("?")[0]
        assert page.evaluate("document.activeElement.matches('button.accept')")
        assert page.evaluate("getComputedStyle(document.activeElement).outlineStyle") != "none"
        tab.shot(f"keyboard-{index}")
        if index % 2 == 0:
            action = "accepted"
        else:  # Tab from Accept past its comment field to Reject
            action = "rejected"
            while not page.evaluate("document.activeElement.matches('button.reject')"):
                page.keyboard.press("Tab")
        with page.expect_navigation():
            page.keyboard.press("Enter")
        page.wait_for_load_state("networkidle")  # the next Enter must not abort its requests
        decided.append((pid, action))
    assert not clicks
    assert len({pid for pid, _ in decided}) == 5
    for pid, action in decided:
        assert fleet.svc.get_proposal(OWNER, STORE, pid).status == action


# --- browse, search, stores, transcripts ----------------------------------------------------


def test_markdown_file_with_raw_toggle_frontmatter_and_expiry(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/file/projects/airline/policy.md", "file-rendered")
    page = tab.page
    assert page.inner_text("article.markdown h1") == "Airline policy"
    assert page.inner_text("article.markdown em") == "reservation"
    assert page.locator("article.markdown b").count() == 0  # raw HTML stays text
    assert "<b>raw</b>" in page.inner_text("article.markdown")
    assert page.inner_text("table.frontmatter").count("2020-01-01") == 2
    assert "expired on 2020-01-01" in page.inner_text(".mark-expires")
    assert "review due since 2020-01-01" in page.inner_text(".mark-review_after")
    page.click("a.raw-toggle")
    tab.shot("file-raw")
    assert page.inner_text("pre.memory").startswith("# Airline policy")


def test_search_and_grep_match_the_api_and_open_the_hit(open_tab: Any, fleet: Fleet) -> None:
    import httpx2

    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/search?q=refunds", "search")
    page = tab.page
    shown = page.locator("a.hit-path").all_inner_texts()
    api = httpx2.get(f"{fleet.url}/v1/stores/default/search", params={"q": "refunds"},
                    headers={"authorization": f"Bearer {fleet.root}"}).json()  # fmt: skip
    assert shown == [h["path"] for h in api["items"]]
    assert "/projects/airline/refunds.md" in shown  # the expired policy is left out by default
    page.locator("a.hit-path", has_text="refunds.md").click()
    tab.shot("search-hit")
    assert page.url.endswith("/file/projects/airline/refunds.md")

    tab.go("/ui/s/default/grep?pattern=Refunds&limit=3", "grep")
    grep_api = httpx2.get(f"{fleet.url}/v1/stores/default/grep",
                         params={"pattern": "Refunds", "limit": 3},
                         headers={"authorization": f"Bearer {fleet.root}"}).json()  # fmt: skip
    rows = page.locator("tr.match").all_inner_texts()
    assert [r.split("\t")[0] for r in rows] == [m["path"] for m in grep_api["items"]]
    assert len(rows) == len(grep_api["items"]) >= 1


def test_store_switcher(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/tree/", "tree")
    page = tab.page
    page.click("a.switch-store")
    tab.shot("stores")
    page.select_option("select[name=store]", "second")
    with page.expect_navigation():
        page.click("form.filters button")
    tab.shot("second-store")
    assert page.url.endswith("/ui/s/second/tree/")
    assert page.inner_text("code.current-store") == "second"
    assert "projects/" in page.locator("table.list").inner_text()


def test_page_through_transcripts_with_filters(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(fleet.root)
    tab.go("/ui/s/default/transcripts?project=airline&limit=60", "transcripts")
    page = tab.page
    seen: list[str] = []
    while True:
        rows = page.locator("tr.transcript-row")
        assert 0 < rows.count() <= 60
        seen += rows.locator("a.transcript").evaluate_all("a => a.map(x => x.href)")
        if page.locator("a.next-page").count() == 0:
            break
        page.click("a.next-page")
        tab.shot("transcripts-next")
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    assert len(seen) == len(set(seen)) == len(raw) == 200
    tab.go("/ui/s/default/transcripts?project=swe&outcome=failure", "transcripts-swe")
    for row in page.locator("tr.transcript-row").all_inner_texts():
        assert "swe" in row and "failure" in row


def test_docs_offline_lists_the_operations(open_tab: Any, fleet: Fleet) -> None:
    tab = open_tab(None, offline=True)
    response = tab.page.goto(f"{fleet.url}/docs")
    assert response is not None and response.status == 200
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp
    try:
        tab.page.locator(".opblock-summary-path").first.wait_for(state="attached", timeout=60_000)
    finally:
        tab.shot("docs", full=False)  # the viewport: the whole reference is very long
    ops = tab.page.locator(".opblock-summary-path").all_inner_texts()
    assert any("/v1/stores/{store}/proposals" in o for o in ops)
    assert len(ops) >= 20


# --- what a viewer without rights sees -------------------------------------------------------


def test_a_viewer_without_rights_sees_none_of_the_hidden_items(open_tab: Any, fleet: Fleet) -> None:
    airline = fleet.svc.get_dream_run(OWNER, STORE, fleet.runs["airline"]).proposals
    swe_tab = open_tab(fleet.swe)
    page = swe_tab.page
    swe_tab.go("/ui/s/default/proposals?status=all", "swe-queue")
    targets = page.locator("td.target").all_inner_texts()
    assert targets and all(t.startswith("/projects/swe/") for t in targets)
    assert not any(pid in page.content() for pid in airline)
    swe_tab.go(f"/ui/s/default/proposals?status=all&run={fleet.runs['airline']}", "swe-run")
    assert page.locator("tr.proposal-row").count() == 0
    swe_tab.go("/ui/s/default/transcripts", "swe-transcripts")
    projects = {r.split("\t")[2] for r in page.locator("tr.transcript-row").all_inner_texts()}
    assert projects == {"swe"}
    swe_tab.go("/ui/s/default/search?q=refunds", "swe-search")
    assert page.locator("a.hit-path").count() == 0

    nobody = open_tab(fleet.nobody)
    nobody.go("/ui/s/default/proposals?status=all", "nobody-queue")
    assert nobody.page.locator("tr.proposal-row").count() == 0
    nobody.go("/ui/s/default/transcripts", "nobody-transcripts")
    assert nobody.page.locator("tr.transcript-row").count() == 0
    nobody.go("/ui/stores", "nobody-stores")
    assert "second" not in nobody.page.inner_text("main")
    nobody.go("/ui/s/default/commits", "nobody-log")  # the paged lists show none of it either
    assert nobody.page.locator("tr.commit-row").count() == 0
    nobody.go("/ui/s/default/tree/", "nobody-tree")
    assert nobody.page.locator("table.list").count() == 0
    nobody.go("/ui/s/default/dreams", "nobody-runs")
    assert nobody.page.locator("a.run").count() == 0
    nobody.go("/ui/s/default/stale", "nobody-stale")
    assert nobody.page.locator("a.file").count() == 0

    fleet.svc.write(OWNER, STORE, "/projects/swe/rights/visible.md", "swe\n", if_absent=True)
    swe_tab.go("/ui/s/default/tree/projects/?limit=1", "swe-tree")
    assert page.locator("table.list a").all_inner_texts() == ["swe/"]
    assert "1 of 1" in page.inner_text("p.pager")  # the airline directory is not counted
    swe_tab.go("/ui/s/default/commits?limit=500", "swe-log")
    changed = page.locator("td.changes").all_inner_texts()
    assert changed and all("/projects/swe/" in c and "airline" not in c for c in changed)
    swe_tab.go("/ui/s/default/dreams", "swe-runs")  # runs are their principal's (and admins')
    assert page.locator("a.run").count() == 0


def test_a_commit_page_shows_only_the_changes_the_viewer_may_read(
    open_tab: Any, fleet: Fleet
) -> None:
    """One commit changes a file of project swe and one of project airline: the swe agent's
    commit page and log name, diff and count only the swe file; a commit of airline files
    only does not exist for it (the page an unknown commit gets)."""
    mixed = fleet.svc.commit(OWNER, STORE, [
        Write("/projects/swe/notes/mixed.md", "# Mixed\n\nswe side of the commit\n",
              if_absent=True),
        Write("/projects/airline/mixed-secret.md", "# Hidden\n\nairline-only words\n",
              if_absent=True),
    ], Provenance(reason="one commit, two projects", session="mixed-session")).commit  # fmt: skip
    hidden = fleet.svc.write(OWNER, STORE, "/projects/airline/only-airline.md", "airline\n",
                             if_absent=True).commit  # fmt: skip

    root = open_tab(fleet.root)
    root.go(f"/ui/s/default/commits/{mixed}", "commit-mixed-root")
    assert root.page.locator("div.change").count() == 2
    assert "one commit, two projects" in root.page.inner_text("td.reason")

    swe = open_tab(fleet.swe)
    page = swe.page
    swe.go(f"/ui/s/default/commits/{mixed}", "commit-mixed-swe")
    assert page.locator("div.change .changed-file").all_inner_texts() == [
        "/projects/swe/notes/mixed.md"
    ]
    html = page.content()
    for leak in ("airline", "mixed-secret", "airline-only words", 'id="f2"'):
        assert leak not in html, leak
    assert "2" not in page.inner_text("h2")  # no count of the changes, readable or not
    swe.go("/ui/s/default/commits?prefix=/projects&limit=500", "log-swe")
    row = page.locator(f"tr.commit-row[data-id='{mixed}'] td.changes").inner_text()
    assert row == "created /projects/swe/notes/mixed.md"
    assert hidden not in page.content() and "airline" not in page.inner_text("table.commits")

    swe.go_refused(f"/ui/s/default/commits/{hidden}", "commit-hidden-swe", 404)
    said = page.inner_text("p.error")
    unknown = "0123456789abcdef0123456789abcdef"
    swe.go_refused(f"/ui/s/default/commits/{unknown}", "commit-unknown-swe", 404)
    assert said.replace(hidden, "ID") == page.inner_text("p.error").replace(unknown, "ID")
    nobody = open_tab(fleet.nobody)
    nobody.go_refused(f"/ui/s/default/commits/{mixed}", "commit-nobody", 404)


def _walk(tab: Tab, first: str, rows: str, label: str, *, back: bool = True) -> list[str]:
    """Every row text from ``first`` on, following "next page" to the end (then, with
    ``back``, "previous" to the start, which must show the same pages in reverse)."""
    tab.go(first, label)
    page = tab.page
    pages = [page.locator(rows).all_inner_texts()]
    while page.locator("a.next-page").count():
        tab.follow("a.next-page")
        pages.append(page.locator(rows).all_inner_texts())
    tab.shot(f"{label}-last")
    if back and len(pages) > 1:
        for expected in reversed(pages[:-1]):
            tab.follow("a.prev-page")
            assert page.locator(rows).all_inner_texts() == expected
    assert all(pages), pages
    return [r for p in pages for r in p]


def test_every_list_pages(open_tab: Any, fleet: Fleet) -> None:
    svc = fleet.svc
    for i in range(7):
        svc.write(OWNER, STORE, f"/projects/swe/paging/f{i}.md", f"# {i}\n", if_absent=True)
    path = "/projects/swe/paging/versions.md"
    sha = svc.write(OWNER, STORE, path, "v1\n", if_absent=True).results[0].sha256
    for n in range(2, 6):
        sha = svc.write(OWNER, STORE, path, f"v{n}\n", if_match=sha).results[0].sha256
    tab = open_tab(fleet.root)

    names = _walk(tab, "/ui/s/default/tree/projects/swe/paging?limit=3", "table.list a", "tree")
    assert names == sorted(e.path.rsplit("/", 1)[-1] for e in
                           svc.ls(OWNER, STORE, "/projects/swe/paging"))  # fmt: skip
    assert len(names) == 8 and "3 of 8" in tab.page.inner_text("p.pager")

    versions = _walk(tab, f"/ui/s/default/history{path}?limit=2",
                     "table.history td:nth-child(3)", "history")  # fmt: skip
    assert versions == ["v5", "v4", "v3", "v2", "v1"]

    commits = _walk(tab, "/ui/s/default/commits?limit=7", "tr.commit-row td:first-child code",
                    "log", back=False)  # fmt: skip
    every = svc.history(OWNER, STORE, limit=10_000)
    assert commits == [c.id[:12] for c in every] and len(every) >= 14

    runs = _walk(tab, "/ui/s/default/dreams?limit=1", "a.run", "runs")
    assert runs == [r.id for r in svc.list_dream_runs(OWNER, STORE, limit=100)]
    assert set(fleet.runs.values()) <= set(runs)

    run = fleet.runs["airline"]
    report = svc.get_dream_run(OWNER, STORE, run).report or {}
    titles = _walk(tab, f"/ui/s/default/dreams/{run}?limit=2", "div.pattern h3", "run-patterns")
    assert titles == [str(e.get("title")) for e in report.get("proposed") or []]
    assert len(titles) >= 3

    stale = _walk(tab, "/ui/s/default/stale?limit=1", "table.stale a.file", "stale")
    assert stale == [f.path for f in svc.stale(OWNER, STORE, days=30)] and stale

    tid = svc.list_transcripts(OWNER, STORE, project="swe", limit=1).items[0].id
    events = svc.get_transcript(OWNER, STORE, tid).events
    shown = _walk(tab, f"/ui/s/default/transcripts/{tid}?limit=7", "li.event p.heading",
                  "transcript-events", back=False)  # fmt: skip
    assert [int(h.split()[0][1:]) for h in shown] == list(range(len(events))) and len(events) > 7
    tab.go(f"/ui/s/default/transcripts/{tid}?limit=7&from=9&to=10#e9", "transcript-from")
    assert tab.page.locator("li.event.marked").evaluate_all("e => e.map(x => x.id)") == [
        "e9",
        "e10",
    ]
    assert tab.page.locator("li.event").first.get_attribute("id") == "e7"
    tab.follow("a.first-page")  # still marking the range, from the first event on
    assert tab.page.locator("li.event").first.get_attribute("id") == "e0"
    assert "1–7 of" in tab.page.inner_text("p.pager")

    stores = _walk(tab, "/ui/stores?limit=1", "table.stores a.store", "stores")
    assert stores == ["default", "second"]
