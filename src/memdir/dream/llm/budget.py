"""Budgets: a run's limit on model tokens and dollars, checked *before* every call.

A call may start only if what the run has used so far, plus what the calls already in flight
have reserved, plus this call's worst case fits the budget. The worst case is the request's
input estimate (:meth:`ModelRequest.estimated_input_tokens`, a deliberately high 3 characters
a token) plus its full ``max_tokens`` of output, priced at the higher of the input and cache
write rates. So concurrent calls cannot overshoot together, and a run stays within its budget
unless a provider counts more input tokens than the estimate (rare: the estimate is generous).

When a call does not fit, :meth:`Ledger.reserve` raises :class:`BudgetExhausted`; the
orchestrator records that state, makes no further calls, and the run goes on with the
deterministic miners alone. Tokens mean all tokens: uncached input, output, cache writes and
cache reads. A model without a price costs 0, so a dollar budget never stops it (the report
says its cost is unknown).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from memdir.core.errors import InvalidInput, MemdirError
from memdir.dream.llm.port import ModelRequest
from memdir.dream.llm.pricing import BATCH_DISCOUNT, Usage, price_for

__all__ = ["Budget", "BudgetExhausted", "Ledger", "Reservation"]


class BudgetExhausted(MemdirError):
    """The next model call would not fit the run's token or dollar budget."""

    type = "budget_exhausted"


@dataclass(frozen=True, slots=True)
class Budget:
    """Limits for one run; None means unlimited. ``tokens`` counts every token kind."""

    tokens: int | None = None
    usd: float | None = None

    def __post_init__(self) -> None:
        if self.tokens is not None and self.tokens < 0:
            raise InvalidInput(f"token budget must be >= 0, got {self.tokens}", tokens=self.tokens)
        if self.usd is not None and self.usd < 0:
            raise InvalidInput(f"dollar budget must be >= 0, got {self.usd}", usd=self.usd)

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens, "usd": self.usd}


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one call in flight holds back from the budget until it settles."""

    tokens: int
    usd: float


class Ledger:
    """Reservations against a :class:`Budget`, measured against the run's :class:`Usage`."""

    def __init__(self, budget: Budget, usage: Usage, model: str) -> None:
        self.budget = budget
        self.usage = usage
        self.model = model
        self._lock = threading.Lock()
        self._tokens = 0
        self._usd = 0.0

    def worst_case(self, request: ModelRequest, *, batched: bool = False) -> Reservation:
        tokens_in = request.estimated_input_tokens()
        price = price_for(self.model, self.usage.prices)
        usd = 0.0
        if price is not None:
            rate_in = max(price.input, price.cache_write)
            usd = (tokens_in * rate_in + request.max_tokens * price.output) / 1_000_000
            usd *= BATCH_DISCOUNT if batched else 1.0
        return Reservation(tokens_in + request.max_tokens, usd)

    def reserve(self, request: ModelRequest, *, batched: bool = False) -> Reservation:
        """Hold the call's worst case, or raise :class:`BudgetExhausted` saying which limit."""
        need = self.worst_case(request, batched=batched)
        with self._lock:
            tokens = self.usage.total_tokens + self._tokens + need.tokens
            usd = self.usage.cost_usd + self._usd + need.usd
            limit = self.budget
            if limit.tokens is not None and tokens > limit.tokens:
                raise BudgetExhausted(
                    f"token budget of {limit.tokens} reached: {self.usage.total_tokens} used,"
                    f" the next call may need {need.tokens}; raise --budget-tokens to go on",
                    limit="tokens",
                    budget=limit.tokens,
                    used=self.usage.total_tokens,
                )
            if limit.usd is not None and usd > limit.usd:
                raise BudgetExhausted(
                    f"dollar budget of {limit.usd} reached: {self.usage.cost_usd:.4f} spent,"
                    f" the next call may cost {need.usd:.4f}; raise --budget-usd to go on",
                    limit="usd",
                    budget=limit.usd,
                    used=round(self.usage.cost_usd, 6),
                )
            self._tokens += need.tokens
            self._usd += need.usd
        return need

    def release(self, reservation: Reservation) -> None:
        """Give a settled (or abandoned) call's reservation back."""
        with self._lock:
            self._tokens -= reservation.tokens
            self._usd -= reservation.usd
