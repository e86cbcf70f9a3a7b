"""Claude Code session files: ``~/.claude/projects/<project>/<session>.jsonl``.

Each line is a record with ``type``, ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``,
``cwd``, ``gitBranch``, ``isSidechain`` and, for ``user`` / ``assistant`` lines, the API
``message``. How lines become events:

- ``user``: string content or ``text`` blocks -> user messages; ``tool_result`` blocks -> tool
  results linked to their ``tool_use`` by ``tool_use_id``; images -> ``[image]`` text.
- ``assistant``: Claude Code writes one line per content block, the lines of one API message
  sharing ``message.id``. They form one turn: each block becomes an event (``text`` ->
  assistant message, ``thinking`` -> thinking, ``tool_use`` -> tool call) carrying that
  ``message_id`` and the model, and the message's token usage — repeated on every line — is
  one ``usage`` event, with the values of its last line, after the turn's blocks.
- ``system`` lines with text -> system messages. Other types (``summary``,
  ``file-history-snapshot``, ``progress``, ``queue-operation``, ...) carry no conversation and
  are counted as ignored.

``is_error`` rule: the ``tool_result`` block's own ``is_error`` (absent = false). The exit
code is read where the output starts with ``Exit code N``.

Sub-agents: lines with ``isSidechain: true`` belong to a sub-agent session linked to the
session in ``sessionId``. With an ``agentId`` (sub-agent files ``agent-<id>.jsonl``, also
under ``<session>/subagents/``) its session id is ``<sessionId>/agent-<agentId>``; older files
that keep sidechains inline get ``<sessionId>/sidechain-<uuid of the chain's first line>``.

Event keys are ``<line uuid>:<block index>`` (``line<N>`` without a uuid) and
``<message.id>:usage``, so a session file that grows re-imports only its new lines' events.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from memdir.transcripts.builder import TranscriptBuilder
from memdir.transcripts.common import as_str, blocks_text, dumps, exit_code_in, usage_of
from memdir.transcripts.model import Event, Transcript, parse_time
from memdir.transcripts.reader import ParseContext, Record, Sample, Source, iter_records

__all__ = ["ClaudeCodeImporter"]

_CONVERSATION: Final = ("user", "assistant", "system")
#: Tuples, not sets: a ``type`` read from the input may be unhashable (a list).
_KNOWN_TYPES: Final = (
    *_CONVERSATION, "summary", "file-history-snapshot", "progress", "queue-operation",
    "attachment", "custom-title", "ai-title", "last-prompt", "pr-link", "agent-name",
    "permission-mode", "agent-setting", "bridge-session", "worktree-state",
)  # fmt: skip
_META_FIELDS: Final = ("cwd", "gitBranch", "version", "slug", "userType")


class ClaudeCodeImporter:
    name = "claude-code"
    description = "Claude Code session JSONL (~/.claude/projects/<project>/<session>.jsonl)"

    def detect(self, sample: Sample) -> float:
        if sample.shape != "jsonl":
            return 0.0
        hits = 0
        for record in sample.records:
            if not isinstance(record, dict) or record.get("type") not in _KNOWN_TYPES:
                continue
            if "sessionId" in record or "leafUuid" in record or "uuid" in record:
                hits += 1
        return 0.95 if hits else 0.0

    def parse(self, source: Source, shape: str, ctx: ParseContext) -> Iterator[Transcript]:
        session = _Session(source, ctx)
        for record in iter_records(source, shape, ctx):
            session.line(record)
        yield from session.finish()


class _Turn:
    """The assistant lines of one API message seen so far (consecutive lines)."""

    def __init__(self, builder: TranscriptBuilder, message_id: str) -> None:
        self.builder = builder
        self.message_id = message_id
        self.usage: dict[str, int] | None = None
        self.ts: Any = None
        self.model: str | None = None


class _Session:
    """Routes a file's lines to the transcripts they belong to (main session, sub-agents)."""

    def __init__(self, source: Source, ctx: ParseContext) -> None:
        self.source = source
        self.ctx = ctx
        self.builders: dict[str, TranscriptBuilder] = {}
        self.sidechain_root: dict[str, str] = {}  # uuid of a sidechain line -> its chain's root
        self.turn: _Turn | None = None
        self.usage_done: set[tuple[str, str]] = set()

    def line(self, record: Record) -> None:
        ctx, source = self.ctx, self.source
        value = ctx.clean(record.value)
        if not isinstance(value, dict):
            ctx.skip(source, record.line, "not a JSON object; skipped")
            return
        kind = value.get("type")
        if kind not in _CONVERSATION:
            if kind in _KNOWN_TYPES:
                ctx.ignored += 1
            else:
                ctx.skip(source, record.line, f"unknown record type {kind!r:.40}; skipped")
            return
        session_id = value.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            ctx.skip(source, record.line, f"{kind} line without a sessionId; skipped")
            return
        message = value.get("message")
        if not isinstance(message, dict):
            if kind != "system":
                ctx.skip(source, record.line, f"{kind} line whose 'message' is not an object; "
                         "skipped")  # fmt: skip
                return
            message = {}
        if kind != "system" and "content" not in message:
            ctx.skip(source, record.line, f"{kind} line whose message has no 'content'; skipped")
            return
        builder = self._builder(value, session_id, record.line)
        builder.transcript.redactions += ctx.last_redactions
        for field in _META_FIELDS:
            builder.set_meta(field, as_str(value.get(field)))
        uuid = value.get("uuid")
        base = uuid if isinstance(uuid, str) and uuid else f"line{record.line}"
        ts = parse_time(value.get("timestamp"))
        raw = dumps(value)
        if kind == "assistant":
            self._assistant(builder, message, base, ts, raw)
            return
        self._end_turn()
        if kind == "user":
            self._user(builder, message, base, ts, raw)
        else:
            self._system(builder, value, base, ts, raw)

    def _builder(self, value: Mapping[str, Any], session_id: str, line: int) -> TranscriptBuilder:
        key, parent = session_id, None
        if value.get("isSidechain") is True:
            parent = session_id
            agent = value.get("agentId")
            if isinstance(agent, str) and agent:
                key = f"{session_id}/agent-{agent}"
            else:
                key = f"{session_id}/sidechain-{self._root(value)}"
        builder = self.builders.get(key)
        if builder is None:
            builder = TranscriptBuilder(ClaudeCodeImporter.name, key, origin=self.source.name,
                                        line=line)  # fmt: skip
            builder.transcript.parent_session = parent
            self.builders[key] = builder
        return builder

    def _root(self, value: Mapping[str, Any]) -> str:
        uuid = value.get("uuid")
        parent = value.get("parentUuid")
        root = self.sidechain_root.get(parent) if isinstance(parent, str) else None
        if root is None:
            root = uuid if isinstance(uuid, str) and uuid else "unknown"
        if isinstance(uuid, str):
            self.sidechain_root[uuid] = root
        return root

    def _user(
        self,
        builder: TranscriptBuilder,
        message: Mapping[str, Any],
        base: str,
        ts: Any,
        raw: str | None,
    ) -> None:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for index, block in enumerate(blocks):
            event = _user_block(block, ts)
            if event is None:
                continue
            event.raw, raw = raw, None
            builder.add(event, f"{base}:{index}")
        if raw is not None:  # no block with anything to show
            self.ctx.ignored += 1

    def _system(
        self, builder: TranscriptBuilder, value: Mapping[str, Any], base: str, ts: Any, raw: str
    ) -> None:
        text = as_str(value.get("content"))
        if text is None:
            self.ctx.ignored += 1
            return
        builder.add(Event("message", role="system", text=text, ts=ts, raw=raw), f"{base}:0")

    def _assistant(
        self,
        builder: TranscriptBuilder,
        message: Mapping[str, Any],
        base: str,
        ts: Any,
        raw: str | None,
    ) -> None:
        message_id = as_str(message.get("id")) or base
        turn = self.turn
        if turn is None or turn.builder is not builder or turn.message_id != message_id:
            self._end_turn()
            turn = self.turn = _Turn(builder, message_id)
        model = as_str(message.get("model"))
        turn.model = model or turn.model
        turn.usage = usage_of(message.get("usage")) or turn.usage
        turn.ts = ts or turn.ts
        content = message.get("content")
        blocks = content if isinstance(content, list) else [content]
        for index, block in enumerate(blocks):
            event = _assistant_block(block, ts)
            if event is None:
                continue
            event.model, event.message_id = model, message_id
            event.raw, raw = raw, None
            builder.add(event, f"{base}:{index}")

    def _end_turn(self) -> None:
        turn, self.turn = self.turn, None
        if turn is None or turn.usage is None:
            return
        done = (turn.builder.transcript.session_id, turn.message_id)
        if done in self.usage_done:
            return  # the message came back after other lines: its usage is counted once
        self.usage_done.add(done)
        event = Event("usage", ts=turn.ts, usage=turn.usage, model=turn.model,
                      message_id=turn.message_id)  # fmt: skip
        turn.builder.add(event, f"{turn.message_id}:usage")

    def finish(self) -> Iterator[Transcript]:
        self._end_turn()
        for builder in self.builders.values():
            yield builder.build()


def _user_block(block: Any, ts: Any) -> Event | None:
    if isinstance(block, Mapping) and block.get("type") == "tool_result":
        output = blocks_text(block.get("content"))
        is_error = block.get("is_error") is True
        return Event("tool_result", ts=ts, call_id=as_str(block.get("tool_use_id")),
                     output=output if output is not None else "", is_error=is_error,
                     exit_code=exit_code_in(output))  # fmt: skip
    text = blocks_text(block)
    if text is None:
        return None
    return Event("message", role="user", text=text, ts=ts)


def _assistant_block(block: Any, ts: Any) -> Event | None:
    if isinstance(block, str):
        return Event("message", role="assistant", text=block, ts=ts)
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        return Event("message", role="assistant", text=as_str(block.get("text")) or "", ts=ts)
    if kind == "thinking":
        return Event("thinking", text=as_str(block.get("thinking")) or "", ts=ts)
    if kind == "redacted_thinking":
        return Event("thinking", text="[redacted thinking]", ts=ts)
    if kind in ("tool_use", "server_tool_use"):
        return Event("tool_call", name=as_str(block.get("name")), call_id=as_str(block.get("id")),
                     input=block.get("input"), ts=ts)  # fmt: skip
    return None
