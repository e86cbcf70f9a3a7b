"""``memdir.Client``: the blocking client. It only sends; :class:`_BaseClient` builds."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import httpx2

from memdir.core.errors import MemdirError
from memdir.core.model import ChangeEvent, Provenance
from memdir.sdk import _checkout, _context, _dreams
from memdir.sdk._base import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, _BaseClient
from memdir.sdk._local import SyncASGITransport
from memdir.sdk._wire import (
    Call,
    Plan,
    Sleep,
    error_from_response,
    is_error,
    present,
    retry_delay,
    unreachable,
)

__all__ = ["Client"]

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(builder: Callable[Concatenate[_BaseClient, P], Plan[T]]) -> Callable[
    Concatenate[Client, P], T
]:  # fmt: skip
    """The public method for a builder: build its plan, then drive it with blocking sends."""

    def method(self: Client, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self._drive(builder(self, *args, **kwargs))

    present(method, builder, "Client")
    return method


class Client(_BaseClient):
    """A blocking memdir client, over HTTP (``base_url`` + ``token``) or in-process over a
    database (``db="sqlite:///..."``, acting as the owner, ``principal=`` or ``token=``).

    Every method raises the exception tree of :mod:`memdir.core.errors` mapped from the
    server's error envelope; mutations carry an ``Idempotency-Key`` reused across retries.
    Thread-safe; close it (or use it as a context manager) to release connections.
    """

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
        transport: httpx2.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token, store=store, db=db, principal=principal, timeout=timeout,
            max_retries=max_retries, provenance=provenance, create=create,
        )  # fmt: skip
        try:
            if transport is None and self._local is not None:
                transport = SyncASGITransport(self._local.app)
            self._http = httpx2.Client(transport=transport, timeout=timeout)
        except BaseException:
            self._close_local()
            raise

    def close(self) -> None:
        """Close connections (and, for the local transport, the database)."""
        self._http.close()
        self._close_local()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- sending -------------------------------------------------------------------------------

    def _send(self, call: Call[T]) -> T:
        """Send one call, retrying as :func:`retry_delay` allows; parse or raise."""
        attempt = 0
        while True:
            try:
                response = self._http.send(call.request)
            except httpx2.TransportError as error:
                delay = retry_delay(call, attempt, self.max_retries, error=error)
                if delay is None:
                    raise unreachable(self.base_url, error) from error
            else:
                delay = retry_delay(call, attempt, self.max_retries, response=response)
                if delay is None:
                    if is_error(response):
                        raise error_from_response(response)
                    return call.parse(response)
            attempt += 1
            time.sleep(delay)

    def _drive(self, plan: Plan[T]) -> T:
        """Run a plan: send its calls, sleep its sleeps, throw failures back into it."""
        try:
            step = next(plan)
            while True:
                try:
                    value: Any = None
                    if isinstance(step, Sleep):
                        time.sleep(step.seconds)
                    else:
                        value = self._send(step)
                except MemdirError as error:
                    step = plan.throw(error)
                else:
                    step = plan.send(value)
        except StopIteration as stop:
            return cast(T, stop.value)

    # --- the API (built once, in _BaseClient) ----------------------------------------------------

    read = _blocking(_BaseClient._read)
    write = _blocking(_BaseClient._write)
    str_replace = _blocking(_BaseClient._str_replace)
    insert = _blocking(_BaseClient._insert)
    delete = _blocking(_BaseClient._delete)
    rename = _blocking(_BaseClient._rename)
    commit = _blocking(_BaseClient._commit)
    update = _blocking(_BaseClient._update)
    revert = _blocking(_BaseClient._revert)
    revert_commit = _blocking(_BaseClient._revert_commit)
    redact = _blocking(_BaseClient._redact)
    purge = _blocking(_BaseClient._purge)
    ls = _blocking(_BaseClient._ls)
    glob = _blocking(_BaseClient._glob)
    grep = _blocking(_BaseClient._grep)
    search = _blocking(_BaseClient._search)
    history = _blocking(_BaseClient._history)
    commits = _blocking(_BaseClient._commits)
    diff = _blocking(_BaseClient._diff)
    changes = _blocking(_BaseClient._changes)
    propose = _blocking(_BaseClient._propose)
    proposals = _blocking(_BaseClient._proposals)
    proposal = _blocking(_BaseClient._proposal)
    accept_proposal = _blocking(_BaseClient._accept_proposal)
    reject_proposal = _blocking(_BaseClient._reject_proposal)
    rebase_proposal = _blocking(_BaseClient._rebase_proposal)
    import_transcript = _blocking(_BaseClient._import_transcript)
    transcripts = _blocking(_BaseClient._transcripts)
    transcript = _blocking(_BaseClient._transcript)
    export_transcript = _blocking(_BaseClient._export_transcript)
    delete_transcript = _blocking(_BaseClient._delete_transcript)
    stores = _blocking(_BaseClient._stores)
    store_info = _blocking(_BaseClient._store_info)
    create_store = _blocking(_BaseClient._create_store)
    archive_store = _blocking(_BaseClient._archive_store)
    delete_store = _blocking(_BaseClient._delete_store)
    me = _blocking(_BaseClient._me)
    principals = _blocking(_BaseClient._principals)
    principal = _blocking(_BaseClient._principal)
    add_principal = _blocking(_BaseClient._add_principal)
    remove_principal = _blocking(_BaseClient._remove_principal)
    tokens = _blocking(_BaseClient._tokens)
    create_token = _blocking(_BaseClient._create_token)
    revoke_token = _blocking(_BaseClient._revoke_token)
    policy = _blocking(_BaseClient._policy)
    set_policy = _blocking(_BaseClient._set_policy)
    check_policy = _blocking(_BaseClient._check_policy)
    dream = _blocking(_dreams._dream)
    dream_runs = _blocking(_dreams._dream_runs)
    dream_run = _blocking(_dreams._dream_run)
    dream_report = _blocking(_dreams._dream_report)
    dream_quality = _blocking(_dreams._dream_quality)
    resume_dream = _blocking(_dreams._resume_dream)
    revert_dream_run = _blocking(_dreams._revert_dream_run)
    context = _blocking(_context._context)
    context_data = _blocking(_context._context_data)
    stale = _blocking(_context._stale)
    checkout_files = _blocking(_checkout._checkout_files)
    path_rights = _blocking(_checkout._path_rights)

    def follow(
        self, after: int = 0, *, wait: float = 30.0, store: str | None = None
    ) -> Iterator[ChangeEvent]:
        """Every change event after revision ``after``, then new ones as they are committed
        (long polls of up to ``wait`` seconds); endless — break out of the loop to stop."""
        while True:
            batch = self.changes(after, wait=wait, store=store)
            yield from batch.events
            after = batch.next_after
