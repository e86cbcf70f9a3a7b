"""From a source to transcripts: sample, pick the importer, parse (no storage here)."""

from __future__ import annotations

from collections.abc import Iterator

from memdir.transcripts import registry
from memdir.transcripts.model import Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source, sample

__all__ = ["read_source", "unrecognised"]


def unrecognised(found: Sample) -> str:
    """Why no importer took a sample, in words a person can act on."""
    known = ", ".join(i.name for i in registry.importers())
    if found.shape == "empty":
        return "empty file; nothing to import"
    if found.shape == "unknown":
        return f"not JSON or JSONL; transcript formats are {known}"
    first = found.records[0] if found.records else None
    what = found.shape.replace("-", " ")
    if isinstance(first, dict):
        keys = ", ".join(list(first)[:6])
        what = f"a {what} whose first record has keys {keys}"
        if "$schema" in first or ("properties" in first and "type" in first):
            what += " (a JSON Schema, not a session)"
    return f"not a transcript: no importer recognises {what}; formats are {known} (--format)"


def read_source(
    source: Source, ctx: ParseContext, format: str | None = None
) -> Iterator[Transcript]:
    """The transcripts in ``source``; problems go to ``ctx`` (nothing here raises for bad input).

    ``format`` names the importer; without it the format is detected from the file's head. A
    file in which the importer finds no events at all yields nothing: it is reported in
    ``ctx.skipped`` naming the importer tried, so a file no importer understands imports
    nothing (empty sessions beside sessions with events are kept).
    """
    importer = registry.get(format) if format is not None else None
    try:
        found = sample(source)
    except OSError as exc:
        ctx.skip(source, None, f"cannot read: {exc.strerror or exc}")
        return
    if importer is None:
        importer = registry.detect(found)
    if importer is None:
        ctx.skip(source, None, unrecognised(found))
        return
    how = "as asked with --format" if format is not None else "detected"
    held: list[Transcript] = []  # empty sessions, kept only if the file has events elsewhere
    useful = False
    try:
        for transcript in importer.parse(source, found.shape, ctx):
            if not transcript.events and not useful:
                held.append(transcript)
                continue
            if not useful:
                useful = True
                yield from held
                held.clear()
            yield transcript
        if held:  # a format that recognises nothing useful must not store empty sessions
            ctx.skip(source, None, f"the {importer.name} importer ({how}) found no events in "
                     f"it ({len(held)} empty session{'s' if len(held) != 1 else ''}); nothing "
                     "is imported — pass --format if the file is in another format")  # fmt: skip
    except OSError as exc:
        ctx.skip(source, None, f"cannot read: {exc.strerror or exc}; the rest is skipped")
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        # An importer must not fail on bad input; if one does, the file still does not stop
        # the import, and the report names the importer so the bug can be found.
        ctx.skip(source, None, f"importer {importer.name} failed ({type(exc).__name__}: "
                 f"{str(exc)[:200]}); the rest of the file is skipped")  # fmt: skip
