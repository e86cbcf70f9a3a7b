"""REST mutations that make no commit honour ``Idempotency-Key`` like file mutations do.

Stores (create, archive, delete), principals and tokens (create) and proposal reviews (accept,
reject, rebase): a repeat of the same request with the same key by the same principal returns
the first attempt's status and body (``Idempotent-Replayed: true``) without doing it again; the
key reused for a different request is 409 ``idempotency_mismatch``; a failed attempt does not
consume the key. Also here: the owner through the SDK's local transport (``GET /v1/me``) and the
SDK's configurable ``update()`` attempt limit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

import memdir
from memdir import OWNER, MemoryService, PreconditionFailed, Write
from memdir.api import create_app
from memdir.api.settings import ApiSettings
from memdir.sdk._local import SyncASGITransport
from memdir.settings import Settings

STORE = "default"


@dataclass
class Rest:
    svc: MemoryService
    http: httpx2.Client
    url: str
    transport: httpx2.BaseTransport  # the app's, in-process

    def send(self, method: str, path: str, key: str | None = None, **kwargs: Any) -> Any:
        headers = {"Idempotency-Key": key} if key is not None else {}
        return self.http.request(method, path, headers=headers, **kwargs)


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[Rest]:
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, STORE)
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    token = svc.create_token(OWNER, "user:root").token
    app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None, auth_failure_rate=None))
    transport = SyncASGITransport(app)
    headers = {"Authorization": f"Bearer {token}"}
    with httpx2.Client(transport=transport, base_url="http://memdir", headers=headers) as http:
        yield Rest(svc, http, url, transport)
    transport.close()
    svc.db.close()


def replayed(first: httpx2.Response, again: httpx2.Response) -> None:
    """``again`` answers exactly as ``first`` did, marked as a replay."""
    assert again.status_code == first.status_code, again.text
    assert again.content == first.content
    assert again.headers.get("Idempotent-Replayed") == "true"
    assert first.headers.get("Idempotent-Replayed") is None


def mismatch(response: httpx2.Response) -> None:
    assert response.status_code == 409, response.text
    assert response.json()["error"]["type"] == "idempotency_mismatch"


def test_store_create_archive_delete(rest: Rest) -> None:
    first = rest.send("POST", "/v1/stores", "s1", json={"name": "notes"})
    assert first.status_code == 201 and first.headers["Location"] == "/v1/stores/notes"
    again = rest.send("POST", "/v1/stores", "s1", json={"name": "notes"})
    replayed(first, again)
    assert again.headers["Location"] == "/v1/stores/notes"
    assert rest.send("POST", "/v1/stores", json={"name": "notes"}).status_code == 409  # no key
    mismatch(rest.send("POST", "/v1/stores", "s1", json={"name": "other"}))
    assert "other" not in {s.name for s in rest.svc.list_stores(OWNER)}

    archived = rest.send("POST", "/v1/stores/notes/archive", "a1")
    assert archived.status_code == 200 and archived.json()["archived_at"]
    replayed(archived, rest.send("POST", "/v1/stores/notes/archive", "a1"))
    mismatch(rest.send("POST", "/v1/stores/default/archive", "a1"))
    assert rest.svc.store_info(OWNER, STORE).archived_at is None

    deleted = rest.send("DELETE", "/v1/stores/notes", "d1")
    assert deleted.status_code == 204
    replayed(deleted, rest.send("DELETE", "/v1/stores/notes", "d1"))  # not a 404: the replay
    assert rest.send("DELETE", "/v1/stores/notes", "d2").status_code == 404  # a new request
    mismatch(rest.send("DELETE", "/v1/stores/default", "d1"))
    assert [s.name for s in rest.svc.list_stores(OWNER)] == [STORE]


def test_a_failed_attempt_does_not_consume_the_key(rest: Rest) -> None:
    missing = rest.send("POST", "/v1/stores/later/archive", "k")
    assert missing.status_code == 404
    rest.svc.create_store(OWNER, "later")
    done = rest.send("POST", "/v1/stores/later/archive", "k")
    assert done.status_code == 200 and done.headers.get("Idempotent-Replayed") is None


def test_keys_belong_to_their_principal(rest: Rest) -> None:
    rest.svc.add_principal(OWNER, "user:second", groups=("admins",))
    other = rest.svc.create_token(OWNER, "user:second").token
    assert rest.send("POST", "/v1/stores", "same", json={"name": "one"}).status_code == 201
    theirs = rest.http.post(
        "/v1/stores",
        json={"name": "two"},
        headers={"Idempotency-Key": "same", "Authorization": f"Bearer {other}"},
    )
    assert theirs.status_code == 201 and theirs.headers.get("Idempotent-Replayed") is None
    assert {"one", "two"} <= {s.name for s in rest.svc.list_stores(OWNER)}


def test_principal_and_token_creation(rest: Rest) -> None:
    body = {"id": "agent:bot", "projects": ["acme"]}
    first = rest.send("POST", "/v1/principals", "p1", json=body)
    assert first.status_code == 201
    replayed(first, rest.send("POST", "/v1/principals", "p1", json=body))
    mismatch(rest.send("POST", "/v1/principals", "p1", json={"id": "agent:other"}))
    assert [p.id for p in rest.svc.list_principals(OWNER)] == ["agent:bot", "user:root"]

    made = rest.send("POST", "/v1/tokens", "t1", json={"principal": "agent:bot"})
    assert made.status_code == 201
    secret = made.json()["token"]
    assert secret.startswith("mdr_")
    again = rest.send("POST", "/v1/tokens", "t1", json={"principal": "agent:bot"})
    assert again.status_code == 201 and again.headers["Idempotent-Replayed"] == "true"
    # the same token, but its secret is not kept anywhere, so the replay cannot show it
    assert again.json() == {**made.json(), "token": None}
    assert again.headers["Cache-Control"] == "no-store"
    assert len(rest.svc.list_tokens(OWNER, "agent:bot")) == 1
    assert rest.svc.authenticate(secret).id == "agent:bot"
    mismatch(rest.send("POST", "/v1/tokens", "t1", json={"principal": "user:root"}))


def _proposal(svc: MemoryService, path: str) -> str:
    return svc.propose(OWNER, STORE, [Write(path, "proposed\n", if_absent=True)], rationale="r").id


def test_proposal_reviews(rest: Rest) -> None:
    base = "/v1/stores/default/proposals"
    one, two, three = (_proposal(rest.svc, f"/p/{n}.md") for n in ("one", "two", "three"))

    accepted = rest.send("POST", f"{base}/{one}/accept", "r1")
    assert accepted.status_code == 200, accepted.text
    assert accepted.headers["X-Memdir-Revision"] == "1"
    replayed(accepted, rest.send("POST", f"{base}/{one}/accept", "r1"))
    assert rest.svc.store_info(OWNER, STORE).revision == 1  # applied once
    mismatch(rest.send("POST", f"{base}/{two}/accept", "r1"))

    rejected = rest.send("POST", f"{base}/{two}/reject", "r2", json={"comment": "no"})
    assert rejected.status_code == 200 and rejected.json()["status"] == "rejected"
    replayed(rejected, rest.send("POST", f"{base}/{two}/reject", "r2", json={"comment": "no"}))
    mismatch(rest.send("POST", f"{base}/{two}/reject", "r2", json={"comment": "other"}))

    rest.svc.write(OWNER, STORE, "/p/three.md", "squatter\n", if_absent=True)
    conflicted = rest.send("POST", f"{base}/{three}/accept")
    assert conflicted.status_code == 409
    rebased = rest.send("POST", f"{base}/{three}/rebase", "r3", json={"content": "merged\n"})
    assert rebased.status_code == 200, rebased.text
    replayed(rebased, rest.send("POST", f"{base}/{three}/rebase", "r3",
                                json={"content": "merged\n"}))  # fmt: skip
    mismatch(rest.send("POST", f"{base}/{three}/rebase", "r3", json={"content": "other\n"}))
    assert rest.svc.get_proposal(OWNER, STORE, three).status == "open"


def test_me_describes_the_owner_through_the_local_transport(rest: Rest) -> None:
    with memdir.Client(db=rest.url) as owner:
        me = owner.me()
    assert (me.id, me.kind, me.groups, me.created_at) == ("owner", "owner", (), None)
    with memdir.Client(db=rest.url, principal="user:root") as root:
        assert root.me().id == "user:root"
        assert root.principal("owner").kind == "owner"  # an admin may look the owner up


def test_update_attempts_are_configurable(rest: Rest) -> None:
    rest.svc.write(OWNER, STORE, "/counter.md", "0", if_absent=True)
    calls: list[str] = []

    def meddling(text: str) -> str:
        """Change the file behind the client's back, so its write always comes too late."""
        calls.append(text)
        current = rest.svc.read(OWNER, STORE, "/counter.md")
        rest.svc.write(OWNER, STORE, "/counter.md", f"{text}x", if_match=current.sha256)
        return text + "1"

    with memdir.Client(db=rest.url) as client:
        with pytest.raises(PreconditionFailed):
            client.update("/counter.md", meddling, max_attempts=3)
        assert len(calls) == 3
        calls.clear()
        with pytest.raises(PreconditionFailed):
            client.update("/counter.md", meddling)
        assert len(calls) == 10  # the documented default


