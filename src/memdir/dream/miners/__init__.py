"""The deterministic miners: one plug-in module each, behind the interface in :mod:`.base`.

Built-ins (registered on first use, in this order): ``tool_errors``, ``recovery``,
``corrections``, ``exploration``, ``loops``, ``stale_memory`` (session miners) and
``consolidation`` (store-level). :mod:`.failures` holds the per-tool failure rules and
:mod:`.signature` the error-template normaliser (masking + Drain) they share.
"""

from memdir.dream.miners.base import (
    BUILTIN_MINERS,
    Call,
    MemoryMiner,
    Miner,
    MinerContext,
    MinerFactory,
    calls_of,
    create,
    miners,
    register,
    unregister,
)
from memdir.dream.miners.failures import FailureRules

__all__ = [
    "BUILTIN_MINERS",
    "Call",
    "FailureRules",
    "MemoryMiner",
    "Miner",
    "MinerContext",
    "MinerFactory",
    "calls_of",
    "create",
    "miners",
    "register",
    "unregister",
]
