"""Web UI benchmark: review-queue and transcript-index pages over 10,000 proposals and 10,000
transcripts, rendered server-side, beside the raw SQL query each page's listing needs.

Usage::

    python benchmarks/web.py [--proposals 10000] [--transcripts 10000] [--requests 60]
                             [--json OUT]

Set-up (not measured) writes the rows directly — proposals shaped as dream proposals (one
``write`` of a known-failure note, statistics with sessions affected out of 200, evidence),
spread over 20 dream runs and 10 projects; transcripts over 10 projects and 3 outcomes — into
a fresh SQLite memdir database. Each page is then requested in-process through the composed
``memdir serve`` app (ASGI, no network): the time is the server's whole answer — session
authentication, the service's keyset page with its visibility checks, grouping by run, and
the template. The raw baseline, interleaved in the same run, is the page's SQL alone through
stdlib ``sqlite3``: the same ORDER BY (the impact key as its index holds it) and LIMIT, no
rights, no rendering. The project-limited viewer (``agent:p3``) may read one project of ten
and no agent's scope, so it sees a tenth of the queue and no transcript: its pages are
where rights decided row by row used to scan the whole table.

Target (from the issue): every page under 300 ms server-side (p95).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sqlite3
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import Stats, fmt, format_table, run_interleaved, write_json

import memdir
from memdir import OWNER
from memdir.storage.schema import dream_runs, impact_sql, proposals, transcripts

TARGET_MS = 300.0
PROJECTS = [f"p{i}" for i in range(10)]


def _load(url: str, n_props: int, n_transcripts: int, seed: int) -> dict[str, Any]:
    svc = memdir.open(url, create=True)
    store = svc.create_store(OWNER, "default")
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    svc.add_principal(OWNER, "agent:p3", projects=("p3",))
    tokens = {p: svc.create_token(OWNER, p).token or "" for p in ("user:root", "agent:p3")}
    rng = random.Random(seed)
    now = dt.datetime.now(dt.UTC)
    runs = [f"d_{uuid.UUID(int=rng.getrandbits(128)).hex[:20]}" for _ in range(20)]
    with svc.db.write() as repo:
        store_id = repo.store("default").id
        repo.conn.execute(sa.insert(dream_runs), [{
            "id": run, "store_id": store_id, "principal": "owner", "status": "finished",
            "revision": 1, "selection": {}, "config": {}, "memory": {}, "selected": 200,
            "processed": 200, "report": {"proposed": [], "left_out": []},
            "created_at": now, "updated_at": now, "finished_at": now,
        } for run in runs])  # fmt: skip
        rows = []
        for i in range(n_props):
            project = PROJECTS[i % len(PROJECTS)]
            path = f"/projects/{project}/known-failures/tool-{i}.md"
            sessions = rng.randint(2, 60)
            rows.append({
                "id": f"p_{uuid.UUID(int=rng.getrandbits(128)).hex[:20]}", "store_id": store_id,
                "author": "owner", "origin": "dream", "status": "open",
                "operations": [{"op": "write", "path": path, "base_sha256": None,
                                "if_absent": True, "if_match": None,
                                "content": f"---\ndescription: tool {i} fails\n---\n# `tool_{i}`"
                                           f" fails: bad input\n\nSeen in {sessions} sessions.\n"}],
                "paths": [path], "rationale": f"Seen in {sessions} of 200 sessions.",
                "evidence": [{"transcript_id": f"t_{i}", "first_event": 3, "last_event": 4,
                              "excerpt": "Error: bad input", "verified": True,
                              "scopes": {"project": project}}],
                "statistics": {"miner": "tool_errors", "sessions": sessions,
                               "sessions_selected": 200, "prevalence": sessions / 200,
                               "confidence": 0.8,
                               "source_scopes": [{"project": project}]},
                "findings": None, "notes": [], "run_id": runs[i % len(runs)],
                "created_at": now - dt.timedelta(seconds=i), "updated_at": now,
            })  # fmt: skip
        repo.conn.execute(sa.insert(proposals), rows)
        outcomes = ("success", "failure", "unknown")
        repo.conn.execute(sa.insert(transcripts), [{
            "id": f"t_{i}", "store_id": store_id, "format": "generic",
            "session_id": f"session-{i}", "project": PROJECTS[i % len(PROJECTS)],
            "agent": f"agent-{i % 7}", "labels": "[]", "outcome": outcomes[i % 3],
            "started_at": now - dt.timedelta(minutes=i), "events": 40, "tool_calls": 12,
            "tool_errors": i % 4, "redactions": 0, "meta": "{}", "imported_at": now,
            "updated_at": now, "imported_by": "owner",
        } for i in range(n_transcripts)])  # fmt: skip
    middle = None
    for _ in range(max(1, n_props // 2000)):  # the cursor halfway down the queue
        middle = svc.proposal_queue(OWNER, "default", limit=1000, cursor=middle).next_cursor
    svc.db.close()
    return {"tokens": tokens, "runs": runs, "store_id": store.name, "middle": middle}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--proposals", type=int, default=10_000)
    parser.add_argument("--transcripts", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=60)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--json")
    args = parser.parse_args()

    from starlette.testclient import TestClient

    from memdir.server import create_server_app
    from memdir.settings import Settings

    workdir = Path(tempfile.mkdtemp(prefix="memdir-web-bench-"))
    path = workdir / "memdir.db"
    url = f"sqlite:///{path}"
    print(f"loading {args.proposals} proposals and {args.transcripts} transcripts …",
          file=sys.stderr)  # fmt: skip
    setup = _load(url, args.proposals, args.transcripts, args.seed)
    raw = sqlite3.connect(path)
    impact = impact_sql("sqlite")  # the queue's key, as its index (migration 0010) holds it
    run = setup["runs"][3]
    open_ = "SELECT * FROM proposals WHERE store_id = 1 AND status = 'open'"
    pages: list[tuple[str, str, str, tuple[Any, ...]]] = [
        ("queue, by impact", "/ui/s/default/proposals",
         f"{open_} ORDER BY {impact} DESC, id DESC "
         "LIMIT 51", ()),
        ("queue, by impact, middle page", "/ui/s/default/proposals?cursor=" + setup["middle"],
         f"{open_} ORDER BY {impact} DESC, id DESC "
         "LIMIT 51 OFFSET 5000", ()),
        ("queue, by time", "/ui/s/default/proposals?sort=time",
         f"{open_} ORDER BY created_at DESC, id DESC "
         "LIMIT 51", ()),
        ("queue, one run", f"/ui/s/default/proposals?run={run}",
         f"{open_} AND run_id = ? ORDER BY {impact} "
         "DESC, id DESC LIMIT 51", (run,)),
        ("transcripts", "/ui/s/default/transcripts",
         "SELECT * FROM transcripts WHERE store_id = 1 ORDER BY started_at DESC, id DESC "
         "LIMIT 51", ()),
        ("transcripts, project+outcome", "/ui/s/default/transcripts?project=p3&outcome=failure",
         "SELECT * FROM transcripts WHERE store_id = 1 AND project = 'p3' AND outcome = 'failure' "
         "ORDER BY started_at DESC, id DESC LIMIT 51", ()),
    ]  # fmt: skip
    viewers = [("admin", setup["tokens"]["user:root"]), ("project p3", setup["tokens"]["agent:p3"])]
    app = create_server_app(Settings(db=url, store="default"))
    results: list[dict[str, Any]] = []
    table: list[list[str]] = []
    with TestClient(app, base_url="http://127.0.0.1") as client:
        for who, token in viewers:
            client.cookies.set("memdir_session", token, path="/ui")
            for name, page_url, sql, params in pages:
                probe = client.get(page_url)
                assert probe.status_code == 200, (page_url, probe.status_code, probe.text[:300])

                def served(_: int, target: str = page_url) -> None:
                    assert client.get(target).status_code == 200

                def baseline(_: int, query: str = sql, values: tuple[Any, ...] = params) -> None:
                    raw.execute(query, values).fetchall()

                web, base = run_interleaved(served, baseline, list(range(args.requests)),
                                            chunk=10, warmup=3)  # fmt: skip
                w, b = Stats.of(web), Stats.of(base)
                ok = w.p95_ms < TARGET_MS
                results.append({"viewer": who, "page": name, "web": w.to_dict(),
                                "raw_sql": b.to_dict(), "under_target": ok})  # fmt: skip
                table.append([f"{name} ({who})", fmt(w.p50_ms), fmt(w.p95_ms), fmt(b.p50_ms),
                              fmt(b.p95_ms), "yes" if ok else "NO"])  # fmt: skip
    print(f"\n{args.proposals} proposals, {args.transcripts} transcripts, "
          f"{args.requests} requests per page (SQLite)\n")  # fmt: skip
    print(format_table(["page (viewer)", "web p50 ms", "web p95 ms", "raw SQL p50 ms",
                        "raw SQL p95 ms", f"< {TARGET_MS:g} ms"], table))  # fmt: skip
    if args.json:
        write_json(args.json, {"proposals": args.proposals, "transcripts": args.transcripts,
                               "results": results})  # fmt: skip
    json.dumps(results)


if __name__ == "__main__":
    main()
