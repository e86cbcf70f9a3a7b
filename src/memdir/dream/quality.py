"""Per-proposal quality checks and a run's quality score, without labels. No I/O.

Every check answers ``True`` (passed), ``False`` (failed, with the reason) or ``None`` (does
not apply, or needs data this run does not have — a plain run has no later part, so fix
validation and feedback loops need ``--backtest``):

- **specificity**: the pattern's literal text has at least :data:`MIN_LITERAL` tokens that are
  not placeholders and not generic words (``error``, ``exit``, ``code``, a wrapper program
  alone…), and — when the run counted it — its literal phrase is rare in successful outputs
  (under :data:`RARE_SHARE` of them): a phrase every successful output has says nothing;
- **failure semantics**: the failing command is not a probe (``grep``, ``test``, ``which``,
  ``diff``… whose non-zero exit is an answer) and not a test runner (``pytest``, ``npm test``…
  whose failure is the code under test, not the tool), nor is its signature a test summary;
- **fix validated** (backtest): the fix the proposal recommends is seen working after the same
  failure in the later part (a later recovery with the same failing side and the same fix);
- **parse sanity**: no heredoc (``<<``) or redirection token (``>``, ``>>``, ``2>&1``, ``<``) in
  the command or lookup the proposal is about, and no masked placeholder (``<path>``…) in the
  command it tells an agent to run while its evidence had the literal text;
- **stability** (when the run split its sessions): the pattern recurs in both of two disjoint
  random halves of the sessions (seeded by the run), at least ``max(2, ceil(K / 2))`` sessions
  in each;
- **duplicates**: no other proposal of the run has the same normalised phrase (program
  version suffixes dropped, so ``python3`` is ``python``) or an evidence Jaccard of at least
  :data:`DUPLICATE_JACCARD` — over the (session, event) places the two were seen, so two
  proposals about the same failing calls are duplicates, two habits of the same sessions not;
- **feedback loop** (backtest): the note, once accepted, did not cause a proposal in the later
  part (a stale-memory, contradiction or consolidation draft on its path). Must be 0.

A proposal's quality is the share of its applicable checks that pass; the run's **quality
score** is 100 × the mean over its proposals (None with no proposal). Parse-sanity failures and
feedback loops are also counted on their own, since a run should have none.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from memdir.core.dream_options import DEFAULTS
from memdir.dream.miners.base import calls_of
from memdir.dream.miners.failures import FailureRules
from memdir.dream.miners.signature import PLACEHOLDERS, literal_phrase
from memdir.dream.model import Pattern, Session

__all__ = [
    "CHECKS",
    "DUPLICATE_JACCARD",
    "MIN_LITERAL",
    "RARE_SHARE",
    "Evidence",
    "PhraseCounter",
    "check_all",
    "flagged",
    "phrase_of",
    "run_summary",
    "score",
]

CHECKS: Final = ("specificity", "failure_semantics", "fix_validated", "parse_sanity",
                 "stability", "duplicates", "feedback_loop")  # fmt: skip
MIN_LITERAL: Final = 2
RARE_SHARE: Final = 0.01
DUPLICATE_JACCARD: Final = 0.5
#: Words that say a call failed without saying how: a signature of only these is a wrapper's.
GENERIC: Final = frozenset(
    [
        "error",
        "errors",
        "failed",
        "failure",
        "fail",
        "exit",
        "code",
        "status",
        "command",
        "returned",
        "non-zero",
        "nonzero",
        "exited",
        "with",
        "the",
        "a",
        "an",
        "of",
        "in",
        "to",
        "is",
        "was",
        "not",
        "and",
        "or",
        "bash",
        "sh",
        "zsh",
        "shell",
        "process",
        "tool",
        "call",
        "result",
        "output",
        "stderr",
        "stdout",
        "warning",
        "fatal",
        "exception",
        "traceback",
        "unknown",
    ]
)
#: Programs that only wrap another command: a pattern about one of these alone is about nothing.
WRAPPERS: Final = frozenset(
    ["bash", "sh", "zsh", "cd", "env", "sudo", "timeout", "time", "xargs", "nohup", "exec", "eval"]
)
PROBES: Final = frozenset(
    [
        "grep",
        "egrep",
        "fgrep",
        "rg",
        "ag",
        "ack",
        "test",
        "[",
        "[[",
        "which",
        "command",
        "type",
        "diff",
        "cmp",
        "pgrep",
    ]
) | {"git grep", "git diff", "git diff --quiet"}
TEST_RUNNERS: Final = frozenset(
    ["pytest", "py.test", "jest", "vitest", "mocha", "tox", "nox", "rspec", "phpunit", "unittest"]
) | {"go test", "cargo test", "npm test", "pnpm test", "yarn test", "make test", "make check",
     "npm run test", "pnpm run test", "yarn run test", "python -m pytest", "python3 -m pytest",
     "bun test", "deno test", "mvn test", "gradle test", "dotnet test", "mix test"}  # fmt: skip
_TEST_SUMMARY: Final = re.compile(
    r"\b\d+ (?:failed|passed|errors?)\b|\bFAILED\b|AssertionError|\btests? failed\b", re.I
)
_REDIRECT: Final = re.compile(
    r"(?:^|\s)(?:<<-?\S*|\d?>>?|&>|\d?>&\d|<(?![a-z]+>))(?=\s|$|['\"\w/])"
)
_VERSIONED: Final = re.compile(r"\b([a-z][a-z_-]*?)\d+(?:\.\d+)*\b")


def _literal_tokens(text: str) -> list[str]:
    tokens = [t.strip("`'\".,:;()[]{}") for t in literal_phrase(text).split()]
    return [t for t in tokens
            if t and t.lower() not in GENERIC and t.lower() not in WRAPPERS
            and any(c.isalpha() for c in t)]  # fmt: skip


def phrase_of(pattern: Pattern) -> str:
    """The literal phrase that identifies a pattern in text (what rarity and duplicates use)."""
    s = pattern.subject
    if pattern.miner in ("tool_errors", "feedback"):
        return literal_phrase(str(s.get("signature") or s.get("text") or pattern.title))
    if pattern.miner == "recovery":
        return literal_phrase(str(s.get("failed", "")))
    if pattern.miner in ("loops", "exploration"):
        return literal_phrase(str(s.get("input", "")))
    if pattern.miner == "stale_memory":
        return str(s.get("claim", ""))
    return ""


def _normalised(text: str) -> str:
    """Lowercase, version suffixes of program names dropped (``python3`` -> ``python``)."""
    return " ".join(_VERSIONED.sub(r"\1", text.lower()).split())


def _command(pattern: Pattern) -> str:
    s = pattern.subject
    return str(s.get("command") or s.get("failed") or s.get("input") or "").strip()


def _program(command: str) -> str:
    words = command.split()
    return " ".join(words[:2]) if words else ""


def _specificity(pattern: Pattern, rare: tuple[int, int] | None) -> tuple[bool | None, str]:
    if pattern.miner in ("consolidation", "corrections", "model"):
        return None, "not a signature"
    text = (
        phrase_of(pattern)
        if pattern.miner != "recovery"
        else (f"{pattern.subject.get('failed', '')} {pattern.subject.get('fixed', '')}")
    )
    tokens = _literal_tokens(text)
    if pattern.miner == "tool_errors":  # the command words count: `npm ci` + its error
        command = str(pattern.subject.get("command", ""))
        tokens += [w for w in command.split() if w not in WRAPPERS and w.isalpha()][:1]
    if len(tokens) < MIN_LITERAL:
        return False, f"{len(tokens)} literal token(s) in {text.strip()!r}, need {MIN_LITERAL}"
    if rare is not None and rare[1]:
        share = rare[0] / rare[1]
        if share >= RARE_SHARE:
            return False, (f"its phrase is in {rare[0]} of {rare[1]} successful outputs "
                           f"({share:.1%})")  # fmt: skip
    return True, f"{len(tokens)} literal tokens"


def _failure_semantics(pattern: Pattern) -> tuple[bool | None, str]:
    if pattern.miner not in ("tool_errors", "recovery", "loops"):
        return None, "not a failure pattern"
    command = _command(pattern)
    words = command.split()
    first = words[0] if words else ""
    two = " ".join(words[:2])
    three = " ".join(words[:3])
    if first in PROBES or two in PROBES:
        return False, f"`{two or first}` is a probe: its non-zero exit is an answer"
    if first in TEST_RUNNERS or two in TEST_RUNNERS or three in TEST_RUNNERS:
        return False, f"`{two or first}` is a test runner: its failure is the code under test"
    signature = str(pattern.subject.get("signature", ""))
    if _TEST_SUMMARY.search(signature):
        return False, f"the signature {signature!r} is a test result"
    return True, "a tool failure"


def _parse_sanity(pattern: Pattern) -> tuple[bool | None, str]:
    s = pattern.subject
    fields = [str(s[k]) for k in ("command", "input", "failed", "fixed", "claim") if s.get(k)]
    for text in fields:
        bare = " ".join(t for t in text.split() if t not in PLACEHOLDERS)  # `<path>` is no `<`
        match = _REDIRECT.search(bare)
        if match:
            return False, f"heredoc or redirection {match.group(0).strip()!r} in {text[:80]!r}"
    told = str(s.get("fixed") or (s.get("input") if pattern.miner == "exploration" else "") or "")
    masked = [p for p in PLACEHOLDERS if p in told.split()]
    if masked and pattern.examples:
        return False, f"placeholder {masked[0]} in {told[:80]!r} where the evidence had text"
    return True, "clean"


@dataclass
class Evidence:
    """What a run knows beyond the patterns (all optional; a check without its data is None).

    ``anchors``: per pattern id, where it was seen — (session, event position) pairs, any
    hashable values — the duplicates check falls back to the examples' (transcript, event);
    ``halves``: per pattern id, its sessions in each of the two random halves;
    ``success_phrases``: per pattern id, (successful outputs containing its phrase, successful
    outputs); ``fix_validated`` and
    ``feedback_loops``: per pattern id, from a backtest (the loop value names what it caused).
    """

    min_sessions: int = DEFAULTS.min_sessions
    anchors: Mapping[str, set[Any]] = field(default_factory=dict)
    halves: Mapping[str, tuple[int, int]] | None = None
    success_phrases: Mapping[str, tuple[int, int]] | None = None
    fix_validated: Mapping[str, bool] | None = None
    feedback_loops: Mapping[str, list[str]] | None = None


def _duplicates(patterns: Sequence[Pattern], evidence: Evidence) -> dict[str, list[str]]:
    """Per pattern id, the other proposed patterns it duplicates."""
    out: dict[str, list[str]] = {p.id: [] for p in patterns}
    keys = {p.id: _normalised(f"{_program(_command(p))} {phrase_of(p)}") for p in patterns}
    seen: dict[str, set[Any]] = {
        p.id: set(
            evidence.anchors.get(p.id) or {(e.transcript_id, e.first_event) for e in p.examples}
        )
        for p in patterns
    }
    ids = sorted({p.id for p in patterns})
    for i, a in enumerate(ids):
        for b in ids[i + 1 :]:
            same = bool(keys[a].strip()) and keys[a] == keys[b]
            union = seen[a] | seen[b]
            jaccard = len(seen[a] & seen[b]) / len(union) if union else 0.0
            if same or jaccard >= DUPLICATE_JACCARD:
                out[a].append(b)
                out[b].append(a)
    return out


def check_all(patterns: Sequence[Pattern], evidence: Evidence) -> dict[str, dict[str, Any]]:
    """Every check for every proposed pattern: ``{pattern id: {check: {"pass", "detail"}}}``
    plus ``"quality"``: the share of applicable checks passed."""
    unique = list({p.id: p for p in patterns}.values())
    dups = _duplicates(unique, evidence)
    need = max(2, math.ceil(evidence.min_sessions / 2))
    out: dict[str, dict[str, Any]] = {}
    for pattern in unique:
        pid = pattern.id
        rare = (evidence.success_phrases or {}).get(pid)
        results: dict[str, tuple[bool | None, str]] = {
            "specificity": _specificity(pattern, rare),
            "failure_semantics": _failure_semantics(pattern),
            "parse_sanity": _parse_sanity(pattern),
        }
        if evidence.fix_validated is not None and pid in evidence.fix_validated:
            ok = evidence.fix_validated[pid]
            results["fix_validated"] = (ok, "its fix worked after the same failure later" if ok
                                        else "its fix was not seen working later")  # fmt: skip
        else:
            results["fix_validated"] = (None, "needs --backtest and a fix to check")
        if evidence.halves is not None:
            a, b = evidence.halves.get(pid, (0, 0))
            results["stability"] = (
                a >= need and b >= need,
                f"{a} and {b} sessions in the two halves (need {need})",
            )
        else:
            results["stability"] = (None, "needs --backtest")
        found = dups.get(pid, [])
        results["duplicates"] = (not found, "duplicates " + ", ".join(found) if found
                                 else "no duplicate")  # fmt: skip
        if evidence.feedback_loops is not None:
            caused = evidence.feedback_loops.get(pid, [])
            results["feedback_loop"] = (not caused, "caused " + ", ".join(caused) if caused
                                        else "caused no later proposal")  # fmt: skip
        else:
            results["feedback_loop"] = (None, "needs --backtest")
        entry: dict[str, Any] = {name: {"pass": results[name][0], "detail": results[name][1]}
                                 for name in CHECKS}  # fmt: skip
        applicable = [v for v, _ in results.values() if v is not None]
        entry["quality"] = round(sum(applicable) / len(applicable), 4) if applicable else None
        out[pid] = entry
    return out


def score(checks: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The run's quality score and per-check counts (passed, failed, not applicable)."""
    counts = {name: {"passed": 0, "failed": 0, "n/a": 0} for name in CHECKS}
    qualities: list[float] = []
    for entry in checks.values():
        for name in CHECKS:
            value = entry[name]["pass"]
            counts[name]["n/a" if value is None else "passed" if value else "failed"] += 1
        if entry.get("quality") is not None:
            qualities.append(float(entry["quality"]))
    return {
        "score": round(100 * sum(qualities) / len(qualities), 1) if qualities else None,
        "proposals": len(checks),
        "checks": counts,
        "parse_failures": counts["parse_sanity"]["failed"],
        "feedback_loops": counts["feedback_loop"]["failed"],
    }


