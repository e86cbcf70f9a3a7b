"""The CLI end to end: real processes where exit codes and concurrency matter, click's runner
(the same code, in-process) elsewhere. Every database is a real SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from memdir.cli.main import cli

MEMDIR = [sys.executable, "-m", "memdir.cli"]


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    result = CliRunner().invoke(cli, ["--db", url, "init"])
    assert result.exit_code == 0, result.output
    return url


def run(db: str, *args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(cli, ["--db", db, *args], input=input)


def run_json(db: str, *args: str, input: str | None = None) -> tuple[int, Any]:
    result = run(db, *args, "--json", input=input)
    return result.exit_code, json.loads(result.stdout)


def test_write_read_roundtrip_json_fields(db: str) -> None:
    code, out = run_json(db, "write", "/a/b.md", "--create", input="hello\n")
    assert code == 0
    assert {"path", "sha256", "version", "revision", "commit"} <= out.keys()
    assert out["version"] == 1 and out["revision"] == 1
    code, view = run_json(db, "read", "/a/b.md")
    assert code == 0
    assert view["content"] == "hello\n"
    assert view["sha256"] == out["sha256"]
    assert view["version"] == 1


def test_exit_codes_follow_the_error_table(db: str) -> None:
    assert run(db, "write", "/f.md", "--create", input="x").exit_code == 0
    # blind overwrite of an existing file: precondition required, says how to get the sha256
    result = run(db, "write", "/f.md", input="y")
    assert result.exit_code == 3
    assert "memdir read /f.md --json" in result.stderr
    # stale hash: precondition failed, current sha256 reported
    code, out = run_json(db, "write", "/f.md", "--if-match", "0" * 64, input="y")
    assert code == 3
    assert out["error"]["type"] == "precondition_failed"
    assert len(out["error"]["current_sha256"]) == 64
    # --create on an existing file: precondition failed
    assert run(db, "write", "/f.md", "--create", input="x").exit_code == 3
    # not found
    code, out = run_json(db, "read", "/missing.md")
    assert code == 5 and out["error"]["type"] == "not_found"
    # invalid path: usage
    code, out = run_json(db, "read", "/a/../b")
    assert code == 2 and out["error"]["type"] == "invalid_path"
    assert "'..'" in out["error"]["message"]
    # edit conflict: old text absent
    assert run(db, "edit", "/f.md", "--old", "nope", "--new", "z").exit_code == 1
    # unknown store
    assert run(db, "--store", "nope", "read", "/f.md").exit_code == 5


def test_failed_precondition_fails_even_when_content_is_equal(db: str) -> None:
    _, first = run_json(db, "write", "/c.md", "--create", input="1")
    _, second = run_json(db, "write", "/c.md", "--if-match", first["sha256"], input="2")
    code, out = run_json(db, "write", "/c.md", "--if-match", first["sha256"], input="2")
    assert code == 3
    assert out["error"]["current_sha256"] == second["sha256"]


def test_non_utf8_stdin_is_refused_and_changes_nothing(db: str) -> None:
    result = run(db, "write", "/bin.md", "--create", input=b"\xff\xfeoops")
    assert result.exit_code == 2
    assert "not valid UTF-8" in result.stderr
    assert run(db, "read", "/bin.md").exit_code == 5


def test_edit_insert_mv_rm_log_diff_revert(db: str) -> None:
    run(db, "write", "/p/x.md", "--create", input="one\ntwo\nthree\n")
    assert run(db, "edit", "/p/x.md", "--old", "two", "--new", "TWO").exit_code == 0
    assert run(db, "insert", "/p/x.md", "--line", "0", "--text", "zero").exit_code == 0
    assert run(db, "mv", "/p/x.md", "/q/y.md", "--reason", "tidy").exit_code == 0
    assert run(db, "read", "/q/y.md").stdout == "zero\none\nTWO\nthree\n"
    _, versions = run_json(db, "log", "/q/y.md")
    assert [v["version"] for v in versions] == [4, 3, 2, 1]
    assert versions[0]["operation"] == "renamed" and versions[0]["old_path"] == "/p/x.md"
    diff = run(db, "diff", "/q/y.md", "1", "3").stdout
    assert "-two" in diff and "+TWO" in diff and "+zero" in diff
    assert run(db, "revert", "/q/y.md", "--to-version", "1").exit_code == 0
    assert run(db, "read", "/q/y.md").stdout == "one\ntwo\nthree\n"
    assert run(db, "rm", "/q/y.md").exit_code == 0
    assert run(db, "read", "/q/y.md").exit_code == 5
    _, commits = run_json(db, "log")
    assert [c["revision"] for c in commits] == [6, 5, 4, 3, 2, 1]
    assert commits[2]["reason"] == "tidy"
    undo = run(db, "revert", "--commit", commits[0]["id"][:10])
    assert undo.exit_code == 0, undo.stderr
    assert run(db, "read", "/q/y.md").stdout == "one\ntwo\nthree\n"


def test_read_version_lines_and_numbered_view(db: str) -> None:
    run(db, "write", "/n.md", "--create", input="a\nb\nc\nd\n")
    _, view = run_json(db, "read", "/n.md")
    run(db, "write", "/n.md", "--if-match", view["sha256"], input="changed\n")
    assert run(db, "read", "/n.md", "--version", "1", "--lines", "2-3").stdout == "b\nc\n"
    assert run(db, "read", "/n.md", "--version", "1", "--lines", "3-", "-n").stdout == (
        "     3\tc\n     4\td\n"
    )
    assert run(db, "read", "/n.md", "--version", "9").exit_code == 5


def test_provenance_and_actor_are_recorded(db: str) -> None:
    assert run(db, "--as", "agent:ci-bot", "read", "/x").exit_code == 5  # not registered
    assert run(db, "principal", "add", "agent:ci-bot").exit_code == 0
    result = run(
        db, "--as", "agent:ci-bot", "write", "/agents/ci-bot/s.md", "--create",
        "--session", "s-1", "--transcript", "t-9", "--reason", "noticed",
        "--source-kind", "tool-result", input="x",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    _, commits = run_json(db, "log", "--actor", "agent:ci-bot")
    assert len(commits) == 1
    c = commits[0]
    assert (c["actor"], c["session"], c["transcript"], c["reason"], c["source_kind"]) == (
        "agent:ci-bot", "s-1", "t-9", "noticed", "tool-result",
    )  # fmt: skip
    assert run(db, "--as", "nobody", "read", "/x").exit_code == 2


def test_idempotency_key_replays_the_first_result(db: str) -> None:
    _, first = run_json(db, "write", "/i.md", "--create", "--idempotency-key", "k1", input="x")
    code, again = run_json(db, "write", "/i.md", "--create", "--idempotency-key", "k1", input="x")
    assert code == 0
    assert again["commit"] == first["commit"] and again["replayed"] is True
    code, other = run_json(db, "write", "/j.md", "--create", "--idempotency-key", "k1", input="y")
    assert code == 1 and other["error"]["type"] == "idempotency_mismatch"


def test_ls_glob_grep_search(db: str) -> None:
    run(db, "write", "/projects/acme/testing.md", "--create", input="Run tests with pytest.\n")
    run(db, "write", "/projects/acme/deploy.md", "--create", input="Deploy with make ship.\n")
    run(db, "write", "/org/rules.md", "--create", input="Be kind.\n")
    _, entries = run_json(db, "ls")
    assert [(e["path"], e["kind"], e["files"]) for e in entries] == [
        ("/org", "dir", 1), ("/projects", "dir", 2),
    ]  # fmt: skip
    assert run(db, "ls", "-R").stdout.count("\n") == 3
    assert run(db, "glob", "/projects/**/*.md").stdout.split() == [
        "/projects/acme/deploy.md", "/projects/acme/testing.md",
    ]  # fmt: skip
    assert (
        run(db, "grep", "pytest").stdout == "/projects/acme/testing.md:1:Run tests with pytest.\n"
    )
    assert run(db, "grep", "nothing-here").exit_code == 1
    assert run(db, "grep", "(unclosed").exit_code == 2
    _, hits = run_json(db, "search", "how do I run the tests?")
    assert hits[0]["path"] == "/projects/acme/testing.md"
    _, hits = run_json(db, "search", "kind", "--prefix", "/projects")
    assert hits == []
    for hostile in ['"unbalanced', "NOT AND OR", "it's a-b:c", "*", "NEAR(", "^x"]:
        assert run(db, "search", hostile).exit_code == 0, hostile


def test_commit_applies_all_or_nothing(db: str, tmp_path: Path) -> None:
    ops = [
        {"op": "create", "path": "/m/a.md", "content": "a"},
        {"op": "create", "path": "/m/b.md", "content": "b"},
    ]
    code, out = run_json(db, "commit", input=json.dumps(ops))
    assert code == 0 and len(out["results"]) == 2
    bad = [
        {"op": "create", "path": "/m/c.md", "content": "c"},
        {"op": "str_replace", "path": "/m/a.md", "old": "zzz", "new": "y"},
    ]
    assert run(db, "commit", input=json.dumps(bad)).exit_code == 1
    assert run(db, "read", "/m/c.md").exit_code == 5
    assert run(db, "commit", input="not json").exit_code == 2
    assert run(db, "commit", input='[{"op": "explode"}]').exit_code == 2


def test_stores_archive_and_backup(db: str, tmp_path: Path) -> None:
    assert run(db, "store", "create", "team").exit_code == 0
    assert run(db, "store", "create", "Bad Name").exit_code == 2
    assert run(db, "--store", "team", "write", "/t.md", "--create", input="t").exit_code == 0
    assert run(db, "store", "archive", "team").exit_code == 0
    assert run(db, "--store", "team", "write", "/u.md", "--create", input="u").exit_code == 4
    assert run(db, "--store", "team", "read", "/t.md").stdout == "t"
    _, stores = run_json(db, "store", "list")
    assert {s["name"]: s["files"] for s in stores} == {"default": 0, "team": 1}
    assert run(db, "store", "rm", "team").exit_code == 2
    assert run(db, "store", "rm", "team", "--yes").exit_code == 0
    backup = tmp_path / "backup.db"
    assert run(db, "backup", str(backup)).exit_code == 0
    assert run(f"sqlite:///{backup}", "store", "list").stdout.startswith("default")


def test_export_import_roundtrip_is_lossless(db: str, tmp_path: Path) -> None:
    files = {
        "/org/rules.md": "---\ndescription: rules\ntags: [a, b]\ncustom: {x: 1}\n---\nBody\n",
        "/projects/ünïcode/naïve.md": "no trailing newline",
        "/.hidden/dot.md": "\r\nwindows\r\nline endings\r\n",
    }
    for path, content in files.items():
        assert run(db, "write", path, "--create", input=content.encode()).exit_code == 0
    out = tmp_path / "export"
    assert run(db, "export", str(out)).exit_code == 0
    assert run(db, "export", str(out)).exit_code == 2  # not empty: refused
    other = f"sqlite:///{tmp_path / 'other.db'}"
    CliRunner().invoke(cli, ["--db", other, "init"])
    code, report = run_json(other, "import", str(out))
    assert code == 0 and report["created"] == 3
    for path, content in files.items():
        _, view = run_json(other, "read", path)
        assert view["content"] == content
    _, commits = run_json(other, "log")
    assert commits[0]["source_kind"] == "import"
    # importing again changes nothing; a changed file needs --overwrite
    assert run_json(other, "import", str(out))[1]["unchanged"] == 3
    (out / "org" / "rules.md").write_text("changed\n")
    assert run(other, "import", str(out)).exit_code == 1
    assert run_json(other, "import", str(out), "--overwrite")[1]["updated"] == 1


def test_missing_database_says_to_init(tmp_path: Path) -> None:
    result = run(f"sqlite:///{tmp_path / 'none.db'}", "read", "/x.md")
    assert result.exit_code == 1
    assert "memdir init" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_env_and_argument_precedence(tmp_path: Path, db: str) -> None:
    env = {**os.environ, "MEMDIR_DB": db, "MEMDIR_STORE": "default"}
    proc = subprocess.run(
        [*MEMDIR, "write", "/e.md", "--create", "--json"],
        input=b"env", capture_output=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run(
        [*MEMDIR, "--store", "nope", "read", "/e.md"],
        capture_output=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 5  # the argument beats MEMDIR_STORE


COUNTER_SCRIPT = r"""
import json, subprocess, sys
memdir, db, n = sys.argv[1:4]
refused = []
done = 0
while done < int(n):
    read = subprocess.run([*memdir.split(), "--db", db, "read", "/counter.md", "--json"],
                          capture_output=True, text=True)
    assert read.returncode == 0, read.stderr
    view = json.loads(read.stdout)
    value = int(view["content"]) + 1
    write = subprocess.run([*memdir.split(), "--db", db, "write", "/counter.md",
                            "--if-match", view["sha256"], "--json"],
                           input=str(value), capture_output=True, text=True)
    if write.returncode == 0:
        done += 1
    else:
        refused.append(write.returncode)
