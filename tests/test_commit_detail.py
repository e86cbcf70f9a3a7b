"""``MemoryService.commit_detail``: a commit with the text before and after each change, only
for the changes the caller may read (the commit page of the web UI shows exactly this)."""

from __future__ import annotations

from pathlib import Path

import httpx2
import pytest

import memdir
from memdir import OWNER, MemoryService
from memdir.api import create_app
from memdir.api.settings import ApiSettings
from memdir.core.errors import InvalidInput, NotFound
from memdir.core.model import Principal, Provenance, Write
from memdir.settings import Settings

STORE = "default"


@pytest.fixture
def svc(tmp_path: Path) -> MemoryService:
    found = memdir.open(f"sqlite:///{tmp_path / 'memdir.db'}", create=True)
    found.create_store(OWNER, STORE)
    found.add_principal(OWNER, "agent:a", projects=("a",))
    return found


def _agent(svc: MemoryService) -> Principal:
    return svc.authenticate(svc.create_token(OWNER, "agent:a").token or "")


def test_only_readable_changes_with_their_text_before_and_after(svc: MemoryService) -> None:
    svc.write(OWNER, STORE, "/projects/a/notes.md", "one\n", if_absent=True)
    sha = svc.read(OWNER, STORE, "/projects/a/notes.md").sha256
    done = svc.commit(OWNER, STORE, [
        Write("/projects/a/notes.md", "one\ntwo\n", if_match=sha),
        Write("/projects/b/secret.md", "b only\n", if_absent=True),
    ], Provenance(reason="both projects", session="s-1"))  # fmt: skip
    agent = _agent(svc)

    whole = svc.commit_detail(OWNER, STORE, done.commit)
    assert [c.change.path for c in whole.changes] == ["/projects/a/notes.md",
                                                      "/projects/b/secret.md"]  # fmt: skip
    seen = svc.commit_detail(agent, STORE, done.commit[:8])  # a prefix names it too
    assert seen.commit.id == done.commit and seen.commit.reason == "both projects"
    assert [c.change.path for c in seen.changes] == ["/projects/a/notes.md"]
    assert [v.path for v in seen.commit.changes] == ["/projects/a/notes.md"]
    (change,) = seen.changes
    assert (change.before, change.after) == ("one\n", "one\ntwo\n")
    assert change.before_path == "/projects/a/notes.md"
    with pytest.raises(InvalidInput):
        svc.commit_detail(agent, STORE, done.commit[:4])


def test_a_commit_without_a_readable_change_is_an_unknown_commit(svc: MemoryService) -> None:
    hidden = svc.write(OWNER, STORE, "/projects/b/x.md", "b\n", if_absent=True).commit
    agent = _agent(svc)
    with pytest.raises(NotFound) as refused:
        svc.commit_detail(agent, STORE, hidden)
    with pytest.raises(NotFound) as unknown:
        svc.commit_detail(agent, STORE, "0" * 32)
    assert refused.value.message.replace(hidden, "X") == unknown.value.message.replace(
        "0" * 32, "X"
    )


def test_a_rename_from_an_unreadable_path_shows_no_text_or_path_before(svc: MemoryService) -> None:
    svc.write(OWNER, STORE, "/projects/b/moved.md", "from b\n", if_absent=True)
    moved = svc.rename(OWNER, STORE, "/projects/b/moved.md", "/projects/a/moved.md").commit
    (change,) = svc.commit_detail(_agent(svc), STORE, moved).changes
    assert change.change.path == "/projects/a/moved.md" and change.change.old_path is None
    assert change.before is None and change.before_path is None and change.after == "from b\n"
    (full,) = svc.commit_detail(OWNER, STORE, moved).changes
    assert full.change.old_path == "/projects/b/moved.md" and full.before == "from b\n"


def test_a_redacted_version_before_is_flagged_and_its_text_gone(svc: MemoryService) -> None:
    path = "/projects/a/r.md"
    sha = svc.write(OWNER, STORE, path, "secret v1\n", if_absent=True).results[0].sha256
    second = svc.write(OWNER, STORE, path, "clean v2\n", if_match=sha).commit
    svc.redact(OWNER, STORE, path, 1)
    (change,) = svc.commit_detail(OWNER, STORE, second).changes
    assert change.redacted and change.before is None and change.after == "clean v2\n"


@pytest.mark.anyio
async def test_rest_get_commit_answers_what_the_service_answers(svc: MemoryService) -> None:
    done = svc.commit(OWNER, STORE, [
        Write("/projects/a/r.md", "a text\n", if_absent=True),
        Write("/projects/b/r.md", "b text\n", if_absent=True),
    ])  # fmt: skip
    hidden = svc.write(OWNER, STORE, "/projects/b/only.md", "b\n", if_absent=True).commit
    token = svc.create_token(OWNER, "agent:a").token or ""
    app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None, auth_failure_rate=None))
    transport = httpx2.ASGITransport(app=app)
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(transport=transport, base_url="http://memdir") as client:
        got = await client.get(f"/v1/stores/{STORE}/commits/{done.commit}", headers=headers)
        assert got.status_code == 200, got.text
        body = got.json()
        assert body["commit"]["id"] == done.commit
        assert [c["change"]["path"] for c in body["changes"]] == ["/projects/a/r.md"]
        assert [c["after"] for c in body["changes"]] == ["a text\n"]
        assert "/projects/b" not in got.text and "b text" not in got.text
        refused = await client.get(f"/v1/stores/{STORE}/commits/{hidden}", headers=headers)
        assert refused.status_code == 404
