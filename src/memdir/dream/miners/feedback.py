"""Harness and environment feedback: what the harness tells the agent went wrong, and the fix.

Agents run inside harnesses that answer a bad turn with fixed text: SWE-agent's "Your output
was not formatted correctly", aider's "The LLM did not conform to the edit format" and
"SEARCH/REPLACE block failed to match", a linter report after an edit, "EXECUTION TIMED OUT",
"output too long", a step or cost limit, OpenHands' "Please continue working on the task".
Such text comes as a user-role (or system) message after the agent acted, or inside a tool
result — often a *successful* one (a lint report after an edit that applied). It recurs across
sessions in near-identical form; a person's words do not (those are :mod:`.corrections`).

A **feedback event** is the first line, among the first lines of such a user message
(:data:`MESSAGE_LINES`) or of a system message or tool result (:data:`RESULT_LINES`), that
matches one of the feedback kinds (:data:`KINDS`; the most specific kind in the text wins:
``edit``, ``format``, ``lint``, ``truncated``, ``timeout``, ``limit``, ``continue``,
``warning``, ``environment``; aider's "did not conform to the edit format" is an ``edit``
rejected, whatever reason follows). Messages considered: user and system messages after the
agent's first action, not a user simulator's closing line (:func:`is_simulator_closing`) and not
a slash command the user typed (``/undo``); before it, only a lint report (the harness lints the
files, e.g. at aider's ``--lint`` launch) or the model API failing in a system message: a system
prompt's words about formats and limits are no event. The line's first sentence (the advice
after it varies between a harness's versions) is masked and filed in a
:class:`~.signature.Drain` grouped by kind, so one harness message is one template whatever its
variable parts and whichever result or message carried it. A lint report's failing checks and
coded findings (``flake8 failed``, ``F821 undefined name <str>``) and the harness's request are
the signal's ``details``, counted in sessions by the reducer: the note lists the findings seen
most and quotes the most frequent request. ``environment`` lines (the model API overloaded, a
gateway error) count only in messages, never inside tool output, where program errors belong to
:mod:`.tool_errors`.

**The fix** is the agent's next compliant turn: after the event, the next action of the agent
(for a tool result, the next call of that tool; for a message, the next tool call or reply)
that the harness did not answer with the same feedback. Variants count how it went —
``complied on the next turn``, ``complied after N more`` (the feedback came back N times), or
``never complied`` (also when the session ends with the agent's reply: nothing shows it
complied) — and the subject keeps what the harness asked for (``instruction``: its
lines with ``must``, ``please``, ``make sure``, ...) and the compliant turn (``fix``).

Recurrence is what makes text harness text, so the engine's thresholds do the separating:
unique wording never reaches ``min_sessions``. Key: ``kind|template`` (one harness message is
one pattern whichever result or message carried it). The miner owns
its logic (see :mod:`.base`): it covers a memory file holding the signature's literal phrase
(as whole words), drafts a ``known-failures`` note with the rule, the harness's instruction
and how often compliance worked, and leaves out (reported, not queued) ``environment``
feedback — nothing an agent's memory can fix — and feedback no session ever complied with
unless the harness states the rule (then it is a rule agents keep breaking, and proposed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from memdir.dream.miners.base import MinerContext, cut, excerpt, lossy_epsilon
from memdir.dream.miners.signature import Drain, DrainMined, literal_phrase, mask_tokens
from memdir.dream.model import MemoryText, Pattern, Session, Signal
from memdir.transcripts.model import Event, bounded_key

__all__ = [
    "KINDS",
    "MESSAGE_LINES",
    "RESULT_LINES",
    "FeedbackMiner",
    "feedback_kind",
    "is_simulator_closing",
]

#: Leading non-empty lines of a user message, and of a system message or tool result, read.
MESSAGE_LINES: Final = 3
RESULT_LINES: Final = 40
#: Kind -> the text that marks it, in the order they are tried (the first match names it);
#: lowercase, since lines are lowercased before they are matched.
KINDS: Final = (
    ("edit", re.compile(
        r"failed to (?:exactly )?match|searchreplacenoexactmatch|no exact match|"
        r"no replacement was performed|did not appear verbatim|must exactly match|"
        r"edit (?:was|has been) (?:rejected|reverted)|did not conform to the edit format", re.I)),
    ("format", re.compile(
        r"not formatted correctly|did not conform to the (?:\w+ )?format|wrong format|"
        r"malformed (?:response|output|action)|could not parse (?:your|the) (?:response|output|"
        r"action)|failed to parse (?:your|the) (?:response|output|action)|"
        r"must always include|no (?:valid )?(?:command|action|tool call) (?:was )?found|"
        r"invalid (?:response )?format|provide exactly one (?:action|bash block|tool call)",
        re.I)),
    ("lint", re.compile(
        r"lint errors?|fix any errors below|introduced new syntax error|flake8\.{3,}failed|"
        r"linter (?:errors?|found)", re.I)),
    ("truncated", re.compile(
        r"too long|\btruncated\b|output (?:was |has been )?(?:clipped|cut|shortened)|"
        r"observations? should not exceed|exceed(?:s|ed)? the (?:maximum|limit)", re.I)),
    ("timeout", re.compile(r"timed out|\btimeout\b", re.I)),
    ("limit", re.compile(
        r"(?:step|cost|token|turn|iteration|budget) limit|"
        r"\b(?:exceed|exhaust|reach|hit)\w*\s+(?:\S+\s+){0,5}?(?:the )?"
        r"(?:limit|context window|maximum)\b|"
        r"maximum (?:number of )?(?:steps|iterations|turns)|\bexit_(?:cost|context|format)\b",
        re.I)),
    ("continue", re.compile(
        # "keep working" alone is how simulated customers talk ("I prefer to keep working
        # with you"); a harness names the task
        r"^please continue|continue (?:working|on the task)|keep working on (?:the|your) task|"
        r"you should never ask",
        re.I)),
    ("warning", re.compile(r"^(?:warning|warn)\b[:!]?|^\W*warning:", re.I)),
    ("environment", re.compile(
        r"apiconnectionerror|internalservererror|ratelimiterror|serviceunavailable|"
        r"overloaded_error|\boverloaded\b|rate limit|connection (?:error|refused|reset)|"
        r"\b50[234]\b.{0,20}(?:error|gateway|unavailable)", re.I)),
)  # fmt: skip
#: Kinds with no agent-side fix: reported, never drafted.
REPORT_ONLY: Final = frozenset({"environment"})
#: The rule each kind's note states, before the harness's own words.
RULES: Final = {
    "format": "Answer in the exact format the harness asks for, on every turn.",
    "edit": "Copy the text to replace exactly from the file as it is now (read it again after "
    "each edit); keep edit blocks small.",
    "lint": "Fix what the linter reports in the files you edited before moving on.",
    "truncated": "Keep command output short: filter it (grep, head, tail, wc) instead of "
    "printing everything.",
    "timeout": "Do not start commands that run long or wait for input; bound them (timeout, "
    "background, non-interactive flags).",
    "limit": "Work within the step and cost limits: stop exploring and finish in time.",
    "continue": "Do not end your turn to ask or to report progress: nobody answers. Keep "
    "working until the task is done, then finish the way the harness says.",
    "warning": "Heed the warning the harness gives.",
    "environment": "The environment failed, not the agent.",
}
_INSTRUCTION: Final = re.compile(
    r"\b(?:must|should|please|make sure|ensure|only|always|never|try|do not|don't|just reply|"
    r"you can|if you think)\b",
    re.I,
)
_SLASH: Final = re.compile(r"^/[a-z][\w-]*\b")
#: What a lint report names: a check that failed (pre-commit's ``flake8....Failed``) and a
#: finding with its code (``path:12:3: F821 undefined name 'x'``, SWE-agent's ``- E999 …``).
_CHECK_FAILED: Final = re.compile(r"^([A-Za-z][\w-]*)\.{3,}\s*Failed$")
_FINDING: Final = re.compile(r"^(?:\S+?:\d+:(?:\d+:)?\s*|- )([A-Z]{1,3}\d{3,4}) (.+)$")
#: Kinds that are feedback before the agent's first action too (see :func:`_found`).
_BEFORE_ACTING: Final = ("lint", "environment")
#: The prefix of the detail that records the harness's instruction (:meth:`FeedbackMiner.note`).
_ASKS: Final = "asks: "
_QUOTED: Final = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`")
#: Details kept per feedback event.
MAX_DETAILS: Final = 4
_ANSI: Final = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


#: Every kind in one pattern (each alternative a named group, in :data:`KINDS` order), run
#: case-sensitively on lowercased text (the patterns are written in lowercase): a line is
#: scanned once, and without the cost of case folding.
_ANY: Final = re.compile("|".join(f"(?P<{kind}>{pattern.pattern})" for kind, pattern in KINDS))


#: The control tokens a benchmark's user simulator ends or hands off a conversation with
#: (τ-bench, τ²-bench: ``###STOP###``, ``###TRANSFER###``, ``###OUT-OF-SCOPE###``).
_CONTROL: Final = re.compile(r"###\s*[A-Z][A-Z_-]*\s*###")
#: A closing line: "no, that's all (I needed)", "that's all, thanks", "nothing else", ...
_CLOSING: Final = re.compile(
    r"^(?:no,?\s+)?(?:that'?s|that is|this is)\s+(?:all|everything|it)\b|"
    r"^(?:no,?\s+)?nothing (?:else|more)\b|"
    r"^(?:no,?\s+)?(?:i'?m|i am|we'?re) (?:all )?(?:set|good|done)\b|"
    r"^no,? thanks?\b|^no,? thank you\b|"
    r"^(?:ok(?:ay)?,?\s+)?(?:thanks|thank you)\b.*\b(?:bye|goodbye)\b"
)


def is_simulator_closing(text: str) -> bool:
    """Whether a user turn ends the conversation rather than correcting anything.

    A user simulator's control token (``###STOP###`` and the like) anywhere in the turn, or a
    closing line ("No, that's all I needed. Thanks!", "that's all, thanks", "nothing else").
    """
    if _CONTROL.search(text):
        return True
    lowered = " ".join(text.split()).lower().lstrip("\"'*-> ").replace("’", "'")
    return bool(_CLOSING.match(lowered))


def feedback_kind(line: str, *, message: bool) -> str | None:
    """The feedback kind a line shows (see :data:`KINDS`), or None.

    ``environment`` counts only in messages (``message=True``): in tool output those words
    are the program's own errors.
    """
    found = _first(line, message=message)
    return found[1] if found is not None else None


#: Lowercase words one of which every feedback match holds: a text with none is skipped
#: without running the pattern (most tool output).
_TRIGGERS: Final = (
    "format", "exactly one", "must", "pars", "malformed", "no valid", "no command", "no action",
    "no tool call", "match", "replace", "verbatim", "rejected", "reverted", "lint", "syntax",
    "fix any", "flake8", "long", "truncat", "clip", "cut", "shorten", "exceed", "timed out",
    "timeout", "limit", "maximum", "exit_", "continu", "keep working", "never ask", "warn",
    "error", "overload", "unavailable", "connection",)  # fmt: skip
#: :data:`_TRIGGERS` as one pattern: a single scan of the text instead of one per word.
_TRIGGER: Final = re.compile("|".join(re.escape(word) for word in _TRIGGERS))


def _first(text: str, *, message: bool) -> tuple[int, str] | None:
    """(offset, kind) of the first feedback match in ``text`` (lines joined by newlines)."""
    lower = text.lower()
    if _TRIGGER.search(lower) is None:
        return None
    for match in _ANY.finditer(lower):
        kind = match.lastgroup
        if kind is None or (kind == "environment" and not message):
            continue
        return match.start(), kind
    return None


_USAGE: Final = re.compile(r"^(?:tokens?|cost|usage)\b", re.IGNORECASE)  # bookkeeping lines
_ORDER: Final = {kind: rank for rank, (kind, _) in enumerate(KINDS)}
_PROSE: Final = re.compile(r"^[A-Za-z][\w'’,]*(?: +[\w'’,.:;()<>/-]+){3,}")


def _prose(line: str) -> bool:
    """Whether a line reads as an instruction in words (not code, a path or a table row)."""
    return bool(_PROSE.match(line)) and bool(_INSTRUCTION.search(line)) and "│" not in line


_SENTENCE: Final = re.compile(r"(?<=[a-z)\]])[.!?]\s+(?=[A-Z])")


def _first_sentence(line: str) -> tuple[str, str]:
    """A line's first sentence and the rest: a harness's versions keep the opening sentence
    ("Your proposed edit has introduced new syntax error(s).") and reword the advice after
    it, which belongs to the instruction, not to the template."""
    found = _SENTENCE.search(line)
    if found is None:
        return line, ""
    return line[: found.start() + 1], line[found.end() :]


def _lines(text: str, limit: int) -> list[str]:
    out: list[str] = []
    for raw in _ANSI.sub("", text).splitlines():
        line = raw.strip()
        if line:
            out.append(line[:300])
            if len(out) >= limit:
                break
    return out


@dataclass(frozen=True, slots=True)
class _Event:
    """A feedback event: where, which kind, from what source, its line and instruction."""

    position: int  # the event carrying it
    anchor: int  # where its evidence starts (the call, for a tool result)
    kind: str
    source: str  # "message" or the tool's name
    line: str
    instruction: str
    tool: str | None  # the tool whose next call must comply (tool results)
    details: tuple[str, ...] = ()  # the checks and codes a lint report names


def _acted(event: Event) -> bool:
    return event.kind == "tool_call" or (event.kind == "message" and event.role == "assistant")


def _lint_details(lines: Sequence[str]) -> tuple[str, ...]:
    """The failing checks and coded findings of a lint report (:data:`_FINDING`), masked but
    for the code (``F821 undefined name <str>``), in order, at most :data:`MAX_DETAILS`."""
    out: list[str] = []
    for line in lines:
        check = _CHECK_FAILED.match(line)
        found = _FINDING.match(line) if check is None else None
        if check is not None:
            detail = f"{check.group(1)} failed"
        elif found is not None:
            # the code is the cause; a quoted name is the instance (``'os' imported but unused``)
            message = _QUOTED.sub("<str>", found.group(2))
            detail = f"{found.group(1)} {' '.join(mask_tokens(message, 12))}"
        else:
            continue
        if detail not in out:
            out.append(detail)
            if len(out) >= MAX_DETAILS:
                break
    return tuple(out)


def _found(session: Session) -> list[_Event]:
    """The session's feedback events, in order (see the module docstring)."""
    out: list[_Event] = []
    calls: dict[str, tuple[int, str]] = {}
    acted = False
    for position, event in enumerate(session.events):
        if event.kind == "tool_call":
            acted = True
            if event.call_id is not None:
                calls[event.call_id] = (position, event.name or "?")
            continue
        if _acted(event):
            acted = True
            continue
        if event.kind == "tool_result" and event.output:
            anchor, tool = calls.get(event.call_id or "", (position, event.name or "?"))
            lines, message, source = _lines(event.output, RESULT_LINES), False, tool
        elif event.kind == "message" and (
            (event.role in ("user", "system") and acted) or event.role == "system"
        ):
            text = event.text or ""
            if is_simulator_closing(text) or _SLASH.match(text.lstrip()):
                continue
            anchor, tool = position, None
            # A person may type into a user turn: only its first lines are the harness's.
            limit = MESSAGE_LINES if event.role == "user" else RESULT_LINES
            lines, message, source = _lines(text, limit), True, "message"
        else:
            continue
        hits = [
            (_ORDER[kind], index, kind)
            for index, line in enumerate(lines)
            if (kind := feedback_kind(line, message=message)) is not None
        ]
        if not acted:
            # Before the agent's first action only a lint report (about the files: aider's
            # ``--lint`` launch lints what an earlier session left) and the model API failing
            # to answer (the agent's first turn never came) are feedback; a system prompt's
            # words about formats and limits are no event.
            hits = [hit for hit in hits if hit[2] in _BEFORE_ACTING]
        if not hits:
            continue
        _, index, kind = min(hits)  # the most specific kind, on its first line
        line, after = _first_sentence(lines[index])
        rest = [x for x in [after, *lines[index + 1 :]] if x and _prose(x)]
        instruction = rest[0] if rest else (line if _prose(line) else "")
        details = _lint_details(lines[index:]) if kind == "lint" else ()
        out.append(_Event(position, anchor, kind, source, line, instruction, tool, details))
    return out


