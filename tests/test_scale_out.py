"""Scale-out: several `memdir serve` processes over one PostgreSQL database.

Two servers start together (exactly one first-start admin token between them); 16 SDK clients
spread across them update one counter file 25 times each (exactly 400, a history of 400
modifications with gap-free revisions); a token revoked through one server is refused by the
other within the token cache's second.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

import memdir
from memdir import OWNER, Unauthenticated

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TOKEN_LINE = re.compile(r"^\s+(mdr_\S+)\s*$")


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Serve:
    def __init__(self, db: str, cwd: Path) -> None:
        self.url = f"http://127.0.0.1:{_free_port()}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
        env["MEMDIR_RATE_LIMIT"] = "off"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memdir.cli", "--db", db, "serve", "--port",
             self.url.rsplit(":", 1)[1]],
            cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.stderr: list[str] = []
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)

    def wait(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, "".join(self.stderr)
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError("memdir serve did not start:\n" + "".join(self.stderr))

    def tokens(self) -> list[str]:
        return [m[1] for line in self.stderr if (m := TOKEN_LINE.match(line))]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def test_two_servers_one_database(postgres_admin_url: str, tmp_path: Path) -> None:
    from postgres_cluster import create_database

    db = create_database(postgres_admin_url, "memdir_scale_out")
    servers = [Serve(db, tmp_path), Serve(db, tmp_path)]  # started together
    try:
        for server in servers:
            server.wait()
        printed = [t for s in servers for t in s.tokens()]
        assert len(printed) == 1, [s.stderr for s in servers]  # one first-start admin
        admin_token = printed[0]
        with memdir.Client(servers[0].url, admin_token) as admin:
            admin.add_principal("agent:counter", projects=["acme"])
            token = admin.create_token("agent:counter").token
            assert token is not None
            admin.write("/projects/acme/counter.md", "0", if_absent=True)

        failures: list[BaseException] = []

        def worker(index: int) -> None:
            try:
                with memdir.Client(servers[index % 2].url, token) as client:
                    for _ in range(25):
                        client.update(
                            "/projects/acme/counter.md",
                            lambda text: str(int(text) + 1),
                            max_attempts=200,
                        )
            except BaseException as exc:  # reported below
                failures.append(exc)

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []

        svc = memdir.open(db)
        try:
            assert svc.read(OWNER, "default", "/projects/acme/counter.md").content == "400"
            versions = svc.file_history(OWNER, "default", "/projects/acme/counter.md")
            assert [v.operation for v in versions].count("modified") == 400
            commits = svc.history(OWNER, "default", limit=1000)
            revisions = sorted(c.revision for c in commits)
            assert revisions == list(range(1, len(revisions) + 1))  # gap-free
        finally:
            svc.db.close()

        # revoke through server 0; server 1 refuses the token within its cache's second
        with memdir.Client(servers[0].url, admin_token) as admin:
            [info] = [t for t in admin.tokens() if t.principal == "agent:counter"]
            admin.revoke_token(info.id)
        deadline = time.monotonic() + 3
        refused = False
        with memdir.Client(servers[1].url, token) as client:
            while time.monotonic() < deadline and not refused:
                try:
                    client.read("/projects/acme/counter.md")
                    time.sleep(0.1)
                except Unauthenticated:
                    refused = True
        assert refused
    finally:
        for server in servers:
            server.stop()
