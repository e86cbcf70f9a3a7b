"""Error signatures and normalised inputs: the variable parts of text abstracted away.

Two steps, as in the log-parsing literature:

1. **Masking** (:func:`mask`) replaces what is variable by construction with placeholders:
   URLs ``<url>``, UUIDs ``<id>``, timestamps and dates ``<ts>``, hex values ``<hex>``, quoted
   values ``<str>``, paths ``<path>``, and every remaining token holding a digit ``<num>``
   (``HAT030``, ``certificate_7504069``, ``1.2.3``). Masking alone makes two errors that differ
   only in those parts identical, whatever order they arrive in.
2. **Drain** (:class:`Drain`) — He, Zhu, Zheng and Lyu, *Drain: An Online Log Parsing Approach
   with Fixed Depth Tree*, ICWS 2017 — groups masked messages into templates: a fixed-depth
   prefix tree routes a message by its token count and its first ``depth - 2`` tokens to a leaf;
   at the leaf the most similar template (share of equal tokens, ``<*>`` and placeholders
   matching anything) absorbs it when the similarity reaches ``similarity``, and the positions
   where they differ become ``<*>``; otherwise it starts a template of its own. This catches
   variable parts masking cannot know (``module foo not found`` / ``module bar not found``).

When a template generalises, its text (and so the pattern key built from it) changes: Drain
reports the old and new text so the reducer can move what it counted under the old key
(:meth:`Drain.add` returns both). The tree is plain data (:meth:`Drain.state`), so a
checkpointed run continues exactly where it stopped.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = [
    "PLACEHOLDERS",
    "Drain",
    "error_line",
    "literal_phrase",
    "mask",
    "mask_tokens",
    "normalise_command",
    "tokens_of",
]

WILDCARD: Final = "<*>"
PLACEHOLDERS: Final = ("<url>", "<id>", "<ts>", "<hex>", "<str>", "<path>", "<num>", WILDCARD)
_MAX_TOKENS: Final = 40

_MASKS: Final = [
    (re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://\S+"), "<url>"),
    (
        re.compile(r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b"),
        "<id>",
    ),
    (
        re.compile(
            r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
            r"(?:Z|[+-]\d{2}:?\d{2})?)?\b|\b\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?\b"
        ),
        "<ts>",
    ),
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"), "<hex>"),
    (re.compile(r"\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|`[^`\n]{0,200}`"), "<str>"),
    (
        re.compile(
            r"(?<![\w<])(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*"
            r"|\b[\w.-]+/[\w.@+-]+(?:/[\w.@+-]*)*"
        ),
        "<path>",
    ),
]  # fmt: skip
_DIGIT: Final = re.compile(r"\d")
_WRAPPED: Final = re.compile(r"[^\w<]*(<(?:url|id|ts|hex|str|path|num)>)[^\w>]*")
_ERROR_WORDS: Final = re.compile(
    r"error|fail|fatal|exception|denied|not found|no such|cannot|can't|unable|invalid|"
    r"unknown|refused|timed out|timeout|missing|undefined|unexpected|not allowed|permission",
    re.IGNORECASE,
)
_ERROR_PREFIX: Final = re.compile(r"^(?:error|Error|ERROR)\s*:\s*")
_EXIT_LINE: Final = re.compile(r"^(?:Error: )?Exit code:? -?\d+\s*$")


def mask(text: str) -> str:
    """``text`` with URLs, ids, times, hex, quoted values and paths replaced by placeholders."""
    for pattern, placeholder in _MASKS:
        text = pattern.sub(placeholder, text)
    return text


def mask_tokens(text: str, limit: int = _MAX_TOKENS) -> list[str]:
    """The masked tokens of ``text`` (at most ``limit``): also any token with a digit -> <num>,
    and punctuation around a placeholder dropped (``(<hex>,`` -> ``<hex>``)."""
    out: list[str] = []
    for token in mask(text).split()[:limit]:
        bare = _WRAPPED.fullmatch(token)
        if bare:
            out.append(bare.group(1))
        else:
            out.append("<num>" if _DIGIT.search(token) else token)
    return out


def tokens_of(text: str) -> list[str]:
    """Whitespace tokens with digit runs masked but paths and flags kept (inputs, not errors)."""
    return [
        "<num>" if token.isdigit() or (_DIGIT.search(token) and "/" not in token) else token
        for token in _MASKS[1][0].sub("<id>", _MASKS[2][0].sub("<ts>", text)).split()
    ]


def normalise_command(text: str, limit: int = 200) -> str:
    """A command or input with ids, times and numbers masked, whitespace collapsed, bounded."""
    return " ".join(tokens_of(text))[:limit]


def error_line(output: str | None) -> str:
    """The line of an output that says what went wrong, without a leading ``Error:``.

    The first line with an error word (``error``, ``failed``, ``not found``, ``denied``, ...),
    else the first non-empty line; an ``Exit code N`` line is skipped.
    """
    if not output:
        return ""
    first = ""
    for count, raw in enumerate(output.splitlines()):
        line = raw.strip()
        if not line or _EXIT_LINE.match(line):
            continue
        if not first:
            first = line
        if _ERROR_WORDS.search(line):
            return _ERROR_PREFIX.sub("", line)[:400]
        if count > 60:
            break
    return _ERROR_PREFIX.sub("", first)[:400]


def literal_phrase(template: str) -> str:
    """The longest run of template tokens that are not placeholders (a searchable phrase)."""
    best: list[str] = []
    run: list[str] = []
    for token in [*template.split(), WILDCARD]:
        if token in PLACEHOLDERS:
            if len(run) > len(best):
                best = run
            run = []
        else:
            run.append(token)
    return " ".join(best)


class Drain:
    """A compact Drain (see the module docstring): templates per group, online, deterministic.

    ``group`` keeps unrelated sources apart (a tool and its command): messages of different
    groups never share a template. Positions are compared exactly; placeholders from masking
    and ``<*>`` match any token. With ``width`` > 0, :meth:`tick` (once per session) applies
    lossy counting to the templates as :mod:`memdir.dream.reduce` does to patterns: every
    ``width`` sessions, templates with ``messages + delta <= bucket`` are forgotten, so one-off
    errors do not grow the tree with the fleet.
    """

    def __init__(
        self, depth: int = 4, similarity: float = 0.5, max_children: int = 64, width: int = 0
    ) -> None:
        self.depth = max(3, depth)
        self.similarity = similarity
        self.max_children = max_children
        self.width = width
        self.sessions = 0
        self.next_id = 0
        self.templates: dict[int, list[str]] = {}
        self.paths: dict[int, list[str]] = {}
        self.counts: dict[int, int] = {}
        self.deltas: dict[int, int] = {}
        self._tree: dict[str, Any] = {}

    def add(self, group: str, tokens: list[str]) -> tuple[int, str | None]:
        """File a message; return its template's id and the text it had before, if changed."""
        path = self._route(group, tokens)
        leaf: list[int] = self._node(path).setdefault("", [])
        best, best_score = -1, -1.0
        for index in leaf:
            score = self._score(self.templates[index], tokens)
            if score > best_score:
                best, best_score = index, score
        if best >= 0 and best_score >= self.similarity:
            self.counts[best] += 1
            template = self.templates[best]
            pairs = zip(template, tokens, strict=True)
            merged = [a if a == b or a in PLACEHOLDERS else WILDCARD for a, b in pairs]
            if merged != template:
                old = " ".join(template)
                self.templates[best] = merged
                return best, old
            return best, None
        index, self.next_id = self.next_id, self.next_id + 1
        self.templates[index], self.paths[index] = list(tokens), path
        self.counts[index], self.deltas[index] = 1, self._bucket() - 1 if self.width else 0
        leaf.append(index)
        return index, None

    def template(self, index: int) -> str:
        return " ".join(self.templates[index])

    def tick(self) -> None:
        """One session done: forget rare templates at each bucket boundary."""
        self.sessions += 1
        if not self.width or self.sessions % self.width:
            return
        bucket = self._bucket()
        for index in [i for i in self.templates if self.counts[i] + self.deltas[i] <= bucket]:
            self._forget(index)

    def _bucket(self) -> int:
        return max(1, -(-self.sessions // self.width))

    def _forget(self, index: int) -> None:
        path = self.paths.pop(index)
        del self.templates[index], self.counts[index], self.deltas[index]
        trail: list[tuple[dict[str, Any], str]] = []
        key = path[0] + "\x00" + path[1]
        node: dict[str, Any] = self._tree[key]
        trail.append((self._tree, key))
        for step in path[2:]:
            trail.append((node["children"], step))
            node = node["children"][step]
        node[""].remove(index)
        for parent, name in reversed(trail):  # drop the nodes left empty
            child = parent[name]
            if child.get("") or child.get("children"):
                break
            del parent[name]

    @staticmethod
    def _score(template: list[str], tokens: list[str]) -> float:
        if not tokens:
            return 1.0
        same = sum(1 for a, b in zip(template, tokens, strict=True) if a == b or a in PLACEHOLDERS)
        return same / len(tokens)

    def _route(self, group: str, tokens: list[str]) -> list[str]:
        path = [group, str(len(tokens))]
        node = self._node(path)
        for token in tokens[: self.depth - 2]:
            key = WILDCARD if token in PLACEHOLDERS or _DIGIT.search(token) else token
            children = node.setdefault("children", {})
            if key not in children and len(children) >= self.max_children:
                key = WILDCARD
            path.append(key)
            node = children.setdefault(key, {})
        return path

    def _node(self, path: list[str]) -> dict[str, Any]:
        node: dict[str, Any] = self._tree.setdefault(path[0] + "\x00" + path[1], {})
        for key in path[2:]:
            node = node.setdefault("children", {}).setdefault(key, {})
        return node

    def state(self) -> dict[str, Any]:
        """JSON-able: each template (by id) with its tree path and counts."""
        return {
            "sessions": self.sessions,
            "next_id": self.next_id,
            "templates": [
                [i, self.templates[i], self.paths[i], self.counts[i], self.deltas[i]]
                for i in sorted(self.templates)
            ],
        }

    @classmethod
    def from_state(cls, state: dict[str, Any], **options: Any) -> Drain:
        drain = cls(**options)
        drain.sessions, drain.next_id = int(state["sessions"]), int(state["next_id"])
        for index, template, path, count, delta in state["templates"]:
            drain.templates[index], drain.paths[index] = list(template), list(path)
            drain.counts[index], drain.deltas[index] = count, delta
            drain._node(list(path)).setdefault("", []).append(index)
        return drain