def flagged(checks: Mapping[str, Any]) -> list[str]:
    """The failed checks of one proposal's entry, by name."""
    return [n for n in CHECKS if checks.get(n, {}).get("pass") is False]


class PhraseCounter:
    """Counts, over successful call outputs, those holding each pattern's literal phrase."""

    def __init__(self, phrases: Mapping[str, str]) -> None:
        self.phrases = {pid: p.lower() for pid, p in phrases.items() if p.strip()}
        self.hits = dict.fromkeys(self.phrases, 0)
        self.total = 0

    def add(self, output: str) -> None:
        self.total += 1
        low = output.lower()
        for pid, phrase in self.phrases.items():
            if phrase in low:
                self.hits[pid] += 1

    def add_session(self, session: Session, rules: FailureRules) -> None:
        for call in calls_of(session, rules):
            if not call.failed and call.result is not None and call.result.output:
                self.add(call.result.output)

    def counts(self) -> dict[str, tuple[int, int]]:
        return {pid: (self.hits[pid], self.total) for pid in self.phrases}


def _scope(path: str) -> str:
    parts = path.strip("/").split("/")
    return {"projects": "project", "users": "user", "agents": "agent", "tasks": "task",
            "org": "org"}.get(parts[0], parts[0]) if parts and parts[0] else "/"  # fmt: skip