def _next_action(session: Session, after: int, tool: str | None) -> int | None:
    """The position of the agent's next action after ``after`` (of ``tool`` when given)."""
    for position in range(after + 1, len(session.events)):
        event = session.events[position]
        if tool is not None:
            if event.kind == "tool_call" and (event.name or "?") == tool:
                return position
        elif _acted(event):
            return position
    return None


def _describe(session: Session, position: int) -> str:
    """The compliant turn in one line: the call (and the first line of its result) or reply."""
    event = session.events[position]
    if event.kind == "tool_call":
        value = event.input
        command = value.get("command") if isinstance(value, dict) else None
        text = cut(" ".join((command if isinstance(command, str) else str(value)).split()), 160)
        for later in session.events[position + 1 : position + 40]:
            if later.kind == "tool_result" and later.call_id == event.call_id and later.output:
                first = [x for x in _lines(later.output, 4) if not _USAGE.match(x)]
                if first:
                    return f"{event.name}: {text} -> {cut(first[0], 100)}"
                break
        return f"{event.name}: {text}"
    return f"reply: {cut(' '.join((event.text or '').split()), 160)}"


def _answered(session: Session, position: int) -> bool:
    """Whether anything but the agent's own next turns follows ``position`` (the harness or
    the tool answered it): a reply that ends the session shows no compliance."""
    return any(not _acted(e) for e in session.events[position + 1 :])


