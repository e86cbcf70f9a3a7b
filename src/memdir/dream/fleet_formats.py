"""The synthetic fleet's building blocks: abstract session scripts, noise, and two file formats.

A session is first written as a script of :class:`Act` values (a user or assistant turn, or a
tool call with its result), then serialised to a transcript format the importers read:

- **Claude Code** session JSONL (:func:`claude_lines`): one line per record, as Claude Code
  writes them — a user line per prompt, an assistant line per content block sharing the API
  message's ``id`` and ``usage``, a user line per ``tool_result`` block. Shell calls are
  ``Bash`` with ``{"command", "description"}``; a non-zero exit is written the way Claude Code
  writes it: the output starts with ``Exit code N`` and the block has ``is_error: true`` — also
  for the exits that are *not* failures (a ``grep`` that finds nothing, a ``diff`` that finds
  differences, a false ``test``), which is exactly what a dream's failure rules must see through.
- **OpenAI chat result files** (:func:`openai_element`), τ-bench's shape: one element
  ``{task_id, trial, reward, info, traj}`` per session, the scope labels (``project``,
  ``user``, ``agent``) and ``started_at`` at the element's top level, function tools called
  one per assistant message, a failing tool result's content starting with ``Error: `` (the
  format's ``is_error`` rule).
- **mini-swe-agent** trajectories (:func:`mini_trajectory`): ``{info, messages,
  trajectory_format}``, the harness's wrapped shape — an assistant turn's fenced ``bash``
  block is the action, the next user turn its observation, ``<returncode>N</returncode>`` and
  ``<output>…</output>`` with no exit code or error flag anywhere else. File tools become the
  shell commands such an agent types: a file write is a heredoc with a redirection
  (``cat <<'EOF' > path``).

Event counts (:func:`event_count`) follow what the importers make of each act, so the planner
can aim at a session length: Claude Code — a user turn 1, an assistant turn 2 (text + usage), a
call 3 (call + usage + result); OpenAI chat — a turn 1, a call 2, the system prompt 1.

Noise (:class:`Noise`) is built so that nothing in it recurs across sessions by accident: every
path, search term and one-off error message is drawn from a vocabulary of pseudo-words (no
digits, so number abstraction cannot merge them), and user turns avoid the words corrections
are made of (``no``, ``don't``, ``stop``, ``never``, ``always``, ``instead``, ``actually``),
except in questions (``why don't we …?``), which are not corrections.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "CLAUDE",
    "CODEX",
    "MINI",
    "OPENAI",
    "Act",
    "Builder",
    "Noise",
    "Spec",
    "act_events",
    "call",
    "claude_lines",
    "codex_lines",
    "event_count",
    "mini_trajectory",
    "openai_element",
    "say",
    "session_uuid",
]

CLAUDE: Final = "claude-code"
OPENAI: Final = "openai-chat"
CODEX: Final = "codex"
MINI: Final = "swe-agent"  # the importer of SWE-agent and mini-swe-agent trajectories
_MODEL: Final = "claude-sonnet-4-5-20250929"
_ALNUM: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_CC_VERSION: Final = "2.0.14"


@dataclass(frozen=True, slots=True)
class Act:
    """One step of a session script.

    ``kind`` is ``user`` / ``assistant`` (``text``) or ``call`` (``tool``, ``input``,
    ``output``, ``exit_code`` for shell calls, ``error`` for a failed call of any tool).
    ``fails_task``: the session fails its task because of this act although the act itself
    succeeds (a silent policy violation): the session's outcome (reward) is a failure.
    """

    kind: str
    text: str = ""
    tool: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    output: str = ""
    error: bool = False
    exit_code: int | None = None
    fails_task: bool = False


def say(role: str, text: str) -> Act:
    return Act(role, text=text)


def call(
    tool: str, input: dict[str, Any], output: str, *, error: bool = False,
    exit_code: int | None = None, fails_task: bool = False,
) -> Act:  # fmt: skip
    """A tool call and its result; a non-zero ``exit_code`` marks a shell call's exit."""
    return Act("call", tool=tool, input=input, output=output, error=error, exit_code=exit_code,
               fails_task=fails_task)  # fmt: skip


def act_events(acts: list[Act], fmt: str) -> int:
    """How many events the importer of ``fmt`` makes of ``acts`` (see the module docstring)."""
    if fmt in (CLAUDE, CODEX):
        return sum(3 if a.kind == "call" else 2 if a.kind == "assistant" else 1 for a in acts)
    if fmt == MINI:
        return sum(3 if a.kind == "call" else 1 for a in acts)
    return sum(2 if a.kind == "call" else 1 for a in acts)


