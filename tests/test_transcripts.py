"""Transcripts in the store, on every backend: import of the shared data, idempotent and
incremental re-import, the generic round trip, labels as scopes, purge, atomicity, the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

import shared_counts
from memdir import OWNER, Forbidden, MemoryService, NotFound, Principal
from memdir.storage.schema import transcript_events, transcripts
from memdir.transcripts import Labels, Source, sources_from_paths
from memdir.transcripts.redact import Redactor
from memdir.transcripts.store import TranscriptRows

STORE = "default"
DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "transcripts"
TAU = DATA / "tau-bench-airline" / "gpt-4o-airline.json"
CLAUDE = DATA / "claude-code-samples"

needs_data = pytest.mark.skipif(  # under CI=true a missing data set is a failure, not a skip
    not DATA.is_dir() and os.environ.get("CI") != "true",
    reason=f"shared data not found at {DATA}",
)


def table_counts(svc: MemoryService) -> tuple[int, int]:
    with svc.db.read() as repo:
        t = repo.conn.execute(sa.select(sa.func.count()).select_from(transcripts)).scalar_one()
        e = repo.conn.execute(
            sa.select(sa.func.count()).select_from(transcript_events)
        ).scalar_one()
    return int(t), int(e)


def assert_whole(svc: MemoryService) -> None:
    """No partial transcript: each row's event count is its events, seq 0..n-1."""
    with svc.db.read() as repo:
        rows = repo.conn.execute(sa.select(transcripts.c.id, transcripts.c.events)).all()
        for tid, count in rows:
            seqs = repo.conn.execute(
                sa.select(transcript_events.c.seq)
                .where(transcript_events.c.transcript_id == tid)
                .order_by(transcript_events.c.seq)
            ).scalars()
            assert list(seqs) == list(range(count)), tid


#: One redactor for the tests importing the shared data: its cache of screened strings is
#: exact, so later imports of the same files skip re-screening (reports count per import).
SHARED = Redactor()


def import_paths(svc: MemoryService, *paths: Path, **kwargs: Any) -> Any:
    sources, _ = sources_from_paths([str(p) for p in paths])
    kwargs.setdefault("redactor", SHARED)
    return svc.import_transcripts(OWNER, STORE, sources, **kwargs)


def jsonl(path: Path, records: list[Any]) -> Path:
    text = "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)
    path.write_text(text, encoding="utf-8")
    return path


@needs_data
def test_every_shared_file_imports(svc: MemoryService) -> None:
    sources, passed = sources_from_paths([str(DATA)])
    # Licences, manifests, read-mes, the recount script and the policy text are passed over.
    assert {Path(p.file).name for p in passed} == {
        "LICENSE", "MANIFEST.tsv", "SOURCE.md", "count_sets.py", "airline_wiki_policy.md"
    }  # fmt: skip
    report = svc.import_transcripts(OWNER, STORE, sources, redactor=SHARED)
    assert report.failed == []
    assert report.files == len(sources)
    schema = [p for p in report.skipped if p.file.endswith(".schema.v2.1.144.json")]
    assert len(schema) == 1 and "not a transcript" in schema[0].reason
    other = {Path(p.file).name for p in report.skipped if p not in schema}
    assert other == {"daaain_claude-code-log__edge_cases.jsonl"}
    with svc.db.read() as repo:
        rows = repo.conn.execute(
            sa.select(transcripts.c.format, sa.func.count(), sa.func.sum(transcripts.c.tool_calls),
                      sa.func.sum(transcripts.c.tool_errors)).group_by(transcripts.c.format)
        ).all()  # fmt: skip
    by_format = {f: (int(n), int(calls), int(errors)) for f, n, calls, errors in rows}
    counted = shared_counts.count_sets(DATA)
    tau2, swe, hands = (
        counted["tau2-leaderboard"],
        counted["swe-agent-trajectories"],
        counted["openhands-samples"],
    )
    assert by_format["tau2"] == (
        tau2["sessions"],
        tau2["tool_calls"],
        shared_counts.tau2_tool_errors(DATA),
    )
    assert by_format["swe-agent"][:2] == (swe["sessions"], swe["tool_calls"])
    refused = shared_counts.openhands_refused_calls(DATA)
    assert by_format["openhands"] == (
        hands["sessions"],
        hands["tool_calls"] + refused,
        hands["tool_errors"],
    )
    aider = counted["aider-chat-history"]
    assert by_format["aider"][0] == shared_counts.aider_sessions(DATA)
    shell_runs = aider["shell_commands_run"]
    assert by_format["aider"][1] >= aider["edits_applied"] // 2 + shell_runs
    assert set(by_format) == {
        "claude-code", "codex", "openai-chat", "tau2", "swe-agent", "openhands", "aider"
    }  # fmt: skip
    assert table_counts(svc) == (report.new, report.events)
    assert_whole(svc)


