"""Agent session transcripts: the normalised model, one importer per format, storage.

- :mod:`.model` — :class:`Transcript` and :class:`Event` (pure data);
- :mod:`.registry` — the :class:`Importer` interface, :func:`register`, detection;
- one module per format: :mod:`.claude_code`, :mod:`.anthropic`, :mod:`.openai_chat`
  (τ-bench result files included), :mod:`.responses`, :mod:`.codex`, :mod:`.otel`,
  :mod:`.generic` (also the export form);
- :mod:`.reader` (streaming records, bad-record reports), :mod:`.redact` (secrets),
  :mod:`.builder` (keys, tool-call linking), :mod:`.importing` (source -> transcripts);
- :mod:`.store` (queries) and :mod:`.service` (:class:`TranscriptsMixin` of the service).

See docs/transcripts.md for the formats, their ``is_error`` rules and the generic form.
"""

from __future__ import annotations

from memdir.transcripts.model import (
    Event,
    ImportedTranscript,
    ImportReport,
    Labels,
    Problem,
    Transcript,
    TranscriptInfo,
    TranscriptView,
)
from memdir.transcripts.reader import Source, sources_from_paths
from memdir.transcripts.registry import Importer, importers, register, unregister

__all__ = [
    "Event",
    "ImportReport",
    "ImportedTranscript",
    "Importer",
    "Labels",
    "Problem",
    "Source",
    "Transcript",
    "TranscriptInfo",
    "TranscriptView",
    "importers",
    "register",
    "sources_from_paths",
    "unregister",
]