def event_count(acts: list[Act], fmt: str) -> int:
    """The events of a whole session of ``acts`` (with the system prompt of OpenAI chat and
    mini-swe-agent)."""
    return act_events(acts, fmt) + (1 if fmt in (OPENAI, MINI) else 0)


Builder = Callable[["Noise"], list[Act]]


@dataclass(frozen=True)
class Spec:
    """A pattern to plant: what a dream should find, where, how often, and its acts.

    ``miner``: the miner expected to find it, or None when any miner's finding will do (a
    shape no built-in miner is named for). ``place``: ``opening`` (the session's first calls),
    ``body`` (anywhere after them), ``late`` (after the first 8 calls), ``closing`` (the
    session's last turns), ``memory`` (no sessions: the store itself). ``user`` ``top`` /
    ``second``: the user with the most / second most sessions of ``format``. ``shape``: one of
    the real-world shapes (``memdir.dream.fleet_shapes``), scored apart from the catalogue's
    classic patterns. ``junk``: planted noise that must *not* become a proposal (a simulator's
    closing, a heredoc taken for a lookup); a proposal matching it is junk.
    """

    id: str
    miner: str | None
    tool: str | None
    contains: str | tuple[str, ...]
    prevalence: float
    description: str
    format: str | None = CLAUDE
    projects: tuple[str, ...] = ()
    user: str | None = None
    recent: bool = False
    place: str = "body"
    build: Builder | None = None
    accept: tuple[tuple[str, str | None, str], ...] = ()
    memory: tuple[str, ...] = ()
    shape: bool = False
    junk: bool = False


# --- vocabulary --------------------------------------------------------------------------

_ONSETS: Final = ("b", "br", "c", "ch", "d", "f", "fl", "g", "gr", "h", "j", "k", "l", "m",
                  "n", "p", "pl", "qu", "r", "s", "sh", "st", "t", "tr", "v", "w", "z")  # fmt: skip
_VOWELS: Final = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou")
_CODAS: Final = ("", "n", "r", "l", "s", "x", "m", "ck", "nd", "rt")
_FILLER: Final = (
    "the", "module", "handler", "config", "function", "request", "response", "cache", "test",
    "value", "field", "service", "client", "path", "input", "output", "result", "call",
    "check", "update", "build", "change", "file", "type", "error", "state", "queue", "job",
    "looks", "seems", "uses", "reads", "writes", "returns", "calls", "passes", "keeps",
    "with", "from", "into", "for", "and", "then", "so", "here", "there", "now", "first",
)  # fmt: skip


def _words(count: int) -> tuple[str, ...]:
    """Pseudo-words, the same for every fleet (letters only: nothing to abstract as a number)."""
    rng = random.Random("memdir-fleet-vocabulary")
    seen: dict[str, None] = {}
    while len(seen) < count:
        word = "".join(
            rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS)
            for _ in range(rng.randint(2, 3))
        )
        if "make" not in word and "pnpm" not in word:
            seen[word] = None
    return tuple(seen)


WORDS: Final = _words(1500)
_EXTS: Final = ("ts", "tsx", "py", "go", "rs", "md", "json", "yaml")


def session_uuid(rng: random.Random) -> str:
    value = f"{rng.getrandbits(128):032x}"
    return f"{value[:8]}-{value[8:12]}-4{value[13:16]}-a{value[17:20]}-{value[20:]}"