print(json.dumps(refused))
"""


@pytest.mark.slow
def test_cli_concurrent_increments_lose_nothing(db: str, tmp_path: Path) -> None:
    """Two processes x 25 read-modify-write increments through the CLI end at exactly 50."""
    assert run(db, "write", "/counter.md", "--create", input="0").exit_code == 0
    script = tmp_path / "counter.py"
    script.write_text(COUNTER_SCRIPT)
    memdir = f"{sys.executable} -m memdir.cli"
    # Each of the ~100 calls is a whole CLI process: let them share compiled bytecode, as an
    # installed memdir does, instead of compiling every module anew when the environment
    # forbids writing it beside the sources.
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), memdir, db, "25"],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    refused: list[int] = []
    for proc in procs:
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0
        refused.extend(json.loads(out))
    assert run(db, "read", "/counter.md").stdout == "50"
    assert all(code == 3 for code in refused), refused
    _, versions = run_json(db, "log", "/counter.md", "--limit", "100")
    assert len(versions) == 51


def test_principals_tokens_and_the_review_queue(db: str, tmp_path: Path) -> None:
    assert run(db, "principal", "add", "agent:bot", "--project", "acme").exit_code == 0
    assert run(db, "principal", "add", "user:root", "--group", "admins").exit_code == 0
    assert run(db, "principal", "add", "agent:bot").exit_code == 1  # exists
    assert run(db, "write", "/org/rules.md", "--create", input="be kind\n").exit_code == 0
    code, token = run_json(db, "token", "create", "agent:bot", "--name", "ci")
    assert code == 0 and token["token"].startswith("mdr_")
    env = {**os.environ, "MEMDIR_TOKEN": token["token"]}
    # the token's principal may only propose to /org: exit 6, the proposal id on stdout
    proc = subprocess.run(
        [*MEMDIR, "--db", db, "edit", "/org/rules.md", "--old", "kind", "--new", "very kind"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 6, proc.stderr
    proposal = proc.stdout.strip()
    assert proposal.startswith("p_") and "review" in proc.stderr
    # it writes its project directly
    proc = subprocess.run(
        [*MEMDIR, "--db", db, "write", "/projects/acme/a.md", "--create"],
        input="ok", capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    _, listed = run_json(db, "--as", "user:root", "proposals", "list")
    assert [p["id"] for p in listed] == [proposal]
    shown = run(db, "--as", "user:root", "proposals", "show", proposal).stdout
    assert "- kind" in shown and "+ very kind" in shown
    assert run(db, "--as", "user:root", "proposals", "accept", proposal).exit_code == 0
    assert run(db, "read", "/org/rules.md").stdout == "be very kind\n"
    # policy: show, check with a reason, a bad policy refused whole (exit 1, nothing changes)
    assert "org-read" in run(db, "policy", "show").stdout
    check = run(db, "policy", "check", "agent:bot", "write", "/org/rules.md")
    assert check.exit_code == 4 and "no rule grants write" in check.stdout
    assert run(db, "policy", "check", "agent:bot", "read", "/org/x.md").exit_code == 0
    assert run(db, "policy", "set", input="version: 1\nrules: [oops\n").exit_code == 2
    assert "org-read" in run(db, "policy", "show").stdout
    # revoke: the token stops working (exit 4)
    assert run(db, "token", "revoke", token["id"]).exit_code == 0
    proc = subprocess.run(
        [*MEMDIR, "--db", db, "read", "/org/rules.md"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 4 and "not valid" in proc.stderr


def test_screening_refusal_is_exit_7_and_purge(db: str) -> None:
    leak = "our key is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8" + "\n"
    code, out = run_json(db, "write", "/org/k.md", "--create", input=leak)
    assert code == 7 and out["error"]["type"] == "screening_refused"
    assert "a1B2c3D4e5F6" not in json.dumps(out)
    run(db, "write", "/users/ana/ssn.md", "--create", input="private\n")
    assert run(db, "purge", "/users/ana/ssn.md").exit_code == 2  # needs --yes
    assert run(db, "purge", "/users/ana/ssn.md", "--yes").exit_code == 0
    assert run(db, "log", "/users/ana/ssn.md").exit_code == 5
    _, commits = run_json(db, "log")
    assert commits[0]["reason"] == "purged the whole history of /users/ana/ssn.md"


def test_every_verb_is_found_lazily_and_only_its_module_loads() -> None:
    """The root group names each verb's module (VERBS); a verb imports only that module."""
    from memdir.cli.main import VERBS

    script = (
        "import sys; from memdir.cli.main import cli; "
        "cmd = cli.get_command(None, sys.argv[1]); assert cmd is not None, sys.argv[1]; "
        "print(sorted(m for m in sys.modules if m.startswith(('memdir.cli.', 'memdir.service',"
        " 'sqlalchemy', 'memdir.dream'))))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "read"], capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == str(
        ["memdir.cli.app", "memdir.cli.files", "memdir.cli.main", "memdir.cli.output"]
    )
    registered = set(cli.load_all())  # type: ignore[attr-defined]
    assert registered == set(VERBS), registered ^ set(VERBS)
    for name, module in VERBS.items():
        callback = cli.commands[name].callback
        assert callback is not None and callback.__module__ == f"memdir.cli.{module}", name


