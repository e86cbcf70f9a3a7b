"""The SDK's transport behaviour: retries, idempotency keys, the error envelope by ``type``.

Failures are injected at the transport seam (``httpx2.MockTransport``, or a transport that
loses the real app's first response); memdir itself is never replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

import memdir
from memdir import (
    OWNER,
    BackendError,
    MemdirError,
    NotFound,
    PreconditionFailed,
    Proposed,
)
from memdir.api import create_app
from memdir.api.settings import ApiSettings
from memdir.sdk import RateLimited
from memdir.sdk._local import SyncASGITransport
from memdir.settings import Settings

COMMIT = {
    "commit": "c" * 32,
    "revision": 1,
    "created_at": "2026-01-01T00:00:00Z",
    "replayed": False,
    "results": [{"op": "write", "path": "/a.md", "file_id": 1, "version": 1,
                 "operation": "created", "sha256": "0" * 64, "size": 1, "old_path": None}],
}  # fmt: skip


def envelope(status: int, type_: str, headers: dict[str, str] | None = None, **details: Any) -> (
    httpx2.Response
):  # fmt: skip
    body = {"error": {"type": type_, "message": f"{type_} happened", **details}}
    return httpx2.Response(status, json=body, headers=headers)


@pytest.fixture(autouse=True)
def _no_memdir_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Clients read MEMDIR_TOKEN / MEMDIR_DB when not told; tests tell them everything."""
    for name in ("MEMDIR_TOKEN", "MEMDIR_DB"):
        monkeypatch.delenv(name, raising=False)


class Script:
    """Answers requests in order with the given responses (or raises the given errors)."""

    def __init__(self, *answers: httpx2.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx2.Request] = []

    def __call__(self, request: httpx2.Request) -> httpx2.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keys(self) -> list[str | None]:
        return [r.headers.get("idempotency-key") for r in self.requests]


Run = Callable[..., Any]


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Iterator[Callable[[Script, Callable[[Any], Any]], Any]]:
    """``run(script, lambda client: client.method(...))`` with a sync or an async client."""

    def sync(script: Script, action: Callable[[Any], Any], **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 3)
        with memdir.Client(
            "http://memdir.test", "mdr_x", transport=httpx2.MockTransport(script), **kwargs
        ) as client:
            return action(client)

    def asynchronous(script: Script, action: Callable[[Any], Any], **kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 3)

        async def main() -> Any:
            async with memdir.AsyncClient(
                "http://memdir.test", "mdr_x", transport=httpx2.MockTransport(script), **kwargs
            ) as client:
                return await action(client)

        return anyio.run(main)

    yield sync if request.param == "sync" else asynchronous


def test_a_retried_mutation_repeats_its_idempotency_key(run: Run) -> None:
    script = Script(
        httpx2.ConnectError("refused"),
        envelope(503, "backend_error", {"Retry-After": "0"}),
        httpx2.Response(201, json=COMMIT),
    )
    result = run(script, lambda c: c.write("/a.md", "a", if_absent=True, reason="été"))
    assert result.results[0].operation == "created"
    keys = script.keys()
    assert len(keys) == 3 and keys[0] and len(set(keys)) == 1
    sent = script.requests[-1]
    assert sent.headers["if-none-match"] == "*" and sent.content == b"a"
    assert sent.headers.get_list("x-memdir-reason") == ["été"]  # UTF-8 on the wire
    assert sent.headers["authorization"] == "Bearer mdr_x"

    again = Script(httpx2.Response(200, json=COMMIT))
    run(again, lambda c: c.write("/a.md", "a", if_match="0" * 64))
    assert again.keys()[0] not in keys  # a new logical change, a new key


def test_rate_limits_are_waited_out_then_raised(run: Run) -> None:
    limited = envelope(429, "rate_limited", {"Retry-After": "0"}, retry_after=0)
    script = Script(limited, httpx2.Response(200, json={"items": ["/a.md"], "next_cursor": None}))
    assert run(script, lambda c: c.glob("/**")) == ["/a.md"]
    assert len(script.requests) == 2

    always = Script(limited)
    with pytest.raises(RateLimited) as raised:
        run(always, lambda c: c.read("/a.md"), max_retries=2)
    assert len(always.requests) == 3 and raised.value.details["retry_after"] == 0
    too_long = Script(envelope(429, "rate_limited", {"Retry-After": "3600"}))
    with pytest.raises(RateLimited):
        run(too_long, lambda c: c.read("/a.md"))
    assert len(too_long.requests) == 1


