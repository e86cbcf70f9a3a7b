"""`memdir export --git`: a store of 1,000+ commits with renames, deletes and a redaction,
checked against the git CLI — `git log --follow` and `git diff` agree with the store's file
history and diffs, the redacted secret is in no git object, provenance is in the trailers, a
second export appends only the new commits, and only what the principal reads is exported."""

from __future__ import annotations

import random
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

import memdir
from memdir import OWNER, Delete, MemoryService, Provenance, Rename, Write
from memdir.checkout.gitexport import export_git
from memdir.cli.main import cli
from memdir.core.content import sha256_hex
from memdir.core.errors import Conflict

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")

SECRET = "zebra-quokka-7781-do-not-keep"
STORE = "default"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
    return done.stdout.decode()


def build(svc: MemoryService, commits: int, seed: int = 7) -> dict[str, list[str]]:
    """Random commits (writes, edits, renames, deletes, multi-file) with provenance; returns
    each live file's path history (its paths in order), for the rename checks."""
    rng = random.Random(seed)
    live: dict[str, str] = {}
    paths: dict[str, list[str]] = {}  # current path -> every path it had
    serial = 0

    def fresh() -> str:
        nonlocal serial
        serial += 1
        return f"/d{serial % 7}/f{serial}.md"

    for n in range(commits):
        ops: list[memdir.Operation] = []
        kind = rng.random()
        if not live or kind < 0.2:
            path = fresh()
            ops.append(Write(path, f"# {path}\nfirst line {n}\n", if_absent=True))
        elif kind < 0.6:
            path = rng.choice(sorted(live))
            lines = live[path].splitlines(keepends=True)
            if len(lines) > 3 and rng.random() < 0.4:
                lines[rng.randrange(1, len(lines))] = f"changed line {n}\n"
            else:
                lines.append(f"line {n} of {path}\n")
            ops.append(Write(path, "".join(lines), if_match=sha256_hex(live[path])))
        elif kind < 0.78:
            path = rng.choice(sorted(live))
            ops.append(Rename(path, fresh()))
        elif kind < 0.88:
            ops.append(Delete(rng.choice(sorted(live))))
        else:
            for path in rng.sample(sorted(live), min(2, len(live))):
                ops.append(Write(path, live[path] + f"both {n}\n",
                                 if_match=sha256_hex(live[path])))  # fmt: skip
            path = fresh()
            ops.append(Write(path, f"# {path}\nwith others {n}\n", if_absent=True))
        provenance = Provenance(
            session=f"session-{n % 13}", reason=f"step {n}",
            source_kind=rng.choice([None, "user-stated", "agent-inferred"]),
            transcript=f"tr-{n}" if n % 50 == 0 else None,
        )  # fmt: skip
        svc.commit(OWNER, STORE, ops, provenance)
        for op in ops:
            if isinstance(op, Write):
                live[op.path] = op.content
                paths.setdefault(op.path, [op.path])
            elif isinstance(op, Rename):
                live[op.new_path] = live.pop(op.path)
                paths[op.new_path] = [*paths.pop(op.path), op.new_path]
            else:
                live.pop(op.path)
                paths.pop(op.path)
    return paths


@pytest.fixture
def svc(tmp_path: Path) -> MemoryService:
    service = memdir.open(f"sqlite:///{tmp_path / 'memdir.db'}", create=True)
    service.create_store(OWNER, STORE)
    return service


def revisions_of(repo: Path) -> dict[int, str]:
    out = git(repo, "log", "--format=%H %(trailers:key=Memdir-Revision,valueonly,separator=)")
    return {int(rev): sha for sha, rev in (line.split() for line in out.splitlines())}