def test_propose(rest: Rest) -> None:
    body = {"operations": [{"op": "write", "path": "/p/x.md", "content": "x", "if_absent": True}],
            "rationale": "why"}  # fmt: skip
    url = "/v1/stores/default/proposals"
    first = rest.send("POST", url, "q1", json=body)
    assert first.status_code == 201, first.text
    assert first.headers["Location"] == f"{url}/{first.json()['id']}"
    replayed(first, rest.send("POST", url, "q1", json=body))
    assert len(rest.svc.list_proposals(OWNER, STORE)) == 1
    mismatch(rest.send("POST", url, "q1", json={**body, "rationale": "another"}))


class LosesFirstResponses(httpx2.BaseTransport):
    """Delivers every request, but loses the response of the first one to each URL."""

    def __init__(self, inner: httpx2.BaseTransport) -> None:
        self.inner = inner
        self.seen: dict[str, int] = {}

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self.inner.handle_request(request)
        key = f"{request.method} {request.url.path}"
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.seen[key] == 1:
            raise httpx2.ReadError("connection reset after the server answered", request=request)
        return response


def test_sdk_retries_of_these_mutations_apply_them_once(rest: Rest) -> None:
    token = rest.http.headers["Authorization"].removeprefix("Bearer ")
    transport = LosesFirstResponses(rest.transport)
    pid = _proposal(rest.svc, "/p/sdk.md")
    with memdir.Client("http://memdir", token, transport=transport, max_retries=2) as client:
        assert client.create_store("fresh").name == "fresh"  # the retry was replayed
        assert client.archive_store("fresh").archived_at is not None
        client.delete_store("fresh")
        assert client.add_principal("agent:sdk").id == "agent:sdk"
        assert client.accept_proposal(pid).revision == 1
        proposal = client.propose([Write("/p/again.md", "a", if_absent=True)], rationale="r")
    assert rest.svc.store_info(OWNER, STORE).revision == 1
    assert [s.name for s in rest.svc.list_stores(OWNER)] == [STORE]
    assert "agent:sdk" in {p.id for p in rest.svc.list_principals(OWNER)}
    assert [p.id for p in rest.svc.list_proposals(OWNER, STORE)] == [proposal.id]
    assert all(count == 2 for count in transport.seen.values()), transport.seen


def test_a_write_queued_for_review_is_queued_once(rest: Rest) -> None:
    rest.svc.add_principal(OWNER, "agent:bot")
    bot = rest.svc.create_token(OWNER, "agent:bot").token
    url = "/v1/stores/default/files/org/rule.md"

    def put(key: str, content: str) -> httpx2.Response:
        headers = {"Authorization": f"Bearer {bot}", "Idempotency-Key": key}
        return rest.http.put(url, content=content, headers=headers)

    first = put("w1", "be kind\n")  # agents may only propose under /org/
    assert first.status_code == 202, first.text
    again = put("w1", "be kind\n")
    assert again.status_code == 202
    assert again.json()["error"]["proposal"] == first.json()["error"]["proposal"]
    assert len(rest.svc.list_proposals(OWNER, STORE)) == 1
    mismatch(put("w1", "be rude\n"))
    other = put("w2", "be rude\n")  # a new key: a new proposal
    assert other.status_code == 202
    assert other.json()["error"]["proposal"] != first.json()["error"]["proposal"]