class Noise:
    """Realistic, non-recurring session content for one session (drawn from its own rng)."""

    def __init__(self, rng: random.Random, fmt: str, project: str) -> None:
        self.rng = rng
        self.fmt = fmt
        self.project = project

    def word(self) -> str:
        return self.rng.choice(WORDS)

    def path(self) -> str:
        return f"src/{self.word()}/{self.word()}.{self.rng.choice(_EXTS)}"

    def sentence(self, low: int = 6, high: int = 18) -> str:
        rng = self.rng
        words = [rng.choice(_FILLER) if rng.random() < 0.7 else self.word()
                 for _ in range(rng.randint(low, high))]  # fmt: skip
        return " ".join(words).capitalize() + "."

    def one_off(self) -> str:
        """An error message that occurs once: pseudo-words only, 7-12 of them."""
        words = [self.word() for _ in range(self.rng.randint(7, 12))]
        return " ".join(words).capitalize()

    # --- turns ---

    def task(self) -> str:
        w, p = self.word(), self.path()
        return self.rng.choice((
            f"Add a {w} option to {p} and wire it through the config.",
            f"The build fails in {p}; please fix it.",
            f"Can you refactor {w} in {p} to use the shared client?",
            f"Please update the docs for {w}.",
            f"Investigate why the {w} job is slow.",
            f"Write tests for {p}.",
            f"Rename {w} to {self.word()} across the {self.project} codebase.",
            f"Look into the {w} bug report and propose a fix.",
        ))  # fmt: skip

    def mid_user(self) -> str:
        w = self.word()
        return self.rng.choice((
            "Thanks, that looks good.",
            f"Can you also check {w}?",
            f"What does {w} do?",
            "Great, please continue.",
            f"Looks right. Run the {w} tests next.",
            f"Why don't we cache {w}?",
            f"Is {w} still used anywhere?",
            f"Could you explain the change to {self.path()}?",
        ))  # fmt: skip

    def closing_user(self) -> str:
        return self.rng.choice(("Thanks!", "Perfect, thank you.", "Great work.", "Merci!"))

    # --- Claude Code tool calls ---

    def lookup(self) -> Act:
        """A navigation step that never repeats: a random path, term or directory."""
        rng, p = self.rng, self.path()
        kind = rng.randrange(5)
        if kind == 0:
            lines = "\n".join(
                f"{n:>6}\t{self.sentence(3, 9)}" for n in range(1, rng.randint(4, 14))
            )
            return call("Read", {"file_path": f"/repo/{self.project}/{p}"}, lines)
        if kind == 1:
            hits = [self.path() for _ in range(rng.randint(0, 4))]
            out = f"Found {len(hits)} files\n" + "\n".join(hits) if hits else "No files found"
            return call("Grep", {"pattern": self.word(), "path": "src"}, out)
        if kind == 2:
            hits = [self.path() for _ in range(rng.randint(1, 5))]
            return call("Glob", {"pattern": f"src/**/{self.word()}*"}, "\n".join(hits))
        if kind == 3:
            names = "\n".join(
                f"{self.word()}.{rng.choice(_EXTS)}" for _ in range(rng.randint(2, 7))
            )
            return self.bash(f"ls src/{self.word()}/", names)
        return self.bash(
            f"cat {p}", "\n".join(self.sentence(3, 9) for _ in range(rng.randint(2, 8)))
        )

    def bash(self, command: str, output: str, exit_code: int = 0) -> Act:
        description = command.split()[0].capitalize() + " " + self.word()
        if exit_code:
            return call("Bash", {"command": command, "description": description}, output,
                        error=True, exit_code=exit_code)  # fmt: skip
        return call("Bash", {"command": command, "description": description}, output)

    def claude_work(self) -> list[Act]:
        """One noise step of a Claude Code session (a call, sometimes with a remark before)."""
        rng, w, p = self.rng, self.word(), self.path()
        roll = rng.random()
        if roll < 0.30:
            act = self.lookup()
        elif roll < 0.45:
            old, new = self.sentence(2, 6), self.sentence(2, 6)
            act = call("Edit", {"file_path": f"/repo/{self.project}/{p}", "old_string": old,
                                "new_string": new},
                       f"The file /repo/{self.project}/{p} has been updated.")  # fmt: skip
        elif roll < 0.52:  # grep that finds nothing: exit 1, not a failure
            act = self.bash(f'grep -rn "{w}{self.word()}" src/', "", 1)
        elif roll < 0.57:  # diff that finds differences: exit 1, not a failure
            a, b = self.path(), self.path()
            out = (
                f"--- {a}\n+++ {b}\n@@ -1,2 +1,2 @@\n-{self.sentence(2, 5)}\n+{self.sentence(2, 5)}"
            )
            act = self.bash(f"diff {a} {b}", out, 1)
        elif roll < 0.60:  # a false test: exit 1, not a failure
            act = self.bash(f"test -f dist/{w}.js", "", 1)
        elif roll < 0.66:  # a one-off failure with a message seen nowhere else
            act = self.bash(f"./scripts/{w}.sh --{self.word()}", self.one_off(), 1)
        elif roll < 0.78:
            out = f"{rng.randint(2, 40)} passed in {rng.uniform(0.2, 9):.2f}s"
            act = self.bash(f"pytest tests/test_{w}.py -q", out)
        elif roll < 0.88:
            act = self.bash(f"git diff --stat -- {p}",
                            f" {p} | {rng.randint(1, 60)} {'+' * rng.randint(1, 9)}")  # fmt: skip
        else:
            out = f"> build\n> tsc -p .\n\nbuilt {w} in {rng.randint(2, 90)}s"
            act = self.bash(f"npm run build -- --scope {w}", out)
        return [say("assistant", self.sentence()), act] if rng.random() < 0.3 else [act]

    # --- OpenAI function tools ---

    def ident(self, prefix: str, length: int = 10) -> str:
        return prefix + "".join(self.rng.choice("abcdef0123456789") for _ in range(length))

    def openai_work(self) -> list[Act]:
        """One noise step of an operations bot: a function call, sometimes a remark before."""
        rng = self.rng
        customer = self.ident("cus_")
        roll = rng.random()
        if roll < 0.05:
            act = call(rng.choice(("get_metrics", "lookup_runbook", "list_orders")),
                       {"query": self.word()}, "Error: " + self.one_off(), error=True)  # fmt: skip
        elif roll < 0.30:
            act = call("get_customer", {"customer_id": customer}, json.dumps({
                "id": customer, "name": f"{self.word().title()} {self.word().title()}",
                "plan": rng.choice(("free", "team", "enterprise")),
                "seats": rng.randint(1, 400)}))  # fmt: skip
        elif roll < 0.50:
            orders = [{"id": self.ident("ord_"),
                       "status": rng.choice(("paid", "open", "refunded")),
                       "amount": rng.randint(5, 9000)}
                      for _ in range(rng.randint(0, 4))]  # fmt: skip
            act = call("list_orders", {"customer_id": customer}, json.dumps(orders))
        elif roll < 0.65:
            service = self.word()
            window = rng.choice(("1h", "24h", "7d"))
            act = call("get_metrics", {"service": service, "window": window},
                       json.dumps({"service": service, "p95_ms": rng.randint(20, 900),
                                   "error_rate": round(rng.random() / 20, 4)}))  # fmt: skip
        elif roll < 0.80:
            topic = self.word()
            steps = [self.sentence(4, 9) for _ in range(rng.randint(1, 4))]
            act = call(
                "lookup_runbook", {"topic": topic}, json.dumps({"topic": topic, "steps": steps})
            )
        elif roll < 0.90:
            invoice = self.ident("in_")
            act = call("get_invoice", {"invoice_id": invoice}, json.dumps({
                "id": invoice, "amount_due": rng.randint(0, 5000), "status": "paid"}))  # fmt: skip
        elif roll < 0.93:  # refunds within the policy limit: successful sessions have them too
            order, amount = self.ident("ord_"), rng.randint(5, 200)
            act = call("issue_refund", {"order_id": order, "amount": amount, "reason": self.word()},
                       json.dumps({"refund_id": self.ident("re_"), "order_id": order,
                                   "status": "issued", "amount": amount}))  # fmt: skip
        else:
            ticket = self.ident("T-", 6)
            act = call("update_ticket", {"ticket_id": ticket, "note": self.sentence(4, 10)},
                       json.dumps({"id": ticket, "updated": True}))  # fmt: skip
        return [say("assistant", self.sentence()), act] if rng.random() < 0.25 else [act]

    def openai_task(self) -> str:
        w = self.word()
        return self.rng.choice((
            f"Customer {self.ident('cus_')} says their {w} invoice looks wrong.",
            f"Check the error rate of the {w} service over the last day.",
            f"A customer wants to know the status of order {self.ident('ord_')}.",
            f"Open a ticket for the {w} outage and find the runbook.",
            f"Why was customer {self.ident('cus_')} charged twice?",
        ))  # fmt: skip


