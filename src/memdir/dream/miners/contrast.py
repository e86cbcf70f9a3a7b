"""Contrast: tool calls over-represented in failed sessions against successful trials of the task.

The costliest failures are silent: every call succeeds and the session still fails (a refund
the policy forbids, a cabin change a basic-economy fare does not allow). No error text points
at them; only outcomes do. When sessions are trials of the same task with different outcomes
(τ-bench: 50 tasks x 4 trials), a call feature that failed trials make and successful trials of
the *same task* do not is a candidate cause.

**Features** of a session (a set, at most :data:`MAX_FEATURES`): each tool called (``tool``),
and each scalar argument as ``tool arg=value`` — nested ones by dotted path
(``book_reservation payment_methods.payment_id=gift_card_<num>``) — with digits masked and
values longer than :data:`MAX_VALUE` characters or pure ids skipped, so a feature names a
kind of call, not one booking.

**Statistic.** Per task, the miner counts failed and successful trials and, per feature, the
failed and successful trials that have it. Tasks with both outcomes are the strata of a
Mantel-Haenszel test (stratified 2x2 tables: the task is controlled for, so a feature that only
hard tasks need does not look harmful): the common odds ratio — the plain Mantel-Haenszel
estimator, consistent however sparse the strata are (a trial or two per outcome and task); 0.5
is added to every cell only when the pooled numerator or denominator is zero, since adding it to
each of many sparse strata pulls the estimate towards 1 (Greenland and Robins, 1985; Sweeting
et al., 2004) — and the Cochran-Mantel-Haenszel chi-square with continuity correction, whose
p-values are adjusted for the number of distinct hypotheses tested (Benjamini-Hochberg: the
false discovery rate). Features with identical per-task tables (``get_flight_status`` and
``get_flight_status flight_number=HAT<num>`` when every call has such a number) are one
hypothesis and are counted once in that adjustment. A feature is
proposed when it is in at least ``min_sessions`` failed trials of at least ``min_tasks`` tasks,
its odds ratio is at least :data:`MIN_ODDS` and its corrected p-value at most :data:`ALPHA`; one
with a lower odds ratio is no finding and left out silently (else every call a failed session
makes would crowd the report); the others are reported with their figures.

**Memory** is bounded: at most :data:`MAX_TASKS` tasks are held — beyond that the task seen
least recently is folded into fixed per-feature sums (its stratum is final by then in a fleet
read in order) — and a session contributes at most :data:`MAX_FEATURES` features, so a task's
table is bounded by the features its trials make; nothing grows with the number of sessions.

**What successful trials said.** A contrast figure says which call goes with failure, not what
to do instead; the sessions often say it. From each *successful* trial's agent messages the
miner keeps the sentences that name a word of a tool the trial called (``search_onestop_flight``
-> ``onestop``, matched with hyphens and spaces removed: "one-stop"), at most
:data:`MAX_SENTENCES` per tool and word, each with the sessions that said it and their source
classes. The draft quotes up to :data:`MAX_QUOTES` of them for the tool's *distinctive* words
(in no other tool's name: ``flight`` names several tools, ``onestop`` one), only from the
pattern's own source classes (text every reader of the proposal may read, as placement checks
for the evidence), preferring sentences that also name another tool's distinctive word (the
alternative: "direct flights first, then one-stop options"), then the most sessions.

Signals: one per feature of each *failed* session that names a task (the reducer counts them,
keeps examples); key ``tool|feature``; subject ``tool``, ``feature`` and, once annotated at
the end, the stratified figures (also in the pattern's statistics).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any, ClassVar, Final

from memdir.dream.miners.base import MinerContext, calls_of, excerpt
from memdir.dream.miners.failures import FailureRules
from memdir.dream.miners.signature import normalise_command
from memdir.dream.model import MemoryText, Pattern, Session, Signal
from memdir.dream.reduce import source_class
from memdir.transcripts.model import bounded_key

__all__ = [
    "ALPHA",
    "MAX_FEATURES",
    "MAX_QUOTES",
    "MAX_SENTENCES",
    "MAX_TASKS",
    "MIN_ODDS",
    "ContrastMiner",
    "benjamini_hochberg",
    "features_of",
    "mantel_haenszel",
]

MAX_FEATURES: Final = 64
MAX_TASKS: Final = 4096
MAX_VALUE: Final = 40
MAX_QUOTES: Final = 3
MAX_SENTENCES: Final = 64  # kept per (tool, word); later ones only add to those kept
MAX_TOOLS: Final = 512  # tool names whose words are compared (distinctive words)
_SPLIT: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_MARKUP: Final = re.compile(r"[*_`#>]+")
_JOINERS: Final = re.compile(r"[\s\-]+")
MIN_ODDS: Final = 3.0
ALPHA: Final = 0.05
_DIGIT: Final = re.compile(r"\d")
_DIGITS: Final = re.compile(r"\d+(?:[.,:-]\d+)*")
_UUID: Final = re.compile(r"[0-9a-fA-F-]{16,}")
_SKIP_KEYS: Final = frozenset({"id", "user_id", "reservation_id", "session_id", "call_id"})

#: A stratum: [failed trials, successful trials, {feature: [failed with, successful with]}].
Stratum = list[Any]


def _values(prefix: str, value: Any, depth: int, out: list[str]) -> None:
    if isinstance(value, dict) and depth < 2:
        for key in sorted(value):
            if key not in _SKIP_KEYS:
                _values(f"{prefix}.{key}" if prefix else str(key), value[key], depth + 1, out)
    elif isinstance(value, list) and depth < 2:
        for item in value[:8]:
            _values(prefix, item, depth + 1, out)
    elif isinstance(value, (str, bool, int)) or (isinstance(value, float) and value.is_integer()):
        text = str(value).lower() if isinstance(value, bool) else str(value)
        if not text or len(text) > MAX_VALUE or "\n" in text:
            return
        masked = _DIGITS.sub("<num>", text) if _DIGIT.search(text) else text
        if masked == "<num>" or _UUID.fullmatch(text):
            return
        out.append(f"{prefix}={masked}")


def features_of(session: Session, rules: FailureRules) -> dict[str, tuple[str, int]]:
    """The session's call features, each with its tool and the first call's event position."""
    found: dict[str, tuple[str, int]] = {}
    times: dict[str, int] = {}
    facts: dict[str, list[str]] = {}  # an id seen in results -> the facts its record states
    for call in calls_of(session, rules):
        if call.shell:
            continue  # shell commands are other miners' matter; their words vary too much
        times[call.name] = times.get(call.name, 0) + 1
        names = [call.name] if times[call.name] == 1 else [f"{call.name} (again)"]
        if isinstance(call.input, dict):
            args: list[str] = []
            _values("", call.input, 0, args)
            names += [f"{call.name} {a}" for a in sorted(set(args))]
            for value in _ids(call.input):
                names += [f"{call.name} on {fact}" for fact in facts.get(value, ())]
        if call.result is not None and not call.failed:
            _remember(call.result.output, facts)
        for feature in names:
            if feature not in found and len(found) < MAX_FEATURES:
                found[feature] = (call.name, call.index)
    return found


def _ids(value: dict[str, Any]) -> list[str]:
    """The id-like string arguments of a call (``reservation_id``, ``order_id``, ``id``)."""
    return sorted(
        {
            str(v)
            for k, v in value.items()
            if isinstance(v, str) and (k == "id" or k.endswith("_id"))
        }
    )


def _remember(output: str | None, facts: dict[str, list[str]]) -> None:
    """File the scalar facts of a JSON record result under the ids it holds.

    ``{"reservation_id": "X", "cabin": "basic_economy", "insurance": "no", ...}`` makes a
    later ``cancel_reservation(reservation_id="X")`` carry the features ``cancel_reservation
    on cabin=basic_economy`` and ``... on insurance=no``: the record the call acted on, which
    is what a policy's conditions are about.
    """
    if not output or not output.lstrip().startswith("{") or len(output) > 20_000:
        return
    try:
        record = json.loads(output)
    except ValueError:
        return
    if not isinstance(record, dict):
        return
    ids = _ids(record)
    if not ids:
        return
    found: list[str] = []
    for key in sorted(record):
        value = record[key]
        if key == "id" or key.endswith("_id") or isinstance(value, (dict, list)):
            continue
        _values(key, value, 2, found)
    for value in ids:
        facts[value] = found[:16]


def _chi_p(statistic: float) -> float:
    """Upper tail of the chi-square distribution with one degree of freedom."""
    return math.erfc(math.sqrt(max(0.0, statistic) / 2))


def mantel_haenszel(strata: list[tuple[int, int, int, int]]) -> tuple[float, float]:
    """(common odds ratio, CMH p-value) of 2x2 strata ``(a, b, c, d)``.

    ``a`` failed with, ``b`` failed without, ``c`` succeeded with, ``d`` succeeded without.
    The odds ratio is the Mantel-Haenszel estimator, with 0.5 added to every cell of every
    stratum only when its pooled numerator or denominator would be zero (see the module
    docstring); the test uses the raw counts with continuity correction. Strata with one
    outcome only carry no information and are skipped.
    """
    informative = [(a, b, c, d) for a, b, c, d in strata if (a + b) and (c + d)]
    num = sum(a * d / (a + b + c + d) for a, b, c, d in informative)
    den = sum(b * c / (a + b + c + d) for a, b, c, d in informative)
    if informative and (num == 0 or den == 0):
        halves = [(a + 0.5, b + 0.5, c + 0.5, d + 0.5) for a, b, c, d in informative]
        num = sum(a * d / (a + b + c + d) for a, b, c, d in halves)
        den = sum(b * c / (a + b + c + d) for a, b, c, d in halves)
    dev = var = 0.0
    for a, b, c, d in informative:
        n = a + b + c + d
        if n > 1:
            dev += a - (a + b) * (a + c) / n
            var += (a + b) * (c + d) * (a + c) * (b + d) / (n * n * (n - 1))
    odds = num / den if den else math.inf
    if var <= 0:
        return odds, 1.0
    statistic = (max(0.0, abs(dev) - 0.5)) ** 2 / var
    return odds, _chi_p(statistic)


def benjamini_hochberg(p_values: dict[str, float]) -> dict[str, float]:
    """Benjamini-Hochberg adjusted p-values (q-values): the false discovery rate at which
    each test would be called significant among all of them."""
    ranked = sorted(p_values.items(), key=lambda kv: (kv[1], kv[0]))
    total = len(ranked)
    out: dict[str, float] = {}
    running = 1.0
    for rank in range(total, 0, -1):
        feature, p = ranked[rank - 1]
        running = min(running, p * total / rank)
        out[feature] = min(1.0, running)
    return out


def tool_words(tool: str) -> list[str]:
    """The words of a tool's name a sentence may name it by (four letters or more)."""
    parts = re.split(r"[^a-z]+", re.sub(r"([a-z])([A-Z])", r"\1_\2", tool).lower())
    return sorted({p for p in parts if len(p) >= 4})