@needs_data
def test_tau_bench_in_the_store(svc: MemoryService) -> None:
    raw = json.loads(TAU.read_text(encoding="utf-8"))
    report = import_paths(svc, TAU)
    tool_messages = [m for e in raw for m in e["traj"] if m["role"] == "tool"]
    errors = sum(1 for m in tool_messages if m["content"].startswith("Error: "))
    assert (report.new, report.tool_calls, report.tool_errors) == (200, 1164, errors)
    page = svc.list_transcripts(OWNER, STORE, limit=500)
    assert len(page.items) == 200 and page.next_cursor is None
    assert sum(t.tool_calls for t in page.items) == 1164
    assert sum(t.tool_errors for t in page.items) == errors
    assert {t.outcome for t in page.items} == {"success", "failure"}
    failed = svc.list_transcripts(OWNER, STORE, outcome="failure", limit=500).items
    assert len(failed) == sum(1 for e in raw if e["reward"] == 0.0)
    with_errors = svc.list_transcripts(OWNER, STORE, has_errors=True, limit=500).items
    assert all(t.tool_errors for t in with_errors) and len(with_errors) < 200
    element = raw[17]
    info = svc.list_transcripts(OWNER, STORE, limit=500).items
    tid = next(
        t.id for t in info
        if t.session_id == f"gpt-4o-airline/task-{element['task_id']}/trial-{element['trial']}"
    )  # fmt: skip
    view = svc.get_transcript(OWNER, STORE, tid)
    assert view.info.score == element["reward"]
    results = [e for e in view.events if e.kind == "tool_result"]
    tool_messages = [m for m in element["traj"] if m["role"] == "tool"]
    assert [(e.call_id, e.output) for e in results] == [
        (m["tool_call_id"], m["content"]) for m in tool_messages
    ]
    latest: dict[str | None, str | None] = {}  # call ids are reused: pair with the latest
    for event in view.events:
        if event.kind == "tool_call":
            latest[event.call_id] = event.name
        elif event.kind == "tool_result":
            assert latest[event.call_id] == event.name
    # paging with the cursor visits every transcript once
    seen: list[str] = []
    cursor = None
    while True:
        page = svc.list_transcripts(OWNER, STORE, limit=64, cursor=cursor)
        seen += [t.id for t in page.items]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen)) == 200


@needs_data
def test_reimport_is_a_no_op(svc: MemoryService) -> None:
    first = import_paths(svc, DATA)
    counts = table_counts(svc)
    again = import_paths(svc, DATA)
    assert (again.new, again.grown, again.events) == (0, 0, 0)
    assert again.unchanged == again.sessions == first.sessions  # a session spans two files
    assert table_counts(svc) == counts


@needs_data
def test_a_grown_claude_code_session_adds_exactly_its_new_events(
    svc: MemoryService, tmp_path: Path
) -> None:
    lines = (CLAUDE / "daaain_claude-code-log__representative_messages.jsonl").read_text(
        encoding="utf-8"
    ).splitlines(keepends=True)  # fmt: skip
    live = tmp_path / "test_session.jsonl"
    live.write_text("".join(lines[:5]), encoding="utf-8")
    first = import_paths(svc, live)
    assert first.new == 1
    live.write_text("".join(lines), encoding="utf-8")  # the session went on
    grown = import_paths(svc, live)
    tid = first.transcripts[0].id
    assert [t.status for t in grown.transcripts] == ["grown"]
    # Exactly the new events: what a fresh import of the whole file has beyond the first part.
    svc.create_store(OWNER, "fresh")
    whole = svc.import_transcripts(OWNER, "fresh", [Source.from_path(live)], redactor=SHARED)
    assert grown.events == whole.events - first.events > 0
    view = svc.get_transcript(OWNER, STORE, tid)
    fresh = svc.get_transcript(OWNER, "fresh", whole.transcripts[0].id)
    assert [e.key for e in view.events] == [e.key for e in fresh.events]
    assert view.normalised() == fresh.normalised()
    assert import_paths(svc, live).unchanged == 1
    assert_whole(svc)