# --- Claude Code --------------------------------------------------------------------------


def _iso(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def claude_lines(
    acts: list[Act], rng: random.Random, *, session: str, cwd: str, start: dt.datetime
) -> Iterator[str]:
    """The session as Claude Code JSONL lines (each ends with a newline)."""
    when = start
    parent: str | None = None
    branch = rng.choice(("main", "dev", f"feat/{rng.choice(WORDS)}"))

    def line(kind: str, message: dict[str, Any], extra: dict[str, Any] | None = None) -> str:
        nonlocal parent
        uuid = session_uuid(rng)
        record: dict[str, Any] = {
            "parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
            "sessionId": session, "version": _CC_VERSION, "gitBranch": branch, "type": kind,
            "message": message, "uuid": uuid, "timestamp": _iso(when),
        }  # fmt: skip
        if extra:
            record.update(extra)
        parent = uuid
        return json.dumps(record, ensure_ascii=False) + "\n"

    def assistant(block: dict[str, Any]) -> str:
        usage = {"input_tokens": rng.randint(3, 40),
                 "cache_creation_input_tokens": rng.randint(0, 4000),
                 "cache_read_input_tokens": rng.randint(0, 90000),
                 "output_tokens": rng.randint(5, 900)}  # fmt: skip
        message = {"id": "msg_" + f"{rng.getrandbits(96):024x}", "type": "message",
                   "role": "assistant", "model": _MODEL, "content": [block],
                   "stop_reason": "tool_use" if block["type"] == "tool_use" else "end_turn",
                   "stop_sequence": None, "usage": usage}  # fmt: skip
        return line("assistant", message, {"requestId": "req_" + f"{rng.getrandbits(64):016x}"})

    for act in acts:
        when += dt.timedelta(seconds=rng.randint(2, 45), milliseconds=rng.randint(0, 999))
        if act.kind == "user":
            yield line("user", {"role": "user", "content": act.text})
        elif act.kind == "assistant":
            yield assistant({"type": "text", "text": act.text})
        else:
            call_id = "toolu_" + f"{rng.getrandbits(96):024x}"
            yield assistant(
                {"type": "tool_use", "id": call_id, "name": act.tool, "input": act.input}
            )
            when += dt.timedelta(milliseconds=rng.randint(40, 30000))
            output = act.output
            if act.exit_code:
                output = f"Exit code {act.exit_code}\n{output}".rstrip("\n")
            block = {"tool_use_id": call_id, "type": "tool_result", "content": output,
                     "is_error": act.error}  # fmt: skip
            yield line("user", {"role": "user", "content": [block]}, {"toolUseResult": output})


# --- Codex CLI rollouts ------------------------------------------------------------------


def _codex_call(act: Act, cwd: str) -> tuple[str, dict[str, Any], str]:
    """A Claude Code shaped call as Codex makes it: (item type, item fields, output text).

    Shell work goes through ``shell`` with ``["bash", "-lc", command]``; ``Read``/``Grep``/
    ``Glob`` become the shell commands Codex runs instead (``sed -n``, ``rg``, ``rg --files``;
    ``rg`` finding nothing exits 1 — not a failure); ``Edit`` is an ``apply_patch`` call.
    """
    data, exit_code = act.input, act.exit_code or 0
    if act.tool == "Edit":
        patch = (f"*** Begin Patch\n*** Update File: {data['file_path']}\n-{data['old_string']}"
                 f"\n+{data['new_string']}\n*** End Patch")  # fmt: skip
        return "custom_tool_call", {"name": "apply_patch", "input": patch}, "Done!"
    if act.tool == "Read":
        command = f"sed -n '1,200p' {data['file_path']}"
    elif act.tool == "Grep":
        command = f"rg -n {data['pattern']} {data['path']}"
        exit_code = 1 if act.output == "No files found" else 0
    elif act.tool == "Glob":
        command = f"rg --files -g '{data['pattern']}'"
    else:
        command = str(data["command"])
    output = "" if exit_code == 1 and act.tool == "Grep" else act.output
    arguments = json.dumps({"command": ["bash", "-lc", command], "workdir": cwd})
    text = json.dumps({"output": output, "metadata": {"exit_code": exit_code,
                                                      "duration_seconds": 0.2}})  # fmt: skip
    return "function_call", {"name": "shell", "arguments": arguments}, text


def codex_lines(
    acts: list[Act], rng: random.Random, *, session: str, cwd: str, start: dt.datetime
) -> Iterator[str]:
    """The session as a Codex CLI rollout (each line ends with a newline); a ``token_count``
    event follows every assistant message and every call, as Codex writes one per turn."""
    when = start

    def line(kind: str, payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": _iso(when), "type": kind, "payload": payload},
                          ensure_ascii=False) + "\n"  # fmt: skip

    def tokens() -> str:
        usage = {"input_tokens": rng.randint(900, 40000),
                 "cached_input_tokens": rng.randint(0, 30000),
                 "output_tokens": rng.randint(5, 900),
                 "total_tokens": rng.randint(1000, 70000)}  # fmt: skip
        return line("event_msg", {"type": "token_count", "info": {"last_token_usage": usage}})

    yield line("session_meta", {"id": session, "timestamp": _iso(when), "cwd": cwd,
                                "originator": "codex_cli_rs", "cli_version": "0.46.0"})  # fmt: skip
    yield line(
        "turn_context", {"cwd": cwd, "model": "gpt-5-codex", "approval_policy": "on-request"}
    )
    for act in acts:
        when += dt.timedelta(seconds=rng.randint(2, 45), milliseconds=rng.randint(0, 999))
        if act.kind != "call":
            part = "input_text" if act.kind == "user" else "output_text"
            content = [{"type": part, "text": act.text}]
            yield line("response_item", {"type": "message", "role": act.kind, "content": content})
            if act.kind == "assistant":
                yield tokens()
            continue
        call_id = "call_" + "".join(rng.choice(_ALNUM) for _ in range(24))
        kind, fields, output = _codex_call(act, cwd)
        yield line("response_item", {"type": kind, **fields, "call_id": call_id})
        when += dt.timedelta(milliseconds=rng.randint(40, 30000))
        yield line(
            "response_item", {"type": f"{kind}_output", "call_id": call_id, "output": output}
        )
        yield tokens()


# --- OpenAI chat (τ-bench result files) ---------------------------------------------------


def openai_element(
    acts: list[Act], rng: random.Random, *, task_id: int, system: str, labels: dict[str, str],
    start: dt.datetime,
) -> dict[str, Any]:  # fmt: skip
    """One result-file element: ``{task_id, trial, reward, info, traj}`` plus scope labels."""
    traj: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for act in acts:
        if act.kind != "call":
            traj.append({"role": act.kind, "content": act.text})
            continue
        call_id = "call_" + "".join(rng.choice(_ALNUM) for _ in range(24))
        traj.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call_id, "type": "function",
             "function": {"name": act.tool, "arguments": json.dumps(act.input)}}]})  # fmt: skip
        traj.append({"role": "tool", "tool_call_id": call_id, "name": act.tool,
                     "content": act.output})  # fmt: skip
    failed = any(a.kind == "call" and a.error for a in acts)
    reward = 0.0 if failed and rng.random() < 0.6 else float(rng.random() < 0.8)
    if any(a.fails_task for a in acts):
        reward = 0.0
    return {
        "task_id": task_id, "trial": 0, "reward": reward, **labels,
        "started_at": _iso(start),
        "info": {"task": {"instruction": acts[0].text if acts else ""},
                 "reward_info": {"reward": reward}},
        "traj": traj,
    }  # fmt: skip


