"""Settings of the HTTP server that only the REST surface reads.

They come from the environment, read once by :func:`memdir.api.create_app`:

``MEMDIR_RATE_LIMIT``
    Requests per second per bearer token, and the burst a token may spend at once:
    ``RATE/BURST`` (``50/100``, the default), ``RATE`` (burst = 2 × rate), or ``off``. Requests
    without a token are limited per client address with the same numbers.
``MEMDIR_AUTH_FAILURE_LIMIT``
    Failed authentications (401: unknown, revoked or expired token, or none) per client
    address: ``RATE/BURST`` (default ``1/30``: 30 at once, then one a second) or ``off``. An
    address over it gets 429 on every request until its bucket refills, whatever token it
    sends, so invented tokens cannot each get a fresh bucket.
``MEMDIR_TRUSTED_PROXIES``
    Comma-separated addresses or CIDR networks of reverse proxies (``10.0.0.5,fd00::/8``).
    Only a request whose socket peer is one of them has its ``X-Forwarded-For`` (the client
    address, for rate limits) and ``X-Forwarded-Proto`` honoured; from anyone else they are
    ignored. Default: none (``memdir serve`` never lets uvicorn apply proxy headers itself).
``MEMDIR_TOKEN_CACHE_SECONDS``
    How long a successful authentication is remembered (default 1; 0: look every token up on
    every request). Revocations made through another process take effect within this time.
``MEMDIR_BENCH_ROUTES``
    ``1`` adds the hidden route ``GET /v1/_bench/constant`` (no token, no database: the floor
    that ``benchmarks/http_bench.py`` measures the real routes against). Off by default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from memdir.api.ratelimit import Network, parse_networks
from memdir.core.errors import InvalidInput

__all__ = ["API_ENV_VARS", "ApiSettings"]

#: Environment variables the REST surface reads, beside those of :mod:`memdir.settings`.
API_ENV_VARS = (
    "MEMDIR_RATE_LIMIT",
    "MEMDIR_AUTH_FAILURE_LIMIT",
    "MEMDIR_TRUSTED_PROXIES",
    "MEMDIR_TOKEN_CACHE_SECONDS",
    "MEMDIR_BENCH_ROUTES",
)


@dataclass(frozen=True)
class ApiSettings:
    """``rate``: sustained requests per second per token (None: no limit); ``burst``: bucket
    size; ``auth_failure_rate`` / ``auth_failure_burst``: failed authentications per client
    address (None: no limit); ``trusted_proxies``: the peers whose forwarding headers count;
    ``token_cache_seconds``: how long an authentication is reused (0: never);
    ``bench_routes``: serve the constant benchmark route."""

    rate: float | None = 50.0
    burst: int = 100
    auth_failure_rate: float | None = 1.0
    auth_failure_burst: int = 30
    trusted_proxies: tuple[Network, ...] = ()
    token_cache_seconds: float = 1.0
    bench_routes: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiSettings:
        env = os.environ if environ is None else environ
        rate, burst = _rate_limit(env.get("MEMDIR_RATE_LIMIT", "").strip())
        failures = env.get("MEMDIR_AUTH_FAILURE_LIMIT", "").strip()
        fail_rate, fail_burst = (
            _rate_limit(failures, "MEMDIR_AUTH_FAILURE_LIMIT")
            if failures
            else (cls.auth_failure_rate, cls.auth_failure_burst)
        )
        bench = env.get("MEMDIR_BENCH_ROUTES", "").strip().lower() in ("1", "true", "yes", "on")
        cache = _seconds(env.get("MEMDIR_TOKEN_CACHE_SECONDS", "").strip())
        return cls(
            rate=rate, burst=burst, auth_failure_rate=fail_rate, auth_failure_burst=fail_burst,
            trusted_proxies=_proxies(env.get("MEMDIR_TRUSTED_PROXIES", "")),
            token_cache_seconds=cache, bench_routes=bench,
        )  # fmt: skip


def _proxies(value: str) -> tuple[Network, ...]:
    items = [v for v in (part.strip() for part in value.split(",")) if v]
    try:
        return parse_networks(items)
    except ValueError as bad:
        raise InvalidInput(
            f"MEMDIR_TRUSTED_PROXIES must be comma-separated addresses or CIDR networks "
            f"(10.0.0.5,10.1.0.0/16); received {str(bad)!r}"
        ) from None


def _seconds(value: str) -> float:
    if not value:
        return ApiSettings.token_cache_seconds
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds <= 3600:
        raise InvalidInput(f"MEMDIR_TOKEN_CACHE_SECONDS must be 0-3600 seconds, received {value!r}")
    return seconds


def _rate_limit(value: str, var: str = "MEMDIR_RATE_LIMIT") -> tuple[float | None, int]:
    if not value:
        return ApiSettings.rate, ApiSettings.burst
    if value.lower() in ("off", "0", "none", "unlimited"):
        return None, 0
    rate_text, _, burst_text = value.partition("/")
    try:
        rate = float(rate_text)
        burst = int(burst_text) if burst_text else max(1, int(rate * 2))
    except ValueError:
        rate, burst = -1.0, -1
    if rate <= 0 or burst < 1:
        raise InvalidInput(
            f"{var} must be RATE/BURST (e.g. 50/100), RATE or off; received {value!r}"
        )
    return rate, burst
