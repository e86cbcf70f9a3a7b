"""The model port: one small interface every model backend implements.

A dream run asks a model for *structured output* only: a :class:`ModelRequest` carries the
system text, a cacheable shared prefix (the steering instructions and the memory index, the
same for every call of a run), the per-call data blocks (delimited, untrusted transcript text;
see :mod:`.prompts`), and the JSON schema the answer must follow. A backend returns a
:class:`ModelReply`: the parsed object, the call's :class:`TokenUsage` and the model's name.

Invariants every backend keeps:

- ``complete`` returns a reply whose ``data`` is a JSON object produced through the schema
  (a forced tool call where the API has tools), or raises :class:`ModelCallError`; it never
  returns free text;
- ``complete_many`` returns one entry per request, in request order: a reply or the
  :class:`ModelCallError` of that request (one failure does not sink the others);
- ``TokenUsage.input_tokens`` counts *uncached* input only; cache writes and reads are counted
  apart (APIs that fold cached tokens into their input count are normalised to this);
- the SDKs are imported lazily: memdir runs without them, and asking for a backend whose SDK is
  missing raises :class:`ModelConfigError` naming the extra to install
  (``pip install 'memdir[models]'``).

Backends are plug-ins: :data:`BACKENDS` (a :class:`memdir.plugins.Registry`) maps a spec's
provider (``anthropic``, ``openai``, ``fake``) to a factory; the built-ins are loaded the same
way third parties add theirs (a ``memdir.model_backends`` entry point or
:func:`register_backend`), and :func:`model_from_spec` is the one composition point.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from memdir.core.errors import BackendError, InvalidInput
from memdir.plugins import Registry

__all__ = [
    "BACKENDS",
    "BackendFactory",
    "ModelCallError",
    "ModelConfigError",
    "ModelPort",
    "ModelReply",
    "ModelRequest",
    "TokenUsage",
    "complete_concurrently",
    "model_from_spec",
    "register_backend",
    "require_sdk",
    "sdk_error",
]


class ModelConfigError(InvalidInput):
    """A model was asked for that cannot be used as configured: bad spec, no key, no SDK."""

    type = "model_config"


class ModelCallError(BackendError):
    """A model call failed after the SDK's own retries.

    ``transient`` — worth retrying later (rate limit, overload, 5xx, timeout, a reply that did
    not follow the schema); ``fatal`` — no further call of this run can succeed (bad key, no
    such model), so the run stops using the model. ``usage`` is what the call consumed when a
    reply came but could not be used (it still counts against the budget).
    """

    type = "model_error"

    def __init__(
        self,
        message: str,
        *,
        transient: bool = False,
        fatal: bool = False,
        usage: TokenUsage | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, transient=transient, fatal=fatal, **details)
        self.transient = transient
        self.fatal = fatal
        self.usage = usage


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """One structured-output call.

    ``prefix`` is sent before the data and marked cacheable where the API allows it, so a run's
    calls share one cache entry; ``data`` blocks hold the untrusted text, already delimited and
    escaped. ``schema`` is a JSON schema of an *object*; ``tool_name`` names the function the
    model is forced to call with it. ``custom_id`` identifies the request in a batch.
    """

    system: str
    prefix: str
    data: tuple[str, ...]
    schema: dict[str, Any]
    tool_name: str
    tool_description: str
    max_tokens: int = 4096
    custom_id: str = ""

    def text(self) -> str:
        """Everything the model reads, in order (for size estimates and the fake model)."""
        return "\n\n".join((self.system, self.prefix, *self.data))

    def estimated_input_tokens(self) -> int:
        """A deliberately high estimate (3 characters a token) used to check budgets."""
        return len(self.text()) // 3 + 16


@dataclass(frozen=True, slots=True)
class TokenUsage:
    """Tokens one call used; ``input_tokens`` excludes cache writes and reads."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    @property
    def total(self) -> int:
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_creation_input_tokens
            + self.cache_read_input_tokens
        )


@dataclass(frozen=True, slots=True)
class ModelReply:
    """A parsed structured answer; ``batched`` when it came through a batch API (priced so)."""

    data: dict[str, Any]
    usage: TokenUsage
    model: str
    custom_id: str = ""
    batched: bool = False


@runtime_checkable
class ModelPort(Protocol):
    """What the orchestrator needs from a backend.

    ``name`` is the spec it was built from (``anthropic:claude-sonnet-4-5``); ``model`` the
    model id used for pricing; ``supports_batches`` whether ``complete_many(batch=True)`` uses a
    provider batch API (otherwise it makes bounded-concurrency individual calls).
    """

    name: str
    model: str
    supports_batches: bool

    def complete(self, request: ModelRequest) -> ModelReply: ...

    def complete_many(
        self,
        requests: Sequence[ModelRequest],
        *,
        concurrency: int = 4,
        batch: bool | None = None,
    ) -> list[ModelReply | ModelCallError]: ...


