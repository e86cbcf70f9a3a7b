"""Memory as a directory: `memdir checkout` and `memdir sync` end to end.

The acceptance scenario runs real `memdir` processes and edits with real shell tools (`sed -i`,
`echo >>`, `mv`, `rm`) in two checkouts, over the embedded database and over a live
`memdir serve` with a token; the rights tests go through the SDK's local transport as a
registered agent; the state and disk-safety tests poke at the files between steps.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir.checkout import STATE_FILE, checkout, sync
from memdir.checkout.sync import _replace_checked
from memdir.core.content import sha256_hex
from memdir.core.policy import DEFAULT_POLICY_YAML

MEMDIR = [sys.executable, "-m", "memdir.cli"]

SEED = {
    "/notes/a.md": "# A\nalpha line\nsecond line\n",
    "/notes/b.md": "# B\nbeta\n",
    "/notes/c.md": "# C\ngamma, about to move\n",
    "/notes/d.md": "# D\ndelta, about to go\n",
    "/notes/e.md": "# E\nepsilon\n",
}


@pytest.fixture(autouse=True)
def _no_memdir_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MEMDIR_TOKEN", "MEMDIR_DB", "MEMDIR_URL", "MEMDIR_STORE"):
        monkeypatch.delenv(name, raising=False)


class Target:
    """Where the CLI talks to: a database URL (``--db``) or a server URL with a token."""

    def __init__(self, db: str, url: str | None = None, token: str | None = None) -> None:
        self.db, self.url, self.token = db, url, token

    def client(self) -> memdir.Client:
        if self.url:
            return memdir.Client(self.url, self.token)
        return memdir.Client(db=self.db)

    def run(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
        command = [*MEMDIR, "--db", self.db, *args]
        if self.token:
            env["MEMDIR_TOKEN"] = self.token
        if self.url and args[0] == "checkout":
            command += ["--url", self.url]
        return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=120)  # fmt: skip


@pytest.fixture(params=["embedded", "serve"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Target]:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    memdir.Client(db=db, create=True).close()
    if request.param == "embedded":
        yield Target(db)
        return
    from test_checkout_watch import Server

    (tmp_path / "serve").mkdir()
    server = Server(tmp_path / "serve")
    try:
        yield Target(f"sqlite:///{tmp_path / 'unused.db'}", server.url, server.admin)
    finally:
        server.stop()


def sh(command: str, cwd: Path) -> None:
    subprocess.run(["sh", "-c", command], cwd=cwd, check=True)


def test_shell_edits_in_two_checkouts_conflict_then_resolve(target: Target, tmp_path: Path) -> None:
    with target.client() as client:
        client.commit([memdir.Write(p, t, if_absent=True) for p, t in SEED.items()])
        start = client.store_info().revision
    one, two = tmp_path / "one", tmp_path / "two"
    for directory in (one, two):
        done = target.run("checkout", "/notes", str(directory), cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert (directory / "a.md").read_text() == SEED["/notes/a.md"]
    state = json.loads((one / STATE_FILE).read_text())
    assert state["revision"] == start and set(state["files"]) == set(SEED)
    assert "token" not in json.dumps(state) and (target.token or "mdr_") not in json.dumps(state)

    sh("sed -i 's/alpha/ALPHA/' a.md && echo 'more beta' >> b.md && mv c.md c2.md && rm d.md", one)
    sh("sed -i 's/alpha/OMEGA/' a.md && echo 'more epsilon' >> e.md", two)

    first = target.run("sync", str(one), "--reason", "edits in one", "--session", "s-one",
                       "--json", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    sent = {(c["operation"], c["path"], c["old_path"]) for c in json.loads(first.stdout)["sent"]}
    assert sent == {
        ("modified", "/notes/a.md", None),
        ("modified", "/notes/b.md", None),
        ("renamed", "/notes/c2.md", "/notes/c.md"),
        ("deleted", "/notes/d.md", None),
    }

    second = target.run("sync", str(two), "--reason", "edits in two", "--session", "s-two",
                        "--json", cwd=tmp_path)  # fmt: skip
    assert second.returncode == 3, second.stderr
    report = json.loads(second.stdout)
    assert [c["path"] for c in report["conflicts"]] == ["/notes/a.md"]
    assert "a.md.theirs" in report["conflicts"][0]["message"]
    assert [c["path"] for c in report["sent"]] == ["/notes/e.md"]
    # both texts kept: ours in place, theirs beside it; the untouched files were pulled
    assert "OMEGA" in (two / "a.md").read_text()
    assert "ALPHA" in (two / "a.md.theirs").read_text()
    assert (two / "b.md").read_text().endswith("more beta\n")
    assert (two / "c2.md").exists() and not (two / "c.md").exists()
    assert not (two / "d.md").exists()

    again = target.run("sync", str(two), cwd=tmp_path)
    assert again.returncode == 3 and "not resolved yet" in again.stdout

    sh("printf '# A\\nALPHA and OMEGA line\\nsecond line\\n' > a.md && rm a.md.theirs", two)
    resolved = target.run("sync", str(two), "--reason", "merged", "--session", "s-two",
                          cwd=tmp_path)  # fmt: skip
    assert resolved.returncode == 0, resolved.stdout + resolved.stderr
    back = target.run("sync", str(one), cwd=tmp_path)
    assert back.returncode == 0, back.stderr

    with target.client() as client:
        store = {f.path: f.content for f in client.checkout_files("/notes", content=True).files}
        commits = [c for c in client.commits(limit=None) if c.revision > start]
    for directory in (one, two):
        here = {"/notes/" + p.name: p.read_text() for p in directory.iterdir() if p.suffix == ".md"}
        assert here == store
    assert store["/notes/a.md"] == "# A\nALPHA and OMEGA line\nsecond line\n"
    assert store["/notes/e.md"].endswith("more epsilon\n")
    # one commit per sync that sent something, with the provenance given
    assert [(c.reason, c.session, len(c.changes)) for c in reversed(commits)] == [
        ("edits in one", "s-one", 4),
        ("edits in two", "s-two", 1),
        ("merged", "s-two", 1),
    ]


def bot_store(tmp_path: Path) -> str:
    """A database where ``agent:bot`` (project acme) writes /projects/acme, may only propose
    in /org, may only read /shared and may not see /projects/other."""
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    with memdir.Client(db=db, create=True) as owner:
        owner.add_principal("agent:bot", projects=["acme"])
        policy = DEFAULT_POLICY_YAML + (
            '  - id: shared-read\n    who: "*"\n    paths: ["/shared/**"]\n'
            "    actions: [read]\n    reason: everyone reads the shared notes\n"
        )
        owner.set_policy(policy)
        owner.commit([
            memdir.Write("/org/rules.md", "rules\n", if_absent=True),
            memdir.Write("/projects/acme/notes.md", "notes\n", if_absent=True),
            memdir.Write("/projects/acme/guarded.md", "---\nprotected: true\n---\nkeep\n",
                         if_absent=True),
            memdir.Write("/shared/ro.md", "read only\n", if_absent=True),
            memdir.Write("/projects/other/secret.md", "not for bot\n", if_absent=True),
        ])  # fmt: skip
    return db


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_rights_read_only_files_and_proposals_per_file(tmp_path: Path) -> None:
    db = bot_store(tmp_path)
    work = tmp_path / "work"
    with memdir.Client(db=db, principal="agent:bot") as bot:
        report = checkout(bot, "/", work)
        files = sorted(p.relative_to(work).as_posix() for p in work.rglob("*.md"))
        assert files == ["org/rules.md", "projects/acme/guarded.md", "projects/acme/notes.md",
                         "shared/ro.md"]  # fmt: skip
        assert report.read_only == 1
        assert mode(work / "shared/ro.md") == 0o444
        assert mode(work / "projects/acme/notes.md") == 0o644
        if os.geteuid() != 0:  # root writes through any mode
            with pytest.raises(PermissionError):
                (work / "shared/ro.md").open("a")

        sh("echo rule two >> org/rules.md && echo more >> projects/acme/notes.md", work)
        sh("sed -i 's/keep/changed/' projects/acme/guarded.md && echo new > org/new.md", work)
        sh("echo fresh > projects/acme/fresh.md", work)
        sh("chmod u+w shared/ro.md && echo forced >> shared/ro.md", work)
        result = sync(bot, work, reason="bot edits")
        assert {c.path for c in result.sent} == {"/projects/acme/notes.md",
                                                 "/projects/acme/fresh.md"}  # fmt: skip
        assert len(result.commits) == 1
        proposed = {p.path: p.proposal for p in result.proposals}
        assert set(proposed) == {"/org/rules.md", "/org/new.md", "/projects/acme/guarded.md"}
        assert len(set(proposed.values())) == 3  # one proposal per file
        assert [p.path for p in result.forbidden] == ["/shared/ro.md"]
        assert result.exit_code == 4
        # working files left as written
        assert (work / "org/rules.md").read_text() == "rules\nrule two\n"
        assert (work / "shared/ro.md").read_text() == "read only\nforced\n"

        sh("printf 'read only\\n' > shared/ro.md", work)
        later = sync(bot, work)
        assert later.exit_code == 6 and not later.sent and not later.commits
        assert {p.path for p in later.proposals} == set(proposed)
        assert all("still waits" in p.message for p in later.proposals)

    with memdir.Client(db=db) as owner:
        owner.accept_proposal(proposed["/org/rules.md"])
    with memdir.Client(db=db, principal="agent:bot") as bot:
        after = sync(bot, work)
    assert {p.path for p in after.proposals} == {"/org/new.md", "/projects/acme/guarded.md"}
    state = json.loads((work / STATE_FILE).read_text())
    assert "/org/rules.md" not in state["proposals"]
    with memdir.Client(db=db) as owner:
        owner.reject_proposal(proposed["/projects/acme/guarded.md"])
    with memdir.Client(db=db, principal="agent:bot") as bot:
        rejected = sync(bot, work)
    messages = {p.path: p.message for p in rejected.proposals}
    assert "was rejected" in messages["/projects/acme/guarded.md"]
    assert "still waits" in messages["/org/new.md"] and not rejected.commits
    assert state["files"]["/org/rules.md"]["sha256"] == sha256_hex("rules\nrule two\n")


def test_remote_changes_pull_into_untouched_files_and_deletes_conflict(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    work = tmp_path / "work"
    with memdir.Client(db=db, create=True) as client:
        client.commit([memdir.Write(p, t, if_absent=True) for p, t in SEED.items()])
        checkout(client, "/", work)
        a = client.read("/notes/a.md")
        client.write("/notes/a.md", a.content + "remote\n", if_match=a.sha256)
        client.delete("/notes/b.md", if_match=client.read("/notes/b.md").sha256)
        client.write("/notes/new/f.md", "remote new\n", if_absent=True)
        client.delete("/notes/e.md", if_match=client.read("/notes/e.md").sha256)
        sh("echo local >> notes/e.md", work)  # changed here, deleted there
        report = sync(client, work)
        assert {(c.path, c.operation) for c in report.pulled} == {
            ("/notes/a.md", "modified"), ("/notes/b.md", "deleted"), ("/notes/new/f.md", "created"),
        }  # fmt: skip
        assert [c.path for c in report.conflicts] == ["/notes/e.md"]
        assert "deleted in the store" in report.conflicts[0].message
        assert (work / "notes/e.md").read_text().endswith("local\n")
        assert report.exit_code == 3
        # the next sync re-creates it: the local text was kept, nothing lost
        again = sync(client, work)
        assert [(c.path, c.operation) for c in again.sent] == [("/notes/e.md", "created")]
        assert client.read("/notes/e.md").content.endswith("local\n")


def test_a_commit_racing_the_listing_is_retried_not_overwritten(tmp_path: Path) -> None:
    """The store moves between a sync's listing and its commit: the If-Match fails, nothing
    applies, and the sync lists again and reports the conflict."""
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    work = tmp_path / "work"
    with memdir.Client(db=db, create=True) as client:
        client.write("/x.md", "base\n", if_absent=True)
        checkout(client, "/", work)
        (work / "x.md").write_text("base\nmine\n")
        listing = client.checkout_files

        def racing(*args: Any, **kwargs: Any) -> Any:
            page = listing(*args, **kwargs)
            if not racing.done:  # type: ignore[attr-defined]
                racing.done = True  # type: ignore[attr-defined]
                view = client.read("/x.md")
                client.write("/x.md", "base\ntheirs\n", if_match=view.sha256)
            return page

        racing.done = False  # type: ignore[attr-defined]
        client.checkout_files = racing  # type: ignore[method-assign]
        report = sync(client, work)
        assert [c.path for c in report.conflicts] == ["/x.md"]
        assert client.read("/x.md").content == "base\ntheirs\n"
        assert (work / "x.md").read_text() == "base\nmine\n"
        assert (work / "x.md.theirs").read_text() == "base\ntheirs\n"


def test_replace_keeps_a_local_change_made_after_the_check(tmp_path: Path) -> None:
    file = tmp_path / "f.md"
    file.write_text("base\n")
    base = sha256_hex("base\n")
    assert _replace_checked(file, b"pulled\n", base, "write")
    assert file.read_text() == "pulled\n"
    file.write_text("edited\n")  # no longer the base: the pull must not replace it
    assert not _replace_checked(file, b"pulled again\n", sha256_hex("pulled\n"), "write")
    assert file.read_text() == "edited\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.md"]  # no temporaries left


def test_sync_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    memdir.Client(db=db, create=True).close()
    (tmp_path / "plain").mkdir()
    done = subprocess.run([*MEMDIR, "--db", db, "sync", str(tmp_path / "plain")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2
    assert "not a memdir checkout" in done.stderr and "memdir checkout" in done.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.md").write_text("x")
    done = subprocess.run([*MEMDIR, "--db", db, "checkout", str(tmp_path / "full")],
                          capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2 and "not an empty directory" in done.stderr


def test_invalid_local_files_are_reported_and_the_rest_syncs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    work = tmp_path / "work"
    with memdir.Client(db=db, create=True) as client:
        client.write("/ok.md", "ok\n", if_absent=True)
        checkout(client, "/", work)
        (work / "latin1.md").write_bytes(b"caf\xe9\n")
        (work / "ok.md").write_text("ok\nmore\n")
        (work / "notes.md~").write_text("editor backup, never synced")
        report = sync(client, work)
        assert [p.path for p in report.invalid] == ["/latin1.md"]
        assert "UTF-8" in report.invalid[0].message
        assert [c.path for c in report.sent] == ["/ok.md"]
        assert report.exit_code == 2
        assert [e.path for e in client.ls("/", recursive=True)] == ["/ok.md"]
