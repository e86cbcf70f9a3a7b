"""Local fake model APIs for tests: the real SDKs talk HTTP to these, on 127.0.0.1 only.

:class:`FakeServer` is a threaded ``http.server`` that records every request (method, path,
headers, JSON body, the status answered and the reply) and can be told to answer some
statuses first (``fail_first=[429, 529]``, with ``retry-after-ms`` so SDK backoff stays short)
and to hold each answer ``delay`` seconds (to observe concurrency: ``max_in_flight``).
Subclasses route requests:

- :class:`FakeAnthropic` — the Messages API (``POST /v1/messages``: a forced tool call whose
  input the *brain* builds from the request text, usage with cache writes for a new
  ``cache_control`` prefix and cache reads for a known one) and the Message Batches API
  (create, retrieve — ``in_progress`` for ``polls_before_end`` polls — cancel, and JSONL
  results in reverse order, so callers must map by ``custom_id``; ``batch_errors`` makes
  items error);
- :class:`FakeOpenAI` — Chat Completions (``POST /v1/chat/completions``: a function tool call,
  or with ``tools=False`` a 400 for any request with tools and JSON content for
  ``response_format`` requests; cached prompt tokens for a known system message).

The brain defaults to :func:`memdir.dream.llm.fake.answer`, the deterministic fake model, so
the HTTP fakes and the in-process fake answer alike. Token counts are 4 characters a token.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

from memdir.dream.llm.fake import answer, estimate_tokens

Brain = Callable[[str, str], dict[str, Any]]
Answer = tuple[int, dict[str, str], Any]


@dataclass
class Recorded:
    """One request as the server saw it, and what it answered."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    status: int = 0
    reply: Any = None


@dataclass
class FakeServer:
    """A threaded HTTP server on 127.0.0.1 that records requests; subclasses implement route."""

    fail_first: list[int] = field(default_factory=list)
    delay: float = 0.0
    requests: list[Recorded] = field(default_factory=list)
    max_in_flight: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                server._handle(self, "GET")

            def do_POST(self) -> None:
                server._handle(self, "POST")

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def route(self, record: Recorded) -> Answer:
        """What to answer; subclasses route their API's paths. Here: every path is unknown."""
        return 404, {}, self.error_body(404)

    def error_body(self, status: int) -> Any:
        return {"type": "error", "error": {"type": f"http_{status}", "message": "fake failure"}}

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        record = Recorded(
            method, handler.path, {k.lower(): v for k, v in handler.headers.items()},
            json.loads(raw) if raw else None,
        )  # fmt: skip
        with self._lock:
            self.requests.append(record)
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            failure = self.fail_first.pop(0) if self.fail_first else None
        try:
            if self.delay:
                time.sleep(self.delay)
            if failure is not None:
                status, headers, reply = failure, {"retry-after-ms": "5"}, self.error_body(failure)
            else:
                status, headers, reply = self.route(record)
        finally:
            with self._lock:
                self._in_flight -= 1
        record.status, record.reply = status, reply
        payload = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
        handler.send_response(status)
        handler.send_header("content-type", headers.pop("content-type", "application/json"))
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("content-length", str(len(payload)))
        handler.end_headers()
        handler.wfile.write(payload)

    def served(self, path: str = "") -> list[Recorded]:
        """Requests answered 200 whose path starts with ``path``."""
        return [r for r in self.requests if r.status == 200 and r.path.startswith(path)]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [block.get("text", "") for block in content or [] if isinstance(block, dict)]