def complete_concurrently(
    port: ModelPort, requests: Sequence[ModelRequest], concurrency: int
) -> list[ModelReply | ModelCallError]:
    """``port.complete`` over ``requests`` with at most ``concurrency`` calls in flight."""

    def one(request: ModelRequest) -> ModelReply | ModelCallError:
        try:
            return port.complete(request)
        except ModelCallError as exc:
            return exc

    with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
        return list(pool.map(one, requests))


def sdk_error(name: str, sdk: Any, exc: Exception, *, refused: str) -> ModelCallError:
    """An SDK exception as a :class:`ModelCallError` (both official SDKs share the classes).

    Transient: rate limits, server errors, connection failures, and 408/409/429/5xx statuses
    (retried by the orchestrator). Fatal: authentication, permission and not-found (the model is
    not used again in the run; ``refused`` says what to check).
    """
    status = getattr(exc, "status_code", None)
    transient = isinstance(
        exc, sdk.RateLimitError | sdk.InternalServerError | sdk.APIConnectionError
    ) or (isinstance(status, int) and (status >= 500 or status in (408, 409, 429)))
    fatal = isinstance(exc, sdk.AuthenticationError | sdk.PermissionDeniedError | sdk.NotFoundError)
    what = f"was refused ({refused})" if fatal else "failed"
    return ModelCallError(
        f"{name} call {what}: {type(exc).__name__} (status {status}): {exc}",
        transient=transient,
        fatal=fatal,
        status=status,
    )


def require_sdk(module: str) -> Any:
    """Import an optional SDK, or say which extra installs it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModelConfigError(
            f"the {module!r} package is needed for {module} models but is not installed:"
            " install it with pip install 'memdir[models]' (or use --model offline)",
            package=module,
        ) from None


#: ``factory(rest_of_spec, environment) -> ModelPort``; ``rest`` is the spec after ``provider:``.
BackendFactory = Callable[[str, Mapping[str, str]], ModelPort]


def _anthropic(rest: str, env: Mapping[str, str]) -> ModelPort:
    from memdir.dream.llm.anthropic import AnthropicModel

    return AnthropicModel.from_spec(rest, env)


def _openai(rest: str, env: Mapping[str, str]) -> ModelPort:
    from memdir.dream.llm.openai import OpenAIModel

    return OpenAIModel.from_spec(rest, env)


def _fake(rest: str, env: Mapping[str, str]) -> ModelPort:
    from memdir.dream.llm.fake import FakeModel

    return FakeModel(rest or "fake")


def _backend(value: object) -> BackendFactory:
    """A backend factory is kept as it is: ``factory(rest_of_spec, environment)``."""
    if not callable(value):
        raise TypeError(f"{value!r} is not a model backend factory (rest, env) -> ModelPort")
    return value  # callable; its signature is the contract


#: Provider name -> factory: the built-ins, then ``memdir.model_backends`` entry points, then
#: :func:`register_backend` calls (:mod:`memdir.plugins` has the rules).
BACKENDS: Registry[BackendFactory] = Registry(
    "model backend",
    "memdir.model_backends",
    (
        "memdir.dream.llm.port:_anthropic",
        "memdir.dream.llm.port:_openai",
        "memdir.dream.llm.port:_fake",
    ),
    name_of=lambda factory: factory.__name__.lstrip("_"),
    adapt=_backend,
    reserved=("offline",),
    detail="provider",
)


def register_backend(provider: str, factory: BackendFactory, *, replace: bool = False) -> None:
    """Make ``provider:<rest>`` specs build models with ``factory``; a taken provider needs
    ``replace=True``."""
    BACKENDS.register(provider, _backend(factory), replace=replace)


def model_from_spec(spec: str, env: Mapping[str, str] | None = None) -> ModelPort | None:
    """Build the model a ``--model`` value names; None for ``offline`` (miners only).

    ``anthropic:<model>`` (key ``ANTHROPIC_API_KEY``, optional ``ANTHROPIC_BASE_URL``),
    ``openai:<model>@<base_url>`` (``OPENAI_API_KEY``; optional for a self-hosted
    ``base_url``), ``fake`` (in-process, deterministic). ``env`` defaults to ``os.environ``.
    """
    text = spec.strip()
    if text in ("", "offline"):
        return None
    provider, _, rest = text.partition(":")
    factory = BACKENDS.items().get(provider)
    if factory is None:
        raise ModelConfigError(
            f"unknown model spec {spec!r}: use offline, fake, anthropic:<model> or"
            " openai:<model>@<base_url>",
            spec=spec,
        )
    return factory(rest, os.environ if env is None else env)
