"""The SDK contract, through a live `memdir serve` on 127.0.0.1 and through the local in-process
transport, with the sync and the async client: every contract test runs four ways.

Principals: the admin (``user:admin``, the token `memdir serve` printed; the owner locally) and
``agent:bot`` on project ``acme`` (reads ``/org`` and may only propose there). Each test gets a
fresh store, so the module shares one server and one local database.
"""

from __future__ import annotations

import functools
import os
import re
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

import memdir
from memdir import (
    OWNER,
    Delete,
    EditConflict,
    Forbidden,
    IdempotencyMismatch,
    InvalidInput,
    InvalidPath,
    NotFound,
    PathConflict,
    PreconditionFailed,
    PreconditionRequired,
    Proposed,
    Provenance,
    StrReplace,
    Unauthenticated,
    Write,
)

TOKEN_LINE = re.compile(r"^\s+(mdr_\S+)\s*$")


def sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@pytest.fixture(autouse=True)
def _no_memdir_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients read MEMDIR_TOKEN / MEMDIR_DB when not told; tests tell them everything."""
    for name in ("MEMDIR_TOKEN", "MEMDIR_DB"):
        monkeypatch.delenv(name, raising=False)


# --- a live server -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`python -m memdir.cli --db URL serve --port P`; ``admin`` is the token it prints."""

    def __init__(self, directory: Path) -> None:
        self.db = f"sqlite:///{directory / 'memdir.db'}"
        self.url = f"http://127.0.0.1:{free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
        env["MEMDIR_RATE_LIMIT"] = "off"
        command = [sys.executable, "-m", "memdir.cli", "--db", self.db, "serve", "--port",
                   self.url.rsplit(":", 1)[1]]  # fmt: skip
        self.proc = subprocess.Popen(
            command, cwd=directory, env=env, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stderr: list[str] = []
        self.reader = threading.Thread(target=self._collect, daemon=True)
        self.reader.start()
        self.admin = self._wait()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def _wait(self, timeout: float = 180) -> str:
        # A slow start on a loaded machine is not a failure; a crash is seen at once (poll).
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "".join(self.stderr)
            try:
                if httpx2.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    tokens = [m[1] for line in self.stderr if (m := TOKEN_LINE.match(line))]
                    assert len(tokens) == 1, self.stderr
                    return tokens[0]
            except httpx2.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("memdir serve did not start:\n" + "".join(self.stderr))

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Live:
    url: str
    admin: str
    bot: str


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    server = Server(tmp_path_factory.mktemp("serve"))
    try:
        with memdir.Client(server.url, server.admin) as admin:
            admin.add_principal("agent:bot", projects=["acme"])
            bot = admin.create_token("agent:bot", name="tests").token
        assert bot is not None
        yield Live(server.url, server.admin, bot)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def local_db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('local') / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    try:
        svc.add_principal(OWNER, "agent:bot", projects=("acme",))
    finally:
        svc.db.close()
    return url


# --- four ways to the same contract --------------------------------------------------------------


class Blocking:
    """An AsyncClient called from test code: each method runs in the portal's event loop."""

    def __init__(self, portal: BlockingPortal, client: memdir.AsyncClient) -> None:
        self._portal = portal
        self._client = client

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._client, name)
        if not callable(value):
            return value
        return lambda *a, **k: self._portal.call(functools.partial(value, *a, **k))

    def close(self) -> None:
        self._portal.call(self._client.aclose)


@dataclass
class Way:
    """How a test reaches memdir: ``open(as_bot=False, sync=False, **kwargs)`` makes a client
    (``sync``: a blocking one whatever the way, for use inside an ``update()`` function)."""

    name: str
    open: Callable[..., Any]
    store: str


WAYS = ["http-sync", "http-async", "local-sync", "local-async"]


@pytest.fixture(params=WAYS)
def way(request: pytest.FixtureRequest, local_db: str) -> Iterator[Way]:
    transport, flavour = request.param.split("-")
    store = f"t-{uuid.uuid4().hex[:12]}"
    opened: list[Any] = []
    with start_blocking_portal() as portal:

        def open_client(as_bot: bool = False, sync: bool = False, **kwargs: Any) -> Any:
            kwargs.setdefault("store", store)
            if transport == "http":
                live: Live = request.getfixturevalue("live")
                kwargs.setdefault("token", live.bot if as_bot else live.admin)
                kwargs.setdefault("base_url", live.url)
            else:
                kwargs.setdefault("db", local_db)
                if as_bot:
                    kwargs.setdefault("principal", "agent:bot")
            if flavour == "sync" or sync:
                client: Any = memdir.Client(**kwargs)
            else:
                client = Blocking(portal, memdir.AsyncClient(**kwargs))
            opened.append(client)
            return client

        open_client().create_store(store)
        try:
            yield Way(request.param, open_client, store)
        finally:
            for client in opened:
                client.close()