# --- mini-swe-agent trajectories ------------------------------------------------------------

#: What mini-swe-agent answers a turn without exactly one action (its format error).
FORMAT_ERROR: Final = (
    "Please always provide EXACTLY ONE action in triple backticks, found {found} actions.\n\n"
    "Please format your response exactly as follows:\n\n<response_example>\nHere are some "
    "thoughts about why you want to perform the action.\n\n```bash\n<action>\n```\n"
    "</response_example>"
)


def _mini_command(act: Act) -> tuple[str, str, int]:
    """A Claude Code shaped call as a shell agent types it: (command, output, exit code)."""
    data, code = act.input, act.exit_code or 0
    if act.tool == "Read":
        return f"cat {data['file_path']}", act.output, 0
    if act.tool == "Grep":
        empty = act.output == "No files found"
        command = f"grep -rln {data['pattern']} {data['path']}"
        return command, "" if empty else act.output, int(empty)
    if act.tool == "Glob":
        return f"find . -path './{data['pattern']}'", act.output, 0
    if act.tool == "Edit":
        body = str(data["new_string"])
        return f"cat <<'EOF' > {data['file_path']}\n{body}\nEOF", "", 0
    return str(data["command"]), act.output, code


def mini_trajectory(acts: list[Act], rng: random.Random, *, system: str) -> dict[str, Any]:
    """The session as a mini-swe-agent ``.traj.json`` value (see the module docstring)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for act in acts:
        if act.kind != "call":
            messages.append({"role": act.kind, "content": act.text})
            continue
        command, output, code = _mini_command(act)
        thought = f"THOUGHT: {rng.choice(('Next', 'Now', 'Let me'))} run this.\n\n"
        messages.append({"role": "assistant", "content": f"{thought}```bash\n{command}\n```"})
        observation = f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>"
        messages.append({"role": "user", "content": observation})
    status = "Submitted" if rng.random() < 0.8 else "LimitsExceeded"
    return {
        "info": {"exit_status": status, "submission": "", "mini_version": "1.9.0",
                 "model_stats": {"instance_cost": round(rng.uniform(0.01, 0.9), 4),
                                 "api_calls": sum(a.kind == "call" for a in acts)}},
        "messages": messages, "trajectory_format": "mini-swe-agent-1",
    }  # fmt: skip
