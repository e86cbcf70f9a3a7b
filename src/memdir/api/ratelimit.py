"""Per-token rate limits: one token bucket per bearer token (or client address).

A bucket holds up to ``burst`` requests and refills at ``rate`` per second; a request takes
one, or is refused with the seconds until one is back. Buckets live in the server process
(each worker of ``memdir serve --workers N`` keeps its own), keyed by a hash of the token so
no secret is held in memory longer than a request. Full, idle buckets are dropped.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]

_MAX_BUCKETS = 100_000


class RateLimiter:
    """Token buckets by key. Not thread-safe: used from the event loop only."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, updated)

    @staticmethod
    def key(authorization: bytes | None, client: str | None) -> str:
        """The bucket of a request: its bearer credential, else its client address."""
        if authorization:
            return "t:" + hashlib.blake2b(authorization, digest_size=16).hexdigest()
        return "a:" + (client or "?")

    def take(self, key: str) -> float:
        """Take one request from ``key``'s bucket: 0 if allowed, else seconds to wait."""
        now = self._clock()
        tokens, updated = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - updated) * self.rate)
        if tokens >= 1.0:
            self._buckets[key] = (tokens - 1.0, now)
            if len(self._buckets) > _MAX_BUCKETS:
                self._prune(now)
            return 0.0
        self._buckets[key] = (tokens, now)
        return (1.0 - tokens) / self.rate

    def _prune(self, now: float) -> None:
        """Drop buckets that have refilled completely (forgetting them changes nothing)."""
        full = self.burst / self.rate
        self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < full}

    @staticmethod
    def retry_after(wait: float) -> int:
        """Whole seconds for a ``Retry-After`` header (at least 1)."""
        return max(1, math.ceil(wait))
