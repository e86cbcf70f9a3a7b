"""Per-token rate limits: one token bucket per bearer token (or client address).

A bucket holds up to ``burst`` requests and refills at ``rate`` per second; a request takes
one, or is refused with the seconds until one is back. Buckets live in the server process
(each worker of ``memdir serve --workers N`` keeps its own), keyed by a hash of the token so
no secret is held in memory longer than a request. Full, idle buckets are dropped.

Failed authentications are limited per client address, whatever token they carried (an
invented token would otherwise get a fresh bucket each time). The client address is the
socket peer, or — only when the peer is one of the configured trusted proxies — the address
that proxy put in ``X-Forwarded-For`` (:func:`client_address`).
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import time
from collections.abc import Callable, Iterable, Sequence

__all__ = ["Network", "RateLimiter", "client_address", "parse_networks"]

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

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

    def wait(self, key: str) -> float:
        """Seconds until ``key``'s bucket holds a request again (0: it does); takes nothing."""
        found = self._buckets.get(key)
        if found is None:
            return 0.0
        tokens = min(float(self.burst), found[0] + (self._clock() - found[1]) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate

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


def parse_networks(values: Iterable[str]) -> tuple[Network, ...]:
    """Addresses or CIDR networks (``10.0.0.0/8``, ``::1``); ValueError names a bad one."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(value.strip()) from None
    return tuple(networks)


def _trusted(address: str, proxies: Sequence[Network]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in network for network in proxies)


def client_address(
    peer: str | None, forwarded_for: Sequence[bytes], proxies: Sequence[Network]
) -> str | None:
    """The client a request comes from.

    ``peer`` (the socket's address) unless it is a trusted proxy; then the nearest address in
    ``X-Forwarded-For`` (its values, in order) that is not a trusted proxy, read from the
    right, since each proxy appends the address it received from. Without trusted proxies,
    or from any other peer, the header is ignored: a client cannot choose its own bucket.
    """
    if peer is None or not proxies or not forwarded_for or not _trusted(peer, proxies):
        return peer
    hops = [h.strip() for value in forwarded_for for h in value.decode("latin-1").split(",")]
    hops = [h for h in hops if h]
    for hop in reversed(hops):
        if not _trusted(hop, proxies):
            return hop
    return hops[0] if hops else peer
