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
from collections.abc import Callable
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


def _quoted(match: re.Match[str]) -> str:
    """A quoted value: kept when it is a name without digits (or an identifier such as
    ``'sqlite3'``) — ``No module named 'numpy'`` must not merge with ``'pandas'`` — else
    ``<str>``."""
    found = _QUOTED_NAME.fullmatch(match.group(0))
    if found and (not _DIGIT.search(found.group(2)) or _IDENTIFIER.fullmatch(found.group(2))):
        return "'" + found.group(2) + "'"
    return "<str>"


_MASKS: Final[list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]]] = [
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
    (re.compile(r"\"[^\"\n]{0,200}\"|'[^'\n]{0,200}'|`[^`\n]{0,200}`"), _quoted),
    (
        re.compile(
            r"(?<![\w<])(?:~|\.{1,2})?/[\w.@+-]+(?:/[\w.@+-]*)*"
            r"|\b[\w.-]+/[\w.@+-]+(?:/[\w.@+-]*)*"
        ),
        "<path>",
    ),
]  # fmt: skip
_DIGIT: Final = re.compile(r"\d")
#: Digits inside identifiers are not numbers: ``python3``, ``sqlite3``, ``utf8``, ``Uint8Array``,
#: ``x86_64`` (a lowercase word ending in at most 3 digits, or digits between letters).
#: ``HAT030``, ``mia_li_3668``, ``v1.2``, ``E404`` and ``42`` are values.
_IDENTIFIER: Final = re.compile(r"[a-z]{2,}\d{1,3}|[A-Za-z][A-Za-z_]*\d+[A-Za-z_]\w*")
#: A quoted literal worth keeping in a signature: a name (module, table, command, symbol).
_QUOTED_NAME: Final = re.compile(r"""(['"`])([A-Za-z_][\w.:@-]{0,60})\1""")
_WRAPPED: Final = re.compile(r"[^\w<]*(<(?:url|id|ts|hex|str|path|num)>)[^\w>]*")
_ERROR_WORDS: Final = re.compile(
    r"error|fail|fatal|exception|denied|not found|no such|cannot|can't|unable|invalid|"
    r"unknown|refused|timed out|timeout|missing|undefined|unexpected|not allowed|permission",
    re.IGNORECASE,
)
_ERROR_PREFIX: Final = re.compile(r"^(?:error|Error|ERROR)\s*:\s*")
_EXIT_LINE: Final = re.compile(r"^(?:Error: )?Exit code:? -?\d+\s*$")


def _numeric(token: str) -> bool:
    """Whether a token holds a value with digits (not an identifier such as ``python3``)."""
    if not _DIGIT.search(token) or token.startswith("'"):
        return False
    parts = [p for p in re.split(r"[.:()\[\]{},;!?]+", token) if _DIGIT.search(p)]
    return not parts or not all(_IDENTIFIER.fullmatch(p) for p in parts)


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
            out.append("<num>" if _numeric(token) else token)
    return out


def tokens_of(text: str) -> list[str]:
    """Whitespace tokens with digit runs masked but paths and flags kept (inputs, not errors)."""
    return [
        "<num>" if token.isdigit() or ("/" not in token and _numeric(token)) else token
        for token in _MASKS[1][0].sub("<id>", _MASKS[2][0].sub("<ts>", text)).split()
    ]


def normalise_command(text: str, limit: int = 200) -> str:
    """A command or input with ids, times and numbers masked, whitespace collapsed, bounded."""
    return " ".join(tokens_of(text))[:limit]


#: Harness wrapper lines: they say *that* something failed, not what (skipped).
_WRAPPER_LINES: Final = re.compile(
    r"^(?:Your proposed edit has introduced new syntax error|ERRORS:$|This is how your edit would|"
    r"Your changes have NOT been applied|Here is the original code|Edit the file again|"
    r"DO NOT re-run the same failed edit|\[File: |\(\d+ more lines (?:above|below)\)|"
    r"</?(?:returncode|output|error)>|(?:Error: )?Exit code:? -?\d+|Command `|"
    r"\[Command finished with exit code|Process exited with code|OBSERVATION:|"
    r"=+ ?(?:FAILURES|ERRORS|short test summary info|test session starts)? ?=+$|[-=_~*#]{3,}$|"
    r"_{3,} .* _{3,}$|Traceback \(most recent call last\)|During handling of the above|"
    r"The above exception was the direct cause|\(node:\d+\) \w*Warning|\(Use `node --trace|"
    r"npm (?:warn|WARN|notice)|> \S+@\S+ \S+$|> |\[dotenv@|Warning: |WARNING: |warning: |"
    r".{0,40}\[(?:INFO|DEBUG|TRACE|WARN|WARNING)\]|(?:INFO|DEBUG)[: ])",
)
#: Lines that point elsewhere or keep accounts, never what failed: a bare link (aider's
#: ``https://aider.chat/docs/troubleshooting/edit-errors.html`` holds "errors" in its path)
#: and a harness's token and cost line (``Tokens: 26,161 sent, 141 received. Cost: …``).
_NOT_ERROR_LINES: Final = re.compile(
    r"^(?:<?[a-zA-Z][a-zA-Z0-9+.-]*://\S+>?|Tokens?: [\d,.]+k? sent\b.*|Cost: \$.*)$"
)
_SHELL_PREFIX: Final = re.compile(r"^(?:/bin/|/usr/bin/)?(?:ba|z|da|k)?sh: (?:line )?\d*:? ?")
#: An interpreter naming itself before its error (``/usr/bin/python3: No module named pytest``):
#: ``python``, ``python3`` and a path to either say one thing, so the name goes.
_INTERPRETER_PREFIX: Final = re.compile(
    r"^(?:\S*/)?(?:python[\d.]*|pypy[\d.]*|node|ruby|perl|php): (?=\S)"
)
#: Informative literals, quoted so masking keeps them and Drain does not merge them away.
_LITERALS: Final = (
    (re.compile(r"^(?:zsh: )?command not found: (\S+)$"), r"command not found: '\1'"),
    (re.compile(r"^(\S+): (?:command )?not found$"), r"command not found: '\1'"),
    (re.compile(r"No module named '?([\w.]+)'?"), r"No module named '\1'"),
    (re.compile(r"no such table: ([\w.]+)", re.IGNORECASE), r"no such table: '\1'"),
    (re.compile(r"no such column: ([\w.]+)", re.IGNORECASE), r"no such column: '\1'"),
)
#: The exception line that ends a Python traceback (``pkg.mod.SomeError: message``).
_EXCEPTION: Final = re.compile(
    r"^(?:E\s+)?([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Fault|Failure|"
    r"NotFound|Timeout)\b(?::.*)?)$"
)
_FLAKE8: Final = re.compile(r"^- ([EFWC]\d{3}) (.*)$")
_TAIL_CHARS: Final = 20_000
_HEAD_LINES: Final = 200
_LOG_PREFIX: Final = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[T ][\d:.]+Z?\]?\s*(?:\[?(?:ERROR|FATAL|CRITICAL)\]?:?\s*)?"
)
_TIMED_OUT: Final = re.compile(r"^((?:Command )?timed out after \S+).*", re.IGNORECASE)


