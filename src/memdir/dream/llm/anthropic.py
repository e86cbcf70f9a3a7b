"""The Anthropic backend: the official ``anthropic`` SDK, Messages and Message Batches APIs.

- **Structured output** through tool use: one tool whose ``input_schema`` is the request's
  schema, and ``tool_choice`` forcing it, so the reply is the tool call's ``input``.
- **Prompt caching**: the system text and the shared prefix are two system blocks, the prefix
  marked ``cache_control: {"type": "ephemeral"}``; tools come first in the cached prefix, so a
  run's calls share one cache entry (the API caches prefixes above about 1,024 tokens).
- **Retries**: the SDK retries 408/409/429/5xx and 529 (overloaded) itself, with exponential
  backoff honouring ``retry-after`` (``max_retries``, default 4). What still fails becomes a
  :class:`ModelCallError`, ``transient`` for rate limits, overload, 5xx, timeouts and replies
  without the tool call, ``fatal`` for bad keys and unknown models.
- **Batches** (:meth:`AnthropicModel.complete_many` with ``batch=True``, or automatically from
  ``batch_threshold`` requests): one Message Batch per :data:`MAX_BATCH` requests, polled with
  backoff (``poll_interval`` growing 1.5x up to ``max_poll_interval``) until it has ended,
  results mapped back by ``custom_id`` (results come in any order); a request that errored or
  expired in the batch is returned as its :class:`ModelCallError`. A batch still running after
  ``max_wait`` is cancelled and its requests fail (not transient: retrying them one by one
  could pay twice for what the batch still finishes).

The SDK is imported when a model is built, not with this module.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Final

from memdir.dream.llm.port import (
    ModelCallError,
    ModelConfigError,
    ModelReply,
    ModelRequest,
    TokenUsage,
    complete_concurrently,
    require_sdk,
    sdk_error,
)

__all__ = ["MAX_BATCH", "AnthropicModel"]

#: Requests per Message Batch (the API allows 100,000 or 256 MB; stay far below).
MAX_BATCH: Final = 5_000
_TRANSIENT_BATCH_ERRORS: Final = frozenset({"overloaded_error", "api_error", "rate_limit_error"})


def _usage(raw: Any) -> TokenUsage:
    return TokenUsage(
        input_tokens=int(getattr(raw, "input_tokens", 0) or 0),
        output_tokens=int(getattr(raw, "output_tokens", 0) or 0),
        cache_creation_input_tokens=int(getattr(raw, "cache_creation_input_tokens", 0) or 0),
        cache_read_input_tokens=int(getattr(raw, "cache_read_input_tokens", 0) or 0),
    )


class AnthropicModel:
    """A Claude model behind the port (spec ``anthropic:<model>``)."""

    supports_batches = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 600.0,
        batch_threshold: int = 200,
        poll_interval: float = 5.0,
        max_poll_interval: float = 60.0,
        max_wait: float = 24 * 3600.0,
    ) -> None:
        sdk = require_sdk("anthropic")
        self.sdk = sdk
        self.model = model
        self.name = f"anthropic:{model}"
        self.batch_threshold = batch_threshold
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.max_wait = max_wait
        self.client = sdk.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )

    @classmethod
    def from_spec(cls, rest: str, env: Mapping[str, str]) -> AnthropicModel:
        """``rest`` is the model id; the key and base URL come from the environment."""
        if not rest.strip():
            raise ModelConfigError(
                "anthropic model spec names no model: use anthropic:<model>,"
                " e.g. anthropic:claude-sonnet-4-5",
                spec=f"anthropic:{rest}",
            )
        key = env.get("ANTHROPIC_API_KEY", "")
        if not key:
            raise ModelConfigError(
                f"anthropic:{rest} needs an API key: set ANTHROPIC_API_KEY"
                " (or use --model offline)",
                variable="ANTHROPIC_API_KEY",
            )
        return cls(rest.strip(), api_key=key, base_url=env.get("ANTHROPIC_BASE_URL") or None)

    def params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API parameters for ``request`` (also a batch item's ``params``)."""
        return {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "system": [
                {"type": "text", "text": request.system},
                {"type": "text", "text": request.prefix, "cache_control": {"type": "ephemeral"}},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": b} for b in request.data]}
            ],
            "tools": [
                {
                    "name": request.tool_name,
                    "description": request.tool_description,
                    "input_schema": request.schema,
                }
            ],
            "tool_choice": {"type": "tool", "name": request.tool_name},
        }

    def complete(self, request: ModelRequest) -> ModelReply:
        try:
            message = self.client.messages.create(**self.params(request))
        except self.sdk.APIError as exc:
            raise self._error(exc) from exc
        return self._reply(message, request)

    def complete_many(
        self, requests: Sequence[ModelRequest], *, concurrency: int = 4, batch: bool | None = None
    ) -> list[ModelReply | ModelCallError]:
        use_batch = len(requests) >= self.batch_threshold if batch is None else batch
        if not use_batch or not requests:
            return complete_concurrently(self, requests, concurrency)
        out: list[ModelReply | ModelCallError] = []
        for start in range(0, len(requests), MAX_BATCH):
            out.extend(self._batch(requests[start : start + MAX_BATCH]))
        return out

    # --- internals -----------------------------------------------------------------------------

    def _reply(self, message: Any, request: ModelRequest, *, batched: bool = False) -> ModelReply:
        for block in message.content:
            if (
                getattr(block, "type", None) == "tool_use"
                and block.name == request.tool_name
                and isinstance(block.input, dict)
            ):
                return ModelReply(
                    dict(block.input),
                    _usage(message.usage),
                    str(message.model),
                    custom_id=request.custom_id,
                    batched=batched,
                )
        stop = getattr(message, "stop_reason", None)
        # Cut off at max_tokens, the same call would be cut off again: not worth a retry.
        raise ModelCallError(
            f"{self.name} answered without a complete {request.tool_name} call (stop_reason"
            f" {stop!r}){'; raise max_tokens or lower batch_size' if stop == 'max_tokens' else ''}",
            transient=stop != "max_tokens",
            usage=_usage(message.usage),
            stop_reason=stop,
        )

    def _error(self, exc: Exception) -> ModelCallError:
        return sdk_error(
            self.name, self.sdk, exc, refused="check ANTHROPIC_API_KEY and the model id"
        )

    def _batch(self, requests: Sequence[ModelRequest]) -> list[ModelReply | ModelCallError]:
        ids = [r.custom_id or f"req-{i}" for i, r in enumerate(requests)]
        if len(set(ids)) != len(ids):
            raise ModelCallError("batch requests need distinct custom_id values", fatal=False)
        items = [
            {"custom_id": i, "params": self.params(r)} for i, r in zip(ids, requests, strict=True)
        ]
        try:
            batch = self.client.messages.batches.create(requests=items)
            batch = self._wait(batch)
            results = {
                item.custom_id: item.result
                for item in self.client.messages.batches.results(batch.id)
            }
        except self.sdk.APIError as exc:
            error = self._error(exc)
            return [error for _ in requests]
        except ModelCallError as exc:  # the batch did not end in time
            return [exc for _ in requests]
        out: list[ModelReply | ModelCallError] = []
        for custom_id, request in zip(ids, requests, strict=True):
            result = results.get(custom_id)
            out.append(self._batch_item(custom_id, request, result, batch.id))
        return out

    def _wait(self, batch: Any) -> Any:
        """Poll until the batch ended; past ``max_wait``, cancel it (what it did not process
        is not billed) and fail its requests for good rather than pay for them twice."""
        delay = self.poll_interval
        deadline = time.monotonic() + self.max_wait
        while batch.processing_status != "ended":
            if time.monotonic() > deadline:
                try:
                    self.client.messages.batches.cancel(batch.id)
                    cancelled = "cancelled"
                except self.sdk.APIError:
                    cancelled = "could not be cancelled: cancel it in the console"
                raise ModelCallError(
                    f"message batch {batch.id} had not ended after {self.max_wait:.0f}s and"
                    f" {cancelled}; run again later or without --batch",
                    batch=batch.id,
                )
            time.sleep(delay)
            delay = min(delay * 1.5, self.max_poll_interval)
            batch = self.client.messages.batches.retrieve(batch.id)
        return batch

    def _batch_item(
        self, custom_id: str, request: ModelRequest, result: Any, batch_id: str
    ) -> ModelReply | ModelCallError:
        kind = getattr(result, "type", None)
        if kind == "succeeded":
            try:
                return self._reply(result.message, request, batched=True)
            except ModelCallError as exc:
                return exc
        error_type = None
        if kind == "errored":
            error_type = getattr(getattr(result.error, "error", None), "type", None)
        return ModelCallError(
            f"request {custom_id} of message batch {batch_id} did not succeed:"
            f" {kind or 'no result'}{f' ({error_type})' if error_type else ''}",
            transient=kind in ("expired", None) or error_type in _TRANSIENT_BATCH_ERRORS,
            batch=batch_id,
            custom_id=custom_id,
        )