# --- files ---------------------------------------------------------------------------------------


def test_write_read_cas_and_edits(way: Way) -> None:
    c = way.open()
    created = c.write("/projects/acme/a.md", "one\ntwo\n", if_absent=True)
    assert created.results[0].operation == "created" and created.results[0].version == 1
    view = c.read("/projects/acme/a.md")
    assert (view.content, view.sha256, view.version) == ("one\ntwo\n", sha("one\ntwo\n"), 1)

    with pytest.raises(PreconditionFailed) as stale:
        c.write("/projects/acme/a.md", "x", if_match=sha("nope"))
    assert stale.value.details["current_sha256"] == view.sha256
    with pytest.raises(PreconditionFailed):
        c.write("/projects/acme/a.md", "x", if_absent=True)
    with pytest.raises(PreconditionRequired):
        c.write("/projects/acme/a.md", "x")

    c.write("/projects/acme/a.md", "one\nTWO\n", if_match=view.sha256)
    c.str_replace("/projects/acme/a.md", "TWO", "three")
    c.insert("/projects/acme/a.md", 0, "# A")
    assert c.read("/projects/acme/a.md").content == "# A\none\nthree\n"
    assert c.read("/projects/acme/a.md", lines=(2, None)).content == "one\nthree\n"
    assert c.read("/projects/acme/a.md", version=1).content == "one\ntwo\n"
    with pytest.raises(EditConflict):
        c.str_replace("/projects/acme/a.md", "absent", "x")

    moved = c.rename("/projects/acme/a.md", "/projects/acme/b.md")
    assert moved.results[0].old_path == "/projects/acme/a.md"
    with pytest.raises(NotFound):
        c.read("/projects/acme/a.md")
    assert [v.version for v in c.history("/projects/acme/b.md")] == [5, 4, 3, 2, 1]
    assert "-one\n+# A" not in c.diff("/projects/acme/b.md", 1)
    assert "+three" in c.diff("/projects/acme/b.md", 1, 4)

    c.delete("/projects/acme/b.md")
    with pytest.raises(NotFound):
        c.read("/projects/acme/b.md")
    c.revert("/projects/acme/b.md", 1)
    assert c.read("/projects/acme/b.md").content == "one\ntwo\n"
    with pytest.raises(InvalidPath):
        c.read("relative.md")


def test_revert_commit_redact_purge(way: Way) -> None:
    c = way.open()
    c.write("/projects/acme/leak.md", "key=hunter2\n")
    c.write("/projects/acme/leak.md", "key=<redacted>\n", if_match=sha("key=hunter2\n"))
    undo = c.revert_commit(c.commits(limit=1)[0].id, reason="undo")
    assert c.read("/projects/acme/leak.md").content == "key=hunter2\n" and undo.revision == 3
    c.str_replace("/projects/acme/leak.md", "hunter2", "<gone>")
    plan = c.redact("/projects/acme/leak.md", 1, dry_run=True)
    assert not plan.done and [v.version for v in plan.versions] == [1, 3]
    assert c.redact("/projects/acme/leak.md", 1).done
    assert [v.redacted for v in c.history("/projects/acme/leak.md")] == [False, True, False, True]
    c.purge("/projects/acme/leak.md", reason="gone for good")
    with pytest.raises(NotFound):
        c.history("/projects/acme/leak.md")


def test_ls_glob_grep_search_and_pages(way: Way) -> None:
    c = way.open()
    ops = [Write(f"/projects/acme/n/{i:03}.md", f"note {i} about caching\n") for i in range(150)]
    c.commit([*ops, Write("/projects/acme/big.md", "x\n" * 1100)])
    top = c.ls("/projects/acme")
    assert [(e.path, e.kind, e.files) for e in top] == [
        ("/projects/acme/big.md", "file", 0),
        ("/projects/acme/n", "dir", 150),
    ]
    assert len(c.ls("/", recursive=True)) == 151
    assert c.glob("/projects/acme/n/00*.md") == [f"/projects/acme/n/00{i}.md" for i in range(10)]
    matches = c.grep("^x$", prefix="/projects/acme", limit=None)  # two pages of 1000
    assert len(matches) == 1100 and matches[-1].line == 1100
    assert [m.line for m in c.grep("x", limit=3)] == [1, 2, 3]
    near = c.grep("note 7 ", context=1)
    assert near[0].path == "/projects/acme/n/007.md" and near[0].after == ()
    hits = c.search("caching", limit=120)  # two pages of 100
    assert len(hits) == 120 and all(h.path.startswith("/projects/acme/n/") for h in hits)
    assert c.search("caching", prefix="/org") == []


