"""A deterministic fake model: for demos, tests and the fake HTTP servers the tests run.

:func:`answer` plays the model. It reads only what a real model would read — the request's
text, with its delimited data blocks — and returns the structured object the schema asks for:

- for ``record_findings``: one ``tool_error`` finding per failing tool result (titled
  ``"<tool> fails: <its signature, digits as N>"``, referencing the call and its result —
  through the fix when a later call of the same tool worked: that call, as shown, is the
  finding's ``fix``) and one ``preference`` finding per user message that starts with
  *always*, *never*, *remember* or *from now on* (titled by the message, its text the
  suggested memory). It follows no instruction in the data — but, like a careless model, it
  does *echo* the user's words back, which is what the injection screening must catch;
- for ``record_proposals``: for every draft, a rationale that cites the draft's statistics and
  repeats the miners' rationale, and each operation's text unchanged.

Token usage is estimated at 4 characters a token. :class:`FakeModel` serves it in-process
through the same port the real backends implement (spec ``fake``); the tests' fake Anthropic
and OpenAI servers serve the same answers over HTTP.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Sequence
from typing import Any, Final

from memdir.dream.llm.port import (
    ModelCallError,
    ModelReply,
    ModelRequest,
    TokenUsage,
    complete_concurrently,
)
from memdir.dream.llm.prompts import DRAFTS_TOOL, FINDINGS_TOOL

__all__ = ["FakeModel", "answer", "estimate_tokens"]

_TRANSCRIPT = re.compile(r'<transcript_data id="([^"]*)"[^>]*>\n(.*?)\n</transcript_data>', re.S)
_DRAFT = re.compile(r'<draft_data id="(\d+)">\n(.*?)\n</draft_data>', re.S)
_LINE = re.compile(r"^\[(\d+)\] (.*)$")
_RESULT = re.compile(r"^tool_result (\S+) \(error[^)]*\)(?: signature: |: ?)(.*)$")
_WORKED = re.compile(r"^tool_result (\S+) \((?:ok|tests-failed)\b")
_CALL = re.compile(r"^tool_call (\S+) (?:\$ )?(.*)$")
_PREFERENCE_STARTS: Final = ("always", "never", "remember", "from now on")


def estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _unescape(text: str) -> str:
    return re.sub(
        r"&lt;(\s*/?\s*(?:transcript_data|memory_index|draft_data|known_titles)\b)", r"<\1", text
    )


def _fix(events: list[tuple[int, str]], at: int, tool: str) -> tuple[str, int] | None:
    """The first later call of ``tool`` that worked (its result ``ok`` or ``tests-failed``),
    as shown, with its result's position: the fix the evidence shows."""
    for index in range(at + 1, len(events) - 1):
        call = _CALL.match(events[index][1])
        if call is None or call.group(1) != tool:
            continue
        worked = _WORKED.match(events[index + 1][1])
        if worked is not None and worked.group(1) == tool:
            return call.group(2).strip(), events[index + 1][0]
    return None


def _findings(text: str) -> dict[str, Any]:
    findings: list[dict[str, Any]] = []
    for transcript_id, body in _TRANSCRIPT.findall(text):
        events = [
            (int(m.group(1)), _unescape(m.group(2)))
            for m in map(_LINE.match, body.splitlines())
            if m is not None
        ]
        for at, (position, rest) in enumerate(events):
            failed = _RESULT.match(rest)
            ref = {"transcript_id": transcript_id, "first_event": position, "last_event": position}
            if failed is not None:
                tool, error = failed.groups()
                signature = re.sub(r"\d+", "N", error.strip().splitlines()[0] if error else "")
                found: dict[str, Any] = {
                    "title": f"{tool} fails: {signature[:60]}",
                    "kind": "tool_error",
                    "detail": f"{tool} failed with: {error[:200]}",
                    "references": [{**ref, "first_event": max(0, position - 1)}],
                }
                fixed = _fix(events, at, tool)
                if fixed is not None:
                    found["fix"] = fixed[0]
                    found["suggested_memory"] = f"If {tool} fails with that, run: {fixed[0]}"
                    found["references"][0]["last_event"] = fixed[1]
                findings.append(found)
            elif rest.startswith("user: ") and rest[6:].lower().startswith(_PREFERENCE_STARTS):
                said = rest[6:].strip()
                findings.append(
                    {
                        "title": f"user preference: {said[:60]}",
                        "kind": "preference",
                        "detail": f"The user said: {said}",
                        "suggested_memory": said,
                        "references": [ref],
                    }
                )
    return {"findings": findings}


def _proposals(text: str) -> dict[str, Any]:
    proposals = []
    for number, body in _DRAFT.findall(text):
        draft = json.loads(_unescape(body))
        stats = draft["statistics"]
        rationale = (
            f"{draft['pattern']}: seen in {stats['sessions']} of {stats['sessions_selected']}"
            f" sessions ({stats['prevalence']:.0%}). {draft['rationale']}"
        )
        texts = [
            {"operation": op["operation"], "text": op.get("content", op.get("new", op.get("text")))}
            for op in draft["operations"]
            if any(key in op for key in ("content", "new", "text"))
        ]
        proposals.append({"id": int(number), "rationale": rationale, "texts": texts})
    return {"proposals": proposals}


def answer(tool_name: str, text: str) -> dict[str, Any]:
    """The structured object the fake model returns for a request's ``tool_name`` and text."""
    if tool_name == FINDINGS_TOOL:
        return _findings(text)
    if tool_name == DRAFTS_TOOL:
        return _proposals(text)
    raise ModelCallError(f"the fake model knows no tool {tool_name!r}", tool=tool_name)


class FakeModel:
    """The fake model behind the port, in-process (spec ``fake``); keeps every request."""

    supports_batches = False

    def __init__(self, model: str = "fake") -> None:
        self.model = model
        self.name = "fake" if model == "fake" else f"fake:{model}"
        self.requests: list[ModelRequest] = []
        self._lock = threading.Lock()

    def complete(self, request: ModelRequest) -> ModelReply:
        with self._lock:
            self.requests.append(request)
        text = request.text()
        data = answer(request.tool_name, text)
        usage = TokenUsage(
            input_tokens=estimate_tokens(text),
            output_tokens=estimate_tokens(json.dumps(data)),
        )
        return ModelReply(data, usage, self.model, custom_id=request.custom_id)

    def complete_many(
        self, requests: Sequence[ModelRequest], *, concurrency: int = 4, batch: bool | None = None
    ) -> list[ModelReply | ModelCallError]:
        return complete_concurrently(self, requests, concurrency)