def _both_paths(monkeypatch: pytest.MonkeyPatch, db: str, *args: str) -> tuple[Result, Result]:
    """``memdir ARGS`` answered by the read fast path (the service may not open), then by
    the service (the fast path switched off)."""
    import memdir.cli.fast
    from memdir.cli.app import App

    def no_service(self: App, *, create: bool = False) -> None:
        raise AssertionError("the fast path fell back to the service")

    with monkeypatch.context() as patch:
        patch.setattr(App, "service", no_service)
        fast = run(db, *args)
    with monkeypatch.context() as patch:
        patch.setattr(memdir.cli.fast, "read_current", lambda *a: None)
        slow = run(db, *args)
    return fast, slow


def test_read_fast_path_gives_the_service_bytes(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`memdir read` without the service: the same stdout, stderr and exit code, for the
    owner and a registered --as principal, with --json, --lines, -n and an expired file."""
    run(db, "write", "/org/a.md", "--create", input="one\ntwo\nthree\n")
    run(db, "write", "/org/old.md", "--create", input="---\nexpires: 2020-01-01\n---\nold\n")
    assert run(db, "principal", "add", "agent:bot", "--project", "acme").exit_code == 0
    for args in (
        ("read", "/org/a.md"),
        ("read", "/org/a.md", "--json"),
        ("read", "/org/a.md", "--lines", "2-3", "-n"),
        ("read", "/org/a.md", "--lines", "2-", "--json"),
        ("read", "/org/old.md"),
        ("read", "/org/old.md", "--json"),
        ("--as", "agent:bot", "read", "/org/a.md", "--json"),
    ):
        fast, slow = _both_paths(monkeypatch, db, *args)
        assert (fast.exit_code, fast.stdout, fast.stderr) == (
            slow.exit_code, slow.stdout, slow.stderr,
        ), args  # fmt: skip
        assert fast.exit_code == 0 and fast.stdout, args
    assert "expired 2020-01-01" in run(db, "read", "/org/old.md").stderr


def test_read_fast_path_leaves_every_refusal_to_the_service(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Missing, unreadable, unknown store or principal, bad path: the fast path answers
    nothing, so the error is the service's own (the same bytes as with the fast path off)."""
    import memdir.cli.fast

    run(db, "write", "/projects/other/secret.md", "--create", input="s\n")
    assert run(db, "principal", "add", "agent:bot", "--project", "acme").exit_code == 0
    answered: list[object] = []
    real = memdir.cli.fast.read_current

    def spy(*args: Any) -> Any:
        answered.append(real(*args))
        return answered[-1]

    monkeypatch.setattr(memdir.cli.fast, "read_current", spy)
    cases = [
        ("read", "/nothing.md"),
        ("--as", "agent:bot", "read", "/projects/other/secret.md"),
        ("--as", "agent:bot", "read", "/nothing.md"),
        ("--as", "agent:nobody", "read", "/projects/other/secret.md"),
        ("--store", "nope", "read", "/projects/other/secret.md"),
        ("read", "relative.md"),
        ("read", "/projects/other/secret.md", "--lines", "99999999999999999999"),
    ]
    for args in cases:
        with_fast = run(db, *args)
        with monkeypatch.context() as patch:
            patch.setattr(memdir.cli.fast, "read_current", lambda *a: None)
            without = run(db, *args)
        assert with_fast.exit_code != 0, args
        assert (with_fast.exit_code, with_fast.stdout, with_fast.stderr) == (
            without.exit_code, without.stdout, without.stderr,
        ), args  # fmt: skip
    assert answered and all(a is None for a in answered)
    unreadable = run(db, "--as", "agent:bot", "read", "/projects/other/secret.md")
    assert unreadable.exit_code == 5
    assert unreadable.stderr == run(db, "read", "/projects/other/nothing.md").stderr.replace(
        "nothing", "secret"
    )


def test_read_fast_path_records_the_read(db: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The read time reaches file_reads in the format the service's read log writes."""
    import datetime as dt
    import sqlite3

    import memdir.cli.fast

    run(db, "write", "/org/a.md", "--create", input="x\n")
    database = db.removeprefix("sqlite:///")
    query = "SELECT file_id, store_id, read_at FROM file_reads"
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    assert run(db, "read", "/org/a.md").stdout == "x\n"
    with sqlite3.connect(database) as conn:
        (fast,) = conn.execute(query).fetchall()
    assert fast[:2] == (1, 1)
    assert (
        before <= dt.datetime.fromisoformat(fast[2]) <= dt.datetime.now(dt.UTC).replace(tzinfo=None)
    )
    monkeypatch.setattr(memdir.cli.fast, "read_current", lambda *a: None)
    assert run(db, "read", "/org/a.md").stdout == "x\n"
    with sqlite3.connect(database) as conn:
        (slow,) = conn.execute(query).fetchall()
    assert slow[:2] == fast[:2] and len(slow[2]) == len(fast[2]) and slow[2] >= fast[2]


def test_read_fast_path_knows_the_schema_head() -> None:
    from memdir.cli.fast import head_revision
    from memdir.storage.schema import HEAD_REVISION

    assert head_revision() == HEAD_REVISION


def test_memdir_read_imports_no_service_or_sqlalchemy(db: str) -> None:
    run(db, "write", "/org/a.md", "--create", input="x\n")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memdir.cli", "--db", db, "read", "/org/a.md"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout == "x\n", proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "memdir.cli.fast" in loaded
    heavy = sorted(
        m for m in loaded if m.startswith(("sqlalchemy", "memdir.service", "memdir.dream"))
    )
    assert not heavy, heavy


@pytest.mark.parametrize(
    "argv",
    [("ls", "/org"), ("search", "hello"), ("write", "/org/b.md", "--create")],
    ids=["ls", "search", "write"],
)
def test_cli_verbs_import_no_dream_engine(db: str, argv: tuple[str, ...]) -> None:
    """The service loads the dream engine, backtests and transcript importers only for the
    verbs that run them: ``ls``, ``search`` and ``write`` never import ``memdir.dream*``."""
    run(db, "write", "/org/a.md", "--create", input="hello\n")
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memdir.cli", "--db", db, *argv],
        input="hello again\n", capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "memdir.service" in loaded and "memdir.dreams" in loaded  # the mixin, not the engine
    engine = sorted(m for m in loaded if m.startswith("memdir.dream."))
    assert engine == [], engine
    importers = sorted(m for m in loaded if m in {"memdir.transcripts.importing",
                                                  "memdir.transcripts.redact"})  # fmt: skip
    assert importers == [], importers
