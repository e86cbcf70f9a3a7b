"""The importer interface and the registry the built-in importers use like any other.

An importer is any object with:

- ``name``: the format id stored with every transcript it makes (``claude-code``);
- ``description``: one line for ``--help`` and the docs;
- ``detect(sample) -> float``: how sure it is (0 = not this format, 1 = certain) that a
  :class:`~memdir.transcripts.reader.Sample` (shape, leading records, head text) is its
  format. The most confident importer wins; ties go to the one registered first;
- ``parse(source, shape, ctx) -> Iterator[Transcript]``: the transcripts of a source, each
  complete. Records come from :func:`~memdir.transcripts.reader.iter_records`; each must be
  passed through ``ctx.clean`` (secret redaction) before use; bad records are reported with
  ``ctx.skip`` and skipped, records that carry nothing for a transcript are counted in
  ``ctx.ignored``. An importer raises nothing for bad input.

Third parties add a format with :func:`register` (``register(MyImporter())``); the built-ins
are registered the same way, in :data:`BUILTIN_IMPORTERS` order.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from memdir.core.errors import InvalidInput
from memdir.transcripts.model import Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source

__all__ = [
    "BUILTIN_IMPORTERS",
    "Importer",
    "detect",
    "get",
    "importers",
    "register",
    "unregister",
]


@runtime_checkable
class Importer(Protocol):
    """One transcript format (see the module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str: ...

    def detect(self, sample: Sample) -> float: ...

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]: ...


_lock = threading.Lock()
_registry: dict[str, Importer] = {}


def register(importer: Importer, *, replace: bool = False) -> None:
    """Add an importer; a second one with the same name needs ``replace=True``."""
    with _lock:
        if importer.name in _registry and not replace:
            raise InvalidInput(f"an importer named {importer.name!r} is already registered")
        _registry[importer.name] = importer


def unregister(name: str) -> None:
    with _lock:
        _registry.pop(name, None)


def importers() -> list[Importer]:
    """Every registered importer, built-ins first."""
    _load_builtins()
    with _lock:
        return list(_registry.values())


def get(name: str) -> Importer:
    """The importer of a format, or InvalidInput listing the known ones."""
    _load_builtins()
    with _lock:
        found = _registry.get(name)
        known = sorted(_registry)
    if found is None:
        raise InvalidInput(
            f"unknown transcript format {name!r}; use one of {', '.join(known)}", format=name
        )
    return found


def detect(sample: Sample) -> Importer | None:
    """The most confident importer for ``sample``, or None when none recognises it."""
    best: Importer | None = None
    best_score = 0.0
    for importer in importers():
        score = importer.detect(sample)
        if score > best_score:
            best, best_score = importer, score
    return best


BUILTIN_IMPORTERS = (
    "memdir.transcripts.generic:GenericImporter",
    "memdir.transcripts.claude_code:ClaudeCodeImporter",
    "memdir.transcripts.codex:CodexImporter",
    "memdir.transcripts.anthropic:AnthropicImporter",
    "memdir.transcripts.openai_chat:OpenAIChatImporter",
    "memdir.transcripts.responses:ResponsesImporter",
    "memdir.transcripts.otel:OTelImporter",
    "memdir.transcripts.tau2:Tau2Importer",
    "memdir.transcripts.swe_agent:SweAgentImporter",
    "memdir.transcripts.openhands:OpenHandsImporter",
    "memdir.transcripts.aider:AiderImporter",
)
_loaded = False


def _load_builtins() -> None:
    """Register the built-in importers on first use (each module is small; imported lazily)."""
    global _loaded
    if _loaded:
        return
    import importlib

    with _lock:
        if _loaded:
            return
        builtins: dict[str, Importer] = {}
        for spec in BUILTIN_IMPORTERS:
            module, cls = spec.split(":")
            importer = getattr(importlib.import_module(module), cls)()
            builtins[importer.name] = importer
        # Built-ins first, then anything registered before the first use.
        merged = {**builtins, **_registry}
        _registry.clear()
        _registry.update(merged)
        _loaded = True
