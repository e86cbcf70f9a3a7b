"""What model calls cost: a per-model price table and the run's accumulated :class:`Usage`.

Prices are US dollars per million tokens, as the providers published them for their
standard (non-priority) tiers, checked 2026-11 (where a page listed no cache rates, the
provider's standard multipliers are assumed); edit :data:`PRICES` (or pass ``prices=`` to
:class:`Usage`) when they change. A model id matches the longest table key it starts with, so
dated ids (``claude-sonnet-4-5-20250929``) and provider prefixes (``openai/gpt-4o``) find
their family. A model with no entry — every self-hosted model — costs 0 and is listed in
``Usage.unpriced`` so the run report says its cost is unknown, never silently zero.

Anthropic bills a 5-minute cache write at 1.25x and a cache read at 0.1x the input price;
OpenAI bills cached input at its own listed rate and has no write premium. Calls made through
a batch API cost half (:data:`BATCH_DISCOUNT`), on every token kind.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.dream.llm.port import TokenUsage

__all__ = ["BATCH_DISCOUNT", "PRICES", "Price", "Usage", "cost_usd", "price_for"]

#: Batch APIs bill every token at this fraction of the interactive price.
BATCH_DISCOUNT: Final = 0.5


@dataclass(frozen=True, slots=True)
class Price:
    """USD per million tokens: uncached input, output, cache write, cache read."""

    input: float
    output: float
    cache_write: float
    cache_read: float


def _anthropic(input_: float, output: float, cache_read: float | None = None) -> Price:
    """Anthropic's standard multipliers: cache write 1.25x, cache read 0.1x the input price."""
    return Price(input_, output, input_ * 1.25, input_ * 0.1 if cache_read is None else cache_read)


#: Model id prefix -> price (USD per million tokens). Claude Haiku 5.5 is priced at its lower
#: band (prompts up to 100k tokens, which dream calls stay under); long-context surcharges of
#: other models are not modelled either, for the same reason.
PRICES: Final[dict[str, Price]] = {
    "claude-fable-5-1": _anthropic(10.0, 50.0, cache_read=0.25),
    "claude-mythos-5-1": _anthropic(10.0, 50.0, cache_read=0.25),
    "claude-fable-5": _anthropic(10.0, 50.0, cache_read=1.0),
    "claude-mythos-5": _anthropic(10.0, 50.0, cache_read=1.0),
    "claude-opus-5-5": _anthropic(4.0, 20.0),
    "claude-opus-5": _anthropic(5.0, 25.0),
    "claude-opus-4-8": _anthropic(5.0, 25.0),
    "claude-opus-4-7": _anthropic(5.0, 25.0),
    "claude-opus-4-6": _anthropic(5.0, 25.0),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-5-5": _anthropic(2.0, 10.0, cache_read=0.10),
    "claude-sonnet-4-6": _anthropic(3.0, 15.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-5-5": _anthropic(0.10, 0.50, cache_read=0.01),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "claude-3-haiku": Price(0.25, 1.25, 0.30, 0.03),
    "gpt-5-nano": Price(0.05, 0.40, 0.05, 0.005),
    "gpt-5-mini": Price(0.25, 2.0, 0.25, 0.025),
    "gpt-5": Price(1.25, 10.0, 1.25, 0.125),
    "gpt-4.1-nano": Price(0.10, 0.40, 0.10, 0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, 0.40, 0.10),
    "gpt-4.1": Price(2.0, 8.0, 2.0, 0.50),
    "gpt-4o-mini": Price(0.15, 0.60, 0.15, 0.075),
    "gpt-4o": Price(2.50, 10.0, 2.50, 1.25),
}


def price_for(model: str, prices: dict[str, Price] | None = None) -> Price | None:
    """The price of the longest key ``model`` (or its part after a ``/``) starts with."""
    table = PRICES if prices is None else prices
    names = {model, model.rsplit("/", 1)[-1]}
    best: tuple[int, Price] | None = None
    for key, price in table.items():
        if any(name.startswith(key) for name in names) and (best is None or len(key) > best[0]):
            best = (len(key), price)
    return None if best is None else best[1]


def cost_usd(
    usage: TokenUsage, model: str, *, batched: bool = False, prices: dict[str, Price] | None = None
) -> float | None:
    """What ``usage`` cost on ``model``; None when the model has no price."""
    price = price_for(model, prices)
    if price is None:
        return None
    dollars = (
        usage.input_tokens * price.input
        + usage.output_tokens * price.output
        + usage.cache_creation_input_tokens * price.cache_write
        + usage.cache_read_input_tokens * price.cache_read
    ) / 1_000_000
    return dollars * (BATCH_DISCOUNT if batched else 1.0)


_COUNTS: Final = (
    "requests",
    "batched_requests",
    "retries",
    "failures",
    "input_tokens",
    "output_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
)


@dataclass
class Usage:
    """Requests, tokens and cost accumulated over a run (thread-safe ``add``).

    ``requests`` counts successful calls (each item of a batch is one); ``retries`` the
    orchestrator's own retries (the SDKs' retries are inside one call); ``failures`` calls
    that failed for good. ``unpriced`` lists models without a price: their calls add 0 to
    ``cost_usd``.
    """

    requests: int = 0
    batched_requests: int = 0
    retries: int = 0
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0
    unpriced: list[str] = field(default_factory=list)
    prices: dict[str, Price] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def total_tokens(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )

    def add(self, usage: TokenUsage, model: str, *, batched: bool = False) -> float | None:
        """Count one successful call; return its cost (None if the model is unpriced)."""
        cost = cost_usd(usage, model, batched=batched, prices=self.prices)
        with self._lock:
            self.requests += 1
            self.batched_requests += int(batched)
            self.input_tokens += usage.input_tokens
            self.output_tokens += usage.output_tokens
            self.cache_creation_input_tokens += usage.cache_creation_input_tokens
            self.cache_read_input_tokens += usage.cache_read_input_tokens
            if cost is None:
                if model not in self.unpriced:
                    self.unpriced.append(model)
            else:
                self.cost_usd += cost
        return cost

    def count(self, *, retries: int = 0, failures: int = 0) -> None:
        with self._lock:
            self.retries += retries
            self.failures += failures

    @classmethod
    def from_json(cls, data: dict[str, Any], prices: dict[str, Price] | None = None) -> Usage:
        """Usage continued from :meth:`to_json` (a resumed run keeps counting its spend)."""
        usage = cls(prices=prices)
        for name in (*_COUNTS, "cost_usd"):
            value = data.get(name)
            if isinstance(value, int | float) and not isinstance(value, bool):
                setattr(usage, name, float(value) if name == "cost_usd" else int(value))
        usage.unpriced = [str(m) for m in data.get("unpriced_models") or []]
        return usage

    def to_json(self) -> dict[str, Any]:
        """The figures a run record keeps (``cost_usd`` rounded to micro-dollars)."""
        return {
            "requests": self.requests,
            "batched_requests": self.batched_requests,
            "retries": self.retries,
            "failures": self.failures,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": round(self.cost_usd, 6),
            "unpriced_models": list(self.unpriced),
        }
