"""Scale-out: several `memdir serve` processes over one PostgreSQL database.

Two servers start together (exactly one first-start admin token between them); 16 SDK clients
spread across them update one counter file 25 times each (exactly 400, a history of 400
modifications with gap-free revisions); a token revoked through one server is refused by the
other within the token cache's second.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import memdir
from memdir import OWNER, Unauthenticated
from test_api_live import ServeProcess

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


def test_two_servers_one_database(postgres_admin_url: str, tmp_path: Path) -> None:
    from postgres_cluster import create_database

    db = create_database(postgres_admin_url, "memdir_scale_out")
    servers = [ServeProcess(db, tmp_path), ServeProcess(db, tmp_path)]  # started together
    try:
        for server in servers:
            server.wait_healthy(timeout=60)
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
