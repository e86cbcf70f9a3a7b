"""Aider chat histories (``.aider.chat.history.md``) and aider's published chat transcripts.

The file is Markdown that aider appends to as it runs. A session starts at a line
``# aider chat started at YYYY-MM-DD HH:MM:SS`` (its start time, local to the machine that
wrote it, stored as UTC since the file names no zone); text before the first such line — the
tail of an earlier session, or a whole published example — is one session of its own. Sessions
are named ``<file>#<ordinal>``.

Line kinds: ``#### …`` is the user's message (a run of such lines is one message; slash
commands such as ``/undo`` stay in the text); ``> …`` (or a bare ``>``) is aider's own
output — harness feedback; anything else is the model's reply. A reply that carries edit
blocks (``<<<<<<< SEARCH`` / ``=======`` / ``>>>>>>> REPLACE``, or the older ``ORIGINAL`` /
``UPDATED``) is also a ``tool_call`` named ``edit`` with input ``{"files": [...]}`` (the
file name on the line before each block or its fence); the aider output that follows it is
that call's ``tool_result``. A reply without recognisable blocks that aider answers as an
edit (``Applied edit to …`` or an edit-format failure) is an ``edit`` call too, with the
files aider names.
``> Running CMD`` in aider's output is a ``tool_call`` named ``shell`` (``{"command": CMD}``)
whose result is the output lines after it. Other aider output is a ``system`` message.

``is_error`` rule: an edit result is an error when aider reports that the reply ``did not
conform to the edit format``, a ``SearchReplaceNoExactMatch`` / "failed to exactly match", or a
Python traceback; a shell result when it holds a traceback or ``command not found``. There is
no outcome label (unknown); commits, ``/undo`` and interrupts stay in the text.
"""

from __future__ import annotations

import codecs
import datetime as dt
import re
from collections.abc import Iterator
from typing import Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.model import Event, Transcript
from memdir.transcripts.reader import ParseContext, Sample, Source

__all__ = ["AiderImporter"]