def _literal(line: str) -> str:
    line = _SHELL_PREFIX.sub("", line) if _SHELL_PREFIX.match(line) else line
    line = _INTERPRETER_PREFIX.sub("", line)
    line = _TIMED_OUT.sub(r"\1", _LOG_PREFIX.sub("", line))
    for pattern, replacement in _LITERALS:
        line = pattern.sub(replacement, line)
    return line


def _exception(output: str) -> str | None:
    """A Python traceback's final exception line, read from the output's tail (bounded)."""
    tail = output[-_TAIL_CHARS:]
    at = tail.rfind("Traceback (most recent call last)")
    if at < 0:
        return None
    frames = False
    for raw in tail[at:].splitlines()[1:]:
        if raw.startswith((" ", "\t")):
            frames = True
            continue
        line = raw.strip()
        if not line:
            continue
        found = _EXCEPTION.match(line) if frames else None
        if found:
            return found.group(1)
        if line.startswith(("During handling", "The above exception")):
            frames = False
    return None


def error_line(output: str | None) -> str:
    """The line of an output that says what went wrong, without a leading ``Error:``.

    In order: a Python traceback's final exception line (searched in the last 20,000
    characters, so a long traceback's end is found); the first line with an error word
    (``error``, ``failed``, ``not found``, ``denied``, ...) among the first 200 lines, skipping
    harness wrappers and section headers (:data:`_WRAPPER_LINES`: ``Your proposed edit has
    introduced new syntax error(s)``, ``<returncode>``, ``Exit code N``, ``=== FAILURES ===``,
    node/npm warnings), bare links and token/cost lines — an editor's ``- E999
    IndentationError: …`` line gives the error without its lint code; else the first such
    non-wrapper line, else the first line.
    Informative literals are quoted so masking keeps them: ``bash: foo: command not found`` is
    ``command not found: 'foo'``, ``No module named numpy`` is ``No module named 'numpy'``.
    """
    if not output:
        return ""
    exception = _exception(output)
    if exception is not None:
        return _literal(exception)[:400]
    first = fallback = ""
    for count, raw in enumerate(output.splitlines()):
        if count > _HEAD_LINES:
            break
        line = raw.strip()
        if not line:
            continue
        first = first or line
        if _WRAPPER_LINES.match(line) or _EXIT_LINE.match(line) or _NOT_ERROR_LINES.match(line):
            continue
        if line.startswith("E ") and line[2:3] in (" ", ""):
            line = line[1:].strip()  # pytest's failure lines: ``E   KeyError: 'x'``
        lint = _FLAKE8.match(line)
        if lint:
            line = lint.group(2) if lint.group(1) == "E999" else f"{lint.group(1)} {lint.group(2)}"
        line = _ERROR_PREFIX.sub("", line)
        if not line:
            continue
        fallback = fallback or line
        if _ERROR_WORDS.search(line):
            return _literal(line)[:400]
    return _literal(_ERROR_PREFIX.sub("", fallback or first))[:400]


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
        same = 0
        for a, b in zip(template, tokens, strict=True):
            if a == b or a in PLACEHOLDERS:
                same += 1
            elif a.startswith("'") or b.startswith("'"):
                return 0.0  # a kept literal (a module's, a command's name) is the cause itself
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


class DrainMined:
    """The checkpoint and rename methods of a miner that keys its patterns by Drain templates
    (``drain``, ``width`` and ``_renames`` attributes): written once for every such miner."""

    drain: Drain
    width: int
    _renames: list[tuple[str, str]]

    def renames(self) -> list[tuple[str, str]]:
        out, self._renames = self._renames, []
        return out

    def state(self) -> dict[str, Any]:
        return {"drain": self.drain.state()}

    def load_state(self, state: dict[str, Any]) -> None:
        self.drain = Drain.from_state(state["drain"], width=self.width)
