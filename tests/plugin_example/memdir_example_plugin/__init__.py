"""An example third-party plug-in: a transcript format, a miner and a model backend, added to
memdir only through package entry points (see ``tests/test_plugins.py``).

- ``example-log``: a line format, ``<role>: <text>`` per line, in files named ``*.exlog``;
- ``example-todo``: a session miner counting sessions where the user says ``TODO <thing>``;
- ``example``: a model backend spec prefix (``example:<name>``) building the fake model.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from memdir.dream.model import Session, Signal
from memdir.transcripts.model import Event, Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source


class ExampleLogImporter:
    name = "example-log"
    description = "role: text lines in *.exlog files"

    def detect(self, sample: Sample) -> float:
        return 0.9 if sample.name.endswith(".exlog") else 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        with source.open() as handle:
            lines = handle.read().decode("utf-8", "replace").splitlines()
        transcript = Transcript("example-log", source.stem)
        for i, line in enumerate(lines):
            role, sep, text = line.partition(": ")
            if not sep or role not in ("user", "assistant"):
                ctx.ignored += 1
                continue
            transcript.events.append(Event("message", key=f"l{i}", role=role, text=text))
        yield transcript


class TodoMiner:
    """Sessions where the user leaves ``TODO <thing>``: one signal per thing per session."""

    name = "example-todo"

    def __init__(self, context: Any) -> None:
        self.context = context

    def mine(self, session: Session) -> list[Signal]:
        found = []
        for event in session.events:
            text = event.text or ""
            if event.role == "user" and text.startswith("TODO "):
                thing = text[5:].strip()
                found.append(Signal("example-todo", thing, {"title": f"todo: {thing}"}, text))
        return found


def example_backend(rest: str, env: Mapping[str, str]) -> Any:
    from memdir.dream.llm.fake import FakeModel

    return FakeModel(rest or "example")
