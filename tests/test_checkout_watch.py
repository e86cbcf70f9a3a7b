"""`sync --watch`: an agent appends to a file in the directory (a shell loop of `echo >>`) while
another client edits the same file through REST on a live `memdir serve`; the watcher syncs
after local changes settle and pulls from the change feed. Every line of both survives (or a
conflict is reported, both texts kept, and resolving it while the watcher runs converges) —
never a lost update."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import memdir
from memdir.checkout import checkout
from memdir.checkout.sync import SyncReport
from memdir.checkout.watch import watch
from memdir.core.errors import MemdirError
from test_sdk import Server as SdkServer

ROUNDS = 12


class Server(SdkServer):
    """`memdir serve` as the SDK tests start it, given longer to start on a busy machine."""

    def _wait(self, timeout: float = 240) -> str:
        return super()._wait(timeout)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    (tmp_path / "serve").mkdir()
    running = Server(tmp_path / "serve")
    try:
        yield running
    finally:
        running.stop()


def _resolve(directory: Path) -> None:
    for theirs in list(directory.glob("*.theirs")):
        ours = theirs.with_name(theirs.name[: -len(".theirs")])
        mine = ours.read_text().splitlines() if ours.exists() else []
        lines = mine + [line for line in theirs.read_text().splitlines() if line not in mine]
        ours.write_text("".join(line + "\n" for line in lines))
        theirs.unlink()


def test_watch_converges_an_agent_appending_and_a_rest_writer(
    server: Server, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    with (
        memdir.Client(server.url, server.admin) as client,
        memdir.Client(server.url, server.admin) as rest,
    ):
        client.write("/notes.md", "start\n", if_absent=True)
        checkout(client, "/", work)
        stop = threading.Event()
        reports: list[SyncReport] = []
        errors: list[MemdirError] = []
        watcher = threading.Thread(
            target=watch, args=(client, work),
            kwargs={"settle_ms": 100, "stop": stop, "on_sync": reports.append,
                    "on_error": errors.append, "session": "watcher"},
            daemon=True,
        )  # fmt: skip
        watcher.start()
        agent = subprocess.Popen(
            ["sh", "-c", f"for i in $(seq 1 {ROUNDS}); do echo agent-$i >> notes.md; "
             "sleep 0.3; done"], cwd=work,
        )  # fmt: skip
        for i in range(ROUNDS):
            rest.update("/notes.md", lambda text, i=i: text + f"rest-{i}\n", max_attempts=100)
            time.sleep(0.3)
        agent.wait(60)
        expected = {f"agent-{i}" for i in range(1, ROUNDS + 1)} | {
            f"rest-{i}" for i in range(ROUNDS)
        }
        deadline = time.monotonic() + 180
        store = local = ""
        while time.monotonic() < deadline:
            _resolve(work)  # a person merging what the watcher reported, while it runs
            store = rest.read("/notes.md").content
            local = (work / "notes.md").read_text()
            settled = not list(work.glob("*.theirs"))
            if expected <= set(store.splitlines()) and local == store and settled:
                break
            time.sleep(0.5)
        assert expected <= set(store.splitlines()), f"lost: {expected - set(store.splitlines())}"
        assert local == store
        # quiet here: a REST write arrives through the change feed and is pulled, untouched
        rest.update("/notes.md", lambda text: text + "rest-late\n")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "rest-late" not in local:
            time.sleep(0.2)
            local = (work / "notes.md").read_text()
        stop.set()
        watcher.join(30)
        assert not watcher.is_alive()
        assert local == rest.read("/notes.md").content
        assert not list(work.glob("*.theirs"))
        assert not errors, errors
        assert any(r.sent for r in reports) and any(r.pulled for r in reports)
        for report in reports:
            for conflict in report.conflicts:  # reported with both texts kept, never dropped
                assert "notes.md.theirs" in conflict.message
        watcher_commits = [c for c in rest.commits(limit=None) if c.session == "watcher"]
        assert watcher_commits and all(c.actor == "user:admin" for c in watcher_commits)