_START: Final = re.compile(r"^# aider chat started at (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
_BLOCK: Final = re.compile(r"^(?:<<<<<<< (?:SEARCH|ORIGINAL))\s*$")
_EDIT_FAILED: Final = re.compile(
    r"did not conform to the edit format|SearchReplaceNoExactMatch|failed to exactly match|"
    r"Traceback \(most recent call last\)"
)
_APPLIED: Final = re.compile(r"(?m)^Applied edit to (.+)$")
_EDIT_RESULT: Final = re.compile(_APPLIED.pattern + "|" + _EDIT_FAILED.pattern, re.MULTILINE)
_SHELL_FAILED: Final = re.compile(r"Traceback \(most recent call last\)|command not found")
_MARKERS: Final = ("# aider chat started at ", 'class="chat-transcript"')


class AiderImporter:
    name = "aider"
    description = "Aider .aider.chat.history.md chat histories and published chat transcripts"

    def detect(self, sample: Sample) -> float:
        if sample.shape != "unknown":
            return 0.0
        head = sample.text[:65_536]
        if "\n# aider chat started at " in "\n" + head:
            return 0.95
        if 'class="chat-transcript"' in head and "\n#### " in head:
            return 0.9
        return 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        session = _Session(self.name, source, 0, None, 1)
        ordinal = 0
        for number, line in enumerate(_lines(source, ctx), 1):
            start = _START.match(line)
            if start is None:
                session.feed(line)
                continue
            if session.has_content():
                yield session.build(ctx)
            ordinal += 1
            when = dt.datetime.strptime(start.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=dt.UTC)
            session = _Session(self.name, source, ordinal, when, number)
        if session.has_content():
            yield session.build(ctx)


def _lines(source: Source, ctx: ParseContext) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    pending = ""
    with source.open() as handle:
        while True:
            chunk = handle.read(1 << 16)
            ctx.advance(len(chunk))
            pending += decoder.decode(chunk, final=not chunk)
            *complete, pending = pending.split("\n")
            for line in complete:
                yield line.rstrip("\r")
            if not chunk:
                break
    if pending:
        yield pending


class _Session:
    """One session's lines, grouped into runs of user, aider and model lines."""

    def __init__(
        self, fmt: str, source: Source, ordinal: int, when: dt.datetime | None, line: int
    ) -> None:
        self.builder = TranscriptBuilder(
            fmt, f"{source.stem}#{ordinal}", origin=source.name, line=line
        )
        self.when = when
        self.runs: list[tuple[str, list[str]]] = []

    def feed(self, line: str) -> None:
        if line.startswith("####"):
            kind, text = "user", line[4:].removeprefix(" ")
        elif line.startswith("> ") or line.rstrip() == ">":  # not an edit block's >>>>>>> line
            kind, text = "aider", line[2:]
        else:
            kind, text = "model", line
        text = text.removesuffix("  ")  # markdown hard line breaks aider writes
        if self.runs and (self.runs[-1][0] == kind or (kind == "model" and not text.strip())):
            self.runs[-1][1].append(text)
        else:
            self.runs.append((kind, [text]))

    def has_content(self) -> bool:
        return any("\n".join(lines).strip() for _, lines in self.runs)

    def build(self, ctx: ParseContext) -> Transcript:
        b = self.builder
        b.transcript.started_at = self.when
        pending_edit: str | None = None
        after_reply = False
        for index, (kind, lines) in enumerate(self.runs):
            text = ctx.clean("\n".join(lines).strip())
            b.transcript.redactions += ctx.last_redactions
            if not text:
                continue
            key = f"r{index}"
            if kind == "user":
                b.add(Event("message", role="user", text=text, ts=self.when), f"{key}:text")
            elif kind == "model":
                b.add(Event("message", role="assistant", text=text, ts=self.when), f"{key}:text")
                files = _edited_files(lines)
                if files:
                    pending_edit = f"{key}:edit"
                    b.add(
                        Event(
                            "tool_call",
                            name="edit",
                            call_id=pending_edit,
                            input={"files": files},
                            ts=self.when,
                        ),
                        f"{key}:call",
                    )
            else:
                if pending_edit is None and after_reply and _EDIT_RESULT.search(text):
                    # aider answered an edit it could not find blocks for (a malformed reply)
                    pending_edit = f"{key}:edit"
                    b.add(
                        Event(
                            "tool_call",
                            name="edit",
                            call_id=pending_edit,
                            input={"files": _APPLIED.findall(text)},
                            ts=self.when,
                        ),
                        f"{key}:call",
                    )
                pending_edit = self._aider(text, key, pending_edit)
            after_reply = kind == "model"
        return b.build()

    def _aider(self, text: str, key: str, pending_edit: str | None) -> str | None:
        """Aider's output: an edit's result, shell runs, or a system message.

        Returns the edit call still waiting for a result: none, once aider has answered.
        """
        b = self.builder
        parts = re.split(r"(?m)^Running (.+)$", text)
        head = parts[0].strip()
        if pending_edit is not None and head:
            failed = bool(_EDIT_FAILED.search(head))
            b.add(
                Event(
                    "tool_result",
                    call_id=pending_edit,
                    name="edit",
                    output=head,
                    is_error=failed,
                    ts=self.when,
                ),
                f"{key}:result",
            )
        elif head:
            b.add(Event("message", role="system", text=head, ts=self.when), f"{key}:text")
        for position in range(1, len(parts), 2):
            call_id = f"{key}:run{position}"
            output = parts[position + 1].strip()
            b.add(
                Event(
                    "tool_call",
                    name="shell",
                    call_id=call_id,
                    input={"command": parts[position].strip()},
                    ts=self.when,
                ),
                f"{call_id}:call",
            )
            b.add(
                Event(
                    "tool_result",
                    call_id=call_id,
                    name="shell",
                    output=output,
                    is_error=bool(_SHELL_FAILED.search(output)),
                    ts=self.when,
                ),
                f"{call_id}:result",
            )
        return None


def _edited_files(lines: list[str]) -> list[str]:
    """File names of a reply's edit blocks: the nearest non-fence line above each block."""
    files: list[str] = []
    for index, line in enumerate(lines):
        if not _BLOCK.match(line):
            continue
        for above in reversed(lines[max(0, index - 3) : index]):
            name = above.strip()
            if name and not name.startswith("```"):
                if name not in files:
                    files.append(name)
                break
    return files