def test_commit_is_atomic_and_keys_replay(way: Way) -> None:
    c = way.open()
    c.write("/projects/acme/a.md", "a\n")
    with pytest.raises(EditConflict):
        c.commit([Write("/projects/acme/n.md", "n\n"), StrReplace("/projects/acme/a.md", "z", "")])
    assert c.glob("/projects/acme/*") == ["/projects/acme/a.md"]

    key = Provenance(idempotency_key=f"k-{uuid.uuid4()}", reason="once")
    first = c.commit([Delete("/projects/acme/a.md")], provenance=key)
    again = c.commit([Delete("/projects/acme/a.md")], provenance=key)
    assert (again.commit, again.revision, again.replayed) == (first.commit, first.revision, True)
    with pytest.raises(IdempotencyMismatch):
        c.write("/projects/acme/other.md", "o\n", provenance=key)
    c.write("/projects/acme/a.md", "f\n")
    with pytest.raises(PathConflict):
        c.write("/projects/acme/a.md/b.md", "o\n")


def test_provenance_and_actor(way: Way) -> None:
    admin, bot = way.open(), way.open(as_bot=True, provenance=Provenance(session="s-1"))
    bot.write("/projects/acme/p.md", "p\n", reason="naïve café", provenance=Provenance(
        source_kind="user-stated", transcript="tr-9"))  # fmt: skip
    (info,) = admin.commits(actor="agent:bot")
    expected = ("agent:bot", "s-1", "naïve café", "user-stated", "tr-9")
    assert (info.actor, info.session, info.reason, info.source_kind, info.transcript) == expected
    assert admin.commits(session="s-1")[0].id == info.id


def test_permissions_and_proposals(way: Way) -> None:
    admin, bot = way.open(), way.open(as_bot=True)
    admin.write("/org/rules.md", "# Rules\n- one\n")
    admin.write("/projects/zeta/secret.md", "z\n")
    assert bot.read("/org/rules.md").content == "# Rules\n- one\n"
    with pytest.raises(NotFound):
        bot.read("/projects/zeta/secret.md")
    with pytest.raises(Forbidden):
        bot.create_store("nope")

    with pytest.raises(Proposed) as queued:
        bot.str_replace("/org/rules.md", "- one", "- one\n- two")
    pid = queued.value.details["proposal"]
    other = bot.propose([Write("/org/new.md", "n\n", if_absent=True)], rationale="why not")
    assert other.status == "open" and other.author == "agent:bot"
    assert {p.id for p in admin.proposals()} == {pid, other.id}
    assert admin.proposal(pid).paths == ("/org/rules.md",)
    accepted = admin.accept_proposal(pid, comment="ok")
    assert admin.read("/org/rules.md").content == "# Rules\n- one\n- two\n"
    assert admin.commits(limit=1)[0].proposal == pid and accepted.revision > 0
    assert admin.reject_proposal(other.id, comment="no").status == "rejected"
    assert [p.id for p in admin.proposals(status="rejected")] == [other.id]
    third = bot.propose([Write("/org/rules.md", "x\n", if_match=sha("stale"))])
    assert admin.rebase_proposal(third.id, content="# Rules\n").status == "open"


def test_changes_and_follow(way: Way) -> None:
    c = way.open()
    c.write("/projects/acme/1.md", "1\n")
    c.write("/projects/acme/2.md", "2\n")
    batch = c.changes(0)
    assert [e.revision for e in batch.events] == [1, 2] and batch.next_after == 2
    assert batch.events[0].changes[0].path == "/projects/acme/1.md"

    writer = way.open()
    timer = threading.Timer(0.3, lambda: writer.write("/projects/acme/3.md", "3\n"))
    timer.start()
    try:
        waited = c.changes(2, wait=10)
    finally:
        timer.join()
    assert [e.changes[0].path for e in waited.events] == ["/projects/acme/3.md"]


def test_follow_sync_and_async(local_db: str, live: Live) -> None:
    store = f"f-{uuid.uuid4().hex[:8]}"
    with memdir.Client(live.url, live.admin, store=store) as c:
        c.create_store(store)
        c.write("/org/a.md", "a\n")
        c.write("/org/b.md", "b\n")
        feed = c.follow(0, wait=1)
        assert [next(feed).revision, next(feed).revision] == [1, 2]
        c.write("/org/c.md", "c\n")
        assert next(feed).changes[0].path == "/org/c.md"

    async def main() -> list[int]:
        async with memdir.AsyncClient(db=local_db, store=store, create=True) as a:
            await a.write("/org/x.md", "x\n")
            await a.write("/org/y.md", "y\n")
            seen = []
            async for event in a.follow(0, wait=1):
                seen.append(event.revision)
                if len(seen) == 2:
                    break
            return seen

    assert anyio.run(main) == [1, 2]