def test_git_export_of_a_long_history_agrees_with_memdir(svc: MemoryService, tmp_path: Path):
    svc.write(OWNER, STORE, "/notes/secret.md", f"the key is {SECRET}\n", if_absent=True)
    head = svc.read(OWNER, STORE, "/notes/secret.md")
    svc.write(OWNER, STORE, "/notes/secret.md", "the key was rotated\n", if_match=head.sha256)
    paths = build(svc, 1000)
    plan = svc.redact(OWNER, STORE, "/notes/secret.md", 1)
    assert plan.done

    repo = tmp_path / "git"
    report = export_git(svc, OWNER, STORE, repo)
    history = list(reversed(svc.history(OWNER, STORE, limit=5000)))
    assert report.added == len(history) == 1002
    assert int(git(repo, "rev-list", "--count", "main")) == len(history)
    assert git(repo, "status", "--porcelain") == ""  # the working tree is the head

    # provenance and authorship, commit by commit
    log = git(repo, "log", "--reverse", "--format=%an|%at|%(trailers:key=Session,valueonly,"
              "separator=)|%(trailers:key=Memdir-Commit,valueonly,separator=)|%s")  # fmt: skip
    for line, info in zip(log.splitlines(), history, strict=True):
        actor, stamp, session, commit, subject = line.split("|")
        subject_wanted = info.reason or f"memdir revision {info.revision}"
        assert (actor, commit, session, subject) == (info.actor, info.id, info.session or "",
                                                     subject_wanted)  # fmt: skip
        assert int(stamp) == int(info.created_at.timestamp())

    # the redacted secret is in no object; the placeholder says what happened
    objects = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects",
                              "--batch"], capture_output=True, check=True).stdout  # fmt: skip
    assert SECRET.encode() not in objects
    assert b"version 1 of /notes/secret.md was redacted" in objects

    # git log --follow agrees with the file histories, git diff with memdir diff
    by_revision = revisions_of(repo)
    renamed = [p for p, trail in paths.items() if len(trail) >= 3][:6]
    assert len(renamed) >= 3
    for path in renamed:
        versions = svc.file_history(OWNER, STORE, path)
        followed = git(repo, "log", "--follow", "--format=%(trailers:key=Memdir-Revision,"
                       "valueonly,separator=)", "--", path[1:])  # fmt: skip
        assert [int(r) for r in followed.split()] == [v.revision for v in versions]
        first, last = versions[-1], versions[0]
        ours = svc.diff(OWNER, STORE, path, first.version, last.version)
        theirs = git(repo, "diff", f"{by_revision[first.revision]}:{first.path[1:]}",
                     f"{by_revision[last.revision]}:{last.path[1:]}")  # fmt: skip
        assert _changed(ours) == _changed(theirs)
    # deleted files are gone from the head tree, live ones there with their content
    tree = set(git(repo, "ls-tree", "-r", "--name-only", "main").split())
    live = {v.path[1:] for v in svc.iter_files(OWNER, STORE)}
    assert tree == live

    # a second export appends only what is new
    old_head = report.head
    assert old_head is not None
    for n in range(5):
        svc.write(OWNER, STORE, f"/later/{n}.md", f"later {n}\n", if_absent=True)
    again = export_git(svc, OWNER, STORE, repo)
    assert again.added == 5 and again.total == 1007
    git(repo, "merge-base", "--is-ancestor", old_head, "main")  # old commits untouched
    assert int(git(repo, "rev-list", "--count", "main")) == 1007
    assert export_git(svc, OWNER, STORE, repo).added == 0

    # content redacted after an export cannot be removed by appending: refuse, say what to do
    target = sorted(paths)[0]
    versions = svc.file_history(OWNER, STORE, target)
    old = next(v for v in reversed(versions) if v.sha256 and v.sha256 != versions[0].sha256)
    svc.redact(OWNER, STORE, old.path, old.version)
    with pytest.raises(Conflict, match="export afresh into a new directory"):
        export_git(svc, OWNER, STORE, repo)


def _changed(diff: str) -> Counter[str]:
    """The added and removed lines of a unified diff (headers and context left out)."""
    return Counter(
        line
        for line in diff.splitlines()
        if line[:1] in "+-" and not line.startswith(("+++", "---"))
    )


def test_git_export_holds_only_what_the_principal_reads(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    with memdir.Client(db=db, create=True) as owner:
        owner.add_principal("agent:bot", projects=["acme"])
        owner.write("/projects/acme/a.md", "acme\n", if_absent=True,
                    provenance=Provenance(session="s1"))  # fmt: skip
        owner.write("/projects/other/hidden.md", "hidden text\n", if_absent=True)
        owner.commit([Write("/projects/acme/b.md", "b\n", if_absent=True),
                      Write("/projects/other/also.md", "also hidden\n", if_absent=True)],
                     reason="mixed")  # fmt: skip
        owner.rename("/projects/other/hidden.md", "/projects/acme/moved.md")
    repo = tmp_path / "bot.git"
    result = CliRunner().invoke(cli, ["--db", db, "--as", "agent:bot", "export", "--git",
                                      str(repo), "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    names = set(git(repo, "log", "--format=", "--name-only").split())
    assert names == {"projects/acme/a.md", "projects/acme/b.md", "projects/acme/moved.md"}
    assert int(git(repo, "rev-list", "--count", "main")) == 3  # the hidden-only commit left out
    objects = subprocess.run(["git", "-C", str(repo), "cat-file", "--batch-all-objects",
                              "--batch"], capture_output=True, check=True).stdout  # fmt: skip
    assert b"also hidden" not in objects
    # the file moved in from an unreadable place arrives as a creation
    assert "projects/acme/moved.md" in git(repo, "show", "--name-status", "--format=", "main")
    # another principal's export cannot extend this one
    other = CliRunner().invoke(cli, ["--db", db, "export", "--git", str(repo)])
    assert other.exit_code == 2 and "export this one into a new directory" in other.stderr