class FeedbackMiner(DrainMined):
    name: ClassVar[str] = "feedback"
    category: ClassVar[str] = "known-failures"

    def __init__(self, context: MinerContext) -> None:
        epsilon = lossy_epsilon(context.thresholds)
        self.width = math.ceil(1 / epsilon) if epsilon > 0 else 0
        self.drain = Drain(width=self.width)
        self._renames: list[tuple[str, str]] = []

    # --- mining -------------------------------------------------------------------------

    def mine(self, session: Session) -> Iterator[Signal]:
        found = _found(session)
        filed: list[tuple[_Event, int]] = []
        for event in found:
            group = event.kind  # one harness message is one template whatever carried it
            index, old = self.drain.add(group, mask_tokens(event.line))
            if old is not None:
                new = self.drain.template(index)
                self._renames.append(
                    (self._key(event, old), self._key(event, new))
                )  # fmt: skip
            filed.append((event, index))
        signals: list[Signal] = []
        seen: set[str] = set()
        for position, (event, index) in enumerate(filed):
            template = self.drain.template(index)
            key = self._key(event, template)
            if key in seen:
                continue  # a session counts each feedback once: its first event and fix
            seen.add(key)
            signals.append(self._signal(session, event, template, key, filed[position + 1 :]))
        self.drain.tick()
        return iter(signals)

    @staticmethod
    def _key(event: _Event, template: str) -> str:
        return bounded_key(f"{event.kind}|{template}")

    def _signal(
        self,
        session: Session,
        event: _Event,
        template: str,
        key: str,
        later: Sequence[tuple[_Event, int]],
    ) -> Signal:
        again = [e for e, i in later if e.kind == event.kind and e.source == event.source]
        after, repeats, fix_at = event.position, 0, None
        while True:
            action = _next_action(session, after, event.tool)
            if action is None:
                break
            # The harness answered this action with the same feedback: not compliant.
            following = _next_action(session, action, None)
            bound = following if following is not None else len(session.events)
            echo = [e for e in again if action < e.position <= bound]
            if not echo:
                if _answered(session, action):
                    fix_at = action
                break
            repeats += 1
            after = echo[0].position
        if fix_at is None:
            variant, fix = "never complied", ""
        else:
            variant = (
                "complied on the next turn" if repeats == 0 else f"complied after {repeats} more"
            )
            fix = _describe(session, fix_at)
        last = fix_at if fix_at is not None else event.position
        where = "harness" if event.source == "message" else f"{event.source} result"
        text = f"{where}: {event.line}"
        if event.instruction and event.instruction != event.line:
            text += f"\n  {event.instruction}"
        text += f"\nnext: {fix}" if fix else "\nnext: (no compliant turn)"
        subject: dict[str, Any] = {
            "kind": event.kind,
            "source": event.source,
            "signature": template,
            "instruction": cut(event.instruction, 240),
            "fix": fix,
        }
        if event.details:
            subject["details"] = list(event.details)
        return Signal(
            miner=self.name,
            key=key,
            subject=subject,
            title=f"Harness feedback ({event.kind}): {cut(event.line, 140)}",
            excerpt=excerpt(session, event.anchor, max(last, event.anchor), text),
            variant=variant,
            # what the harness asked is counted too: the note quotes the most frequent request
            details=(
                *event.details,
                *([_ASKS + subject["instruction"]] if event.instruction else []),
            ),
        )

    # --- the pattern's own logic (see :mod:`.base`) -------------------------------------

    def judge(self, pattern: Pattern) -> str | None:
        """Why a kept feedback pattern is reported, not proposed (None: propose it)."""
        kind = str(pattern.subject.get("kind", ""))
        if kind in REPORT_ONLY:
            return f"reported, not proposed: {kind} feedback has no fix an agent's memory holds"
        complied = sum(n for v, n in pattern.variants.items() if v.startswith("complied"))
        if pattern.variants and not complied and not pattern.subject.get("instruction"):
            return (
                "reported, not proposed: no session shows a turn that complied, and the "
                "harness states no rule to follow"
            )
        return None

    def covers(self, pattern: Pattern, memory: MemoryText) -> bool:
        phrase = literal_phrase(str(pattern.subject.get("signature", ""))).lower()
        return len(phrase.split()) >= 3 and memory.has_phrase(phrase)

    def slug_source(self, pattern: Pattern) -> str:
        s = pattern.subject
        return f"harness {s.get('kind')} {literal_phrase(str(s.get('signature', '')))}"

    def note(self, pattern: Pattern) -> tuple[str, str, list[str]]:
        s = pattern.subject
        kind = str(s.get("kind", "warning"))
        phrase = literal_phrase(str(s.get("signature", ""))) or str(s.get("signature", ""))
        total = sum(pattern.variants.values())
        first = pattern.variants.get("complied on the next turn", 0)
        complied = sum(n for v, n in pattern.variants.items() if v.startswith("complied"))
        where = (
            "as a message" if s.get("source") == "message" else f"in `{s.get('source')}` results"
        )
        body = [
            f"The harness answers {where} with:",
            "",
            "```",
            str(s.get("signature", "")),
            "```",
            "",
            f"Rule: {RULES.get(kind, RULES['warning'])}",
        ]
        asks = [d.removeprefix(_ASKS) for d in pattern.details if d.startswith(_ASKS)]
        instruction = asks[0] if asks else s.get("instruction")  # the most frequent request
        if instruction:
            body += [f'The harness asks: "{instruction}"']
        reported = [(d, n) for d, n in pattern.details.items() if not d.startswith(_ASKS)]
        if reported:
            shown = [f"`{d}` ({n})" for d, n in reported[:6]]
            body += ["", f"What it reported most (sessions): {', '.join(shown)}."]
        if complied:
            body += [
                "",
                f"What worked: the next turn complied in {complied} of {total} sessions "
                f"({first} on the first try).",
            ]
        else:
            body += [
                "",
                f"Agents keep breaking this rule: no later turn complied in any of the {total} "
                "sessions.",
            ]
        if s.get("fix"):
            body += [f"A compliant turn: `{s.get('fix')}`"]
        return (
            f"Harness feedback ({kind}): {phrase}",
            f"The harness reports {kind} problems: {phrase}"[:200],
            body,
        )
