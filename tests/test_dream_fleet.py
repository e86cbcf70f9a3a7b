"""The synthetic fleet: reproducible, imported cleanly by the real importers, and its manifest
true — every planted pattern's sessions recounted here from the raw files, with probes written
independently of the generator; plus the scoring rules, and recall of the offline engine."""

from __future__ import annotations

import datetime as dt
import difflib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir import OWNER
from memdir.dream.engine import Engine, EngineConfig
from memdir.dream.fleet import Fleet, fix_share, generate, load, score
from memdir.dream.fleet_shapes import REFUND_LIMIT, SHAPES
from memdir.dream.model import MINER_NAMES, MemoryFile, Pattern, Session

SESSIONS = 300


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Fleet:
    return generate(11, SESSIONS, out_dir=tmp_path_factory.mktemp("fleet"))


@pytest.fixture(scope="module")
def loaded(fleet: Fleet, tmp_path_factory: pytest.TempPathFactory) -> Any:
    db = tmp_path_factory.mktemp("db") / "memdir.db"
    svc = memdir.open(f"sqlite:///{db}", create=True)
    svc.create_store(OWNER, "default", exist_ok=True)
    report = load(svc, OWNER, "default", fleet)
    yield svc, report
    svc.db.close()


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_same_seed_same_bytes_other_seed_other_fleet(tmp_path: Path) -> None:
    first = _tree(generate(5, 120, out_dir=tmp_path / "a").out_dir)
    again = _tree(generate(5, 120, out_dir=tmp_path / "b").out_dir)
    other = _tree(generate(6, 120, out_dir=tmp_path / "c").out_dir)
    assert first == again
    assert len(first) > 50
    assert first["manifest.json"] != other["manifest.json"]
    with pytest.raises(ValueError, match="already holds a fleet"):
        generate(5, 120, out_dir=tmp_path / "a")
    with pytest.raises(ValueError, match="at least 50 sessions"):
        generate(5, 10, out_dir=tmp_path / "d")


def test_formats_import_cleanly_with_their_labels(fleet: Fleet, loaded: Any) -> None:
    svc, report = loaded
    manifest = fleet.manifest
    assert report.skipped == [] and report.failed == []
    assert report.sessions == report.new == SESSIONS
    assert report.events == manifest["events"]
    infos = []
    cursor = None
    while True:
        page = svc.list_transcripts(OWNER, "default", limit=500, cursor=cursor)
        infos.extend(page.items)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    by_format: dict[str, int] = {}
    for info in infos:
        by_format[info.format] = by_format.get(info.format, 0) + 1
    assert by_format == manifest["formats"]
    assert min(by_format.values()) >= SESSIONS // 10
    assert all(i.project and i.user and i.agent for i in infos)
    assert len({i.agent for i in infos}) >= 20
    assert len({i.project for i in infos}) >= 6
    assert len({i.user for i in infos}) >= 10
    lengths = [i.events for i in infos]
    assert min(lengths) >= 10 and max(lengths) <= 80
    assert max(lengths) - min(lengths) >= 40
    starts = sorted(i.started_at for i in infos if i.started_at)
    assert len(starts) == SESSIONS - manifest["formats"]["swe-agent"]  # trajectories keep none
    assert starts[-1] - starts[0] >= dt.timedelta(weeks=4)
    assert starts[-1] <= fleet.now
    names = {p["format"] for p in manifest["planted"] if p["format"]}
    assert names == {"claude-code", "codex", "openai-chat", "swe-agent"}


# --- reading the raw files, independently of the generator and the importers ------------

Call = tuple[str, dict[str, Any], str, bool]  # tool, input, output, failed


def _claude_session(path: Path) -> tuple[list[Call], list[str]]:
    calls: dict[str, list[Any]] = {}
    order: list[str] = []
    users: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        content = record["message"]["content"]
        if record["type"] == "user" and isinstance(content, str):
            users.append(content)
            continue
        for block in content:
            if block["type"] == "tool_use":
                calls[block["id"]] = [block["name"], block["input"], "", False]
                order.append(block["id"])
            elif block["type"] == "tool_result":
                calls[block["tool_use_id"]][2:] = [block["content"], block["is_error"]]
    return [tuple(calls[i]) for i in order], users  # type: ignore[misc]