def sentences(text: str) -> Iterator[str]:
    """The plain sentences of an agent message: markup stripped; headings, table rows, list
    lead-ins, records and fragments under five words or over 240 characters left out."""
    for part in _SPLIT.split(text):
        part = part.strip()
        if part.startswith(("#", "|")) or part.endswith(":"):
            continue  # headings, table rows and the lead-ins of lists are no sentences
        sentence = " ".join(_MARKUP.sub("", part).split()).lstrip("-• ").strip()
        if (
            20 <= len(sentence) <= 240
            and len(sentence.split()) >= 5
            and not any(c in sentence for c in "|{}[]")
        ):
            yield sentence


class ContrastMiner:
    name: ClassVar[str] = "contrast"
    category: ClassVar[str] = "known-failures"

    def __init__(self, context: MinerContext) -> None:
        self.thresholds = context.thresholds
        self.rules = context.rules
        self.tasks: dict[str, Stratum] = {}
        self.seen: dict[str, int] = {}  # task -> the session number it was last seen at
        self.folded: dict[str, list[int]] = {}  # feature -> [a, b, c, d] of folded strata
        self.sessions = 0
        self._judged: dict[str, dict[str, Any]] | None = None
        self.tools: set[str] = set()
        #: "tool|word" -> sentence -> [successful sessions that said it, their source classes]
        self.quotes: dict[str, dict[str, list[Any]]] = {}
        self._own: dict[str, list[str]] | None = None  # _own_words() of self.tools

    # --- mining -------------------------------------------------------------------------

    def mine(self, session: Session) -> Iterator[Signal]:
        failed, task = session.failed, session.task
        if failed is None or task is None:
            return iter(())
        self.sessions += 1
        self._judged = None
        features = features_of(session, self.rules)
        stratum = self.tasks.get(task)
        if stratum is None:
            stratum = self.tasks[task] = [0, 0, {}]
            if len(self.tasks) > MAX_TASKS:
                self._fold()
        self.seen[task] = self.sessions
        stratum[0 if failed else 1] += 1
        table: dict[str, list[int]] = stratum[2]
        for feature in features:
            row = table.setdefault(feature, [0, 0])
            row[0 if failed else 1] += 1
        if not failed:
            self._quote(session, {tool for tool, _ in features.values()})
            return iter(())
        out = []
        shown: dict[int, str] = {}
        for feature, (tool, position) in features.items():
            if position not in shown:
                call = session.events[position]
                shown[position] = f"{call.name}: {normalise_command(str(call.input), 400)}"
            out.append(
                Signal(
                    miner=self.name,
                    key=bounded_key(f"{tool}|{feature}"),
                    subject={"tool": tool, "feature": feature},
                    title=f"Failed trials call {feature}",
                    excerpt=excerpt(session, position, position, shown[position]),
                )
            )
        return iter(out)

    def _quote(self, session: Session, tools: set[str]) -> None:
        """Keep the successful session's agent sentences that name a word of a tool it called."""
        for tool in sorted(tools - self.tools):
            if len(self.tools) < MAX_TOOLS:
                self.tools.add(tool)
                self._own = None
        # a word another tool's name holds is no tool's own word, now or later: only the
        # words still a single tool's own are worth keeping sentences for
        own = self._own_words()
        words = {tool: names for tool in tools if (names := own.get(tool))}
        if not words:
            return
        cls = source_class(session.info)
        said: set[tuple[str, str]] = set()
        for event in session.events:
            if event.kind != "message" or event.role != "assistant" or not event.text:
                continue
            whole = _JOINERS.sub("", event.text.lower())
            if not any(w in whole for names in words.values() for w in names):
                continue  # names no tool: not worth splitting
            for sentence in sentences(event.text):
                flat = _JOINERS.sub("", sentence.lower())
                for tool, names in words.items():
                    for word in names:
                        if word in flat and (f"{tool}|{word}", sentence) not in said:
                            said.add((f"{tool}|{word}", sentence))
        for key, sentence in sorted(said):
            kept = self.quotes.setdefault(key, {})
            row = kept.get(sentence)
            if row is None:
                if len(kept) >= MAX_SENTENCES:
                    continue
                row = kept[sentence] = [0, []]
            row[0] += 1
            if cls not in row[1] and len(row[1]) < 16:
                row[1].append(cls)
                row[1].sort()

    def _own_words(self, extra: str | None = None) -> dict[str, list[str]]:
        """Per tool seen (and ``extra``), the words of its name no other tool's name holds."""
        if self._own is not None and (extra is None or extra in self.tools):
            return self._own
        named: dict[str, int] = {}  # word -> the number of tools whose names hold it
        every = self.tools | ({extra} if extra else set())
        for name in every:
            for word in tool_words(name):
                named[word] = named.get(word, 0) + 1
        own = {name: [w for w in tool_words(name) if named[w] == 1] for name in every}
        if extra is None or extra in self.tools:
            self._own = own
        return own

    def quotes_for(self, pattern: Pattern) -> list[tuple[str, int]]:
        """Up to :data:`MAX_QUOTES` sentences successful trials said about the pattern's tool
        (see the module docstring), each with the number of sessions that said it."""
        tool = str(pattern.subject.get("tool", ""))
        own = self._own_words(tool)
        mine = own.get(tool, [])
        alternatives = {w for name, names in own.items() if name != tool for w in names}
        allowed = set(pattern.sources)
        found: dict[str, int] = {}
        for word in mine:
            for sentence, (count, classes) in self.quotes.get(f"{tool}|{word}", {}).items():
                if not allowed.intersection(classes):
                    continue
                found[sentence] = max(found.get(sentence, 0), int(count))

        def rank(item: tuple[str, int]) -> tuple[bool, int, int, str]:
            flat = _JOINERS.sub("", item[0].lower())
            return (not any(w in flat for w in alternatives), -item[1], len(item[0]), item[0])

        return sorted(found.items(), key=rank)[:MAX_QUOTES]

    def _fold(self) -> None:
        """Fold the least recently seen task's stratum into the fixed sums."""
        oldest = min(self.tasks, key=lambda t: (self.seen.get(t, 0), t))
        failed, succeeded, table = self.tasks.pop(oldest)
        self.seen.pop(oldest, None)
        if not failed or not succeeded:
            return
        for feature, (fw, sw) in table.items():
            row = self.folded.setdefault(feature, [0, 0, 0, 0])
            row[0] += fw
            row[1] += failed - fw
            row[2] += sw
            row[3] += succeeded - sw

    def state(self) -> dict[str, Any]:
        return {
            "sessions": self.sessions,
            "tasks": {
                t: [f, s, dict(sorted(tab.items()))]
                for t, (f, s, tab) in sorted(self.tasks.items())
            },
            "seen": dict(sorted(self.seen.items())),
            "folded": dict(sorted(self.folded.items())),
            "tools": sorted(self.tools),
            "quotes": {k: dict(sorted(v.items())) for k, v in sorted(self.quotes.items())},
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self.sessions = int(state["sessions"])
        self.tasks = {
            t: [int(f), int(s), {k: [int(x), int(y)] for k, (x, y) in tab.items()}]
            for t, (f, s, tab) in state["tasks"].items()
        }
        self.seen = {t: int(n) for t, n in state["seen"].items()}
        self.folded = {k: [int(x) for x in v] for k, v in state["folded"].items()}
        self.tools = set(state.get("tools", ()))
        self._own = None
        self.quotes = {
            k: {text: [int(n), list(classes)] for text, (n, classes) in v.items()}
            for k, v in state.get("quotes", {}).items()
        }
        self._judged = None

    # --- the pattern's own logic (see :mod:`.base`) -------------------------------------

    def _figures(self) -> dict[str, dict[str, Any]]:
        """Per feature: the stratified figures over every task with both outcomes."""
        if self._judged is not None:
            return self._judged
        strata: dict[str, list[tuple[int, int, int, int]]] = {}
        tasks_with: dict[str, int] = {}
        for _, (failed, succeeded, table) in sorted(self.tasks.items()):
            if not failed or not succeeded:
                continue
            for feature, (fw, sw) in table.items():
                strata.setdefault(feature, []).append((fw, failed - fw, sw, succeeded - sw))
                if fw:
                    tasks_with[feature] = tasks_with.get(feature, 0) + 1
        for feature, (a, b, c, d) in self.folded.items():
            strata.setdefault(feature, []).append((a, b, c, d))
        tests = {feature: mantel_haenszel(rows) for feature, rows in strata.items()}
        # one hypothesis per distinct table: features that always occur together are one test
        hypotheses: dict[tuple[tuple[int, int, int, int], ...], str] = {}
        for feature in sorted(strata):
            hypotheses.setdefault(tuple(sorted(strata[feature])), feature)
        distinct = benjamini_hochberg({f: tests[f][1] for f in hypotheses.values()})
        adjusted = {f: distinct[hypotheses[tuple(sorted(strata[f]))]] for f in strata}
        out: dict[str, dict[str, Any]] = {}
        for feature, rows in strata.items():
            odds = tests[feature][0]
            out[feature] = {
                "failed_with": sum(r[0] for r in rows),
                "failed": sum(r[0] + r[1] for r in rows),
                "succeeded_with": sum(r[2] for r in rows),
                "succeeded": sum(r[2] + r[3] for r in rows),
                "contrast_tasks": tasks_with.get(feature, 0),
                "odds_ratio": round(odds, 3) if math.isfinite(odds) else None,
                "p_value": round(adjusted[feature], 6),
            }
        self._judged = out
        return out

    def annotate(self, pattern: Pattern) -> None:
        """Add the stratified figures; the outcome counters become the contrast's own.

        The reducer counted failed sessions only (the evidence), so its failure rate would be
        1 by construction: over the tasks with both outcomes, the sessions *with* the feature
        and how many failed, against all trials of those tasks, say what the lift is.
        """
        figures = self._figures().get(str(pattern.subject.get("feature")))
        if figures is None:
            return
        pattern.extra = dict(figures)
        pattern.subject.update(figures)
        pattern.known = figures["failed_with"] + figures["succeeded_with"]
        pattern.failed = figures["failed_with"]
        pattern.baseline_known = figures["failed"] + figures["succeeded"]
        pattern.baseline_failed = figures["failed"]

    def judge(self, pattern: Pattern) -> str | None:
        """None to propose; ``""`` for a call failed trials make no more often than successful
        ones (no finding: not even reported); else why it is reported, with its figures."""
        figures = self._figures().get(str(pattern.subject.get("feature")))
        if figures is None:
            return ""  # no task with both outcomes made it: nothing to compare
        odds, p = figures["odds_ratio"], figures["p_value"]
        if odds is not None and odds < MIN_ODDS:
            return ""
        tasks = figures["contrast_tasks"]
        shown = f"odds ratio {odds}, p = {p:.3g} over {tasks} tasks with both outcomes"
        if (
            tasks < self.thresholds.min_tasks
            or figures["failed_with"] < self.thresholds.min_sessions
        ):
            return f"reported, not proposed: too little contrast support ({shown})"
        if p > ALPHA:
            return f"reported, not proposed: not significant after correction ({shown})"
        return None

    def covers(self, pattern: Pattern, memory: MemoryText) -> bool:
        feature = str(pattern.subject.get("feature", "")).lower()
        tool, _, arg = feature.partition(" ")
        if not memory.has_phrase(tool):
            return False
        return not arg or memory.has_phrase(arg) or memory.has_phrase(arg.replace("=", " "))

    def _quoted(self, pattern: Pattern) -> list[str]:
        """The note's lines quoting what successful trials said about the tool (or none)."""
        quotes = self.quotes_for(pattern)
        if not quotes:
            return []
        tool = pattern.subject.get("tool", "")
        lines = [f"What successful trials that called `{tool}` told the user about it:"]
        lines += [f'- "{text}" ({n} session{"s" if n != 1 else ""})' for text, n in quotes]
        return [*lines, ""]

    def slug_source(self, pattern: Pattern) -> str:
        return f"failing {pattern.subject.get('feature', '')}"

    def note(self, pattern: Pattern) -> tuple[str, str, list[str]]:
        s = pattern.subject
        feature = str(s.get("feature", ""))
        fw, f, sw, n = (
            s.get("failed_with"),
            s.get("failed"),
            s.get("succeeded_with"),
            s.get("succeeded"),
        )
        return (
            f"Check the rules before `{feature}`: failed trials make this call",
            f"`{feature}` is over-represented in failed sessions of the same tasks"[:200],
            [
                f"Sessions that failed their task called `{feature}` in {fw} of {f} failed "
                f"trials, against {sw} of {n} successful trials of the same tasks (tasks "
                f"with both outcomes: {s.get('contrast_tasks')}; Mantel-Haenszel odds ratio "
                f"{s.get('odds_ratio')}, p = {s.get('p_value')}).",
                "",
                "The calls succeed — the failure is silent: the call is what the task or the "
                "policy did not allow. Rule: before this call, check the policy's conditions "
                "for it and confirm them with the user; if they do not hold, do not make it.",
                "",
                *self._quoted(pattern),
                "How to check: compare a failed and a successful trial of one task in the "
                "evidence below.",
            ],
        )