@needs_data
def test_generic_export_round_trips(svc: MemoryService, tmp_path: Path) -> None:
    import_paths(svc, DATA, labels=Labels(project="acme", tags=("nightly",)))
    svc.create_store(OWNER, "copy")
    page = svc.list_transcripts(OWNER, STORE, limit=5000).items
    # Up to five sessions of every format (an empty session exports to a file that, by the
    # import rule, imports nothing: not a round trip).
    by_format: dict[str, list[Any]] = {}
    for t in page:
        if t.events and len(by_format.setdefault(t.format, [])) < 5:
            by_format[t.format].append(t)
    assert len(by_format) == 7
    chosen = [t for group in by_format.values() for t in group]
    for info in chosen:
        exported = tmp_path / f"{info.id}.jsonl"
        exported.write_text(
            "".join(line + "\n" for line in svc.export_transcript(OWNER, STORE, info.id)),
            encoding="utf-8",
        )
        report = svc.import_transcripts(
            OWNER, "copy", [Source.from_path(exported)], redactor=SHARED
        )
        assert report.failed == [] and report.skipped == [], report.skipped
        [done] = report.transcripts
        original = svc.get_transcript(OWNER, STORE, info.id).normalised()
        again = svc.get_transcript(OWNER, "copy", done.id).normalised()
        assert again == original
        assert original["project"] == "acme" and original["labels"] == ["nightly"]
        # and into the same store it is the same session: nothing new
        again_here = svc.import_transcripts(
            OWNER, STORE, [Source.from_path(exported)], redactor=SHARED
        )
        assert again_here.unchanged == 1


def _session(path: Path, name: str, text: str) -> Path:
    return jsonl(path / f"{name}.jsonl", [
        {"type": "transcript", "version": 1, "session_id": name},
        {"type": "event", "kind": "message", "role": "user", "text": text},
    ])  # fmt: skip


def test_labels_are_scopes(svc: MemoryService, tmp_path: Path) -> None:
    svc.add_principal(OWNER, "agent:bot", projects=("alpha",))
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    bot, root = svc.resolve("agent:bot"), svc.resolve("user:root")
    import_paths(svc, _session(tmp_path, "a1", "alpha work"), labels=Labels(project="alpha"))
    import_paths(svc, _session(tmp_path, "b1", "beta work"), labels=Labels(project="beta"))
    import_paths(svc, _session(tmp_path, "ab", "both"),
                 labels=Labels(project="alpha", agent="other"))  # fmt: skip
    import_paths(svc, _session(tmp_path, "none", "unlabelled"))
    ids = {t.session_id: t.id for t in svc.list_transcripts(OWNER, STORE).items}
    assert set(ids) == {"a1", "b1", "ab", "none"}
    # the agent on project alpha lists and reads only alpha's transcript
    assert [t.session_id for t in svc.list_transcripts(bot, STORE).items] == ["a1"]
    assert svc.get_transcript(bot, STORE, ids["a1"]).events[0].text == "alpha work"
    for hidden in ("b1", "ab", "none"):
        with pytest.raises(NotFound):
            svc.get_transcript(bot, STORE, ids[hidden])
        with pytest.raises(NotFound):
            list(svc.export_transcript(bot, STORE, ids[hidden]))
    assert svc.list_transcripts(bot, STORE, project="beta").items == []
    # administrators read everything, unlabelled included
    assert {t.session_id for t in svc.list_transcripts(root, STORE).items} == set(ids)
    # importing needs write on the scopes: the agent may add alpha sessions, not others
    ok = svc.import_transcripts(bot, STORE, [Source.from_path(_session(tmp_path, "a2", "x"))],
                                labels=Labels(project="alpha"))  # fmt: skip
    assert ok.new == 1 and ok.failed == []
    refused = svc.import_transcripts(bot, STORE, [Source.from_path(_session(tmp_path, "c", "x"))])
    assert refused.new == 0 and "may not import" in refused.failed[0].reason
    # purge needs admin
    with pytest.raises(Forbidden):
        svc.purge_transcript(bot, STORE, ids["a1"])
    svc.purge_transcript(root, STORE, ids["a1"])
    with pytest.raises(NotFound):
        svc.get_transcript(OWNER, STORE, ids["a1"])


