"""User corrections: user turns that correct the agent, clustered by their key terms.

A user message is a correction when all of these hold:

- the agent already acted in the session (an assistant message or a tool call came before it:
  the opening request is a task, not a correction);
- it is short (at most :data:`MAX_CHARS` characters: long task statements are not);
- it is not plain thanks or acknowledgement (``thanks``, ``great, that works``, ``no problem``),
  nor a closing line — a user simulator's control token (``###STOP###``, ``###TRANSFER###``)
  or "no, that's all I needed", "that's all, thanks", "nothing else" (:func:`is_simulator_closing`),
  nor harness feedback (:func:`~.feedback.feedback_kind`: a format error, a limit, "please
  continue" — recurring text a harness sends, which :mod:`.feedback` mines);
- it is not a question (ends with ``?``) unless it *opens* with a correction (``no, ...``);
- it matches one of :data:`RULES`: ``no, use X``, ``don't <verb>``, ``stop <verb>ing``,
  ``actually ...``, ``I told you``, ``always <verb>``, ``never <verb>``, ``use X, not Y``,
  ``instead of``, ``rather than``, ``that's wrong``, ``prefer X over Y``, ``you should have``.

Key terms are the message's content words: lowercased, apostrophes dropped, stop words and the
words that only carry the correcting intent (``no``, ``always``, ``use``, ``instead``, ...)
removed, a plural ``s`` dropped, sorted — so "always use pnpm, not npm" and "use pnpm instead
of npm please" both give ``npm pnpm``. Clusters form online, across sessions: a correction joins
the cluster whose founding terms are most similar (Jaccard >= :data:`JOIN`), else founds one.
Key: the founding terms joined by ``+``. Subject: ``text`` (the most frequent wording's
message) and ``terms``; each wording is a ``variant``. The founding terms are the founding
session's words, so a signal from a session of another source class names the founder's class
in ``origins``: a proposal keyed by them goes only where that class may be read too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any, ClassVar, Final

from memdir.dream.miners.base import MinerContext, cut, excerpt
from memdir.dream.miners.feedback import feedback_kind, is_simulator_closing
from memdir.dream.model import Session, Signal
from memdir.dream.reduce import source_class
from memdir.transcripts.common import dumps
from memdir.transcripts.model import bounded_key

__all__ = [
    "JOIN",
    "MAX_CHARS",
    "RULES",
    "CorrectionsMiner",
    "is_correction",
    "is_simulator_closing",
    "key_terms",
]

MAX_CHARS: Final = 300
JOIN: Final = 0.5
_VERBS = (
    r"use|run|do|add|change|touch|edit|modify|call|create|delete|remove|write|put|make|commit|"
    r"push|install|mention|include|rename|move|format|import|mock|skip|guess|print|log"
)
_OPENERS: Final = re.compile(
    r"^(?:no|nope|wrong|stop|actually|don'?t|do not|never|always|please always|please don'?t|"
    r"please never|please stop|i told you|i said|i asked)\b"
)
RULES: Final = (
    re.compile(r"^(?:no|nope|wrong)\b[,.!:;]?\s*\S"),
    re.compile(rf"\b(?:don'?t|do not|dont)\s+(?:ever\s+)?(?:{_VERBS})\b"),
    re.compile(r"^(?:please\s+)?stop\b"),
    re.compile(r"^actually\b"),
    re.compile(r"\bi (?:already |just )?(?:told|asked|said)\b"),
    re.compile(rf"\balways\s+(?:{_VERBS}|prefer|check|keep)\b"),
    re.compile(rf"\bnever\s+(?:{_VERBS})\b"),
    re.compile(r"\buse\s+\S+\s*,?\s*(?:not|instead of|rather than)\s+\S"),
    re.compile(r"\b(?:instead of|rather than)\b"),
    re.compile(r"\b(?:that'?s|that is|this is|it'?s)\s+(?:wrong|not (?:right|correct|what i))"),
    re.compile(r"\bprefer\s+\S+\s+(?:over|to)\s+\S"),
    re.compile(r"\byou should(?:n'?t| not)? have\b"),
)
_ACK: Final = re.compile(
    r"^(?:no (?:problem|worries|thanks)|thanks|thank you|thx|great|perfect|ok|okay|cool|nice|"
    r"awesome|looks good|lgtm|good job|well done)\b"
)
_STOP_WORDS: Final = """a an the and or but to of in on at for with by from as is are was were be
been being it its this that these those i you we me my your our us please no not nope dont do
does did doesnt didnt use using used always never stop actually instead rather than told asked
said again just only also here there so then now what why how when which who can could would
should will shall must may might have has had get got make sure ok okay yes wrong right correct
thing things like want need thats im youre lets ive isnt wont cant over prefer ever every all any
some more less very really one if else into onto up down out about same other don"""
_STOP: Final = frozenset(_STOP_WORDS.split())
_WORD: Final = re.compile(r"[a-z0-9][a-z0-9._+#/-]*")


#: Feedback kinds whose wording is a harness's, not a person's ("stop, the output is too long"
#: or "it timed out, use -x" may well be a person).
_HARNESS: Final = frozenset({"format", "edit", "lint", "limit", "continue", "environment"})


def is_correction(text: str) -> bool:
    """Whether a user turn (after the agent acted) corrects the agent, by the rules above."""
    stripped = " ".join(text.split())
    if not stripped or len(stripped) > MAX_CHARS or stripped.startswith(("<", "[")):
        return False
    if is_simulator_closing(stripped) or feedback_kind(stripped, message=True) in _HARNESS:
        return False  # a closing line, or the harness's feedback: no person corrects here
    lowered = stripped.lower().lstrip("\"'*-> ").replace("’", "'")
    if _ACK.match(lowered):
        return False
    if lowered.endswith("?") and not _OPENERS.match(lowered):
        return False
    return any(rule.search(lowered) for rule in RULES)


def key_terms(text: str) -> list[str]:
    """The sorted content words of a correction (see the module docstring)."""
    lowered = text.lower().replace("'", "").replace("’", "")
    terms: set[str] = set()
    for word in _WORD.findall(lowered):
        word = word.rstrip("._-/")
        if len(word) < 2 or word in _STOP:
            continue
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        terms.add(word)
    return sorted(terms)[:12]


class CorrectionsMiner:
    name: ClassVar[str] = "corrections"

    def __init__(self, context: MinerContext) -> None:
        self.clusters: list[list[str]] = []
        #: The source class of the session that founded each cluster: its terms are that
        #: session's text, so a joining session's signal names it as an origin.
        self.founders: list[str] = []
        self._index: dict[str, list[int]] = {}

    def _cluster(self, terms: list[str], cls: str) -> tuple[list[str], str]:
        wanted = set(terms)
        best, best_score = -1, 0.0
        for index in sorted({i for t in terms for i in self._index.get(t, ())}):
            founder = set(self.clusters[index])
            score = len(wanted & founder) / len(wanted | founder)
            if score > best_score:
                best, best_score = index, score
        if best >= 0 and best_score >= JOIN:
            return self.clusters[best], self.founders[best]
        self.clusters.append(list(terms))
        self.founders.append(cls)
        for term in terms:
            self._index.setdefault(term, []).append(len(self.clusters) - 1)
        return terms, cls

    def mine(self, session: Session) -> Iterator[Signal]:
        acted = -1
        cls = source_class(session.info)
        for position, event in enumerate(session.events):
            if event.kind == "tool_call" or (event.kind == "message" and event.role == "assistant"):
                acted = position
                continue
            if event.kind != "message" or event.role != "user" or acted < 0 or not event.text:
                continue
            if not is_correction(event.text):
                continue
            terms = key_terms(event.text)
            if not terms:
                continue
            founder, origin = self._cluster(terms, cls)
            text = " ".join(event.text.split())
            before = session.events[acted]
            action = (
                before.text if before.kind == "message" else f"{before.name} {dumps(before.input)}"
            )
            yield Signal(
                miner=self.name,
                key=bounded_key("+".join(founder)),
                subject={"text": cut(text, 200), "terms": list(founder)},
                title=f"User correction: {cut(text, 120)}",
                excerpt=excerpt(
                    session, acted, position, f"agent: {cut(action or '', 200)}\nuser: {text}"
                ),
                variant=cut(text.lower(), 120),
                origins=(origin,) if origin != cls else (),
            )

    def state(self) -> dict[str, Any]:
        return {"clusters": [list(c) for c in self.clusters], "founders": list(self.founders)}

    def load_state(self, state: dict[str, Any]) -> None:
        self.clusters, self.founders, self._index = [], list(state["founders"]), {}
        for terms in state["clusters"]:
            self.clusters.append(list(terms))
            for term in terms:
                self._index.setdefault(term, []).append(len(self.clusters) - 1)
