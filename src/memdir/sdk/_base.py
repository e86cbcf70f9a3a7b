"""The request-building base shared by :class:`~memdir.Client` and :class:`~memdir.AsyncClient`.

:class:`_BaseClient` holds the configuration, builds every ``httpx2.Request`` and parses every
response; it never sends. Each public method of the clients is a builder here (``_read``,
``_write``, ...) returning a :data:`~memdir.sdk._wire.Plan`, which the sync client drives with
blocking sends and the async client with awaited ones — the same split as httpx's
``BaseClient.build_request`` / ``Client.send``, so there is one copy of the API, not two.

REST mapping (see ``docs/sdk.md``): files at ``/v1/stores/{store}/files/{path}`` (``PUT`` with
``If-Match`` / ``If-None-Match: *``, verbs as ``…:str_replace``), lists paged by ``cursor``,
errors from the envelope ``{"error": {"type", "message", ...}}`` by ``type``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, TypeVar, cast
from urllib.parse import quote

import httpx2

import memdir
from memdir.core.errors import InvalidInput, NotFound, PreconditionFailed
from memdir.core.model import (
    ChangeBatch,
    ChangeEvent,
    CommitInfo,
    CommitResult,
    Entry,
    FileView,
    GrepMatch,
    Operation,
    Provenance,
    SearchHit,
    StoreInfo,
    VersionInfo,
)
from memdir.core.paths import normalize_prefix, validate_path
from memdir.core.policy import Decision
from memdir.core.results import PrincipalInfo, Proposal, RedactionPlan, TokenInfo
from memdir.sdk._local import LOCAL_URL, LocalApp, open_local
from memdir.sdk._wire import Call, Plan, Sleep, backoff, from_json, single, whole_seconds
from memdir.sdk._wire import fresh_key as _fresh_key
from memdir.sdk._wire import json_body as _json
from memdir.sdk._wire import parser as _parser
from memdir.settings import Settings
from memdir.transcripts.model import ImportReport, TranscriptInfo, TranscriptView

__all__ = ["DEFAULT_MAX_RETRIES", "DEFAULT_TIMEOUT", "PolicyText", "_BaseClient"]

T = TypeVar("T")

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 3
_PROVENANCE_HEADERS = (
    ("session", "X-Memdir-Session"),
    ("transcript", "X-Memdir-Transcript"),
    ("reason", "X-Memdir-Reason"),
    ("source_kind", "X-Memdir-Source-Kind"),
)


@dataclass(frozen=True)
class PolicyText:
    """A store's policy (YAML) and whether it is still the built-in default."""

    text: str
    default: bool


_commit = _parser(CommitResult)
_p = _parser(Proposal)


