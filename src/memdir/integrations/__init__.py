"""Adapters that give agent frameworks memdir through the SDK (:mod:`memdir.sdk`).

- :mod:`memdir.integrations.anthropic` — Claude's memory tool (``memory_20250818``) as
  ``MemoryTool`` / ``AsyncMemoryTool`` for the ``anthropic`` SDK's tool runner.

Each adapter imports its framework only when imported itself.
"""

from __future__ import annotations
