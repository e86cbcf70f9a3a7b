"""Model-assisted dreaming: the model port, its backends, and the orchestrator.

- :mod:`.port` — :class:`ModelPort`, requests and replies, :func:`model_from_spec`, errors;
- :mod:`.anthropic`, :mod:`.openai`, :mod:`.fake` — the backends (SDKs imported lazily);
- :mod:`.prompts` — system prompts, schemas, and the delimited data blocks (the untrusted-data
  rule lives there);
- :mod:`.findings` — model output to signals and drafts, screened for injection;
- :mod:`.budget`, :mod:`.pricing` — budgets checked before each call, usage and cost;
- :mod:`.assist` — :class:`Assistant`: ``review`` (sub-agents over batches of transcripts) and
  ``write`` (proposal text), with ``usage`` and ``state`` for the run record.

See docs/dreaming.md, "Model-assisted mode".
"""

from __future__ import annotations

from memdir.dream.llm.assist import Assistant, AssistState
from memdir.dream.llm.budget import Budget, BudgetExhausted
from memdir.dream.llm.findings import FLAG, screen_draft
from memdir.dream.llm.port import (
    BACKENDS,
    ModelCallError,
    ModelConfigError,
    ModelPort,
    ModelReply,
    ModelRequest,
    TokenUsage,
    model_from_spec,
    register_backend,
)
from memdir.dream.llm.pricing import PRICES, Price, Usage, price_for

__all__ = [
    "BACKENDS",
    "FLAG",
    "PRICES",
    "AssistState",
    "Assistant",
    "Budget",
    "BudgetExhausted",
    "ModelCallError",
    "ModelConfigError",
    "ModelPort",
    "ModelReply",
    "ModelRequest",
    "Price",
    "TokenUsage",
    "Usage",
    "model_from_spec",
    "price_for",
    "register_backend",
    "screen_draft",
]
