"""The orchestrator of model-assisted dreaming: sub-agent reviews and proposal writing.

:class:`Assistant` is what a dream run holds when a model is configured:

- :meth:`Assistant.review` cuts the sessions into batches (``batch_size`` transcripts, at most
  :data:`BATCH_CHARS` characters of data), sends each batch to the model as one sub-agent call
  with the shared prefix (steering instructions + memory index) and the transcripts as
  delimited data, and maps the structured findings to ``Signal(miner="model", …)`` values
  paired with their transcript (see :mod:`.findings`);
- :meth:`Assistant.write` asks the model, once per :data:`WRITE_CHUNK` drafts, to rewrite the
  drafts' rationale and note text from the miners' statistics and evidence; operations keep
  their kind, path and preconditions.

Calls run with at most ``concurrency`` in flight, or through the provider's batch API
(``use_batches=True``; ``None`` lets the backend decide by run size). Every call is checked
against the budget first (:mod:`.budget`); transient failures the SDK's own retries did not
absorb are retried ``retries`` more times with jittered exponential backoff
(``backoff * 2**attempt * U(0.5, 1.5)`` seconds). When the budget is exhausted or the model
refuses the run (bad key, unknown model) no further call is made: :attr:`Assistant.state`
records it, the findings so far are kept, and the run goes on with the deterministic miners.
Everything returned passes the injection screening (:mod:`.findings`), with or without a
model. :attr:`Assistant.usage` holds requests, tokens and cost for the run record.

Output order never depends on timing: results are returned in input order.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from memdir.dream.llm.budget import Budget, BudgetExhausted, Ledger, Reservation
from memdir.dream.llm.findings import apply_rewrite, screen_draft, signals_from_findings
from memdir.dream.llm.port import (
    ModelCallError,
    ModelPort,
    ModelReply,
    ModelRequest,
    TokenUsage,
)
from memdir.dream.llm.pricing import Usage
from memdir.dream.llm.prompts import (
    DRAFTS_SCHEMA,
    DRAFTS_TOOL,
    FINDINGS_SCHEMA,
    FINDINGS_TOOL,
    REVIEW_SYSTEM,
    WRITE_SYSTEM,
    draft_block,
    known_titles_block,
    shared_prefix,
    transcript_block,
)
from memdir.dream.model import Draft, MemoryFile, Session, Signal
from memdir.transcripts.model import TranscriptInfo

__all__ = ["BATCH_CHARS", "KNOWN_TITLES", "WRITE_CHUNK", "AssistState", "Assistant", "Estimate"]

#: Most characters of transcript data in one review call (about 25k tokens).
BATCH_CHARS: Final = 100_000
#: Most drafts rewritten by one write call.
WRITE_CHUNK: Final = 25
#: Most titles of earlier findings offered to later review calls for reuse.
KNOWN_TITLES: Final = 40

Status = Literal["idle", "ok", "budget-exhausted", "failed"]
Outcome = Literal["skipped", "failed"]


@dataclass
class AssistState:
    """What the model part of a run did, for the run record and the report.

    ``status``: ``idle`` (no call yet), ``ok``, ``budget-exhausted`` or ``failed`` (the model
    refused the run); in the last two, ``reason`` says why and nothing more was sent.
    Sessions in batches that were skipped or failed were mined offline only.
    """

    status: Status = "idle"
    reason: str = ""
    batch_api: bool = False
    batches: int = 0
    batches_done: int = 0
    batches_failed: int = 0
    batches_skipped: int = 0
    sessions_reviewed: int = 0
    sessions_offline: int = 0
    findings: int = 0
    findings_dropped: int = 0
    findings_flagged: int = 0
    drafts_rewritten: int = 0
    drafts_offline: int = 0
    drafts_flagged: int = 0
    rewrites_withheld: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def stopped(self) -> bool:
        return self.status in ("budget-exhausted", "failed")

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if not k.startswith("_")}
        out["errors"] = list(self.errors[:20])
        return out

    def summary(self) -> list[str]:
        """Report lines: what the model reviewed and wrote, and what it did not, and why."""
        lines = [
            f"model review: {self.sessions_reviewed} sessions in {self.batches_done} of"
            f" {self.batches} batches{' (batch API)' if self.batch_api else ''};"
            f" {self.findings} findings ({self.findings_dropped} dropped without a usable"
            f" reference, {self.findings_flagged} flagged as suspected injection)",
            f"model writing: {self.drafts_rewritten} drafts rewritten, {self.drafts_offline}"
            f" left as the miners wrote them, {self.rewrites_withheld} rewrites withheld as"
            f" suspected injection, {self.drafts_flagged} drafts flagged",
        ]
        if self.stopped:
            lines.append(
                f"model stopped ({self.status}): {self.reason}; {self.sessions_offline}"
                " sessions were mined offline only"
            )
        elif self.batches_failed:
            lines.append(
                f"{self.batches_failed} batches failed ({self.sessions_offline} sessions mined"
                f" offline only): {'; '.join(self.errors[:3])}"
            )
        return lines


@dataclass(frozen=True, slots=True)
class Estimate:
    """Worst-case review cost: calls, tokens (input estimate + max_tokens each) and dollars."""

    calls: int
    tokens: int
    usd: float


class Assistant:
    """Model-assisted review and writing for one dream run (see the module docstring).

    ``instructions`` — the operator's steering text, in every prompt; ``budget`` — token and
    dollar limits (unlimited by default); ``concurrency`` — calls in flight at most;
    ``batch_size`` — transcripts per review call; ``use_batches`` — the provider batch API
    (``None``: the backend decides by run size); ``max_tokens`` — output limit per call;
    ``retries`` / ``backoff`` — the orchestrator's own retries of transient failures;
    ``progress(done, total)`` — called as calls finish; ``sleep`` — how backoff waits;
    ``usage`` — what a resumed run already spent (:meth:`Usage.from_json`), which counts
    against the budget. One instance serves one run: ``usage`` and ``state`` accumulate
    across its calls. Call :meth:`write` even when :attr:`state` says the model stopped: it
    then makes no call, but still screens every draft for injection.
    """

    def __init__(
        self,
        port: ModelPort,
        *,
        instructions: str = "",
        budget: Budget | None = None,
        concurrency: int = 4,
        batch_size: int = 8,
        use_batches: bool | None = False,
        max_tokens: int = 4096,
        retries: int = 2,
        backoff: float = 2.0,
        progress: Callable[[int, int], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        usage: Usage | None = None,
    ) -> None:
        self.port = port
        self.instructions = instructions
        self.budget = budget or Budget()
        self.concurrency = max(1, concurrency)
        self.batch_size = max(1, batch_size)
        self.use_batches = use_batches
        self.max_tokens = max_tokens
        self.retries = max(0, retries)
        self.backoff = backoff
        self.progress = progress
        self.sleep = sleep
        self.usage = usage if usage is not None else Usage()
        self.state = AssistState()
        self.ledger = Ledger(self.budget, self.usage, port.model)
        self._lock = threading.Lock()
        self._calls = 0
        self._titles: dict[str, int] = {}

    # --- review -------------------------------------------------------------------------------

    def review(
        self, sessions: Sequence[Session], memory: Sequence[MemoryFile]
    ) -> list[tuple[TranscriptInfo, Signal]]:
        """Model findings over ``sessions`` as (transcript, signal) pairs, in session order."""
        batches = self._batches(sessions)
        requests = self.review_requests(sessions, memory, batches=batches)
        self.state.batches += len(batches)
        results = self._run(requests)
        out: list[tuple[TranscriptInfo, Signal]] = []
        for batch, result in zip(batches, results, strict=True):
            if not isinstance(result, ModelReply):
                self.state.sessions_offline += len(batch)
                if result == "failed":
                    self.state.batches_failed += 1
                else:
                    self.state.batches_skipped += 1
                continue
            signals, dropped, flagged = signals_from_findings(result.data, {s.id: s for s in batch})
            out.extend(signals)
            for _, signal in signals:
                if not signal.subject.get("flags"):
                    self._titles[signal.title] = self._titles.get(signal.title, 0) + 1
            state = self.state
            state.batches_done += 1
            state.sessions_reviewed += len(batch)
            state.findings += len(result.data.get("findings") or [])
            state.findings_dropped += dropped
            state.findings_flagged += flagged
        return out

    def review_requests(
        self,
        sessions: Sequence[Session],
        memory: Sequence[MemoryFile],
        *,
        batches: list[list[Session]] | None = None,
    ) -> list[ModelRequest]:
        """The review calls ``sessions`` make (one per batch); for estimates and dry runs.

        Titles that earlier :meth:`review` calls of this run found (clean ones, the most
        frequent :data:`KNOWN_TITLES`) open each call's data, so a run that reviews its sessions
        chunk by chunk keeps one title per pattern. Calls of one ``review`` are built together,
        so what they send never depends on timing.
        """
        prefix = shared_prefix(self.instructions, memory)
        ranked = sorted(self._titles.items(), key=lambda kv: (-kv[1], kv[0]))[:KNOWN_TITLES]
        lead = (known_titles_block([t for t, _ in ranked]),) if ranked else ()
        return [
            ModelRequest(
                system=REVIEW_SYSTEM,
                prefix=prefix,
                data=(*lead, *(transcript_block(s) for s in batch)),
                schema=FINDINGS_SCHEMA,
                tool_name=FINDINGS_TOOL,
                tool_description="Record the patterns found in these sessions, with references.",
                max_tokens=self.max_tokens,
                custom_id=self._custom_id("review"),
            )
            for batch in (self._batches(sessions) if batches is None else batches)
        ]

    def estimate(self, sessions: Sequence[Session], memory: Sequence[MemoryFile]) -> Estimate:
        """The worst case of reviewing ``sessions`` (what the budget check reserves)."""
        batched = bool(self.use_batches) and self.port.supports_batches
        needs = [
            self.ledger.worst_case(r, batched=batched)
            for r in self.review_requests(sessions, memory)
        ]
        return Estimate(len(needs), sum(n.tokens for n in needs), sum(n.usd for n in needs))

    def _batches(self, sessions: Sequence[Session]) -> list[list[Session]]:
        batches: list[list[Session]] = []
        size = 0
        for session in sessions:
            chars = sum(len(e.text or e.output or "") + 80 for e in session.events)
            if batches and len(batches[-1]) < self.batch_size and size + chars <= BATCH_CHARS:
                batches[-1].append(session)
                size += chars
            else:
                batches.append([session])
                size = chars
        return batches

    # --- write --------------------------------------------------------------------------------

    def write(self, drafts: list[Draft], memory: Sequence[MemoryFile]) -> list[Draft]:
        """The drafts with model-written rationale and note text, every one screened."""
        prefix = shared_prefix(self.instructions, memory)
        chunks = [drafts[i : i + WRITE_CHUNK] for i in range(0, len(drafts), WRITE_CHUNK)]
        requests = [
            ModelRequest(
                system=WRITE_SYSTEM,
                prefix=prefix,
                data=tuple(draft_block(n, d) for n, d in enumerate(chunk)),
                schema=DRAFTS_SCHEMA,
                tool_name=DRAFTS_TOOL,
                tool_description="Record the rewritten rationale and note texts, by draft id.",
                max_tokens=self.max_tokens,
                custom_id=self._custom_id("write"),
            )
            for chunk in chunks
        ]
        results = self._run(requests, allow_batch=False)
        out: list[Draft] = []
        for chunk, result in zip(chunks, results, strict=True):
            proposals: dict[int, dict[str, Any]] = {}
            if isinstance(result, ModelReply):
                for item in result.data.get("proposals") or []:
                    if isinstance(item, dict) and isinstance(item.get("id"), int):
                        proposals.setdefault(item["id"], item)
            for number, draft in enumerate(chunk):
                proposal = proposals.get(number)
                if proposal is None:
                    self.state.drafts_offline += 1
                    out.append(screen_draft(draft))
                    continue
                rewritten, withheld = apply_rewrite(draft, proposal)
                self.state.drafts_rewritten += 1
                self.state.rewrites_withheld += withheld
                out.append(screen_draft(rewritten))
        self.state.drafts_flagged += sum(1 for d in out if "injection-suspected" in d.flags)
        return out

    # --- calls --------------------------------------------------------------------------------

    def _custom_id(self, kind: str) -> str:
        with self._lock:
            self._calls += 1
            return f"{kind}-{self._calls}"

    def _run(
        self, requests: list[ModelRequest], *, allow_batch: bool = True
    ) -> list[ModelReply | Outcome]:
        if not requests:
            return []
        batch = self.use_batches
        if allow_batch and self.port.supports_batches and batch is not False:
            if batch is None:
                batch = len(requests) >= getattr(self.port, "batch_threshold", len(requests) + 1)
            if batch:
                return self._run_batch(requests)
        done = 0

        def one(request: ModelRequest) -> ModelReply | Outcome:
            nonlocal done
            result = self._call(request)
            if self.progress is not None:
                with self._lock:
                    done += 1
                    self.progress(done, len(requests))
            return result

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(one, requests))

    def _call(self, request: ModelRequest) -> ModelReply | Outcome:
        """One call with budget check and retries; the reply, or why there is none."""
        for attempt in range(self.retries + 1):
            reservation = self._reserve(request)
            if reservation is None:
                return "skipped"
            try:
                reply = self.port.complete(request)
            except ModelCallError as exc:
                self._settle(reservation, None, spent=exc.usage)
                if exc.transient and not exc.fatal and attempt < self.retries:
                    self.usage.count(retries=1)
                    self.sleep(self.backoff * 2**attempt * random.uniform(0.5, 1.5))
                    continue
                self._failed(exc)
                return "failed"
            self._settle(reservation, reply)
            return reply
        raise AssertionError("unreachable: the last attempt returns")

    def _run_batch(self, requests: list[ModelRequest]) -> list[ModelReply | Outcome]:
        """Requests that fit the budget go in one provider batch; transient failures retry."""
        self.state.batch_api = True
        held: list[Reservation] = []
        for request in requests:
            reservation = self._reserve(request, batched=True)
            if reservation is None:
                break
            held.append(reservation)
        chosen = requests[: len(held)]
        results: list[ModelReply | Outcome] = ["skipped"] * len(requests)
        replies = (
            self.port.complete_many(chosen, concurrency=self.concurrency, batch=True)
            if chosen
            else []
        )
        retry: list[int] = []
        for i, (reply, reservation) in enumerate(zip(replies, held, strict=True)):
            if isinstance(reply, ModelReply):
                self._settle(reservation, reply)
                results[i] = reply
                continue
            self._settle(reservation, None, spent=reply.usage)
            if reply.transient and not reply.fatal and self.retries:
                retry.append(i)
            else:
                self._failed(reply)
                results[i] = "failed"
        if retry:
            self.usage.count(retries=len(retry))
            with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
                again = pool.map(self._call, [chosen[i] for i in retry])
                for i, result in zip(retry, again, strict=True):
                    results[i] = result
        if self.progress is not None:
            self.progress(len(requests), len(requests))
        return results

    def _reserve(self, request: ModelRequest, *, batched: bool = False) -> Reservation | None:
        if self.state.stopped:
            return None
        try:
            return self.ledger.reserve(request, batched=batched)
        except BudgetExhausted as exc:
            with self._lock:
                if not self.state.stopped:
                    self.state.status = "budget-exhausted"
                    self.state.reason = exc.message
            return None

    def _settle(
        self, reservation: Reservation, reply: ModelReply | None, *, spent: TokenUsage | None = None
    ) -> None:
        """Count what a call used (a reply, or a failed call's ``spent``), then release."""
        if reply is not None:
            self.usage.add(reply.usage, reply.model or self.port.model, batched=reply.batched)
        elif spent is not None:
            self.usage.add(spent, self.port.model)
        self.ledger.release(reservation)
        with self._lock:
            if reply is not None and self.state.status == "idle":
                self.state.status = "ok"

    def _failed(self, exc: ModelCallError) -> None:
        self.usage.count(failures=1)
        with self._lock:
            self.state.errors.append(exc.message)
            if exc.fatal and not self.state.stopped:
                self.state.status = "failed"
                self.state.reason = exc.message