def _openai_sessions(path: Path) -> dict[str, tuple[list[Call], list[str]]]:
    out = {}
    for element in json.loads(path.read_text(encoding="utf-8")):
        calls: dict[str, list[Any]] = {}
        order: list[str] = []
        users: list[str] = []
        for message in element["traj"]:
            if message["role"] == "user":
                users.append(message["content"])
            for tool_call in message.get("tool_calls") or []:
                function = tool_call["function"]
                calls[tool_call["id"]] = [function["name"], json.loads(function["arguments"]),
                                          "", False]  # fmt: skip
                order.append(tool_call["id"])
            if message["role"] == "tool":
                text = message["content"]
                calls[message["tool_call_id"]][2:] = [text, text.startswith("Error: ")]
        name = f"{path.stem}/task-{element['task_id']}/trial-{element['trial']}"
        out[name] = ([tuple(calls[i]) for i in order], users)  # type: ignore[misc]
    return out


def _codex_session(path: Path) -> tuple[str, list[Call], list[str]]:
    """A rollout: shell calls as ``("shell", {"command": <the bash -lc string>}, ...)``."""
    calls: dict[str, list[Any]] = {}
    order: list[str] = []
    users: list[str] = []
    session = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        item = record["payload"]
        if record["type"] == "session_meta":
            session = item["id"]
        if record["type"] != "response_item":
            continue
        if item["type"] == "message" and item["role"] == "user":
            users.append(item["content"][0]["text"])
        elif item["type"] == "function_call":
            command = json.loads(item["arguments"])["command"][-1]
            calls[item["call_id"]] = [item["name"], {"command": command}, "", False]
            order.append(item["call_id"])
        elif item["type"] == "custom_tool_call":
            calls[item["call_id"]] = [item["name"], {"patch": item["input"]}, "", False]
            order.append(item["call_id"])
        elif item["type"] == "function_call_output":
            output = json.loads(item["output"])
            calls[item["call_id"]][2:] = [output["output"], output["metadata"]["exit_code"] != 0]
        elif item["type"] == "custom_tool_call_output":
            calls[item["call_id"]][2] = item["output"]
    return session, [tuple(calls[i]) for i in order], users  # type: ignore[misc]


_BLOCK = re.compile(r"```bash\n(.*?)\n```", re.S)
_OBSERVATION = re.compile(r"^<returncode>(-?\d+)</returncode>\n<output>\n(.*)\n</output>$", re.S)


def _mini_session(path: Path) -> tuple[list[Call], list[str]]:
    """A mini-swe-agent trajectory: a bash block's observation is the next user turn, its exit
    code only inside ``<returncode>``; other user turns (the task, harness feedback) are users'."""
    calls: list[Call] = []
    users: list[str] = []
    command: str | None = None
    for message in json.loads(path.read_text(encoding="utf-8"))["messages"]:
        text = message["content"]
        if message["role"] == "user" and command is not None:
            found = _OBSERVATION.match(text)
            assert found, text[:200]
            calls.append(("bash", {"command": command}, found.group(2), found.group(1) != "0"))
            command = None
        elif message["role"] == "user":
            users.append(text)
        elif message["role"] == "assistant":
            block = _BLOCK.search(text)
            command = block.group(1) if block else None
    return calls, users


def _rewards(root: Path) -> dict[str, float]:
    return {f"{path.stem}/task-{e['task_id']}/trial-{e['trial']}": e["reward"]
            for path in (root / "openai").rglob("*.json")
            for e in json.loads(path.read_text(encoding="utf-8"))}  # fmt: skip


def _sessions(root: Path) -> dict[str, tuple[list[Call], list[str]]]:
    found = {p.stem: _claude_session(p) for p in (root / "claude").rglob("*.jsonl")}
    for path in (root / "mini").rglob("*.traj.json"):
        found[f"{path.parent.name}/{path.name.removesuffix('.traj.json')}"] = _mini_session(path)
    for path in (root / "codex").rglob("*.jsonl"):
        session, calls, users = _codex_session(path)
        found[session] = (calls, users)
    for path in (root / "openai").rglob("*.json"):
        found.update(_openai_sessions(path))
    return found


def _cmd(c: Call) -> str:
    return str(c[1].get("command", "")) if c[0] in ("Bash", "shell", "bash") else ""


def _then(
    calls: list[Call], failing: Callable[[Call], bool], fixed: Callable[[Call], bool]
) -> bool:
    return any(
        failing(c) and c[3] and any(fixed(d) and not d[3] for d in calls[i + 1 : i + 4])
        for i, c in enumerate(calls)
    )


