"""A short-lived cache of authenticated tokens, so a request costs no token lookup.

Authenticating reads the token and its principal from the database (about a millisecond);
a server answering thousands of requests a second from a few tokens would spend most of its
time there. A successful authentication is therefore remembered for ``ttl`` seconds (default
1; ``MEMDIR_TOKEN_CACHE_SECONDS``, 0 turns it off), keyed by a hash of the token. Revoking a
token or removing a principal through this server clears the cache at once; through another
process (the CLI, another server) it takes effect here within ``ttl`` seconds. Failures are
never cached.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from memdir.core.model import Principal

__all__ = ["TokenCache"]

_MAX_ENTRIES = 10_000


class TokenCache:
    """Principals by token hash, each valid until a deadline. Used from the event loop."""

    def __init__(self, ttl: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self._clock = clock
        self._entries: dict[bytes, tuple[Principal, float]] = {}

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, token: str) -> Principal | None:
        if self.ttl <= 0:
            return None
        found = self._entries.get(self._key(token))
        if found is None or found[1] <= self._clock():
            return None
        return found[0]

    def put(self, token: str, principal: Principal) -> None:
        if self.ttl <= 0:
            return
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()
        self._entries[self._key(token)] = (principal, self._clock() + self.ttl)

    def clear(self) -> None:
        self._entries.clear()
