"""``memdir sync DIR --watch``: sync when local files settle or the store's change feed moves.

Two followers feed one trigger: ``watchfiles`` reports local changes once they have settled
(its debounce: no new event for ``settle_ms``), and a long poll of the change feed reports
commits after the revision the checkout has seen. Each trigger runs one :func:`sync` — never
two at once — so an agent writing into the directory and another client writing through REST
or MCP converge through the same compare-and-swap rules as a manual sync: both changes
survive, or the conflict is reported and both texts kept.

A sync's own writes (pulled files, the state file) wake the watcher again; that sync finds
nothing to do, so the loop settles.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memdir.checkout.state import THEIRS, State, ignored
from memdir.checkout.sync import SyncReport, sync
from memdir.core.errors import MemdirError

if TYPE_CHECKING:
    from memdir.sdk import Client

__all__ = ["watch"]

#: Seconds one long poll of the change feed waits (also how quickly a stop is noticed).
FEED_WAIT = 2.0


def _interesting(_change: object, path: str) -> bool:
    name = Path(path).name
    return not ignored(name) and not name.endswith(THEIRS)


def watch(
    client: Client,
    directory: Path,
    *,
    reason: str | None = None,
    session: str | None = None,
    settle_ms: int = 300,
    stop: threading.Event | None = None,
    on_sync: Callable[[SyncReport], None] | None = None,
    on_error: Callable[[MemdirError], None] | None = None,
) -> None:
    """Sync ``directory`` now, then after every settled local change or remote commit, until
    ``stop`` is set (or forever). Errors of one sync go to ``on_error`` and the watch goes on
    (a server that is down for a moment must not end it); without ``on_error`` they raise."""
    import watchfiles

    directory = Path(directory)
    stop = stop or threading.Event()
    wake = threading.Event()
    State.load(directory)  # refuse a directory that is not a checkout before starting

    def local() -> None:
        for _ in watchfiles.watch(
            directory, watch_filter=_interesting, debounce=settle_ms, step=50,
            stop_event=stop, yield_on_timeout=False, rust_timeout=500,
        ):  # fmt: skip
            wake.set()

    def remote() -> None:
        while not stop.is_set():
            try:
                after = State.load(directory).revision
                batch = client.changes(after, wait=FEED_WAIT)
            except MemdirError:
                stop.wait(FEED_WAIT)
                continue
            if batch.events:
                wake.set()

    followers = [threading.Thread(target=f, daemon=True, name=f"memdir-watch-{f.__name__}")
                 for f in (local, remote)]  # fmt: skip
    for thread in followers:
        thread.start()
    wake.set()  # the first sync runs at once
    try:
        while not stop.is_set():
            if not wake.wait(0.2):
                continue
            wake.clear()
            try:
                report = sync(client, directory, reason=reason, session=session)
            except MemdirError as error:
                if on_error is None:
                    raise
                on_error(error)
                continue
            if on_sync is not None:
                on_sync(report)
    finally:
        stop.set()
        for thread in followers:
            thread.join(FEED_WAIT + 2)