def _run(calls: list[Call], command: str) -> int:
    best = run = 0
    for c in calls:
        run = run + 1 if _cmd(c) == command else 0
        best = max(best, run)
    return best


def _failed(calls: list[Call], tool: str, text: str) -> bool:
    return any(c[0] == tool and c[3] and text in c[2] for c in calls)


def _said(users: list[str], *words: str) -> bool:
    return any(all(w in u.lower() for w in words) for u in users)


PROBES: dict[str, Callable[[list[Call], list[str]], bool]] = {
    "npm-frozen-lockfile": lambda c, u: _then(
        c, lambda x: _cmd(x) == "npm ci --frozen-lockfile", lambda x: _cmd(x) == "npm ci"),
    "make-test-renamed": lambda c, u: _then(
        c, lambda x: _cmd(x) == "make test", lambda x: _cmd(x) == "make check"),
    "pnpm-preference": lambda c, u: _said(u, "pnpm"),
    "no-push-main": lambda c, u: _said(u, "push", "main"),
    "nav-architecture": lambda c, u: any(_cmd(x) == "cat docs/ARCHITECTURE.md" for x in c[:3]),
    "nav-ls-src": lambda c, u: any(_cmd(x) == "ls src/" for x in c[:3]),
    "loop-kubectl": lambda c, u: _run(c, "kubectl get pods -n staging") >= 3,
    "invoice-not-found": lambda c, u: _failed(c, "get_invoice", "not found"),
    "orders-rate-limit": lambda c, u: _failed(c, "search_orders", "rate limit exceeded"),
    "ticket-priority": lambda c, u: _then(
        c, lambda x: x[0] == "create_ticket", lambda x: x[0] == "create_ticket"),
    "cargo-offline": lambda c, u: _then(
        c, lambda x: _cmd(x) == "cargo build --offline", lambda x: _cmd(x) == "cargo build"),
    "deploy-timeout": lambda c, u: _failed(c, "deploy_service", "timed out"),
    "pip-user": lambda c, u: _then(
        c, lambda x: "pip install --user" in _cmd(x), lambda x: _cmd(x).startswith("pip install")),
    "emoji-commits": lambda c, u: _said(u, "emoji"),
    "nav-makefile": lambda c, u: any(_cmd(x) == "cat Makefile" for x in c[:3]),
    "loop-healthz": lambda c, u: _run(c, "curl -s http://localhost:8080/healthz") >= 3,
    # the real-world shapes
    "pytest-not-found": lambda c, u: any(
        x[3] and _cmd(x).startswith("pytest -q ")
        and any(_cmd(y) == "python -m " + _cmd(x) and not y[3] for y in c[i + 1 : i + 4])
        for i, x in enumerate(c)),
    "no-such-table": lambda c, u: _failed(c, "bash", "sqlite3.OperationalError: no such table"),
    "format-error": lambda c, u: _said(u, "exactly one action in triple backticks"),
    "python-no-pytest": lambda c, u: _failed(c, "Bash", "No module named pytest"),
    "refund-over-limit": lambda c, u: any(
        x[0] == "issue_refund" and x[1]["amount"] > REFUND_LIMIT for x in c),
    "junk-stop-closing": lambda c, u: any(t.endswith("###STOP###") for t in u),
    "junk-heredoc-lookup": lambda c, u: bool(c) and _cmd(c[0]).startswith("cat <<'EOF' > notes_"),
}  # fmt: skip


def test_manifest_is_what_the_files_hold(fleet: Fleet) -> None:
    sessions = _sessions(fleet.out_dir)
    assert len(sessions) == SESSIONS
    planted = fleet.planted
    assert len(planted) >= 12
    assert {p["miner"] for p in planted} <= {*MINER_NAMES, None}  # None: any miner
    kinds = {p["miner"] for p in planted}
    assert {"tool_errors", "recovery", "corrections", "exploration", "loops", "stale_memory",
            "consolidation"} <= kinds  # fmt: skip
    for entry in planted:
        if entry["prevalence"] is None:  # a memory pattern: its files are seeded
            assert entry["memory"] and all(p in fleet.memory for p in entry["memory"])
            continue
        probe = PROBES[entry["id"]]
        found = sorted(name for name, (calls, users) in sessions.items() if probe(calls, users))
        assert found == sorted(entry["session_ids"]), entry["id"]
        assert entry["sessions"] == len(found) >= 1
        assert entry["prevalence"] == len(found) / SESSIONS
        assert entry["above"] == (entry["intended"] == "above"), entry["id"]
    intended = [p["intended"] for p in planted]
    assert intended.count("above") >= 8 and intended.count("below") >= 4
    rewards = _rewards(fleet.out_dir)  # a silent policy failure fails its session's task
    refunds = next(p for p in planted if p["id"] == "refund-over-limit")["session_ids"]
    assert refunds and all(rewards[name] == 0.0 for name in refunds)
    small = [n for n, (c, _) in sessions.items() if n in rewards and n not in refunds
             and any(x[0] == "issue_refund" for x in c)]  # fmt: skip
    assert small and any(rewards[n] == 1.0 for n in small)  # refunds alone do not fail a task
    wrapped = [x for calls, _ in sessions.values() for x in calls if x[0] == "bash"]
    assert any(x[3] for x in wrapped) and not any(x[2].startswith("Exit code") for x in wrapped)


