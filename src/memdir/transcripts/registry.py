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

Third parties add a format with :func:`register` (``register(MyImporter())``) or an entry
point in the ``memdir.importers`` group naming the importer class; the built-ins are loaded
the same way, in :data:`BUILTIN_IMPORTERS` order (:mod:`memdir.plugins` has the rules).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from memdir.plugins import Registry
from memdir.transcripts.model import Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source

__all__ = [
    "BUILTIN_IMPORTERS",
    "IMPORTERS",
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


def _importer(value: object) -> Importer:
    """An importer class is instantiated; an instance is kept (the registry's ``adapt``)."""
    importer = value() if isinstance(value, type) else value
    if not isinstance(importer, Importer):
        raise TypeError(f"{value!r} is not an importer (name, description, detect, parse)")
    return importer


def register(importer: Importer, *, replace: bool = False) -> None:
    """Add an importer; a second one with the same name needs ``replace=True``."""
    IMPORTERS.register(importer.name, _importer(importer), replace=replace)


def unregister(name: str) -> None:
    IMPORTERS.unregister(name)


def importers() -> list[Importer]:
    """Every registered importer: built-ins, then entry points, then code-registered ones."""
    return list(IMPORTERS.items().values())


def get(name: str) -> Importer:
    """The importer of a format, or InvalidInput listing the known ones."""
    return IMPORTERS.get(name)


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
IMPORTERS: Registry[Importer] = Registry(
    "transcript format",
    "memdir.importers",
    BUILTIN_IMPORTERS,
    name_of=lambda importer: importer.name,
    adapt=_importer,
    detail="format",
)