def test_list_filters(svc: MemoryService, tmp_path: Path) -> None:
    def timed(name: str, start: str, end: str, **labels: str) -> Path:
        return jsonl(tmp_path / f"{name}.jsonl", [
            {"type": "transcript", "version": 1, "session_id": name, "started_at": start,
             "ended_at": end, **labels},
            {"type": "event", "kind": "message", "role": "user", "text": name},
        ])  # fmt: skip

    import_paths(svc, timed("early", "2026-01-01T08:00:00Z", "2026-01-01T09:00:00Z",
                            agent="a1", user="ana", task="t1"),
                 timed("late", "2026-03-01T08:00:00+02:00", "2026-03-01T09:00:00+02:00",
                       agent="a2"))  # fmt: skip

    def names(**filters: Any) -> list[str]:
        return [t.session_id for t in svc.list_transcripts(OWNER, STORE, **filters).items]

    import datetime as dt

    utc = dt.UTC
    assert names() == ["late", "early"]
    assert names(since=dt.datetime(2026, 2, 1, tzinfo=utc)) == ["late"]
    assert names(until=dt.datetime(2026, 2, 1, tzinfo=utc)) == ["early"]
    # 07:30 in UTC+01:00 is 06:30Z: "late" (06:00Z) started before it
    plus1 = dt.timezone(dt.timedelta(hours=1))
    assert names(until=dt.datetime(2026, 3, 1, 7, 30, tzinfo=plus1)) == ["late", "early"]
    assert names(agent="a1") == names(user="ana") == names(task="t1") == ["early"]
    assert names(outcome="unknown", has_errors=False) == ["late", "early"]
    assert names(has_errors=True) == []


def test_token_narrowed_admin_does_not_read_unlabelled(svc: MemoryService) -> None:
    narrowed = Principal("user:root", groups=frozenset({"admins"}))
    from memdir.core.model import TokenScope

    scoped = Principal(narrowed.id, narrowed.groups, scope=TokenScope(paths=("/projects/**",)))
    report = svc.import_transcripts(OWNER, STORE, [Source.from_bytes("s.jsonl", json.dumps(
        {"type": "event", "kind": "message", "role": "user", "text": "x"}).encode())])  # fmt: skip
    tid = report.transcripts[0].id
    assert svc.get_transcript(narrowed, STORE, tid).info.id == tid
    with pytest.raises(NotFound):
        svc.get_transcript(scoped, STORE, tid)


def test_purge_removes_everything_and_store_delete_cascades(
    svc: MemoryService, tmp_path: Path
) -> None:
    report = import_paths(svc, _session(tmp_path, "p1", "x"), _session(tmp_path, "p2", "y"))
    assert table_counts(svc) == (2, 2)
    svc.purge_transcript(OWNER, STORE, report.transcripts[0].id[:6])  # a unique prefix works
    assert table_counts(svc) == (1, 1)
    svc.delete_store(OWNER, STORE)
    assert table_counts(svc) == (0, 0)