def test_memory_seed_makes_a_note_stale_expired_and_duplicated(fleet: Fleet) -> None:
    memory = fleet.memory
    assert "`make test`" in memory["/projects/api/notes/testing.md"]
    freeze = memory["/projects/web/notes/release-freeze.md"]
    expires = dt.date.fromisoformat(freeze.split("expires: ")[1][:10])
    assert expires < fleet.now.date() - dt.timedelta(days=30)
    first, second = (memory[p] for p in ("/org/conventions/code-review.md",
                                         "/projects/api/notes/code-review.md"))  # fmt: skip
    assert first != second
    assert difflib.SequenceMatcher(None, first, second).ratio() > 0.9


def test_noise_has_non_failing_exits_and_one_off_errors(fleet: Fleet) -> None:
    calls = [c for calls, _ in _sessions(fleet.out_dir).values() for c in calls]
    grep_exit = [c for c in calls if _cmd(c).startswith("grep -rn") and c[3]]
    diff_exit = [c for c in calls if _cmd(c).startswith("diff ") and c[2].startswith("Exit code 1")]
    assert len(grep_exit) >= 20 and len(diff_exit) >= 10
    one_off = [c[2] for c in calls if c[3] and _cmd(c).startswith("./scripts/")]
    assert len(one_off) >= 20 and len(set(one_off)) == len(one_off)
    tools = {c[0] for c in calls}
    assert {"Bash", "Read", "Grep", "Glob", "Edit", "shell", "apply_patch", "get_customer",
            "create_ticket"} <= tools  # fmt: skip
    rg_nothing = [c for c in calls if _cmd(c).startswith("rg -n") and c[3] and not c[2]]
    assert rg_nothing  # rg that finds nothing exits 1 in Codex rollouts


def _pattern(miner: str, subject: dict[str, Any], sessions: int, title: str = "") -> Pattern:
    return Pattern(miner, json.dumps(subject, sort_keys=True), title or miner, subject,
                   sessions=sessions, sessions_selected=SESSIONS)  # fmt: skip


