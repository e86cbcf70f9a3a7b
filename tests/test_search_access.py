"""Search, grep, glob and listings depend only on what the caller may read, and user patterns
run in linear time.

- Search results — paths, order, rank positions, snippets — are identical whether or not
  unreadable documents exist in another scope of the store or in another store, on the
  service (SQLite, PostgreSQL), through REST and through the MCP ``search`` tool; hits carry
  a rank position, never a relevance number.
- ``grep '(a+)+$'`` and a glob of many ``**`` finish at once, and ``/healthz`` answers while a
  hostile grep runs; grep keeps Python-syntax semantics and refuses what RE2 cannot run with
  a message naming the construct and the pattern received.
- Glob output and the listings never change with unreadable names.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memdir
from drivers import AsgiSurface, McpDriver, McpSessions, Tokens, direct, reset, stdio_connect
from memdir import OWNER, MemoryService, Principal, Write
from memdir.core.errors import InvalidInput
from memdir.core.globs import compile_glob

STORE = "default"
ALPHA = Principal("agent:alpha", projects=("alpha",))

#: Readable documents whose order BM25 over the whole index would flip (see below).
READABLE = {
    "/projects/alpha/apples.md": "apple apple apple notes from the orchard\n",
    "/projects/alpha/banana.md": "banana bread recipe, one banana and flour\n",
    "/projects/alpha/mixed.md": "apple and banana smoothie\n",
    "/projects/alpha/other.md": "nothing to do with fruit\n",
}
QUERY = "apple banana"


def _hidden(count: int) -> list[Write]:
    """Unreadable files that make "apple" common: counted by a whole-index BM25, they would
    lower its weight below "banana"'s and reorder the readable hits."""
    return [
        Write(f"/projects/beta/apple{i}.md", f"apple pie number {i}\n", if_absent=True)
        for i in range(count)
    ]


@pytest.fixture(scope="module")
def asgi_surface(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AsgiSurface]:
    surface = AsgiSurface(f"sqlite:///{tmp_path_factory.mktemp('asgi') / 'memdir.db'}")
    yield surface
    surface.close()


@pytest.fixture(scope="module")
def stdio_sessions(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpDriver]:
    url = f"sqlite:///{tmp_path_factory.mktemp('stdio') / 'memdir.db'}"
    service = memdir.open(url, create=True)
    tokens = Tokens(service)
    sessions = McpSessions(stdio_connect(url))

    def call(principal: Principal, tool: str, arguments: dict[str, Any]) -> Any:
        if not principal.is_owner:
            tokens.token(principal)
        return sessions.call(principal, tool, arguments)

    yield McpDriver("mcp-stdio", service, call, lambda p: p.id)
    sessions.close()
    service.db.close()