def test_update_reapplies_after_a_concurrent_change(way: Way) -> None:
    c, other = way.open(), way.open(sync=True)
    with pytest.raises(NotFound):
        c.update("/projects/acme/n.md", lambda text: text + "x")
    c.update("/projects/acme/n.md", lambda text: str(int(text or "0") + 1), create=True)
    calls = []

    def bump(text: str) -> str:
        calls.append(text)
        if len(calls) == 1:  # someone else gets in between this read and write
            other.write("/projects/acme/n.md", "10", if_match=sha(text))
        return str(int(text) + 1)

    result = c.update("/projects/acme/n.md", bump, reason="count")
    assert calls == ["1", "10"] and c.read("/projects/acme/n.md").content == "11"
    assert result.results[0].version == 3

    def always_stale(text: str) -> str:
        other.update("/projects/acme/n.md", lambda t: t + "!")
        return text

    with pytest.raises(PreconditionFailed):
        c.update("/projects/acme/n.md", always_stale, max_attempts=2)


def test_admin_stores_principals_tokens_policy(way: Way) -> None:
    c = way.open()
    assert way.store in {s.name for s in c.stores()}
    assert c.store_info().name == way.store
    extra = f"x-{uuid.uuid4().hex[:8]}"
    assert c.create_store(extra).revision == 0
    assert c.create_store(extra, exist_ok=True).name == extra
    assert c.archive_store(extra).archived_at is not None
    c.delete_store(extra)
    with pytest.raises(NotFound):
        c.store_info(extra)

    name = f"agent:t{uuid.uuid4().hex[:8]}"
    assert c.add_principal(name, projects=["acme"]).projects == ("acme",)
    assert name in {p.id for p in c.principals()}
    token = c.create_token(name, paths=["/projects/acme/**"], actions=["read"], expires_in=60)
    assert token.token and token.actions == ("read",)
    assert [t.id for t in c.tokens(name)] == [token.id]
    assert c.revoke_token(token.id).revoked_at is not None
    c.remove_principal(name)
    with pytest.raises(NotFound):
        c.principal(name)

    policy = c.policy()
    assert policy.default and "rules:" in policy.text
    decision = c.check_policy("write", "/org/x.md", principal="agent:bot")
    assert not decision.allowed and decision.principal == "agent:bot"
    c.set_policy(policy.text.replace("actions: [propose]", "actions: [write]"), reason="open org")
    assert c.check_policy("write", "/org/x.md", principal="agent:bot").allowed
    assert not c.policy().default
    with pytest.raises(InvalidInput):
        c.set_policy("rules: [")


def test_tokens_name_the_principal(way: Way) -> None:
    if way.name.startswith("local"):
        admin = way.open()
        bot_token = admin.create_token("agent:bot").token
        assert bot_token is not None
        bot = way.open(token=bot_token)
        assert bot.me().id == "agent:bot"
        assert way.open(as_bot=True).me().id == "agent:bot"
        with pytest.raises(InvalidInput):
            way.open(as_bot=True, token=bot_token)
        bad = way.open(token="mdr_not-a-token")
    else:
        assert way.open().me().groups == ("admins",)
        assert way.open(as_bot=True).me().projects == ("acme",)
        bad = way.open(token="mdr_not-a-token")
    with pytest.raises(Unauthenticated):
        bad.read("/org/a.md")


# --- acceptance: concurrent update() against a live server ---------------------------------------


def test_sixteen_clients_update_one_counter_four_hundred_times(live: Live) -> None:
    store, path = f"c-{uuid.uuid4().hex[:8]}", "/projects/acme/counter.md"
    with memdir.Client(live.url, live.admin, store=store) as admin:
        admin.create_store(store)
        admin.write(path, "0", if_absent=True)
    failures: list[BaseException] = []
    attempts: list[int] = []

    def worker() -> None:
        tries = 0

        def increment(text: str) -> str:
            nonlocal tries
            tries += 1
            return str(int(text) + 1)

        try:
            with memdir.Client(live.url, live.bot, store=store) as client:
                for _ in range(25):
                    before = tries
                    # 16 writers of one file: one wins each round, so allow many rounds.
                    client.update(path, increment, max_attempts=100)
                    attempts.append(tries - before)
        except BaseException as exc:  # reported below, with the others
            failures.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    with memdir.Client(live.url, live.admin, store=store) as admin:
        assert admin.read(path).content == "400"
        versions = admin.history(path, limit=None)
        assert [v.version for v in versions] == list(range(401, 0, -1))
        assert [v.operation for v in versions].count("modified") == 400
        assert {v.actor for v in versions[:-1]} == {"agent:bot"}
        revisions = sorted(c.revision for c in admin.commits(limit=None))
        assert revisions == list(range(1, 402))  # gap-free
        assert admin.store_info().revision == 401
    assert len(attempts) == 400 and max(attempts) > 1  # they did collide, and recovered