def test_score_counts_below_threshold_and_unplanted_finds_against_precision(fleet: Fleet) -> None:
    planted = {p["id"]: p for p in fleet.planted}
    npm = planted["npm-frozen-lockfile"]
    proposed = [
        _pattern("recovery", {"tool": "bash", "failed": "npm ci --frozen-lockfile",
                              "fixed": "npm ci", "change": "remove --frozen-lockfile"},
                 npm["sessions"] + 3),
        _pattern("tool_errors", {"tool": "Bash", "signature": "npm error `<str>` --frozen-lockfile",
                                 "input": "npm ci --frozen-lockfile"}, npm["sessions"]),
        _pattern("corrections", {"text": "No emoji in commit messages please.",
                                 "terms": ["commit", "emoji"]}, 5),
        _pattern("exploration", {"tool": "Bash", "input": "cat README.md"}, 40),
        _pattern("exploration", {"tool": "Read", "input": "docs/ARCHITECTURE.md"}, 40),
    ]  # fmt: skip
    result = score(proposed, fleet.planted)
    assert result.found == ["npm-frozen-lockfile"]
    above = [p for p in fleet.planted if p["above"] and not p["junk"]]
    assert result.recall == pytest.approx(1 / len(above))
    assert result.precision == pytest.approx(2 / 5)
    assert result.below_proposed == [proposed[2].id]
    assert result.unmatched == [proposed[3].id, proposed[4].id]  # wrong tool for the lookup
    assert result.prevalence_errors["npm-frozen-lockfile"] == pytest.approx(3 / SESSIONS * 100)
    assert score([], fleet.planted).recall == 0.0
    # the shapes: junk counts against precision; two proposals for one cause are a duplicate;
    # scored without the shapes, both are left out
    shaped = [
        _pattern("corrections", {"text": "No, that's all I needed. Thanks! ###STOP###",
                                 "terms": ["needed", "stop###"]}, 30),
        _pattern("tool_errors", {"tool": "Bash", "signature": "python: No module named pytest"},
                 5),
        _pattern("tool_errors", {"tool": "Bash", "signature": "python3: No module named pytest"},
                 4),
    ]  # fmt: skip
    both = score(proposed + shaped, fleet.planted)
    assert both.junk == [shaped[0].id]
    assert both.duplicates == {"python-no-pytest": 1}
    assert "python-no-pytest" in both.found
    assert both.precision == pytest.approx(4 / 8)
    from memdir.core.model import Write
    from memdir.dream.model import Draft

    def draft(pattern: Pattern, body: str) -> Draft:
        return Draft(pattern, [Write("/org/x.md", body)], "", [], 0.5)

    drafts = [draft(proposed[0], "Works: `npm ci` (18 of 18)"),  # names the fix
              draft(proposed[1], "`npm ci --frozen-lockfile` keeps failing"),  # names none
              draft(shaped[1], "run `pip install pytest`, then the tests")]  # fmt: skip
    assert fix_share(drafts, fleet.planted) == pytest.approx(2 / 3)
    assert fix_share([], fleet.planted) == 1.0
    classic = score(proposed + shaped, fleet.planted, shapes=False)
    assert (classic.precision, classic.junk, classic.duplicates) == (2 / 5, [], {})
    assert "python-no-pytest" not in classic.found + classic.missed


@pytest.fixture(scope="module")
def drafts(fleet: Fleet, loaded: Any) -> list[Any]:
    """What the offline engine would propose on the fleet (its drafts)."""
    svc, _ = loaded
    memory = []
    for path in sorted(fleet.memory):
        found = svc.read(OWNER, "default", path)
        memory.append(MemoryFile(path, found.content, found.sha256))
    engine = Engine(EngineConfig(), memory, fleet.now)
    cursor = None
    while True:
        page = svc.list_transcripts(OWNER, "default", limit=200, cursor=cursor)
        for info in page.items:
            engine.add(Session(info, svc.get_transcript(OWNER, "default", info.id).events))
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return list(engine.finish().drafts)


@pytest.fixture(scope="module")
def proposed(drafts: list[Any]) -> list[Pattern]:
    return [draft.pattern for draft in drafts]


def test_offline_engine_finds_the_planted_patterns(proposed: list[Pattern], fleet: Fleet) -> None:
    found = score(proposed, fleet.planted, shapes=False)  # the classic catalogue
    assert found.recall >= 0.9, found.missed
    assert found.precision >= 0.9, (found.below_proposed, found.unmatched)
    assert found.max_error_pp <= 2.0, found.prevalence_errors


#: Shapes today's engine gets wrong, by root cause (the marker goes when the cause is fixed).
SHAPES_FAILING: dict[str, str] = {
    "refund-over-limit": "no contrast of failed and successful sessions: the fleet's chat "
    "sessions are one trial of one task each, and a refund's amount is masked to <num>",
}


def _shape(name: str) -> Any:
    if name in SHAPES_FAILING:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=SHAPES_FAILING[name]))
    return name


@pytest.mark.parametrize("name", [_shape(s.id) for s in SHAPES])
def test_offline_engine_on_the_real_world_shapes(
    name: str, drafts: list[Any], proposed: list[Pattern], fleet: Fleet
) -> None:
    """Each shape found once, with its prevalence and the fix its sessions show (or, for junk,
    never proposed)."""
    entry = next(p for p in fleet.planted if p["id"] == name)
    result = score(proposed, [entry])
    if entry["junk"]:
        assert result.junk == [], result.junk
        return
    assert result.found == [name], [p.id for p in proposed if p.miner != "consolidation"]
    assert result.duplicates == {}, result.duplicates
    assert result.max_error_pp <= 2.0, result.prevalence_errors
    mine = [d for d in drafts if score([d.pattern], [entry]).found]
    assert fix_share(mine, [entry]) == 1.0, [d.operations for d in mine]