def test_a_failing_transcript_leaves_nothing(
    svc: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = TranscriptRows.append_events

    def failing(self: TranscriptRows, tid: str, first: int, events: Any) -> None:
        original(self, tid, first, events)  # the rows go in, then the transaction fails
        if any(e.text == "explode" for e in events):
            raise sa.exc.OperationalError("INSERT", {}, Exception("disk full"))

    monkeypatch.setattr(TranscriptRows, "append_events", failing)
    sessions = [_session(tmp_path, "ok1", "fine"), _session(tmp_path, "bad", "explode"),
                _session(tmp_path, "ok2", "ok")]  # fmt: skip
    report = import_paths(svc, *sessions)
    assert report.new == 2 and len(report.failed) == 1
    assert (
        "'bad' not imported" in report.failed[0].reason and "disk full" in report.failed[0].reason
    )
    assert {t.session_id for t in svc.list_transcripts(OWNER, STORE).items} == {"ok1", "ok2"}
    assert table_counts(svc) == (2, 2)
    assert_whole(svc)


def test_a_database_error_inside_a_batch_fails_only_its_transcript(
    svc: MemoryService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many small transcripts share a writer transaction, each in a savepoint: a real
    constraint violation (on PostgreSQL it aborts the transaction until the savepoint is
    rolled back) fails that transcript alone; the others, before and after it, are stored in
    input order."""
    original = TranscriptRows.append_events

    def duplicating(self: TranscriptRows, tid: str, first: int, events: Any) -> None:
        original(self, tid, first, events)
        if any(e.text == "twice" for e in events):
            original(self, tid, first, events)  # the same (transcript, key) again: refused

    monkeypatch.setattr(TranscriptRows, "append_events", duplicating)
    names = [f"s{i:02d}" for i in range(12)]
    sessions = [_session(tmp_path, n, "twice" if n == "s05" else f"turn {n}") for n in names]
    report = import_paths(svc, *sessions)
    assert [t.session_id for t in report.transcripts] == [n for n in names if n != "s05"]
    assert report.new == 11 and [p.reason.split(":")[0] for p in report.failed] == [
        "session 's05' not imported"
    ]
    assert table_counts(svc) == (11, 11)
    assert_whole(svc)
    again = import_paths(svc, *sessions)
    assert (again.new, again.unchanged, len(again.failed)) == (0, 11, 1)


def test_secrets_never_reach_the_database(svc: MemoryService, tmp_path: Path) -> None:
    key = "AKIAIOSFODNN7EXAMPLE"
    path = jsonl(tmp_path / "leak.jsonl", [
        {"type": "transcript", "version": 1, "session_id": "leak", "meta": {"note": key}},
        {"type": "event", "kind": "tool_call", "name": "sh", "call_id": "c",
         "input": {"cmd": f"aws configure set aws_access_key_id {key}"}},
        {"type": "event", "kind": "tool_result", "call_id": "c", "output": f"id={key}",
         "raw": {"stdout": f"id={key}"}},
    ])  # fmt: skip
    report = import_paths(svc, path)
    assert report.redactions == 4 and report.redactions_by_rule == {"secret.aws-access-key": 4}
    with svc.db.read() as repo:
        stored = json.dumps([list(r) for r in repo.conn.execute(sa.select(transcript_events))],
                            default=str)  # fmt: skip
        meta = repo.conn.execute(sa.select(transcripts.c.meta)).scalar_one()
    assert key not in stored and key not in meta
    assert "[REDACTED:secret.aws-access-key]" in stored
    assert svc.list_transcripts(OWNER, STORE).items[0].redactions == 4


def test_invalid_labels_are_refused(svc: MemoryService, tmp_path: Path) -> None:
    from memdir import InvalidInput

    with pytest.raises(InvalidInput, match="one path segment"):
        import_paths(svc, _session(tmp_path, "x", "y"), labels=Labels(project="a/b"))
    path = jsonl(tmp_path / "bad.jsonl", [
        {"type": "transcript", "version": 1, "session_id": "s", "project": ".."},
        {"type": "event", "kind": "message", "role": "user", "text": "x"},
    ])  # fmt: skip
    report = import_paths(svc, path)
    assert report.new == 0 and "invalid project label" in report.failed[0].reason


def test_cli(svc: MemoryService, tmp_path: Path) -> None:
    from memdir.cli.main import cli

    url = svc.db.display_url
    if not url.startswith("sqlite"):
        pytest.skip("the CLI test runs once, on SQLite")
    svc.db.close()
    session = jsonl(tmp_path / "cli.jsonl", [
        {"type": "transcript", "version": 1, "session_id": "cli-1", "outcome": "failure"},
        {"type": "event", "kind": "tool_call", "name": "make", "call_id": "c", "input": {}},
        {"type": "event", "kind": "tool_result", "call_id": "c", "output": "boom",
         "is_error": True, "exit_code": 2},
        "not json",
    ])  # fmt: skip

    def run(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--db", url, "transcripts", *args])

    result = run("import", str(session), str(tmp_path / "missing.jsonl"), "--project", "acme")
    assert result.exit_code == 0, result.output
    assert "1 sessions from 1 files: 1 new" in result.output
    assert "1 tool errors" in result.output and "cli.jsonl:4: not valid JSON" in result.output
    assert "missing.jsonl: no such file" in result.output
    listed = json.loads(run("list", "--has-errors", "--json").stdout)
    [item] = listed["items"]
    assert (item["project"], item["outcome"], item["tool_errors"]) == ("acme", "failure", 1)
    shown = run("show", item["id"])
    assert "ERROR" in shown.output and "make exit 2" in shown.output
    exported = run("export", item["id"]).stdout.splitlines()
    assert json.loads(exported[0])["session_id"] == "cli-1" and len(exported) == 3
    assert run("list", "--outcome", "success", "--json").output.count('"id"') == 0
    assert run("rm", item["id"]).exit_code == 0
    missing = run("show", item["id"], "--json")
    assert missing.exit_code == 5 and json.loads(missing.stdout)["error"]["type"] == "not_found"


ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "transcripts.md"


def test_docs_python_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    block = next(
        b for b in re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
        if "import_transcripts" in b
    )  # fmt: skip
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()
    _session(tmp_path / "runs", "r1", "x")
    scope: dict[str, Any] = {}
    exec(compile(block, "docs/transcripts.md", "exec"), scope)
    assert scope["report"].new == 1 and scope["page"].items == []


@needs_data
def test_the_documented_session_end_hook(tmp_path: Path) -> None:
    """The hook posts the session file and its sub-agent files to a live server."""
    import os
    import re
    import shutil
    import subprocess

    from tests.test_sdk import Server

    import memdir

    text = DOC.read_text(encoding="utf-8")
    script = re.search(r"<!-- memdir-hook -->\n```sh\n(.*?)```", text, re.S)
    assert script is not None
    hook = tmp_path / "memdir-session-end.sh"
    hook.write_text(script.group(1), encoding="utf-8")
    session = tmp_path / "projects" / "-home-ana-acme" / "test_session.jsonl"
    session.parent.mkdir(parents=True)
    shutil.copy(CLAUDE / "daaain_claude-code-log__representative_messages.jsonl", session)
    sub = session.with_suffix("") / "subagents" / "agent-a1.jsonl"
    sub.parent.mkdir(parents=True)
    line = {"type": "user", "uuid": "x1", "sessionId": "test_session", "isSidechain": True,
            "agentId": "a1", "message": {"role": "user", "content": "look around"}}  # fmt: skip
    jsonl(sub, [line])
    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve")
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
        env |= {"MEMDIR_URL": server.url, "MEMDIR_TOKEN": server.admin,
                "MEMDIR_HOOK_LOG": str(tmp_path / "hook.log")}  # fmt: skip
        stdin = json.dumps({"session_id": "test_session", "transcript_path": str(session),
                            "cwd": "/home/ana/acme", "hook_event_name": "SessionEnd",
                            "reason": "exit"})  # fmt: skip
        for _ in range(2):  # a second run imports nothing new
            done = subprocess.run(["bash", str(hook)], input=stdin, env=env, text=True,
                                  timeout=60)  # fmt: skip
            assert done.returncode == 0
        log = (tmp_path / "hook.log").read_text(encoding="utf-8")
        summaries = [json.loads(line) for line in log.splitlines() if line.strip()]
        assert [(s["new"], s["unchanged"]) for s in summaries] == [(1, 0), (1, 0), (0, 1), (0, 1)]
        with memdir.Client(server.url, server.admin) as client:
            items = client.transcripts()
        assert {(t.session_id, t.project) for t in items} == {
            ("test_session", "acme"),
            ("test_session/agent-a1", "acme"),
        }
    finally:
        server.stop()