@dataclass
class FakeAnthropic(FakeServer):
    """Messages + Message Batches, answering through ``brain`` (see the module docstring)."""

    brain: Brain = answer
    polls_before_end: int = 1
    batch_errors: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.prefixes: set[str] = set()
        self.batches: dict[str, dict[str, Any]] = {}
        super().__post_init__()

    def error_body(self, status: int) -> Any:
        kind = {429: "rate_limit_error", 529: "overloaded_error"}.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": f"fake {kind}"}}

    def route(self, record: Recorded) -> Answer:
        path = record.path.split("?")[0]
        if record.method == "POST" and path == "/v1/messages":
            return 200, {}, self.message(record.body)
        if record.method == "POST" and path == "/v1/messages/batches":
            return 200, {}, self.create_batch(record.body)
        cancel = re.fullmatch(r"/v1/messages/batches/([^/]+)/cancel", path)
        if record.method == "POST" and cancel and cancel.group(1) in self.batches:
            batch = self.batches[cancel.group(1)]
            batch["cancelled"] = True
            return 200, {}, self.batch_json(batch) | {"processing_status": "canceling"}
        match = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results)?", path)
        if record.method == "GET" and match and match.group(1) in self.batches:
            batch = self.batches[match.group(1)]
            if match.group(2):
                lines = [json.dumps(self.batch_result(item)) for item in batch["requests"]]
                return 200, {"content-type": "application/binary"}, "\n".join(lines[::-1]).encode()
            batch["polls"] += 1
            return 200, {}, self.batch_json(batch)
        return 404, {}, {"type": "error", "error": {"type": "not_found_error", "message": path}}

    def message(self, params: dict[str, Any]) -> dict[str, Any]:
        system = params.get("system") or []
        system_blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system
        cached = ""
        for i, block in enumerate(system_blocks):
            if "cache_control" in block:
                cached = json.dumps(params.get("tools")) + "".join(
                    b["text"] for b in system_blocks[: i + 1]
                )
        texts = [b["text"] for b in system_blocks]
        for message in params["messages"]:
            texts.extend(_texts(message["content"]))
        tool = params["tool_choice"]["name"]
        data = self.brain(tool, "\n\n".join(texts))
        total = estimate_tokens(json.dumps(params.get("tools")) + "".join(texts))
        usage = {"input_tokens": total, "output_tokens": estimate_tokens(json.dumps(data))}
        if cached:
            digest = hashlib.sha256(cached.encode()).hexdigest()
            kind = (
                "cache_read_input_tokens"
                if digest in self.prefixes
                else "cache_creation_input_tokens"
            )
            self.prefixes.add(digest)
            usage[kind] = estimate_tokens(cached)
            usage["input_tokens"] = max(1, total - usage[kind])
        return {
            "id": f"msg_{len(self.requests)}", "type": "message", "role": "assistant",
            "model": params["model"], "stop_reason": "tool_use", "stop_sequence": None,
            "content": [{"type": "tool_use", "id": "toolu_1", "name": tool, "input": data}],
            "usage": usage,
        }  # fmt: skip

    def create_batch(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = f"msgbatch_{len(self.batches) + 1}"
        self.batches[batch_id] = {"id": batch_id, "requests": body["requests"], "polls": 0}
        return self.batch_json(self.batches[batch_id])

    def batch_json(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = batch["polls"] >= self.polls_before_end
        count = len(batch["requests"])
        counts = {"processing": 0, "succeeded": count, "errored": 0, "canceled": 0, "expired": 0}
        if not ended:
            counts.update(processing=count, succeeded=0)
        results = f"{self.url}/v1/messages/batches/{batch['id']}/results"
        return {
            "id": batch["id"], "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": "2026-11-29T00:00:00Z", "expires_at": "2026-11-30T00:00:00Z",
            "ended_at": "2026-11-29T00:01:00Z" if ended else None, "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": results if ended else None,
        }  # fmt: skip

    def batch_result(self, item: dict[str, Any]) -> dict[str, Any]:
        custom_id = item["custom_id"]
        if custom_id in self.batch_errors:
            error = {"type": self.batch_errors[custom_id], "message": "fake batch item error"}
            result = {"type": "errored", "error": {"type": "error", "error": error}}
        else:
            result = {"type": "succeeded", "message": self.message(item["params"])}
        return {"custom_id": custom_id, "result": result}


@dataclass
class FakeOpenAI(FakeServer):
    """Chat Completions at ``{url}/v1``, answering through ``brain``; ``tools=False`` refuses
    tools the way some self-hosted servers do."""

    brain: Brain = answer
    tools: bool = True

    def __post_init__(self) -> None:
        self.systems: set[str] = set()
        super().__post_init__()

    @property
    def base_url(self) -> str:
        return f"{self.url}/v1"

    def error_body(self, status: int) -> Any:
        return {"error": {"message": f"fake {status}", "type": "server_error", "code": None}}

    def route(self, record: Recorded) -> Answer:
        body = record.body
        if record.method != "POST" or record.path != "/v1/chat/completions":
            return 404, {}, {"error": {"message": record.path, "type": "not_found"}}
        if "tools" in body and not self.tools:
            refusal = "tools are not supported by this server; tool_choice ignored"
            return 400, {}, {"error": {"message": refusal, "type": "invalid_request_error"}}
        texts = [t for m in body["messages"] for t in _texts(m["content"])]
        if "tool_choice" in body:
            tool = body["tool_choice"]["function"]["name"]
        else:
            tool = body["response_format"].get("json_schema", {}).get("name", "record_findings")
        data = self.brain(tool, "\n\n".join(texts))
        arguments = json.dumps(data)
        if "tools" in body:
            call = {"id": "call_1", "type": "function",
                    "function": {"name": tool, "arguments": arguments}}  # fmt: skip
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": arguments}, "stop"
        system = body["messages"][0]["content"]
        cached = estimate_tokens(system) if system in self.systems else 0
        self.systems.add(system)
        prompt = estimate_tokens("".join(texts))
        return 200, {}, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt, "completion_tokens": estimate_tokens(arguments),
                      "total_tokens": prompt + estimate_tokens(arguments),
                      "prompt_tokens_details": {"cached_tokens": cached}},
        }  # fmt: skip
