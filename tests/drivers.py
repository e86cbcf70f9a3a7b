"""Drivers: the store contract's calls through each surface, with the contract's results and
exceptions.

The contract tests (``test_store_contract.py``) call ``svc.write(principal, store, ...)``,
``svc.read(...)`` and so on. ``svc`` is either the service itself or one of these drivers, each
of which makes the same call through a surface and turns the answer back into the service's
result dataclasses and exception classes:

* :class:`RestDriver` — hand-built HTTP requests (httpx) to the REST API: the real ASGI app
  in-process, or a live server; errors from the envelope's ``type``;
* :class:`SdkDriver` — ``memdir.Client`` against a live ``memdir serve``;
* :class:`McpDriver` — an MCP SDK client session (stdio or streamable HTTP) calling the
  memory-tool verbs. Tool results are text: a file view is parsed back into content, sha256
  and version; an error result is mapped to its exception class by its ``_meta`` error type,
  or by the documented form of the reference memory tool's error lines. A tool reports no
  commit, so after a successful change the driver reads the commit it made from the store
  (the newest one, checked to be new) to give the contract its ``CommitResult``.

Every driver keeps ``service``: the service over the same database, in the test process, for
set-up and for inspecting tables (:func:`direct`). A call a surface cannot express raises
:class:`Unsupported` — a test that needs one is marked to skip that surface with the reason
(``not_on``), so an unmarked test hitting it fails rather than passing unnoticed.

Over HTTP the database owner has no token: the drivers act as an admin principal in its place
(``actor_id`` says who commits then).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx2
import sqlalchemy as sa

import memdir
from memdir import OWNER, MemoryService
from memdir.core import errors
from memdir.core.model import (
    CommitInfo,
    CommitResult,
    Entry,
    FileView,
    GrepMatch,
    Operation,
    Principal,
    Provenance,
    SearchHit,
    StoreInfo,
    VersionInfo,
)
from memdir.history import RedactionPlan
from memdir.sdk._wire import ERROR_TYPES, error_from_response, from_json
from memdir.storage.schema import commits

ADMIN = "user:admin"  # who acts for the owner over HTTP
SRC = Path(memdir.__file__).parents[1]  # where the memdir under test is imported from


class Unsupported(Exception):
    """The surface cannot express this call (the test needs ``not_on`` for it)."""


def direct(svc: Any) -> MemoryService:
    """The service behind ``svc`` (itself, or a driver's), for set-up and inspection."""
    return svc if isinstance(svc, MemoryService) else svc.service


def actor_id(svc: Any, principal: Principal) -> str:
    """The principal id commits made as ``principal`` through ``svc`` carry."""
    return principal.id if isinstance(svc, MemoryService) else svc.actor_id(principal)


class Tokens:
    """Bearer tokens per principal: registered (admins) and minted through the service."""

    def __init__(self, service: MemoryService, owner_token: str | None = None) -> None:
        self.service = service
        self.tokens: dict[str, str] = {}
        if owner_token is not None:
            self.tokens[ADMIN] = owner_token

    @staticmethod
    def acting(principal: Principal) -> Principal:
        return Principal(ADMIN, groups=frozenset({"admins"})) if principal.is_owner else principal

    def token(self, principal: Principal) -> str:
        acting = self.acting(principal)
        if acting.id not in self.tokens:
            known = {p.id for p in self.service.list_principals(OWNER)}
            if acting.id not in known:
                self.service.add_principal(
                    OWNER, acting.id, groups=tuple(acting.groups), projects=acting.projects
                )
            info = self.service.create_token(OWNER, acting.id)
            assert info.token is not None
            self.tokens[acting.id] = info.token
        return self.tokens[acting.id]


def _iso(value: dt.datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _prov_headers(provenance: Provenance | None) -> dict[str, str]:
    if provenance is None:
        return {}
    pairs = [
        ("X-Memdir-Session", provenance.session),
        ("X-Memdir-Transcript", provenance.transcript),
        ("X-Memdir-Reason", provenance.reason),
        ("X-Memdir-Source-Kind", provenance.source_kind),
        ("Idempotency-Key", provenance.idempotency_key),
    ]
    return {k: v for k, v in pairs if v is not None}


def _op(op: Operation) -> dict[str, Any]:
    return {k: v for k, v in asdict(op).items() if v is not None}


class RestDriver:
    """The contract through REST: one httpx request per call (pages followed to the end)."""

    def __init__(self, name: str, service: MemoryService, http: httpx2.Client, tokens: Tokens):
        self.name = name
        self.service = service
        self.http = http
        self.tokens = tokens

    def actor_id(self, principal: Principal) -> str:
        return self.tokens.acting(principal).id

    # --- plumbing ---------------------------------------------------------------------------

    def _send(
        self,
        principal: Principal,
        method: str,
        url: str,
        *,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        **kwargs: Any,
    ) -> httpx2.Response:
        sent = {"Authorization": f"Bearer {self.tokens.token(principal)}", **(headers or {})}
        query = {k: v for k, v in (params or {}).items() if v is not None}
        response = self.http.request(method, url, params=query, headers=sent, **kwargs)
        if response.status_code >= 400 or response.status_code == 202:
            raise error_from_response(response)
        return response

    def _pages(self, principal: Principal, url: str, params: dict[str, Any]) -> list[Any]:
        items: list[Any] = []
        cursor = None
        while True:
            page = self._send(principal, "GET", url, params={**params, "cursor": cursor}).json()
            items.extend(page["items"])
            cursor = page["next_cursor"]
            if cursor is None:
                return items

    @staticmethod
    def _store(store: str, tail: str = "") -> str:
        return f"/v1/stores/{quote(store, safe='')}{tail}"

    def _file(self, store: str, path: str, verb: str = "", kind: str = "files") -> str:
        return self._store(store, f"/{kind}/{quote(path[1:], safe='/')}{verb}")

    def _commit(self, response: httpx2.Response) -> CommitResult:
        result: CommitResult = from_json(CommitResult, response.json())
        replayed = response.headers.get("Idempotent-Replayed") == "true"
        assert replayed == result.replayed, "the Idempotent-Replayed header and body disagree"
        return result

    def _edit(
        self,
        principal: Principal,
        store: str,
        path: str,
        verb: str,
        body: dict[str, Any],
        provenance: Provenance | None,
    ) -> CommitResult:
        url = self._file(store, path, verb)
        headers = _prov_headers(provenance)
        return self._commit(self._send(principal, "POST", url, json=body, headers=headers))

    # --- writes -----------------------------------------------------------------------------

    def write(
        self,
        principal: Principal,
        store: str,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        headers = {"Content-Type": "text/markdown; charset=utf-8", **_prov_headers(provenance)}
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        if if_absent:
            headers["If-None-Match"] = "*"
        url = self._file(store, path)
        response = self._send(
            principal, "PUT", url, content=content.encode("utf-8", "surrogatepass"),
            headers=headers,
        )  # fmt: skip
        result = self._commit(response)
        if not result.replayed:  # 201 for a new file, 200 for a new version
            created = result.results[0].operation == "created"
            assert response.status_code == (201 if created else 200), response.status_code
        assert response.headers["ETag"] == f'"{result.results[0].sha256}"'
        return result

    def str_replace(
        self, principal: Principal, store: str, path: str, old: str, new: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        body = {"old": old, "new": new, "if_match": if_match}
        return self._edit(principal, store, path, ":str_replace", body, provenance)

    def insert(
        self, principal: Principal, store: str, path: str, line: int, text: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        body = {"line": line, "text": text, "if_match": if_match}
        return self._edit(principal, store, path, ":insert", body, provenance)

    def rename(
        self, principal: Principal, store: str, path: str, new_path: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        body = {"new_path": new_path, "if_match": if_match}
        return self._edit(principal, store, path, ":move", body, provenance)

    def delete(
        self, principal: Principal, store: str, path: str, *, if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        headers = _prov_headers(provenance)
        if if_match is not None:
            headers["If-Match"] = f'"{if_match}"'
        url = self._file(store, path)
        return self._commit(self._send(principal, "DELETE", url, headers=headers))

    def commit(
        self,
        principal: Principal,
        store: str,
        operations: Sequence[Operation],
        provenance: Provenance | None = None,
    ) -> CommitResult:
        body = {"operations": [_op(op) for op in operations]}
        url = self._store(store, "/commits")
        headers = _prov_headers(provenance)
        return self._commit(self._send(principal, "POST", url, json=body, headers=headers))

    def revert_file(
        self, principal: Principal, store: str, path: str, to_version: int,
        provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        return self._edit(principal, store, path, ":revert", {"to_version": to_version},
                          provenance)  # fmt: skip

    def revert_commit(
        self, principal: Principal, store: str, commit_id: str,
        provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        url = self._store(store, f"/commits/{quote(commit_id, safe='')}/revert")
        headers = _prov_headers(provenance)
        return self._commit(self._send(principal, "POST", url, headers=headers))

    def redact(
        self, principal: Principal, store: str, path: str, version: int, *, dry_run: bool = False
    ) -> RedactionPlan:
        url = self._file(store, path, ":redact")
        body = {"version": version, "dry_run": dry_run}
        plan: RedactionPlan = from_json(RedactionPlan, self._send(principal, "POST", url,
                                                                  json=body).json())  # fmt: skip
        return plan

    # --- reads ------------------------------------------------------------------------------

    def read(
        self,
        principal: Principal,
        store: str,
        path: str,
        *,
        version: int | None = None,
        lines: tuple[int, int | None] | None = None,
    ) -> FileView:
        span = None
        if lines is not None:
            span = f"{lines[0]}-{'' if lines[1] is None else lines[1]}"
        params = {"format": "json", "version": version, "lines": span}
        response = self._send(principal, "GET", self._file(store, path), params=params)
        found: FileView = from_json(FileView, response.json())
        assert response.headers["ETag"] == f'"{found.sha256}-json"'  # one per representation
        assert response.headers["Vary"] == "Accept"
        raw = self._send(
            principal, "GET", self._file(store, path), params={**params, "format": None}
        )
        assert raw.headers["ETag"] == f'"{found.sha256}"'
        assert raw.content == found.content.encode("utf-8", "surrogatepass")  # raw = JSON's
        return found

    def iter_files(self, principal: Principal, store: str, prefix: str = "/") -> Iterator[FileView]:
        for entry in self.ls(principal, store, prefix, depth=None):
            yield self.read(principal, store, entry.path)

    def ls(
        self, principal: Principal, store: str, prefix: str = "/", *, depth: int | None = 1
    ) -> list[Entry]:
        params = {"prefix": prefix, "depth": depth or 1, "recursive": depth is None, "limit": 2}
        return [from_json(Entry, e) for e in self._pages(principal, self._store(store, "/tree"),
                                                          params)]  # fmt: skip

    def glob(self, principal: Principal, store: str, pattern: str) -> list[str]:
        params = {"pattern": pattern, "limit": 2}
        return [str(p) for p in self._pages(principal, self._store(store, "/glob"), params)]

    def grep(
        self, principal: Principal, store: str, pattern: str, *, prefix: str = "/",
        ignore_case: bool = False, context: int = 0, limit: int = 1000,
    ) -> list[GrepMatch]:  # fmt: skip
        params = {"pattern": pattern, "prefix": prefix, "ignore_case": ignore_case,
                  "context": context, "limit": min(limit, 1000)}  # fmt: skip
        url = self._store(store, "/grep")
        page = self._send(principal, "GET", url, params=params).json()
        return [from_json(GrepMatch, m) for m in page["items"]]

    def search(
        self, principal: Principal, store: str, query: str, *, prefix: str = "/", limit: int = 10
    ) -> list[SearchHit]:
        params = {"q": query, "prefix": prefix, "limit": limit}
        page = self._send(principal, "GET", self._store(store, "/search"), params=params).json()
        return [from_json(SearchHit, h) for h in page["items"]]

    def history(
        self, principal: Principal, store: str, *, actor: str | None = None,
        session: str | None = None, prefix: str | None = None,
        since: dt.datetime | None = None, until: dt.datetime | None = None,
        before_revision: int | None = None, limit: int = 50,
    ) -> list[CommitInfo]:  # fmt: skip
        if before_revision is not None:
            raise Unsupported("REST pages commits by cursor, not by a revision")
        params = {"actor": actor, "session": session, "prefix": prefix, "since": _iso(since),
                  "until": _iso(until), "limit": min(limit, 1000)}  # fmt: skip
        page = self._send(principal, "GET", self._store(store, "/commits"), params=params).json()
        return [from_json(CommitInfo, c) for c in page["items"]]

    def file_history(
        self, principal: Principal, store: str, path: str, *, limit: int | None = None
    ) -> list[VersionInfo]:
        url = self._file(store, path, kind="versions")
        found = self._pages(principal, url, {"limit": 2})
        return [from_json(VersionInfo, v) for v in found][:limit]

    def diff(
        self, principal: Principal, store: str, path: str, a: int, b: int | None = None
    ) -> str:
        url = self._file(store, path, kind="diff")
        return str(self._send(principal, "GET", url, params={"a": a, "b": b}).json()["diff"])

    # --- stores -----------------------------------------------------------------------------

    def create_store(self, principal: Principal, name: str, *, exist_ok: bool = False) -> StoreInfo:
        body = {"name": name, "exist_ok": exist_ok}
        info: StoreInfo = from_json(StoreInfo, self._send(principal, "POST", "/v1/stores",
                                                          json=body).json())  # fmt: skip
        return info

    def list_stores(self, principal: Principal) -> list[StoreInfo]:
        return [from_json(StoreInfo, s) for s in self._pages(principal, "/v1/stores",
                                                              {"limit": 2})]  # fmt: skip

    def store_info(self, principal: Principal, name: str) -> StoreInfo:
        info: StoreInfo = from_json(StoreInfo, self._send(principal, "GET",
                                                          self._store(name)).json())  # fmt: skip
        return info

    def archive_store(self, principal: Principal, name: str) -> StoreInfo:
        url = self._store(name, "/archive")
        info: StoreInfo = from_json(StoreInfo, self._send(principal, "POST", url).json())
        return info

    def delete_store(self, principal: Principal, name: str) -> None:
        response = self._send(principal, "DELETE", self._store(name))
        assert response.status_code == 204


class SdkDriver:
    """The contract through ``memdir.Client`` (one client per principal) on a live server."""

    def __init__(self, service: MemoryService, url: str, tokens: Tokens) -> None:
        self.name = "sdk"
        self.service = service
        self.url = url
        self.tokens = tokens
        self.clients: dict[str, memdir.Client] = {}

    def actor_id(self, principal: Principal) -> str:
        return self.tokens.acting(principal).id

    def client(self, principal: Principal) -> memdir.Client:
        token = self.tokens.token(principal)
        if token not in self.clients:
            self.clients[token] = memdir.Client(self.url, token, max_retries=0)
        return self.clients[token]

    def close(self) -> None:
        for client in self.clients.values():
            client.close()

    def write(self, principal: Principal, store: str, path: str, content: str,
              **kwargs: Any) -> CommitResult:  # fmt: skip
        return self.client(principal).write(path, content, store=store, **kwargs)

    def str_replace(self, principal: Principal, store: str, path: str, old: str, new: str,
                    **kwargs: Any) -> CommitResult:  # fmt: skip
        return self.client(principal).str_replace(path, old, new, store=store, **kwargs)

    def insert(self, principal: Principal, store: str, path: str, line: int, text: str,
               **kwargs: Any) -> CommitResult:  # fmt: skip
        return self.client(principal).insert(path, line, text, store=store, **kwargs)

    def delete(self, principal: Principal, store: str, path: str, **kwargs: Any) -> CommitResult:
        return self.client(principal).delete(path, store=store, **kwargs)

    def rename(self, principal: Principal, store: str, path: str, new_path: str,
               **kwargs: Any) -> CommitResult:  # fmt: skip
        return self.client(principal).rename(path, new_path, store=store, **kwargs)

    def commit(self, principal: Principal, store: str, operations: Sequence[Operation],
               provenance: Provenance | None = None) -> CommitResult:  # fmt: skip
        return self.client(principal).commit(operations, store=store, provenance=provenance)

    def revert_file(self, principal: Principal, store: str, path: str, to_version: int,
                    provenance: Provenance | None = None) -> CommitResult:  # fmt: skip
        return self.client(principal).revert(path, to_version, store=store, provenance=provenance)

    def revert_commit(self, principal: Principal, store: str, commit_id: str,
                      provenance: Provenance | None = None) -> CommitResult:  # fmt: skip
        client = self.client(principal)
        return client.revert_commit(commit_id, store=store, provenance=provenance)

    def redact(self, principal: Principal, store: str, path: str, version: int, *,
               dry_run: bool = False) -> RedactionPlan:  # fmt: skip
        return self.client(principal).redact(path, version, dry_run=dry_run, store=store)

    def read(self, principal: Principal, store: str, path: str, **kwargs: Any) -> FileView:
        return self.client(principal).read(path, store=store, **kwargs)

    def iter_files(self, principal: Principal, store: str, prefix: str = "/") -> Iterator[FileView]:
        client = self.client(principal)
        for entry in client.ls(prefix, recursive=True, store=store):
            yield client.read(entry.path, store=store)

    def ls(self, principal: Principal, store: str, prefix: str = "/", *,
           depth: int | None = 1) -> list[Entry]:  # fmt: skip
        client = self.client(principal)
        return client.ls(prefix, depth=depth or 1, recursive=depth is None, store=store)

    def glob(self, principal: Principal, store: str, pattern: str) -> list[str]:
        return self.client(principal).glob(pattern, store=store)

    def grep(self, principal: Principal, store: str, pattern: str, *, limit: int = 1000,
             **kwargs: Any) -> list[GrepMatch]:  # fmt: skip
        return self.client(principal).grep(pattern, limit=limit, store=store, **kwargs)

    def search(self, principal: Principal, store: str, query: str, **kwargs: Any
               ) -> list[SearchHit]:  # fmt: skip
        return self.client(principal).search(query, store=store, **kwargs)

    def history(self, principal: Principal, store: str, *, before_revision: int | None = None,
                **kwargs: Any) -> list[CommitInfo]:  # fmt: skip
        if before_revision is not None:
            raise Unsupported("the SDK pages commits by cursor, not by a revision")
        return self.client(principal).commits(store=store, **kwargs)

    def file_history(self, principal: Principal, store: str, path: str, *,
                     limit: int | None = None) -> list[VersionInfo]:  # fmt: skip
        return self.client(principal).history(path, limit=limit, store=store)

    def diff(self, principal: Principal, store: str, path: str, a: int, b: int | None = None
             ) -> str:  # fmt: skip
        return self.client(principal).diff(path, a, b, store=store)

    def create_store(self, principal: Principal, name: str, *, exist_ok: bool = False
                     ) -> StoreInfo:  # fmt: skip
        return self.client(principal).create_store(name, exist_ok=exist_ok)

    def list_stores(self, principal: Principal) -> list[StoreInfo]:
        return self.client(principal).stores()

    def store_info(self, principal: Principal, name: str) -> StoreInfo:
        return self.client(principal).store_info(name)

    def archive_store(self, principal: Principal, name: str) -> StoreInfo:
        return self.client(principal).archive_store(name)

    def delete_store(self, principal: Principal, name: str) -> None:
        self.client(principal).delete_store(name)


# --- MCP ------------------------------------------------------------------------------------

#: How the tools answer (``memdir.mcp.render``), parsed back.
_VIEW_LINE = re.compile(r"^\s*\d+\t(.*)$", re.S)
_VIEW_SHA = re.compile(r"\n\nsha256: ([0-9a-f]{64}) \(version (\d+)\)$")
_LISTING = "Here're the files and directories"
_PROPOSED = re.compile(r"^Not applied yet: the change awaits review as proposal (\S+?)[ .]")
_SEARCH_HIT = re.compile(r"^(\d+)\. (/.*) \(version (\d+)\)$")
_GREP_LINE = re.compile(r"^(/[^:]*):(\d+):(.*)$", re.S)
_VERSION = re.compile(
    r"^version (\d+) (\S+ \S+)Z (\w+) (\S+)(?: from (\S+))? by (\S+) \(revision (\d+), sha256 "
    r"(\S+)\)(?: — (.*))?$"
)
_SHA = re.compile(r"[0-9a-f]{64}")

#: The reference memory tool's error lines (``memdir.mcp.render``) and their classes.
_DOCUMENTED: tuple[tuple[re.Pattern[str], type[errors.MemdirError]], ...] = (
    (re.compile(r"^The path \S.* does not exist"), errors.NotFound),
    (re.compile(r"^File \S.* already exists"), errors.PreconditionFailed),
    (re.compile(r"^No replacement was performed"), errors.EditConflict),
    (re.compile(r"^Invalid `insert_line` parameter"), errors.EditConflict),
    (re.compile(r"^The destination \S.* already exists"), errors.PathConflict),
    (re.compile(r"^Precondition failed: "), errors.PreconditionFailed),
)


def mcp_error(text: str, meta: dict[str, Any] | None) -> errors.MemdirError:
    """The exception an MCP error result stands for: by its ``_meta`` type, else its form."""
    described = (meta or {}).get("memdir/error")
    if isinstance(described, dict) and described.get("type") in ERROR_TYPES:
        details = {k: v for k, v in described.items() if k not in ("type", "message")}
        return ERROR_TYPES[described["type"]](text, **details)
    for pattern, cls in _DOCUMENTED:
        if pattern.match(text):
            details: dict[str, Any] = {}
            if cls is errors.PreconditionFailed:
                found = _SHA.findall(text.split(" (if_match", 1)[0])
                details["current_sha256"] = found[0] if found else None
            if text.startswith("No replacement was performed. Multiple occurrences"):
                lines = text.rsplit("in lines: ", 1)[1].split(".")[0]
                details["lines"] = [int(n) for n in lines.split(", ")]
            return cls(text, **details)
    return errors.MemdirError(text)


class McpDriver:
    """The contract through the MCP memory tools, one client session per principal.

    ``call(principal, tool, arguments)`` sends one tool call and returns (text, is_error,
    meta); the fixture provides it over stdio or streamable HTTP. The tools serve one store
    (``default``); other stores, versions, line ranges, lists of a directory, commits of
    several operations and history filters have no tool and raise :class:`Unsupported`.
    """

    def __init__(
        self,
        name: str,
        service: MemoryService,
        call: Callable[[Principal, str, dict[str, Any]], tuple[str, bool, dict[str, Any] | None]],
        actor: Callable[[Principal], str],
    ) -> None:
        self.name = name
        self.service = service
        self._call = call
        self._actor = actor

    def actor_id(self, principal: Principal) -> str:
        return self._actor(principal)

    def raw(
        self, principal: Principal, tool: str, arguments: dict[str, Any]
    ) -> tuple[str, bool, dict[str, Any] | None]:
        """One tool call as sent: (text, is_error, _meta)."""
        return self._call(principal, tool, arguments)

    @staticmethod
    def _store(store: str) -> None:
        if store != "default":
            raise Unsupported(f"the MCP tools serve one store (default), not {store!r}")

    def _tool(self, principal: Principal, tool: str, **arguments: Any) -> str:
        args = {k: v for k, v in arguments.items() if v is not None}
        text, is_error, meta = self._call(principal, tool, args)
        assert "\n" not in text or not is_error, f"a tool error must be one line: {text!r}"
        if is_error:
            raise mcp_error(text, meta)
        proposed = _PROPOSED.match(text)
        if proposed:
            raise errors.Proposed(text, proposal=proposed.group(1))
        return text

    def _newest(self, store: str) -> CommitResult | None:
        with self.service.db.read() as repo:
            row = repo.store(store)
            assert row is not None
            value = repo.conn.execute(
                sa.select(commits.c.result)
                .where(commits.c.store_id == row.id)
                .order_by(commits.c.revision.desc())
                .limit(1)
            ).scalar()
        return None if value is None else CommitResult.from_dict(json.loads(value))

    def _change(self, principal: Principal, store: str, tool: str, provenance: Provenance | None,
                **arguments: Any) -> CommitResult:  # fmt: skip
        self._store(store)
        if provenance is not None and provenance != Provenance():
            raise Unsupported("the MCP tools take no provenance or idempotency key")
        before = self._newest(store)
        self._tool(principal, tool, **arguments)
        after = self._newest(store)
        assert after is not None and (before is None or after.revision > before.revision), (
            f"{tool} reported success but made no commit"
        )
        return after

    def write(
        self, principal: Principal, store: str, path: str, content: str, *,
        if_match: str | None = None, if_absent: bool = False,
        provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        # `create` without if_match is create-only; with it, an overwrite of that content.
        return self._change(principal, store, "create", provenance, path=path,
                            file_text=content, if_match=if_match)  # fmt: skip

    def str_replace(
        self, principal: Principal, store: str, path: str, old: str, new: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        return self._change(principal, store, "str_replace", provenance, path=path,
                            old_str=old, new_str=new, if_match=if_match)  # fmt: skip

    def insert(
        self, principal: Principal, store: str, path: str, line: int, text: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        return self._change(principal, store, "insert", provenance, path=path,
                            insert_line=line, insert_text=text, if_match=if_match)  # fmt: skip

    def delete(
        self, principal: Principal, store: str, path: str, *, if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        return self._change(principal, store, "delete", provenance, path=path,
                            if_match=if_match)  # fmt: skip

    def rename(
        self, principal: Principal, store: str, path: str, new_path: str, *,
        if_match: str | None = None, provenance: Provenance | None = None,
    ) -> CommitResult:  # fmt: skip
        return self._change(principal, store, "rename", provenance, old_path=path,
                            new_path=new_path, if_match=if_match)  # fmt: skip

    def read(
        self, principal: Principal, store: str, path: str, *, version: int | None = None,
        lines: tuple[int, int | None] | None = None,
    ) -> FileView:  # fmt: skip
        self._store(store)
        if version is not None or lines is not None:
            raise Unsupported("MCP view reads the current version whole (line ranges are "
                              "shown numbered, without the final newline)")  # fmt: skip
        text = self._tool(principal, "view", path=path)
        if text.startswith(_LISTING):
            raise errors.NotFound(f"{path} is a directory", path=path)
        trailer = _VIEW_SHA.search(text)
        assert trailer is not None, text
        body = text[: trailer.start()].split("\n")[1:]  # after "Here's the content of ..."
        content = "\n".join(_VIEW_LINE.match(line).group(1) for line in body)  # type: ignore[union-attr]
        return FileView(
            path=path, content=content, sha256=trailer.group(1), version=int(trailer.group(2)),
            size=len(content.encode("utf-8")), file_id=None, revision=None,  # type: ignore[arg-type]
            updated_at=None,  # type: ignore[arg-type]
        )  # fmt: skip

    def search(
        self, principal: Principal, store: str, query: str, *, prefix: str = "/", limit: int = 10
    ) -> list[SearchHit]:
        self._store(store)
        text = self._tool(principal, "search", query=query, prefix=prefix, limit=limit)
        if text.startswith("No memory matches"):
            return []
        rows = text.split("\n")[1:]
        hits = []
        for head, snippet in zip(rows[::2], rows[1::2], strict=True):
            found = _SEARCH_HIT.match(head)
            assert found is not None, head
            hits.append(SearchHit(found.group(2), int(found.group(1)), snippet.strip(),
                                  None, int(found.group(3))))  # type: ignore[arg-type]  # fmt: skip
        return hits

    def grep(
        self, principal: Principal, store: str, pattern: str, *, prefix: str = "/",
        ignore_case: bool = False, context: int = 0, limit: int = 1000,
    ) -> list[GrepMatch]:  # fmt: skip
        self._store(store)
        if context or limit != 1000:
            raise Unsupported("the MCP grep tool shows no context and takes no limit")
        text = self._tool(principal, "grep", pattern=pattern, prefix=prefix,
                          ignore_case=ignore_case)  # fmt: skip
        if text.startswith("No line matches"):
            return []
        out = []
        for line in text.split("\n"):
            found = _GREP_LINE.match(line)
            assert found is not None, line
            out.append(GrepMatch(found.group(1), int(found.group(2)), found.group(3)))
        return out

    def file_history(
        self, principal: Principal, store: str, path: str, *, limit: int | None = None
    ) -> list[VersionInfo]:
        self._store(store)
        text = self._tool(principal, "history", path=path, limit=limit or 200)
        out = []
        for line in text.split("\n")[1:]:
            found = _VERSION.match(line)
            assert found is not None, line
            number, when, op, where, moved, actor, revision, sha, why = found.groups()
            out.append(VersionInfo(
                file_id=None, version=int(number), operation=op, path=where, size=None,  # type: ignore[arg-type]
                sha256=None if sha in ("redacted", "-") else sha, commit=None,  # type: ignore[arg-type]
                revision=int(revision), actor=actor, old_path=moved, redacted=sha == "redacted",
                created_at=dt.datetime.fromisoformat(when).replace(tzinfo=dt.UTC), reason=why,
            ))  # fmt: skip
        return out

    def __getattr__(self, name: str) -> Any:
        if name in {"commit", "revert_file", "revert_commit", "redact", "ls", "glob", "history",
                    "diff", "iter_files", "create_store", "list_stores", "store_info",
                    "archive_store", "delete_store"}:  # fmt: skip

            def unsupported(*args: Any, **kwargs: Any) -> Any:
                raise Unsupported(f"MCP has no tool for {name}")

            return unsupported
        raise AttributeError(name)


# --- the surfaces, served once per module ---------------------------------------------------


def reset(service: MemoryService, store: str = "default") -> None:
    """A fresh, empty ``store`` and no other store: each test starts from nothing."""
    for info in service.list_stores(OWNER):
        service.delete_store(OWNER, info.name)
    service.create_store(OWNER, store)


class AsgiSurface:
    """The REST app in-process (``create_app``), reached by httpx through its ASGI transport."""

    def __init__(self, url: str) -> None:
        from memdir.api import create_app
        from memdir.api.settings import ApiSettings
        from memdir.sdk._local import SyncASGITransport
        from memdir.settings import Settings

        self.service = memdir.open(url, create=True)
        limits = ApiSettings(rate=None, auth_failure_rate=None)
        app = create_app(Settings(), self.service, api_settings=limits)
        self.transport = SyncASGITransport(app)
        self.http = httpx2.Client(transport=self.transport, base_url="http://memdir", timeout=30)
        self.tokens = Tokens(self.service)

    def driver(self) -> RestDriver:
        return RestDriver("asgi", self.service, self.http, self.tokens)

    def close(self) -> None:
        self.http.close()
        self.transport.close()
        self.service.db.close()


class McpSessions:
    """MCP client sessions, one per principal, driven from sync code through a portal.

    ``connect(principal)`` returns an async context manager yielding a connected
    ``mcp.Client``; sessions are opened on first use and closed with :meth:`close`.
    """

    def __init__(self, connect: Callable[[Principal], Any]) -> None:
        from contextlib import ExitStack

        from anyio.from_thread import start_blocking_portal

        self.connect = connect
        self.stack = ExitStack()
        self.portal = self.stack.enter_context(start_blocking_portal())
        self.clients: dict[str, Any] = {}

    def call(
        self, principal: Principal, tool: str, arguments: dict[str, Any]
    ) -> tuple[str, bool, dict[str, Any] | None]:
        if principal.id not in self.clients:
            manager = self.portal.wrap_async_context_manager(self.connect(principal))
            self.clients[principal.id] = self.stack.enter_context(manager)
        client = self.clients[principal.id]
        result = self.portal.call(client.call_tool, tool, arguments)
        assert len(result.content) == 1, result
        text = getattr(result.content[0], "text", None)
        assert isinstance(text, str), result
        return text, bool(result.is_error), result.meta

    def close(self) -> None:
        self.stack.close()


def stdio_connect(url: str) -> Callable[[Principal], Any]:
    """`memdir --db URL [--as PRINCIPAL] mcp` as a subprocess, per principal."""
    import sys

    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    def connect(principal: Principal) -> Any:
        acting = [] if principal.is_owner else ["--as", principal.id]
        owner = ["--as-owner"] if principal.is_owner else []  # never the owner by default
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "memdir.cli", "--db", url, *acting, "mcp", *owner],
            # the memdir this process imported, whatever the environment's install points at
            env={"MEMDIR_LOG_LEVEL": "WARNING", "PYTHONPATH": str(SRC)},
        )  # fmt: skip
        return Client(params, read_timeout_seconds=60)

    return connect


def http_connect(url: str, tokens: Tokens) -> Callable[[Principal], Any]:
    """Streamable HTTP to ``url`` (the server's ``/mcp``) with the principal's bearer token."""
    from contextlib import asynccontextmanager

    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    def connect(principal: Principal) -> Any:
        headers = {"Authorization": f"Bearer {tokens.token(principal)}"}

        @asynccontextmanager
        async def session() -> Any:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                Client(
                    streamable_http_client(url, http_client=http), read_timeout_seconds=60
                ) as client,  # fmt: skip
            ):
                yield client

        return session()

    return connect
