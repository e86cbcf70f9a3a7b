"""Settings of the HTTP server that only the REST surface reads.

They come from the environment, read once by :func:`memdir.api.create_app`:

``MEMDIR_RATE_LIMIT``
    Requests per second per bearer token, and the burst a token may spend at once:
    ``RATE/BURST`` (``50/100``, the default), ``RATE`` (burst = 2 × rate), or ``off``. Requests
    without a token are limited per client address with the same numbers.
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

from memdir.core.errors import InvalidInput

__all__ = ["API_ENV_VARS", "ApiSettings"]

#: Environment variables the REST surface reads, beside those of :mod:`memdir.settings`.
API_ENV_VARS = ("MEMDIR_RATE_LIMIT", "MEMDIR_TOKEN_CACHE_SECONDS", "MEMDIR_BENCH_ROUTES")


@dataclass(frozen=True)
class ApiSettings:
    """``rate``: sustained requests per second per token (None: no limit); ``burst``: bucket
    size; ``token_cache_seconds``: how long an authentication is reused (0: never);
    ``bench_routes``: serve the constant benchmark route."""

    rate: float | None = 50.0
    burst: int = 100
    token_cache_seconds: float = 1.0
    bench_routes: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ApiSettings:
        env = os.environ if environ is None else environ
        rate, burst = _rate_limit(env.get("MEMDIR_RATE_LIMIT", "").strip())
        bench = env.get("MEMDIR_BENCH_ROUTES", "").strip().lower() in ("1", "true", "yes", "on")
        cache = _seconds(env.get("MEMDIR_TOKEN_CACHE_SECONDS", "").strip())
        return cls(rate=rate, burst=burst, token_cache_seconds=cache, bench_routes=bench)


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


def _rate_limit(value: str) -> tuple[float | None, int]:
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
            f"MEMDIR_RATE_LIMIT must be RATE/BURST (e.g. 50/100), RATE or off; received {value!r}"
        )
    return rate, burst
