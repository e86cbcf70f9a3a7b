"""The OpenAI-compatible backend: the official ``openai`` SDK's Chat Completions, any base URL.

One backend for OpenAI itself and the servers that speak its API — vLLM, Ollama, llama.cpp's
``llama-server``, LiteLLM — chosen by ``base_url`` (spec ``openai:<model>@<base_url>``).

- **Structured output** through a forced function call: one function whose ``parameters`` are
  the request's schema, ``tool_choice`` naming it; the reply is its JSON ``arguments``. A server
  that refuses tools (HTTP 400/422 naming tools or tool_choice) is asked again with
  ``response_format`` — a JSON schema, and if that is refused too, plain JSON mode — and the
  backend remembers which mode worked. A reply whose text is a JSON object is accepted as well
  (small local models sometimes answer in text even when a tool is forced).
- **Prompt caching** is automatic on these servers (OpenAI for prefixes of 1,024+ tokens,
  vLLM's prefix cache): the system message holds the system text and the shared prefix, so every
  call of a run starts with the same tokens. ``prompt_tokens_details.cached_tokens`` is reported
  as cache reads, and taken out of ``input_tokens`` (which counts uncached input only).
- **Retries**: the SDK retries 408/409/429/5xx with backoff (``max_retries``, default 4).

``OPENAI_API_KEY`` is required for the OpenAI API itself (no ``@base_url``); a self-hosted
server gets the key if it is set and the placeholder ``"unused"`` otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final, Literal

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

__all__ = ["OpenAIModel"]

Mode = Literal["tools", "json_schema", "json_object"]
_MODES: Final[tuple[Mode, ...]] = ("tools", "json_schema", "json_object")
_UNSUPPORTED_HINTS: Final = ("tool", "function", "response_format", "json_schema", "not support")


class OpenAIModel:
    """A model on an OpenAI-compatible server behind the port."""

    supports_batches = False

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 600.0,
    ) -> None:
        sdk = require_sdk("openai")
        self.sdk = sdk
        self.model = model
        self.base_url = base_url
        self.name = f"openai:{model}" + (f"@{base_url}" if base_url else "")
        self.mode: Mode = "tools"
        self.client = sdk.OpenAI(
            api_key=api_key, base_url=base_url, max_retries=max_retries, timeout=timeout
        )

    @classmethod
    def from_spec(cls, rest: str, env: Mapping[str, str]) -> OpenAIModel:
        """``rest`` is ``<model>@<base_url>`` or ``<model>`` (the OpenAI API itself)."""
        model, at, base_url = rest.partition("@")
        model, base_url = model.strip(), base_url.strip()
        if not model or (at and not base_url.startswith(("http://", "https://"))):
            raise ModelConfigError(
                f"bad model spec openai:{rest}: use openai:<model>@<base_url>, e.g."
                " openai:llama3.1@http://localhost:11434/v1",
                spec=f"openai:{rest}",
            )
        key = env.get("OPENAI_API_KEY", "")
        if not key and not base_url:
            raise ModelConfigError(
                f"openai:{model} (the OpenAI API) needs an API key: set OPENAI_API_KEY, or"
                " name a self-hosted server with openai:<model>@<base_url>",
                variable="OPENAI_API_KEY",
            )
        return cls(model, api_key=key or "unused", base_url=base_url or None)

    def params(self, request: ModelRequest, mode: Mode) -> dict[str, Any]:
        """Chat Completions parameters for ``request`` in one structured-output ``mode``."""
        params: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": f"{request.system}\n\n{request.prefix}"},
                {"role": "user", "content": "\n\n".join(request.data)},
            ],
        }
        # The OpenAI API wants max_completion_tokens; compatible servers know max_tokens.
        params["max_completion_tokens" if self.base_url is None else "max_tokens"] = (
            request.max_tokens
        )
        function = {
            "name": request.tool_name,
            "description": request.tool_description,
            "parameters": request.schema,
        }
        if mode == "tools":
            params["tools"] = [{"type": "function", "function": function}]
            params["tool_choice"] = {"type": "function", "function": {"name": request.tool_name}}
        elif mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.tool_name, "schema": request.schema},
            }
        else:
            params["response_format"] = {"type": "json_object"}
            params["messages"][1]["content"] += (
                f"\n\nAnswer with one JSON object following this schema:\n"
                f"{json.dumps(request.schema)}"
            )
        return params

    def complete(self, request: ModelRequest) -> ModelReply:
        start = _MODES.index(self.mode)
        for mode in _MODES[start:]:
            try:
                completion = self.client.chat.completions.create(**self.params(request, mode))
            except self.sdk.APIStatusError as exc:
                if self._unsupported(exc) and mode != _MODES[-1]:
                    continue
                raise self._error(exc) from exc
            except self.sdk.APIError as exc:
                raise self._error(exc) from exc
            self.mode = mode
            return self._reply(completion, request)
        raise AssertionError("unreachable: the last mode either returns or raises")

    def complete_many(
        self, requests: Sequence[ModelRequest], *, concurrency: int = 4, batch: bool | None = None
    ) -> list[ModelReply | ModelCallError]:
        return complete_concurrently(self, requests, concurrency)

    # --- internals -----------------------------------------------------------------------------

    @staticmethod
    def _unsupported(exc: Any) -> bool:
        if exc.status_code not in (400, 404, 422, 501):
            return False
        text = str(exc).lower()
        return any(hint in text for hint in _UNSUPPORTED_HINTS)

    def _reply(self, completion: Any, request: ModelRequest) -> ModelReply:
        choice = completion.choices[0] if completion.choices else None
        message = choice.message if choice is not None else None
        texts: list[str] = []
        if message is not None:
            for call in message.tool_calls or []:
                function = getattr(call, "function", None)
                if function is not None and function.name == request.tool_name:
                    texts.append(function.arguments or "")
            if message.content:
                texts.append(message.content)
        for text in texts:
            data = _json_object(text)
            if data is not None:
                return ModelReply(
                    data, _usage(completion.usage), str(completion.model or self.model),
                    custom_id=request.custom_id,
                )  # fmt: skip
        finish = getattr(choice, "finish_reason", None)
        # Cut off at the token limit, the same call would be cut off again: not worth a retry.
        raise ModelCallError(
            f"{self.name} answered without a JSON object for {request.tool_name} (finish_reason"
            f" {finish!r}){'; raise max_tokens or lower batch_size' if finish == 'length' else ''}",
            transient=finish != "length",
            usage=_usage(completion.usage),
            finish_reason=finish,
        )

    def _error(self, exc: Exception) -> ModelCallError:
        return sdk_error(
            self.name, self.sdk, exc, refused="check OPENAI_API_KEY, the model id and the URL"
        )


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in ``text`` (a bare object or one fenced in a markdown code block)."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.strip("`").removeprefix("json").strip()
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _usage(raw: Any) -> TokenUsage:
    if raw is None:
        return TokenUsage()
    prompt = int(getattr(raw, "prompt_tokens", 0) or 0)
    details = getattr(raw, "prompt_tokens_details", None)
    cached = int(getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    return TokenUsage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(getattr(raw, "completion_tokens", 0) or 0),
        cache_read_input_tokens=cached,
    )