class _BaseClient:
    """Configuration, request building and response parsing (no sending)."""

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        store: str = "default",
        db: str | None = None,
        principal: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        max_retries: int = DEFAULT_MAX_RETRIES,
        provenance: Provenance | None = None,
        create: bool = False,
    ) -> None:
        if base_url is not None and db is not None:
            raise InvalidInput("give base_url= (a server) or db= (a local database), not both")
        if provenance is not None and provenance.idempotency_key is not None:
            raise InvalidInput(
                "a client-wide idempotency key would make every change a replay of the first; "
                "pass provenance=Provenance(idempotency_key=...) to one call instead"
            )
        if max_retries < 0 or timeout <= 0:
            raise InvalidInput(f"max_retries must be >= 0 and timeout > 0, received "
                               f"{max_retries}, {timeout}")  # fmt: skip
        self.store = store
        self.timeout = timeout
        self.max_retries = max_retries
        self.provenance = provenance or Provenance()
        self._local: LocalApp | None = None
        if base_url is not None and principal is not None:
            raise InvalidInput(
                "principal= chooses who acts on a local database (db=); over HTTP the token "
                "names the principal"
            )
        if (token is None and principal is None) or (base_url is None and db is None):
            settings = Settings.load()  # MEMDIR_TOKEN, MEMDIR_DB, the config file
            token = token if token is not None or principal is not None else settings.token
            db = db if db is not None or base_url is not None else settings.db
        if base_url is None:
            assert db is not None
            self._local = open_local(db, principal=principal, token=token, create=create,
                                     store=store)  # fmt: skip
            self._base, bearer = LOCAL_URL, self._local.bearer
        else:
            self._base, bearer = base_url.rstrip("/"), token
        self._headers = {"User-Agent": f"memdir-sdk/{memdir.__version__}"}
        if bearer:
            self._headers["Authorization"] = f"Bearer {bearer}"

    @property
    def acts_as_owner(self) -> bool:
        """True for an in-process client acting as the database owner (opened on ``db=``
        without ``principal=`` or ``token=``); a server never authenticates the owner."""
        return self._local is not None and self._local.acts_as_owner

    @property
    def base_url(self) -> str:
        """The server's URL (``http://memdir.local`` for the local transport)."""
        return self._base

    def _close_local(self) -> None:
        if self._local is not None:
            self._local.close()
            self._local = None

    # --- building requests -------------------------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        content: bytes | None = None,
        headers: httpx2.Headers | None = None,
        timeout: float | None = None,
    ) -> httpx2.Request:
        all_headers = httpx2.Headers(self._headers)
        if headers is not None:
            all_headers.update(headers)
        return httpx2.Request(
            method,
            self._base + path,
            params={k: v for k, v in (params or {}).items() if v is not None},
            json=json,
            content=content,
            headers=all_headers,
            extensions={"timeout": httpx2.Timeout(timeout or self.timeout).as_dict()},
        )

    def _store_url(self, store: str | None, tail: str = "") -> str:
        return f"/v1/stores/{quote(store or self.store, safe='')}{tail}"

    def _path_url(self, kind: str, store: str | None, path: str, verb: str = "") -> str:
        validate_path(path)
        return self._store_url(store, f"/{kind}/{quote(path[1:], safe='/')}{verb}")

    def _change_headers(
        self, reason: str | None, provenance: Provenance | None, **extra: str
    ) -> httpx2.Headers:
        """Provenance headers (UTF-8) and a fresh ``Idempotency-Key`` for one logical change.

        The key is made here, once per call of a public method, and travels in the built
        request — so every transport retry of that request repeats it and the server applies
        the change at most once.
        """
        merged = self.provenance
        if provenance is not None:
            merged = replace(merged, **{k: v for k, v in asdict(provenance).items() if v})
        if reason is not None:
            merged = replace(merged, reason=reason)
        headers = httpx2.Headers(extra)
        headers["Idempotency-Key"] = merged.idempotency_key or uuid.uuid4().hex
        for field, header in _PROVENANCE_HEADERS:
            value = getattr(merged, field)
            if value:
                headers[header] = value  # httpx encodes set values as UTF-8
        return headers

    def _change(
        self,
        method: str,
        url: str,
        reason: str | None,
        provenance: Provenance | None,
        *,
        json: Any = None,
        if_match: str | None = None,
    ) -> Call[CommitResult]:
        """A mutation answered by a commit (the server deduplicates it by its key)."""
        extra = {"If-Match": f'"{if_match}"'} if if_match is not None else {}
        headers = self._change_headers(reason, provenance, **extra)
        return Call(self._request(method, url, json=json, headers=headers), _commit)

    def _pages(
        self,
        url: str,
        item: type[T],
        params: dict[str, Any],
        limit: int | None,
        page_size: int = 1000,
    ) -> Plan[list[T]]:
        """Every item of a paged list (up to ``limit``), following ``next_cursor``."""
        out: list[T] = []
        cursor: str | None = None
        while limit is None or len(out) < limit:
            size = page_size if limit is None else min(page_size, limit - len(out))
            query = {**params, "cursor": cursor, "limit": size}
            page = yield Call(self._request("GET", url, params=query), _json)
            out.extend(cast(T, from_json(item, value)) for value in page["items"])
            cursor = page.get("next_cursor")
            if cursor is None:
                break
        return out

    # --- files ---------------------------------------------------------------------------------

    def _read(
        self,
        path: str,
        *,
        version: int | None = None,
        lines: tuple[int, int | None] | None = None,
        store: str | None = None,
    ) -> Plan[FileView]:
        """Read a file (or one ``version`` of it; ``lines`` = (first, last or None), 1-based).

        ``FileView.sha256`` is what ``write(..., if_match=)`` expects.
        """
        span = None if lines is None else f"{lines[0]}-{'' if lines[1] is None else lines[1]}"
        params = {"format": "json", "version": version, "lines": span}
        request = self._request("GET", self._path_url("files", store, path), params=params)
        return single(Call(request, _parser(FileView)))

    def _write(
        self,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Create (``if_absent=True``) or overwrite (``if_match=<sha256 you read>``) a file.

        Overwriting an existing file without ``if_match`` raises PreconditionRequired; a
        stale ``if_match`` raises PreconditionFailed with ``details['current_sha256']``.
        """
        if if_match is not None and if_absent:
            raise InvalidInput("if_match and if_absent exclude each other; pass one")
        extra = {"Content-Type": "text/markdown; charset=utf-8"}
        if if_match is not None:
            extra["If-Match"] = f'"{if_match}"'
        elif if_absent:
            extra["If-None-Match"] = "*"
        headers = self._change_headers(reason, provenance, **extra)
        url = self._path_url("files", store, path)
        request = self._request("PUT", url, content=content.encode("utf-8"), headers=headers)
        return single(Call(request, _commit))

    def _str_replace(
        self,
        path: str,
        old: str,
        new: str,
        *,
        if_match: str | None = None,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Replace the one occurrence of ``old`` by ``new``, atomically on the server."""
        url = self._path_url("files", store, path, ":str_replace")
        body = {"old": old, "new": new, "if_match": if_match}
        return single(self._change("POST", url, reason, provenance, json=body))

    def _insert(
        self,
        path: str,
        line: int,
        text: str,
        *,
        if_match: str | None = None,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Insert ``text`` as its own line(s) after line ``line`` (0 = at the top)."""
        url = self._path_url("files", store, path, ":insert")
        body = {"line": line, "text": text, "if_match": if_match}
        return single(self._change("POST", url, reason, provenance, json=body))

    def _delete(
        self,
        path: str,
        *,
        if_match: str | None = None,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Delete a file (its history stays; ``revert`` brings it back)."""
        url = self._path_url("files", store, path)
        return single(self._change("DELETE", url, reason, provenance, if_match=if_match))

    def _rename(
        self,
        path: str,
        new_path: str,
        *,
        if_match: str | None = None,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Move a file; it keeps its id and history and never overwrites ``new_path``."""
        url = self._path_url("files", store, path, ":move")
        body = {"new_path": new_path, "if_match": if_match}
        return single(self._change("POST", url, reason, provenance, json=body))

    def _commit(
        self,
        operations: Sequence[Operation],
        *,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Apply ``operations`` (``memdir.Write``, ``StrReplace``, ...) atomically: all or none."""
        body = {"operations": [_operation(op) for op in operations]}
        url = self._store_url(store, "/commits")
        return single(self._change("POST", url, reason, provenance, json=body))

    def _update(
        self,
        path: str,
        fn: Callable[[str], str],
        *,
        max_attempts: int = 10,
        create: bool = False,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Read, apply ``fn(content) -> new content``, write with ``If-Match``; on a failed
        precondition re-read and re-apply, with jittered exponential backoff (20 ms doubling,
        at most 0.5 s), up to ``max_attempts`` times (then the last PreconditionFailed is
        raised). A file many writers change at once needs a higher limit: one write wins
        each round.

        ``fn`` may run several times, so it must be pure. With ``create=True`` a missing file
        is created from ``fn("")``; otherwise a missing file raises NotFound.
        """
        if max_attempts < 1:
            raise InvalidInput(f"max_attempts must be at least 1, received {max_attempts}")
        attempt = 0
        while True:
            attempt += 1
            try:
                view: FileView | None = yield from self._read(path, store=store)
            except NotFound:
                if not create:
                    raise
                view = None
            new = fn("" if view is None else view.content)
            try:
                result: CommitResult = yield from self._write(
                    path, new, if_match=None if view is None else view.sha256,
                    if_absent=view is None, store=store, reason=reason, provenance=provenance,
                )  # fmt: skip
                return result
            except PreconditionFailed:
                if attempt >= max_attempts:
                    raise
            yield Sleep(backoff(attempt - 1, base=0.01, cap=0.5))

    def _revert(
        self,
        path: str,
        to_version: int,
        *,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Put the content of ``to_version`` back as a new version (a deleted file returns)."""
        url = self._path_url("files", store, path, ":revert")
        body = {"to_version": to_version}
        return single(self._change("POST", url, reason, provenance, json=body))

    def _revert_commit(
        self,
        commit: str,
        *,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Undo every change of a commit as a new commit (Conflict if a file moved on since)."""
        url = self._store_url(store, f"/commits/{quote(commit, safe='')}/revert")
        return single(self._change("POST", url, reason, provenance))

    def _redact(
        self, path: str, version: int, *, dry_run: bool = False, store: str | None = None
    ) -> Plan[RedactionPlan]:
        """Remove a version's content (and every version holding the same content); admin."""
        url = self._path_url("files", store, path, ":redact")
        body = {"version": version, "dry_run": dry_run}
        return single(Call(self._request("POST", url, json=body), _parser(RedactionPlan)))

    def _purge(
        self,
        path: str,
        *,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Remove every version ever stored at ``path`` (admin); a tombstone commit remains."""
        url = self._path_url("files", store, path, ":purge")
        return single(self._change("POST", url, reason, provenance))

    # --- looking around ------------------------------------------------------------------------

    def _ls(
        self,
        prefix: str = "/",
        *,
        depth: int = 1,
        recursive: bool = False,
        store: str | None = None,
    ) -> Plan[list[Entry]]:
        """Files and directories under ``prefix`` (``recursive``: every file), in path order."""
        params = {"prefix": normalize_prefix(prefix), "depth": depth, "recursive": recursive}
        return self._pages(self._store_url(store, "/tree"), Entry, params, None)

    def _glob(self, pattern: str, *, store: str | None = None) -> Plan[list[str]]:
        """Readable live files matching ``pattern`` (``*``, ``?``, ``[...]``, ``**``)."""
        return self._pages(self._store_url(store, "/glob"), str, {"pattern": pattern}, None)

    def _grep(
        self,
        pattern: str,
        *,
        prefix: str = "/",
        ignore_case: bool = False,
        context: int = 0,
        limit: int | None = 100,
        store: str | None = None,
    ) -> Plan[list[GrepMatch]]:
        """Lines of current content matching a regular expression, in path and line order."""
        params = {"pattern": pattern, "prefix": prefix, "ignore_case": ignore_case,
                  "context": context}  # fmt: skip
        return self._pages(self._store_url(store, "/grep"), GrepMatch, params, limit)

    def _search(
        self, query: str, *, prefix: str = "/", limit: int = 10, store: str | None = None
    ) -> Plan[list[SearchHit]]:
        """Ranked full-text search over readable current content, best first."""
        if limit < 1:  # as the service says: an empty page is no answer to a bad limit
            raise InvalidInput(f"limit must be at least 1, received {limit}")
        params = {"q": query, "prefix": prefix}
        return self._pages(self._store_url(store, "/search"), SearchHit, params, limit, 100)

    # --- history -------------------------------------------------------------------------------

    def _history(
        self, path: str, *, limit: int | None = None, store: str | None = None
    ) -> Plan[list[VersionInfo]]:
        """Versions of the file at ``path`` (following renames), newest first."""
        url = self._path_url("versions", store, path)
        return self._pages(url, VersionInfo, {}, limit)

    def _commits(
        self,
        *,
        actor: str | None = None,
        session: str | None = None,
        prefix: str | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        limit: int | None = 50,
        store: str | None = None,
    ) -> Plan[list[CommitInfo]]:
        """The store's history: commits with their provenance, newest first; filters combine."""
        params = {
            "actor": actor,
            "session": session,
            "prefix": prefix,
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
        }
        return self._pages(self._store_url(store, "/commits"), CommitInfo, params, limit)

    def _diff(
        self, path: str, a: int, b: int | None = None, *, store: str | None = None
    ) -> Plan[str]:
        """A unified diff of ``path`` from version ``a`` to version ``b`` (default: now)."""
        url = self._path_url("diff", store, path)
        request = self._request("GET", url, params={"a": a, "b": b})
        return single(Call(request, lambda response: str(response.json()["diff"])))

    # --- change feed ---------------------------------------------------------------------------

    def _changes(
        self, after: int = 0, *, wait: float = 0, limit: int = 100, store: str | None = None
    ) -> Plan[ChangeBatch]:
        """Commits after revision ``after`` the caller may see, oldest first; waits up to
        ``wait`` seconds (at most 60) for the first. Continue from ``next_after``."""
        params = {"after": after, "wait": wait or None, "limit": limit}
        url = self._store_url(store, "/changes")
        request = self._request("GET", url, params=params, timeout=self.timeout + wait)
        return single(Call(request, _change_batch))

    # --- proposals -----------------------------------------------------------------------------

    def _propose(
        self,
        operations: Sequence[Operation],
        *,
        rationale: str | None = None,
        evidence: Any = None,
        statistics: Any = None,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[Proposal]:
        """Queue ``operations`` for review instead of applying them (needs ``propose``)."""
        body = {
            "operations": [_operation(op) for op in operations],
            "rationale": rationale,
            "evidence": evidence,
            "statistics": statistics,
        }
        headers = self._change_headers(reason, provenance)
        request = self._request("POST", self._store_url(store, "/proposals"), json=body,
                                headers=headers)  # fmt: skip
        return single(Call(request, _parser(Proposal)))  # deduplicated by its key

    def _proposals(
        self, *, status: str = "open", limit: int | None = None, store: str | None = None
    ) -> Plan[list[Proposal]]:
        """Proposals the caller may see, newest first (``status="all"`` for every state)."""
        url = self._store_url(store, "/proposals")
        return self._pages(url, Proposal, {"status": status}, limit)

    def _proposal(self, proposal: str, *, store: str | None = None) -> Plan[Proposal]:
        """One proposal: operations, findings, notes (base/current/proposed when conflicted)."""
        url = self._store_url(store, f"/proposals/{quote(proposal, safe='')}")
        return single(Call(self._request("GET", url), _parser(Proposal)))

    def _review(
        self, proposal: str, verb: str, body: dict[str, Any], store: str | None
    ) -> httpx2.Request:
        url = self._store_url(store, f"/proposals/{quote(proposal, safe='')}/{verb}")
        return self._request("POST", url, json=body, headers=_fresh_key())

    def _accept_proposal(
        self,
        proposal: str,
        *,
        comment: str | None = None,
        revision: str | None = None,
        store: str | None = None,
    ) -> Plan[CommitResult]:
        """Apply a proposal (Conflict if it no longer applies or is not at ``revision``)."""
        body = {"comment": comment, **({"revision": revision} if revision else {})}
        return single(Call(self._review(proposal, "accept", body, store), _commit))

    def _reject_proposal(
        self, proposal: str, *, comment: str | None = None, store: str | None = None
    ) -> Plan[Proposal]:
        """Reject an open or conflicted proposal."""
        return single(Call(self._review(proposal, "reject", {"comment": comment}, store), _p))

    def _rebase_proposal(
        self, proposal: str, *, content: str | None = None, store: str | None = None
    ) -> Plan[Proposal]:
        """Rebase onto the current files, optionally replacing a one-file change by ``content``."""
        return single(Call(self._review(proposal, "rebase", {"content": content}, store), _p))

    # --- stores, principals, tokens, policy ----------------------------------------------------

    # --- transcripts ---------------------------------------------------------------------------

    def _transcript_url(self, transcript: str, store: str | None, tail: str = "") -> str:
        return self._store_url(store, f"/transcripts/{quote(transcript, safe='')}{tail}")

    def _import_transcript(
        self,
        data: bytes,
        format: str | None = None,
        *,
        name: str | None = None,
        project: str | None = None,
        agent: str | None = None,
        user: str | None = None,
        task: str | None = None,
        labels: Sequence[str] = (),
        store: str | None = None,
    ) -> Plan[ImportReport]:
        """Import (push) the sessions in a transcript file's bytes (``format`` skips detection,
        ``name`` is the file's name); ``project``/``agent``/``user``/``task`` label new sessions
        (scopes), ``labels`` are free. Re-importing is a no-op; a grown session adds its new
        events."""
        params = {"format": format, "name": name, "project": project, "agent": agent,
                  "user": user, "task": task, "label": list(labels) or None}  # fmt: skip
        headers = httpx2.Headers({"Content-Type": "application/x-ndjson"})
        request = self._request("POST", self._store_url(store, "/transcripts"), params=params,
                                content=bytes(data), headers=headers)  # fmt: skip
        return single(Call(request, _parser(ImportReport)))

    def _transcripts(
        self,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        agent: str | None = None,
        project: str | None = None,
        user: str | None = None,
        task: str | None = None,
        outcome: str | None = None,
        has_errors: bool | None = None,
        format: str | None = None,
        limit: int | None = 100,
        store: str | None = None,
    ) -> Plan[list[TranscriptInfo]]:
        """The transcripts the caller may read, newest first; filters combine."""
        params = {
            "since": since.isoformat() if since else None,
            "until": until.isoformat() if until else None,
            "agent": agent, "project": project, "user": user, "task": task,
            "outcome": outcome, "has_errors": "true" if has_errors else None, "format": format,
        }  # fmt: skip
        url = self._store_url(store, "/transcripts")
        return self._pages(url, TranscriptInfo, params, limit)

    def _transcript(self, transcript: str, *, store: str | None = None) -> Plan[TranscriptView]:
        """One transcript (id or unique prefix): header, meta, events, parent, sub-agents."""
        request = self._request("GET", self._transcript_url(transcript, store))
        return single(Call(request, _parser(TranscriptView)))

    def _export_transcript(self, transcript: str, *, store: str | None = None) -> Plan[str]:
        """The transcript in the generic JSONL form (re-importable with ``import_transcript``)."""
        request = self._request("GET", self._transcript_url(transcript, store, "/export"))
        return single(Call(request, lambda response: response.text))

    def _delete_transcript(
        self, transcript: str, *, store: str | None = None
    ) -> Plan[TranscriptInfo]:
        """Purge a transcript and all its events for good (``admin`` on its scopes)."""
        request = self._request("DELETE", self._transcript_url(transcript, store))
        return single(Call(request, _parser(TranscriptInfo), retry_safe=False))

    def _stores(self) -> Plan[list[StoreInfo]]:
        """Every store, by name, with its revision and file count."""
        return self._pages("/v1/stores", StoreInfo, {}, None)

    def _store_info(self, name: str | None = None) -> Plan[StoreInfo]:
        """One store (default: the client's)."""
        return single(Call(self._request("GET", self._store_url(name)), _parser(StoreInfo)))

    def _create_store(self, name: str, *, exist_ok: bool = False) -> Plan[StoreInfo]:
        """Create a store (admins); ``exist_ok`` makes an existing one a success."""
        body = {"name": name, "exist_ok": exist_ok}
        request = self._request("POST", "/v1/stores", json=body, headers=_fresh_key())
        return single(Call(request, _parser(StoreInfo)))

    def _archive_store(self, name: str) -> Plan[StoreInfo]:
        """Make a store read-only for good (admins)."""
        request = self._request("POST", self._store_url(name, "/archive"), headers=_fresh_key())
        return single(Call(request, _parser(StoreInfo)))

    def _delete_store(self, name: str) -> Plan[None]:
        """Delete a store with all its files, history and proposals (admins)."""
        request = self._request("DELETE", self._store_url(name), headers=_fresh_key())
        return single(Call(request, lambda _: None))

    def _me(self) -> Plan[PrincipalInfo]:
        """The principal this client acts as."""
        return single(Call(self._request("GET", "/v1/me"), _parser(PrincipalInfo)))

    def _principals(self) -> Plan[list[PrincipalInfo]]:
        """Every registered principal (admins)."""
        return self._pages("/v1/principals", PrincipalInfo, {}, None)

    def _principal(self, principal: str) -> Plan[PrincipalInfo]:
        """One principal (yourself, or anyone for admins)."""
        url = f"/v1/principals/{quote(principal, safe='')}"
        return single(Call(self._request("GET", url), _parser(PrincipalInfo)))

    def _add_principal(
        self,
        principal: str,
        *,
        groups: Sequence[str] = (),
        projects: Sequence[str] = (),
        tasks: Sequence[str] = (),
        acts_for: str | None = None,
    ) -> Plan[PrincipalInfo]:
        """Register ``agent:NAME``, ``user:NAME`` or ``service:NAME`` (admins)."""
        body = {"id": principal, "groups": list(groups), "projects": list(projects),
                "tasks": list(tasks), "acts_for": acts_for}  # fmt: skip
        request = self._request("POST", "/v1/principals", json=body, headers=_fresh_key())
        return single(Call(request, _parser(PrincipalInfo)))

    def _remove_principal(self, principal: str) -> Plan[None]:
        """Remove a principal and revoke its tokens (admins)."""
        url = f"/v1/principals/{quote(principal, safe='')}"
        return single(Call(self._request("DELETE", url), lambda _: None, retry_safe=False))

    def _tokens(self, principal: str | None = None) -> Plan[list[TokenInfo]]:
        """Tokens (never their secrets), oldest first (admins)."""
        return self._pages("/v1/tokens", TokenInfo, {"principal": principal}, None)

    def _create_token(
        self,
        principal: str,
        *,
        name: str | None = None,
        paths: Sequence[str] = ("/**",),
        actions: Sequence[str] = ("read", "propose", "write", "admin"),
        expires_in: float | dt.timedelta | None = None,
    ) -> Plan[TokenInfo]:
        """A token for ``principal``, narrowed to ``paths`` and ``actions``; the secret is in
        ``TokenInfo.token`` of this result only (admins)."""
        body = {"principal": principal, "name": name, "paths": list(paths),
                "actions": list(actions), "expires_in": whole_seconds(expires_in)}  # fmt: skip
        request = self._request("POST", "/v1/tokens", json=body)
        return single(Call(request, _parser(TokenInfo), retry_safe=False))

    def _revoke_token(self, token_id: str) -> Plan[TokenInfo]:
        """Revoke a token by its id (``tok_...``); it stops working at once (admins)."""
        url = f"/v1/tokens/{quote(token_id, safe='')}/revoke"
        return single(Call(self._request("POST", url), _parser(TokenInfo)))

    def _policy(self, *, store: str | None = None) -> Plan[PolicyText]:
        """The policy in force (YAML) and whether it is the built-in default (``admin``)."""
        request = self._request("GET", self._store_url(store, "/policy"))
        return single(Call(request, lambda r: PolicyText(r.json()["policy"], r.json()["default"])))

    def _set_policy(
        self,
        text: str,
        *,
        store: str | None = None,
        reason: str | None = None,
        provenance: Provenance | None = None,
    ) -> Plan[CommitResult]:
        """Replace the whole policy (YAML); a malformed one is refused and changes nothing."""
        url = self._store_url(store, "/policy")
        return single(self._change("PUT", url, reason, provenance, json={"policy": text}))

    def _check_policy(
        self, action: str, path: str, *, principal: str | None = None, store: str | None = None
    ) -> Plan[Decision]:
        """Whether ``principal`` (default: you) may do ``action`` on ``path``, and why."""
        params = {"action": action, "path": path, "principal": principal}
        request = self._request("GET", self._store_url(store, "/policy/check"), params=params)
        return single(Call(request, _parser(Decision)))


def _operation(op: Operation) -> dict[str, Any]:
    """An operation as the REST body takes it (defaults left out)."""
    data = asdict(op)
    return {k: v for k, v in data.items() if v is not None and not (k == "if_absent" and not v)}


def _change_batch(response: httpx2.Response) -> ChangeBatch:
    page = response.json()
    events = tuple(cast(ChangeEvent, from_json(ChangeEvent, e)) for e in page["items"])
    return ChangeBatch(events, int(page["next_after"]), int(page["revision"]))
