"""``memdir.AsyncClient``: the asyncio / trio client. It only sends; :class:`_BaseClient` builds."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

import anyio
import httpx2

from memdir.core.errors import MemdirError
from memdir.core.model import ChangeEvent, Provenance
from memdir.sdk import _checkout, _context, _dreams
from memdir.sdk._base import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, _BaseClient
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

__all__ = ["AsyncClient"]

P = ParamSpec("P")
T = TypeVar("T")


def _awaitable(builder: Callable[Concatenate[_BaseClient, P], Plan[T]]) -> Callable[
    Concatenate[AsyncClient, P], Coroutine[Any, Any, T]
]:  # fmt: skip
    """The public coroutine method for a builder: build its plan, then drive it."""

    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self._drive(builder(self, *args, **kwargs))

    present(method, builder, "AsyncClient")
    return method


class AsyncClient(_BaseClient):
    """The async twin of :class:`memdir.Client`: the same methods, awaited.

    Over HTTP (``base_url`` + ``token``) or in-process over a database (``db=``), through
    ``httpx2.ASGITransport``. Use ``async with`` or ``await client.aclose()``.
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
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url, token, store=store, db=db, principal=principal, timeout=timeout,
            max_retries=max_retries, provenance=provenance, create=create,
        )  # fmt: skip
        if transport is None and self._local is not None:
            transport = httpx2.ASGITransport(app=self._local.app)
        try:
            self._http = httpx2.AsyncClient(transport=transport, timeout=timeout)
        except BaseException:
            self._close_local()
            raise

    async def aclose(self) -> None:
        """Close connections (and, for the local transport, the database)."""
        await self._http.aclose()
        self._close_local()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # --- sending -------------------------------------------------------------------------------

    async def _send(self, call: Call[T]) -> T:
        """Send one call, retrying as :func:`retry_delay` allows; parse or raise."""
        attempt = 0
        while True:
            try:
                response = await self._http.send(call.request)
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
            await anyio.sleep(delay)

    async def _drive(self, plan: Plan[T]) -> T:
        """Run a plan: send its calls, sleep its sleeps, throw failures back into it."""
        try:
            step = next(plan)
            while True:
                try:
                    value: Any = None
                    if isinstance(step, Sleep):
                        await anyio.sleep(step.seconds)
                    else:
                        value = await self._send(step)
                except MemdirError as error:
                    step = plan.throw(error)
                else:
                    step = plan.send(value)
        except StopIteration as stop:
            return cast(T, stop.value)

    # --- the API (built once, in _BaseClient) ----------------------------------------------------

    read = _awaitable(_BaseClient._read)
    write = _awaitable(_BaseClient._write)
    str_replace = _awaitable(_BaseClient._str_replace)
    insert = _awaitable(_BaseClient._insert)
    delete = _awaitable(_BaseClient._delete)
    rename = _awaitable(_BaseClient._rename)
    commit = _awaitable(_BaseClient._commit)
    update = _awaitable(_BaseClient._update)
    revert = _awaitable(_BaseClient._revert)
    revert_commit = _awaitable(_BaseClient._revert_commit)
    redact = _awaitable(_BaseClient._redact)
    purge = _awaitable(_BaseClient._purge)
    ls = _awaitable(_BaseClient._ls)
    glob = _awaitable(_BaseClient._glob)
    grep = _awaitable(_BaseClient._grep)
    search = _awaitable(_BaseClient._search)
    history = _awaitable(_BaseClient._history)
    commits = _awaitable(_BaseClient._commits)
    diff = _awaitable(_BaseClient._diff)
    changes = _awaitable(_BaseClient._changes)
    propose = _awaitable(_BaseClient._propose)
    proposals = _awaitable(_BaseClient._proposals)
    proposal = _awaitable(_BaseClient._proposal)
    accept_proposal = _awaitable(_BaseClient._accept_proposal)
    reject_proposal = _awaitable(_BaseClient._reject_proposal)
    rebase_proposal = _awaitable(_BaseClient._rebase_proposal)
    import_transcript = _awaitable(_BaseClient._import_transcript)
    transcripts = _awaitable(_BaseClient._transcripts)
    transcript = _awaitable(_BaseClient._transcript)
    export_transcript = _awaitable(_BaseClient._export_transcript)
    delete_transcript = _awaitable(_BaseClient._delete_transcript)
    stores = _awaitable(_BaseClient._stores)
    store_info = _awaitable(_BaseClient._store_info)
    create_store = _awaitable(_BaseClient._create_store)
    archive_store = _awaitable(_BaseClient._archive_store)
    delete_store = _awaitable(_BaseClient._delete_store)
    me = _awaitable(_BaseClient._me)
    principals = _awaitable(_BaseClient._principals)
    principal = _awaitable(_BaseClient._principal)
    add_principal = _awaitable(_BaseClient._add_principal)
    remove_principal = _awaitable(_BaseClient._remove_principal)
    tokens = _awaitable(_BaseClient._tokens)
    create_token = _awaitable(_BaseClient._create_token)
    revoke_token = _awaitable(_BaseClient._revoke_token)
    policy = _awaitable(_BaseClient._policy)
    set_policy = _awaitable(_BaseClient._set_policy)
    check_policy = _awaitable(_BaseClient._check_policy)
    dream = _awaitable(_dreams._dream)
    dream_runs = _awaitable(_dreams._dream_runs)
    dream_run = _awaitable(_dreams._dream_run)
    dream_report = _awaitable(_dreams._dream_report)
    dream_quality = _awaitable(_dreams._dream_quality)
    resume_dream = _awaitable(_dreams._resume_dream)
    revert_dream_run = _awaitable(_dreams._revert_dream_run)
    context = _awaitable(_context._context)
    context_data = _awaitable(_context._context_data)
    stale = _awaitable(_context._stale)
    checkout_files = _awaitable(_checkout._checkout_files)
    path_rights = _awaitable(_checkout._path_rights)

    async def follow(
        self, after: int = 0, *, wait: float = 30.0, store: str | None = None
    ) -> AsyncIterator[ChangeEvent]:
        """Every change event after revision ``after``, then new ones as they are committed
        (long polls of up to ``wait`` seconds); endless — break out of the loop to stop."""
        while True:
            batch = await self.changes(after, wait=wait, store=store)
            for event in batch.events:
                yield event
            after = batch.next_after