@pytest.fixture(params=["sqlite", "postgres", "asgi", "mcp-stdio"])
def surface(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The service on a backend, or a driver of a surface, over a fresh store ``default``."""
    if request.param in ("sqlite", "postgres"):
        if request.param == "sqlite":
            url = f"sqlite:///{request.getfixturevalue('tmp_path') / 'memdir.db'}"
        else:
            from postgres_cluster import create_database

            admin_url: str = request.getfixturevalue("postgres_admin_url")
            url = create_database(admin_url, f"memdir_t_{uuid.uuid4().hex[:16]}")
        service = memdir.open(url, create=True)
        service.create_store(OWNER, STORE)
        yield service
        service.db.close()
        return
    if request.param == "asgi":
        driver: Any = request.getfixturevalue("asgi_surface").driver()
    else:
        driver = request.getfixturevalue("stdio_sessions")
    reset(direct(driver))
    yield driver


def _register(svc: MemoryService) -> None:
    known = {p.id for p in svc.list_principals(OWNER)}
    if ALPHA.id not in known:
        svc.add_principal(OWNER, ALPHA.id, projects=ALPHA.projects)


def test_search_results_do_not_depend_on_hidden_documents(surface: Any) -> None:
    service = direct(surface)
    _register(service)
    service.commit(OWNER, STORE, [Write(p, c, if_absent=True) for p, c in READABLE.items()])
    before = surface.search(ALPHA, STORE, QUERY, limit=10)
    assert [h.path for h in before][:1] == ["/projects/alpha/mixed.md"]
    assert {h.path for h in before} == set(READABLE) - {"/projects/alpha/other.md"}
    assert [h.rank for h in before] == list(range(1, len(before) + 1))

    service.commit(OWNER, STORE, _hidden(60))  # another scope of the same store
    service.create_store(OWNER, "elsewhere")  # another store, full of the same words
    service.commit(
        OWNER, "elsewhere", [Write(f"/projects/alpha/x{i}.md", "apple\n") for i in range(60)]
    )
    assert surface.search(ALPHA, STORE, QUERY, limit=10) == before
    assert surface.search(ALPHA, STORE, QUERY, limit=2) == before[:2]
    assert surface.search(ALPHA, STORE, QUERY, prefix="/projects", limit=10) == before


def test_search_order_follows_the_readable_collection() -> None:
    """The order among readable files is BM25 over them: the file with the rarer readable
    term ranks higher, whatever the hidden files say about that term."""
    svc = memdir.open("sqlite://", create=True)
    svc.create_store(OWNER, STORE)
    _register(svc)
    svc.commit(
        OWNER,
        STORE,
        [
            Write("/projects/alpha/a.md", "apple banana\n"),
            Write("/projects/alpha/b.md", "apple cherry\n"),
            Write("/projects/alpha/c.md", "apple cherry\n"),
        ],
    )
    first = [h.path for h in svc.search(ALPHA, STORE, "banana cherry apple")]
    assert first[0] == "/projects/alpha/a.md"  # banana is the rarest readable term
    svc.commit(OWNER, STORE, [Write(f"/projects/beta/{i}.md", "banana\n") for i in range(40)])
    assert [h.path for h in svc.search(ALPHA, STORE, "banana cherry apple")] == first
    assert next(h.path for h in svc.search(OWNER, STORE, "banana cherry apple")) != first[0]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_rest_search_hits_carry_a_rank_and_no_score(tmp_path: Path) -> None:
    from memdir.api import create_app
    from memdir.api.settings import ApiSettings
    from memdir.settings import Settings

    svc = memdir.open(f"sqlite:///{tmp_path / 'm.db'}", create=True)
    svc.create_store(OWNER, STORE)
    _register(svc)
    svc.commit(OWNER, STORE, [Write(p, c) for p, c in READABLE.items()])
    token = svc.create_token(OWNER, ALPHA.id).token
    app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None))
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://memdir"
    ) as client:
        response = await client.get(
            f"/v1/stores/{STORE}/search",
            params={"q": QUERY},
            headers={"Authorization": f"Bearer {token}"},
        )
    assert response.status_code == 200, response.text
    items = response.json()["items"]
    assert items and all(set(i) == {"path", "rank", "snippet", "sha256", "version"} for i in items)
    assert [i["rank"] for i in items] == list(range(1, len(items) + 1))
    svc.db.close()


# --- linear-time patterns ---------------------------------------------------------------------

HOSTILE_LINE = "a" * 40 + "!"  # (a+)+$ backtracks 2^40 times on this in a backtracking engine
DEEP = "/" + "/".join(["d"] * 40) + ".md"
MANY_STARS = "/**" * 25 + "/x.md"


def test_hostile_patterns_finish_at_once(surface: Any) -> None:
    service = direct(surface)
    _register(service)
    service.commit(
        OWNER,
        STORE,
        [
            Write("/projects/alpha/redos.md", (HOSTILE_LINE + "\n") * 20 + "aaa\n"),
            Write("/projects/alpha" + DEEP, "deep\n"),
            Write("/projects/beta" + DEEP, "hidden\n"),
        ],
    )
    started = time.monotonic()
    matches = surface.grep(ALPHA, STORE, "(a+)+$")
    assert [(m.path, m.line) for m in matches] == [("/projects/alpha/redos.md", 21)]
    assert surface.grep(ALPHA, STORE, "(x+x+)+y") == []
    if not isinstance(surface, McpDriver):  # MCP has no glob tool
        assert surface.glob(ALPHA, STORE, MANY_STARS) == []
        assert surface.glob(ALPHA, STORE, "/**" * 25 + "/d.md") == ["/projects/alpha" + DEEP]
        assert surface.glob(ALPHA, STORE, "/**/" + "*d" * 30 + "*e") == []
    assert time.monotonic() - started < 20  # each of these alone took minutes before


@pytest.mark.anyio
async def test_healthz_answers_during_a_hostile_grep(tmp_path: Path) -> None:
    from memdir.api import create_app
    from memdir.api.settings import ApiSettings
    from memdir.settings import Settings

    svc = memdir.open(f"sqlite:///{tmp_path / 'm.db'}", create=True)
    svc.create_store(OWNER, STORE)
    big = (HOSTILE_LINE + "\n") * 2000
    svc.commit(OWNER, STORE, [Write(f"/org/redos{i}.md", big) for i in range(20)])
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    token = svc.create_token(OWNER, "user:root").token
    app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None))
    latencies: list[float] = []
    statuses: list[int] = []
    async with httpx2.AsyncClient(
        transport=httpx2.ASGITransport(app=app), base_url="http://memdir", timeout=60
    ) as client:

        async def hostile() -> None:
            for _ in range(3):
                response = await client.get(
                    f"/v1/stores/{STORE}/grep",
                    params={"pattern": "(a+)+$"},
                    headers={"Authorization": f"Bearer {token}"},
                )
                statuses.append(response.status_code)

        async def probe() -> None:
            for _ in range(10):
                began = time.monotonic()
                assert (await client.get("/healthz")).status_code == 200
                latencies.append(time.monotonic() - began)
                await anyio.sleep(0.05)

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                group.start_soon(hostile)
                group.start_soon(probe)
    assert statuses == [200, 200, 200]
    assert max(latencies) < 2.0, latencies
    svc.db.close()


GREP_CORPUS = (
    "Alpha beta\n"
    "  indented line\n"
    "café au lait 42\n"
    "tab\there\n"
    "UPPER lower\n"
    "ends with x\n"
    "\n"
    "naïve über ÉCOLE\n"
    "key = value_1\n"
    "line\rafter a carriage return\n"
)
PATTERNS = [
    ("^Alpha", False), ("beta$", False), (r"\d+", False), (r"\w+é", False), (r"^\s+\w", False),
    (r"x\Z", False), (r"^$", False), ("école", True), ("upper", True), (r"[^a-z ]{3}", False),
    (r"\bvalue_\d\b", False), ("a|z", False), (r"(?i)alpha", False), (r"\u00e9", False),
    (r"^after", False), (r"t\tH", True), ("[]x]", False), (r"\Aline", False), ("É", True),
]  # fmt: skip


def _reference(pattern: str, ignore_case: bool) -> list[int]:
    regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    return [i + 1 for i, line in enumerate(GREP_CORPUS.splitlines()) if regex.search(line)]


def test_grep_keeps_python_syntax_semantics() -> None:
    svc = memdir.open("sqlite://", create=True)
    svc.create_store(OWNER, STORE)
    svc.write(OWNER, STORE, "/notes.md", GREP_CORPUS)
    for pattern, ignore_case in PATTERNS:
        found = [m.line for m in svc.grep(OWNER, STORE, pattern, ignore_case=ignore_case)]
        assert found == _reference(pattern, ignore_case), (pattern, ignore_case)
    context = svc.grep(OWNER, STORE, "^UPPER", context=1)
    assert [(m.before, m.after) for m in context] == [(("tab\there",), ("ends with x",))]


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(a)\1", "backreferences"),
        (r"(?P<w>a)(?P=w)", "backreferences"),
        (r"foo(?=bar)", "lookahead and lookbehind"),
        (r"(?<!x)y", "lookahead and lookbehind"),
        (r"a++", "possessive"),
        (r"(?>ab)", "atomic"),
        ("(?x) a b", "verbose"),
    ],
)
def test_grep_refuses_what_re2_cannot_run_and_says_what_to_use(
    surface: Any, pattern: str, named: str
) -> None:
    with pytest.raises(InvalidInput) as refused:
        surface.grep(OWNER, STORE, pattern)
    message = str(refused.value)
    assert named in message and "RE2" in message
    if not isinstance(surface, McpDriver):  # the tool's error line quotes it its own way
        assert repr(pattern) in message


def test_an_invalid_pattern_is_still_an_invalid_regular_expression() -> None:
    svc = memdir.open("sqlite://", create=True)
    svc.create_store(OWNER, STORE)
    with pytest.raises(InvalidInput, match=r"invalid regular expression '\(ab'"):
        svc.grep(OWNER, STORE, "(ab")


# --- glob and listings never see unreadable names ---------------------------------------------


def test_glob_and_listings_ignore_unreadable_names(surface: Any) -> None:
    if isinstance(surface, McpDriver):
        pytest.skip("MCP has no glob, tree or history filter")
    service = direct(surface)
    _register(service)
    service.commit(OWNER, STORE, [Write(p, c, if_absent=True) for p, c in READABLE.items()])
    service.write(OWNER, STORE, "/org/handbook.md", "apple handbook\n")
    patterns = ["/**/*.md", "/projects/*/a*.md", "**/[ab]*", "/projects/**", "/*/*/*"]
    globs = {p: surface.glob(ALPHA, STORE, p) for p in patterns}
    tree = surface.ls(ALPHA, STORE, "/", depth=None)
    grep = surface.grep(ALPHA, STORE, "apple")
    log = [c.id for c in surface.history(ALPHA, STORE)]
    assert "/projects/alpha/apples.md" in globs["/**/*.md"]

    service.commit(OWNER, STORE, _hidden(30))
    service.write(OWNER, STORE, "/projects/betamax/apple.md", "apple\n")
    service.write(OWNER, STORE, "/projects/alph/apple.md", "apple\n")  # a prefix look-alike
    assert {p: surface.glob(ALPHA, STORE, p) for p in patterns} == globs
    assert surface.ls(ALPHA, STORE, "/", depth=None) == tree
    assert surface.grep(ALPHA, STORE, "apple") == grep
    assert [c.id for c in surface.history(ALPHA, STORE)] == log


def test_a_narrowed_token_narrows_the_scan_too() -> None:
    svc = memdir.open("sqlite://", create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    svc.commit(OWNER, STORE, [Write("/org/a.md", "x\n"), Write("/projects/p/b.md", "x\n")])
    narrowed = svc.authenticate(
        svc.create_token(OWNER, "user:root", paths=("/org/**",), actions=("read",)).token or ""
    )
    assert svc.glob(narrowed, STORE, "/**") == ["/org/a.md"]
    assert [m.path for m in svc.grep(narrowed, STORE, "x")] == ["/org/a.md"]
    assert [e.path for e in svc.ls(narrowed, STORE, "/", depth=None)] == ["/org/a.md"]


# --- the glob matcher against a reference -----------------------------------------------------


def _segment_match(pattern: str, name: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern)


def _reference_glob(pattern: list[str], path: list[str]) -> bool:
    if not pattern:
        return not path
    if pattern[0] == "**":
        return any(_reference_glob(pattern[1:], path[i:]) for i in range(len(path) + 1))
    return (
        bool(path)
        and _segment_match(pattern[0], path[0])
        and _reference_glob(pattern[1:], path[1:])
    )


_SEGMENT = st.text(alphabet="ab*?", min_size=1, max_size=4) | st.sampled_from(
    ["**", "[ab]", "[!a]", "a[a-b]"]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_SEGMENT, min_size=1, max_size=5),
    st.lists(st.text(alphabet="ab", min_size=1, max_size=5), min_size=1, max_size=6),
)
def test_glob_matches_like_the_reference(pattern: list[str], path: list[str]) -> None:
    glob = "/" + "/".join(pattern)
    expected = _reference_glob(pattern, path)
    assert compile_glob(glob).match("/" + "/".join(path)) == expected, (glob, path)


# --- the fast path for callers who read the whole store ---------------------------------------

_WHOLE_POLICY = """version: 1
rules:
  - {id: admins, who: group:admins, paths: ['/**'], actions: [admin], reason: administrators}
  - {id: reviewers, who: group:reviewers, paths: ['/**'], actions: [read], reason: reviewers}
  - {id: auditors, who: group:auditors, paths: ['/**'], actions: [read], reason: auditors}
  - {id: no-secrets, who: group:auditors, paths: ['/org/secret/**'], actions: [read],
     effect: deny, reason: not the secrets}
"""


def test_whole_store_readers_are_ranked_by_the_index_and_others_by_readable_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner and an administrator with an unnarrowed token read every file (the policy
    file included): their hits are FTS5's own bm25 order, recomputed here on a separate
    connection. A narrowed token, a reader who may not read the policy file, and a reader
    under a deny rule stay on the filtered ranking (the fast path is never entered)."""
    import sqlite3

    from memdir.core.policy import CompiledPolicy, parse_policy
    from memdir.storage.sqlite import SQLiteDialect, fts_table

    db = tmp_path / "whole.db"
    svc = memdir.open(f"sqlite:///{db}", create=True)
    try:
        svc.create_store(OWNER, STORE)
        words = ["kestrel", "harrier", "osprey", "merlin"]
        writes = [
            Write(f"/org/{'secret/' if i % 7 == 0 else ''}n{i}.md",
                  " ".join(words[j % 4] for j in range(i % 5 + 1)) + " filler" * (i % 9))
            for i in range(40)
        ]  # fmt: skip
        svc.commit(OWNER, STORE, writes)
        svc.set_policy(OWNER, STORE, _WHOLE_POLICY)
        for pid, group in (("user:boss", "admins"), ("user:rev", "reviewers"),
                           ("user:aud", "auditors")):  # fmt: skip
            svc.add_principal(OWNER, pid, groups=(group,))
        narrowed = svc.authenticate(
            svc.create_token(OWNER, "user:boss", paths=("/**",), actions=("read",)).token or ""
        )
        with svc.db.read() as repo:
            table = fts_table(svc._store_row(repo, STORE).id)
        raw = sqlite3.connect(db)
        try:
            expected = [r[0] for r in raw.execute(
                f"SELECT h.path FROM {table} JOIN heads h ON h.file_id = {table}.rowid "
                f"WHERE {table} MATCH '\"kestrel\" OR \"osprey\"' "
                f"ORDER BY bm25({table}, 0.5, 1.0), h.path LIMIT 10"
            )]  # fmt: skip
        finally:
            raw.close()
        entered: list[str] = []
        fast = SQLiteDialect._search_whole

        def spy(self: SQLiteDialect, *args: Any, **kwargs: Any) -> Any:
            entered.append("fast")
            return fast(self, *args, **kwargs)

        monkeypatch.setattr(SQLiteDialect, "_search_whole", spy)
        for who in (OWNER, svc.resolve("user:boss")):
            entered.clear()
            hits = svc.search(who, STORE, "kestrel osprey", limit=10)
            assert entered == ["fast"] and [h.path for h in hits] == expected
        for who in (narrowed, svc.resolve("user:rev"), svc.resolve("user:aud")):
            entered.clear()
            hits = svc.search(who, STORE, "kestrel osprey", limit=10)
            assert entered == [] and hits, who.id
        audited = [h.path for h in svc.search(svc.resolve("user:aud"), STORE, "kestrel", limit=50)]
        assert audited and not any(p.startswith("/org/secret/") for p in audited)
        compiled = CompiledPolicy(parse_policy(_WHOLE_POLICY))
        assert compiled.reads_everything(svc.resolve("user:rev"))
        assert not compiled.reads_everything(svc.resolve("user:aud"))  # a deny on read
    finally:
        svc.db.close()