def run_summary(
    run: Mapping[str, Any], report: Mapping[str, Any] | None, statuses: Mapping[str, str]
) -> dict[str, Any]:
    """What the quality page shows for one run (JSON values).

    ``run``: ``id``, ``status``, ``created_at`` (ISO); ``statuses``: each queued proposal's
    review status by id (``open``, ``accepted``, ``rejected``, …). Acceptance rate is accepted
    over reviewed (accepted + rejected), None before any review; tokens and cost per accepted
    proposal are None with no accepted one.
    """
    report = report or {}
    proposed = list(report.get("proposed") or [])
    by_origin: dict[str, int] = {}
    by_miner: dict[str, int] = {}
    by_scope: dict[str, int] = {}
    for entry in proposed:
        miner = str(entry.get("miner", "?"))
        origin = "model" if miner == "model" else "miners"
        by_origin[origin] = by_origin.get(origin, 0) + 1
        by_miner[miner] = by_miner.get(miner, 0) + 1
        for scope in sorted({_scope(p) for p in entry.get("paths") or []}):
            by_scope[scope] = by_scope.get(scope, 0) + 1
    review: dict[str, int] = {}
    for status in statuses.values():
        review[status] = review.get(status, 0) + 1
    accepted, rejected = review.get("accepted", 0), review.get("rejected", 0)
    usage = report.get("usage") or {}
    kinds = ("input_tokens", "output_tokens", "cache_creation_input_tokens",
             "cache_read_input_tokens")  # fmt: skip
    tokens = sum(int(usage.get(k) or 0) for k in kinds)
    cost = float(usage.get("cost_usd") or 0.0)
    backtest = report.get("backtest")
    return {
        "run": run.get("id"),
        "status": run.get("status"),
        "created_at": run.get("created_at"),
        "kind": "backtest" if backtest else "dream",
        "proposals": len(proposed),
        "by_origin": dict(sorted(by_origin.items())),
        "by_miner": dict(sorted(by_miner.items())),
        "by_scope": dict(sorted(by_scope.items())),
        "review": dict(sorted(review.items())),
        "acceptance_rate": round(accepted / (accepted + rejected), 4)
        if accepted + rejected
        else None,
        "coverage": backtest.get("coverage") if backtest else None,
        "bound": backtest.get("bound") if backtest else None,
        "of_bound": backtest.get("of_bound") if backtest else None,
        "feedback_loops": backtest.get("feedback_loops") if backtest else None,
        "quality": dict(report.get("quality") or {}),
        "checks": {e.get("pattern"): e.get("checks") for e in proposed if e.get("checks")},
        "tokens": tokens,
        "cost_usd": round(cost, 6),
        "tokens_per_accepted": round(tokens / accepted, 1) if accepted else None,
        "cost_per_accepted": round(cost / accepted, 6) if accepted else None,
    }
