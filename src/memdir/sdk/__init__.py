"""The memdir SDK: :class:`Client` (blocking) and :class:`AsyncClient`, over HTTP or in-process.

::

    import memdir

    with memdir.Client("http://127.0.0.1:8420", token="mdr_...") as client:
        view = client.read("/org/rules.md")
        client.write("/org/rules.md", view.content + "- be kind\\n", if_match=view.sha256)
        client.update("/projects/acme/counter.md", lambda text: str(int(text or "0") + 1),
                      create=True)

    local = memdir.Client(db="sqlite:///./.memdir/memdir.db")   # in-process, as the owner

Both clients share one request-building base (``_BaseClient``); results are the service's own
dataclasses (``FileView``, ``CommitResult``, ``SearchHit``, ...); errors are the exception tree
of :mod:`memdir.core.errors` (plus :class:`RateLimited` once retries are spent), chosen by the
error envelope's ``type``. See ``docs/sdk.md``.
"""

from __future__ import annotations

from memdir.sdk._async import AsyncClient
from memdir.sdk._base import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT, PolicyText
from memdir.sdk._sync import Client
from memdir.sdk._wire import RateLimited

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "AsyncClient",
    "Client",
    "PolicyText",
    "RateLimited",
]