def test_requests_the_server_does_not_deduplicate_are_not_resent(run: Run) -> None:
    script = Script(envelope(500, "internal_error"))
    with pytest.raises(MemdirError) as raised:
        run(script, lambda c: c.create_token("agent:x"))  # its secret cannot be replayed
    assert len(script.requests) == 1
    assert type(raised.value) is MemdirError and raised.value.details["type"] == "internal_error"
    refused = Script(httpx2.ConnectError("refused"), envelope(500, "internal_error"))
    with pytest.raises(MemdirError):
        run(refused, lambda c: c.create_token("agent:x"))
    assert len(refused.requests) == 2  # never arrived: safe to send again


def test_errors_are_chosen_by_type(run: Run) -> None:
    cases: list[tuple[httpx2.Response, type[MemdirError]]] = [
        (envelope(418, "not_found"), NotFound),
        (envelope(412, "precondition_failed", current_sha256="ab"), PreconditionFailed),
        (envelope(202, "proposed", proposal="p-1"), Proposed),
        (envelope(405, "method_not_allowed"), MemdirError),
        (httpx2.Response(502, text="<html>bad gateway</html>"), MemdirError),
        (httpx2.Response(503, text="down"), BackendError),
    ]
    for response, cls in cases:
        with pytest.raises(cls) as raised:
            run(Script(response), lambda c: c.read("/a.md"), max_retries=0)
        assert type(raised.value) is cls
    with pytest.raises(Proposed) as proposed:
        run(Script(envelope(202, "proposed", proposal="p-1")), lambda c: c.delete("/a.md"))
    assert proposed.value.details["proposal"] == "p-1"
    with pytest.raises(BackendError) as unreachable:
        run(Script(httpx2.ConnectError("refused")), lambda c: c.read("/a.md"), max_retries=0)
    assert "could not reach memdir at http://memdir.test" in unreachable.value.message


# --- a lost response, against the real app ------------------------------------------------------


class LoseFirstResponse(httpx2.BaseTransport, httpx2.AsyncBaseTransport):
    """Delivers every request to the app, but loses the first response (a dropped connection)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[httpx2.Request] = []

    def _lost(self, request: httpx2.Request) -> None:
        self.sent.append(request)
        if len(self.sent) == 1:
            raise httpx2.ReadError("connection reset after the request was sent", request=request)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        response = self.inner.handle_request(request)
        self._lost(request)
        return response  # type: ignore[no-any-return]

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        self._lost(request)
        return response  # type: ignore[no-any-return]


@pytest.mark.parametrize("flavour", ["sync", "async"])
def test_a_write_whose_response_was_lost_applies_once(tmp_path: Path, flavour: str) -> None:
    svc = memdir.open(f"sqlite:///{tmp_path / 'm.db'}", create=True)
    try:
        svc.create_store(OWNER, "default")
        svc.add_principal(OWNER, "user:root", groups=("admins",))
        token = svc.create_token(OWNER, "user:root").token
        app = create_app(Settings(), svc, api_settings=ApiSettings(rate=None))
        if flavour == "sync":
            transport = LoseFirstResponse(SyncASGITransport(app))
            with memdir.Client("http://memdir", token, transport=transport) as client:
                result = client.write("/org/a.md", "once\n", if_absent=True)
            transport.inner.close()
        else:
            transport = LoseFirstResponse(httpx2.ASGITransport(app=app))

            async def main() -> Any:
                async with memdir.AsyncClient("http://memdir", token, transport=transport) as c:
                    return await c.write("/org/a.md", "once\n", if_absent=True)

            result = anyio.run(main)
        assert len(transport.sent) == 2 and result.replayed
        keys = {r.headers["idempotency-key"] for r in transport.sent}
        assert len(keys) == 1
        assert [v.version for v in svc.file_history(OWNER, "default", "/org/a.md")] == [1]
        assert svc.store_info(OWNER, "default").revision == 1
    finally:
        svc.db.close()


def test_clients_refuse_contradictory_settings(tmp_path: Path) -> None:
    from memdir import InvalidInput, Provenance

    db = f"sqlite:///{tmp_path / 'm.db'}"
    for kwargs in (
        {"base_url": "http://x", "db": db},
        {"base_url": "http://x", "principal": "agent:a"},
        {"base_url": "http://x", "provenance": Provenance(idempotency_key="k")},
        {"db": db, "principal": "agent:a", "token": "mdr_x", "create": True},
    ):
        with pytest.raises(InvalidInput):
            memdir.Client(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(BackendError):
        memdir.Client(db=f"sqlite:///{tmp_path / 'missing.db'}")
    with pytest.raises(NotFound):
        memdir.Client(db=db, principal="agent:nobody", create=True)


def test_the_first_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    docs = (Path(__file__).resolve().parent.parent / "docs" / "sdk.md").read_text("utf-8")
    first = re.findall(r"```python\n(.*?)```", docs, flags=re.S)[0]
    monkeypatch.chdir(tmp_path)
    exec(compile(first, "docs/sdk.md", "exec"), {})
    assert (tmp_path / ".memdir" / "memdir.db").exists()
