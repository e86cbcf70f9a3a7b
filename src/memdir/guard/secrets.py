"""Secret detection: credentials must not land in memory.

Why: a memory file is read by every agent and person with read rights on its path, is copied
into model contexts, and every version is kept; a key written once outlives its rotation.

Two sources of rules, one finding shape (category ``"secret"``, span = the secret value):

- **detect-secrets plugins** (Yelp's ``detect-secrets`` >= 1.5), constructed in-process and
  called line by line through ``analyze_string`` — no files, baseline, git or settings. (Their
  ``analyze_line`` consults the global settings singleton, which a baseline can configure to
  make network verification calls, and returns unordered values; ``analyze_string`` is the
  pure part.) They cover AWS, Azure storage, GitHub classic, GitLab, Slack, Stripe, Twilio,
  SendGrid, npm, PyPI, Discord, Telegram, Mailchimp, Square, IBM, Cloudant, SoftLayer,
  private-key headers, JWTs, ``scheme://user:pass@`` URLs, ``password = "..."`` style keyword
  assignments (quotes required) and quoted high-entropy base64 (> 4.5 bits/char) and hex
  (> 3.0) strings of 20+ characters. Left out: ``IPPublicDetector`` (an IP address is not a
  credential, and notes quote them) and ``ArtifactoryDetector`` (its ``AP[0-9A-F]...`` shape
  matches ordinary capitalised words).
- **hand-written patterns** for formats the plugins miss: Anthropic ``sk-ant-...``, OpenAI
  ``sk-...`` / ``sk-proj-...`` (new shapes without the legacy ``T3BlbkFJ`` marker), Google
  ``AIza...``, GitHub fine-grained ``github_pat_...``, full-length Stripe keys, ``Authorization:
  Bearer/Basic/token ...`` headers, whole PEM private-key blocks, database connection strings
  with a password, AWS secret access keys named in prose, and ``UPPER_CASE_SECRET=value``
  environment assignments.

Not findings, on purpose: bare 40- and 64-digit hex strings (git commit ids and SHA-256
digests — memdir itself quotes them as ETags), UUIDs, and placeholders (``${TOKEN}``,
``<password>``, ``YOUR_API_KEY``, ``****``). Cost control: a plugin runs only on lines meeting
its necessary conditions (:class:`~memdir.guard.secret_rules.PluginRule`: a literal such as
``ghp_``, a run of token characters long enough for the format, a quote); a hand pattern runs
only in windows around occurrences of its literal prefix, and only once cheaper necessary
conditions hold (:class:`~memdir.guard.secret_rules.SecretPattern`: a long enough token run,
holding the prefix for formats that are one token; a literal such as ``://`` or ``=``).
A line is offered only to the plugins whose minimum run its longest run reaches (one
bisection), and literal look-ups in the whole text are shared (:meth:`Document.has`). A clean
text costs one byte-level scan for token runs, about a dozen substring checks, and a few
checks per line holding a long token: about 25 µs per KB (10 KB of τ-bench-shaped
transcript: ~0.3 ms, from ~1.2 ms with a per-plugin test of every line and looser gates).
Gates are necessary conditions, so they change cost, never results; they are looked up in the
case-folded text (:attr:`Document.folded`), where a case-insensitive match's literals occur.
"""

from __future__ import annotations

import bisect
import re
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

from memdir.guard.base import Document, Finding, mask_secret
from memdir.guard.secret_rules import (
    HAND_PATTERNS,
    PLUGIN_RULES,
    PluginRule,
    SecretPattern,
    is_digest_id,
    looks_like_placeholder,
)

if TYPE_CHECKING:
    from detect_secrets.plugins.base import BasePlugin

__all__ = ["SecretsDetector"]

_WHY: Final = (
    "credentials in memory are readable by everyone with read access and persist in version"
    " history; reference a secret manager instead"
)

_AWS_KEY_ID: Final = re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")
_ENTROPY_RULES: Final = frozenset({"secret.high-entropy-base64", "secret.high-entropy-hex"})
#: Shortest quoted string the entropy plugins may report; shorter ones are mostly words.
MIN_ENTROPY_LENGTH: Final = 20
#: Placeholder checks apply to these plugins' values (the format-specific ones are exact).
_GENERIC_RULES: Final = _ENTROPY_RULES | {"secret.keyword-assignment", "secret.basic-auth-url"}


#: The plugins gated by literals in the whole text rather than by a token run.
_UNGATED_BY_RUN: Final = tuple((n, spec) for n, spec in PLUGIN_RULES.items() if spec.min_run == 0)

_JWT_TAIL: Final = re.compile(r"[A-Za-z0-9_\-.+/=]*")
#: A capture group shorter than this is a format prefix (``ghp``, ``glpat``), not the secret.
_MIN_GROUP: Final = 8


def _plugin_values(plugin: BasePlugin, line: str) -> Iterator[tuple[int, str]]:
    """(offset, value) of each secret a plugin finds in ``line``.

    Plain regex plugins are run through their ``denylist`` with ``finditer`` so the offset is
    exact and the value whole: their ``analyze_string`` yields capture groups, which for some
    formats are only the type prefix (GitHub's ``(ghp|gho|...)_...`` yields ``ghp``). The
    longest group of 8+ characters is the secret; otherwise the whole match is. Plugins with
    their own ``analyze_string`` (keyword, JWT validation, entropy) are asked directly and
    their values located in the line.
    """
    from detect_secrets.plugins.base import RegexBasedDetector

    if (
        isinstance(plugin, RegexBasedDetector)
        and type(plugin).analyze_string is RegexBasedDetector.analyze_string
    ):
        for regex in plugin.denylist:
            for match in regex.finditer(line):
                spans = [match.span(i) for i in range(1, (match.lastindex or 0) + 1)]
                spans = [(s, e) for s, e in spans if s >= 0 and e - s >= _MIN_GROUP]
                start, end = max(spans, key=lambda se: se[1] - se[0], default=match.span())
                if end > start:
                    yield start, line[start:end]
        return
    cursor: dict[str, int] = {}
    for value in plugin.analyze_string(line):
        pos = line.find(value, cursor.get(value, 0))
        if pos >= 0:
            cursor[value] = pos + len(value)
            yield pos, value


def _may_match(doc: Document, spec: SecretPattern) -> bool:
    """Whether the text meets ``spec``'s cheap necessary conditions (``run``, ``inside``,
    ``requires``: see :class:`~memdir.guard.secret_rules.SecretPattern`)."""
    if spec.run:
        runs = doc.long_runs(spec.run)
        if not runs:
            return False
        if spec.inside:
            if spec.cased:
                content = doc.content
                runs = [content[s:e] for s, e in doc.token_runs if e - s >= spec.run]
            if not any(prefix in run for run in runs for prefix in spec.prefixes):
                return False
    return not spec.requires or any(doc.has(literal) for literal in spec.requires)


def _admits_text(doc: Document, spec: PluginRule) -> bool:
    """``spec.admits`` for the whole text, sharing literal look-ups through ``doc.has``."""
    content = doc.content
    if spec.quote and "'" not in content and '"' not in content:
        return False
    return (
        (not spec.gate or any(doc.has(literal) for literal in spec.gate))
        and (not spec.also or any(doc.has(literal) for literal in spec.also))
        and (not spec.cased or any(literal in content for literal in spec.cased))
    )


def _windows(doc: Document, spec: SecretPattern) -> list[tuple[int, int]]:
    """Merged spans within ``spec.reach`` of an occurrence of one of its prefixes."""
    content = doc.content
    haystack = content if spec.cased else doc.lowered
    positions = []
    for prefix in spec.prefixes:
        pos = haystack.find(prefix)
        while pos != -1:
            positions.append(pos)
            pos = haystack.find(prefix, pos + 1)
    if not positions:
        return []
    if spec.reach is None or len(haystack) != len(content):
        return [(0, len(content))]
    merged: list[tuple[int, int]] = []
    for pos in sorted(positions):
        start, end = max(0, pos - spec.reach), min(len(content), pos + spec.reach)
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


#: Literals that start a key of a one-token format (lowercase): a line ending in a token that
#: holds one may continue the key on the next line.
SPLIT_PREFIXES: Final = (
    "akia", "asia", "ghp_", "gho_", "ghs_", "ghu_", "ghr_", "github_pat_", "glpat-", "sk-",
    "sk_live_", "rk_live_", "xox", "aiza", "sg.", "eyj", "accountkey=", "secret_access_key=",
    "pypi-",
)  # fmt: skip
#: Generic rules are not asked about joined pieces: any two words joined look like one.
_SPLIT_EXCLUDED: Final = _ENTROPY_RULES | {"secret.keyword-assignment", "secret.password-value"}
_TOKEN_CHARS: Final = frozenset(string.ascii_letters + string.digits + "+/=_-.")
#: What may sit between two pieces of a wrapped key: a closing quote, ``+`` or ``\\`` (string
#: concatenation, shell continuation), the line break, indentation and an opening quote.
_JOIN: Final = re.compile(r"[\"']?[ \t]*[+\\]?[ \t]*\r?\n[ \t]*[+]?[ \t]*[\"']?")
#: At most this many lines are joined into one candidate, of at most this many characters.
_SPLIT_LINES: Final = 6
_SPLIT_CHARS: Final = 400


def _split_candidates(doc: Document) -> Iterator[tuple[str, list[tuple[int, int, int]]]]:
    """(joined text, pieces) for each token holding a :data:`SPLIT_PREFIXES` literal that runs
    to the end of its line and continues on the next.

    A piece is (start in the content, end in the content, end in the joined text). Every key
    format is 20+ characters, so one piece of a wrapped key holds a run of 16+ token
    characters (:attr:`Document.token_runs`): only the lines around those runs are looked at,
    a few slices per run near a line break, and none on a text without long tokens — except
    AWS key ids (20 characters, whose halves are short), found by their ``AKIA`` prefix.
    """
    content, lowered = doc.content, doc.lowered
    if len(lowered) != len(content):
        return
    seen: set[int] = set()
    # AWS key ids are 20 characters: halves of 10 hold no long run; look for their prefix.
    spans = list(doc.token_runs)
    pos = content.find("AKIA")
    while pos != -1:
        spans.append(_fragment(content, pos, pos + 4))
        pos = content.find("AKIA", pos + 1)
    for run_start, run_end in spans:
        end = run_end
        if content.startswith(".", end):
            end = _fragment(content, run_start, end)[1]
        first: tuple[int, int] | None = None
        if content.find("\n", end, end + 8) != -1 and _JOIN.match(content, end) is not None:
            start, end = _fragment(content, run_start, end)
            if _has_prefix(lowered[start:end]):
                first = (start, end)
        elif content.find("\n", max(0, run_start - 8), run_start) != -1:
            start = run_start
            line_start = content.rfind("\n", 0, start) + 1
            if _INDENT.fullmatch(content, line_start, start):
                tail = _TAIL.search(content, max(0, line_start - 200), line_start)
                if tail is not None and tail.start() < tail.end():
                    p_start, p_end = _fragment(content, tail.start(), tail.end())
                    if _has_prefix(lowered[p_start:p_end]):
                        first = (p_start, p_end)
        if first is not None and first[0] not in seen:
            seen.add(first[0])
            found = _continue(content, *first)
            if found is not None:
                yield found


#: The indentation, ``+`` and opening quote before a key's continuation on its line.
_INDENT: Final = re.compile(r"[ \t]*\+?[ \t]*[\"']?")
#: The last token of a line, before a closing quote, ``+`` or ``\\`` and the line break.
_TAIL: Final = re.compile(r"[A-Za-z0-9+/=_.-]*(?=[\"']?[ \t]*[+\\]?[ \t]*\r?\n$)")


_TOKEN_RUN: Final = re.compile(r"[A-Za-z0-9+/=_.-]*")


def _fragment(content: str, start: int, end: int) -> tuple[int, int]:
    """``start, end`` widened to the whole token (``.`` included: JWTs, SendGrid keys)."""
    while start > 0 and content[start - 1] in _TOKEN_CHARS:
        start -= 1
    right = _TOKEN_RUN.match(content, end)
    return start, right.end() if right is not None else end


def _has_prefix(fragment: str) -> bool:
    return any(prefix in fragment for prefix in SPLIT_PREFIXES)


def _continue(content: str, start: int, end: int) -> tuple[str, list[tuple[int, int, int]]] | None:
    """The pieces of a token starting at ``start`` (first piece ending at ``end``) that goes on
    over the next lines, or None if it stops at its own line."""
    pieces = [(start, end, end - start)]
    parts = [content[start:end]]
    total = end - start
    for _ in range(_SPLIT_LINES - 1):
        join = _JOIN.match(content, end)
        if join is None or total >= _SPLIT_CHARS:
            break
        nxt = join.end()
        stop = nxt
        while stop < len(content) and content[stop] in _TOKEN_CHARS:
            stop += 1
        if stop - nxt < 2:
            break
        total += stop - nxt
        parts.append(content[nxt:stop])
        pieces.append((nxt, stop, total))
        end = stop
    if len(pieces) == 1:
        return None
    return "".join(parts), pieces


def _unjoin(pieces: list[tuple[int, int, int]], offset: int) -> int:
    """The content offset of joined-text ``offset``."""
    joined_start = 0
    for start, _end, joined_end in pieces:
        if offset < joined_end:
            return start + offset - joined_start
        joined_start = joined_end
    return pieces[-1][1]


@dataclass(frozen=True)
class _Hit:
    rule: str
    label: str
    priority: int
    start: int
    end: int
    context_start: int
    context_end: int


def _load_plugins() -> list[tuple[BasePlugin, PluginRule]]:
    """Construct the detect-secrets plugins in-process (imported lazily: ~150 ms)."""
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[type[Any]] = list(get_mapping_from_secret_type_to_class().values())
    by_name = {plugin.__name__: plugin for plugin in classes}
    loaded = []
    for name, spec in PLUGIN_RULES.items():
        factory = cast("Callable[[], BasePlugin] | None", by_name.get(name))
        if factory is not None:
            loaded.append((factory(), spec))
    return loaded


class SecretsDetector:
    """Credentials of known formats and generic secret assignments (see the module doc)."""

    name = "secrets"

    def __init__(
        self, patterns: tuple[SecretPattern, ...] = HAND_PATTERNS, *, split_lines: bool = True
    ) -> None:
        """``split_lines``: also look for keys wrapped over lines (off for texts made of
        separate strings joined by line breaks, where a join is no line of the author's)."""
        self._patterns = patterns
        self._split_lines = split_lines
        self._plugins: list[tuple[BasePlugin, PluginRule]] | None = None
        self._tiers: tuple[list[int], list[list[tuple[str, BasePlugin, PluginRule]]]] | None = None

    @property
    def plugins(self) -> list[tuple[BasePlugin, PluginRule]]:
        """The plugins, constructed (and detect-secrets imported) on first need."""
        if self._plugins is None:
            self._plugins = _load_plugins()
        return self._plugins

    @property
    def tiers(self) -> tuple[list[int], list[list[tuple[str, BasePlugin, PluginRule]]]]:
        """The distinct ``min_run`` values, ascending, and for each the plugins (in order)
        that a line whose longest token run is that long may hold: a line is offered only to
        the plugins its run admits, found by one bisection instead of a test per plugin."""
        if self._tiers is None:
            thresholds = sorted({spec.min_run for _plugin, spec in self.plugins})
            tiers = [
                [(type(p).__name__, p, spec) for p, spec in self.plugins if spec.min_run <= t]
                for t in thresholds
            ]
            self._tiers = (thresholds, tiers)
        return self._tiers

    def scan(self, doc: Document) -> list[Finding]:
        hits = list(self._hand_hits(doc))
        hits.extend(self._plugin_hits(doc))
        if self._split_lines and "\n" in doc.content:
            # A wrapped key is one no line holds whole: a joined match over a key found on
            # its own line (a JWT, then a line of hex) is that key, not a longer one.
            found = list(hits)
            hits.extend(
                split
                for split in self._split_hits(doc)
                if all(split.end <= h.start or split.start >= h.end for h in found)
            )
        kept: list[_Hit] = []
        for hit in sorted(hits, key=lambda h: (-h.priority, h.start - h.end, h.start)):
            if all(hit.end <= k.start or hit.start >= k.end for k in kept):
                kept.append(hit)
        for hit in kept:
            doc.add_secret_span(hit.start, hit.end)
        findings = []
        for hit in sorted(kept, key=lambda h: h.start):
            masked = mask_secret(doc.content[hit.start : hit.end])
            findings.append(
                doc.finding(
                    hit.rule,
                    "secret",
                    hit.start,
                    hit.end,
                    f"{hit.label} ({masked}): {_WHY}",
                    excerpt=doc.excerpt(hit.context_start, hit.context_end),
                )
            )
        return findings

    def _split_hits(self, doc: Document) -> Iterator[_Hit]:
        """Keys of a known format wrapped over several lines (see :func:`_split_candidates`):
        the joined pieces are screened; a secret that spans a join is reported over the
        original text, from its first piece to its last (line breaks included)."""
        for joined, pieces in _split_candidates(doc):
            inner = Document(content=joined, path=doc.path)
            first_end = pieces[0][2]
            for hit in (*self._hand_hits(inner), *self._plugin_hits(inner)):
                if hit.end <= first_end or hit.rule in _SPLIT_EXCLUDED:
                    continue
                start, end = _unjoin(pieces, hit.start), _unjoin(pieces, hit.end - 1) + 1
                label = f"{hit.label} split across lines"
                yield _Hit(hit.rule, label, hit.priority, start, end, start, end)

    def _hand_hits(self, doc: Document) -> Iterator[_Hit]:
        for spec in self._patterns:
            if not _may_match(doc, spec):
                continue
            for window_start, window_end in _windows(doc, spec):
                yield from self._hand_matches(doc, spec, window_start, window_end)

    @staticmethod
    def _hand_matches(doc: Document, spec: SecretPattern, lo: int, hi: int) -> Iterator[_Hit]:
        for match in spec.pattern.finditer(doc.content, lo, hi):
            if "secret" in spec.pattern.groupindex:
                start, end = match.span("secret")
            else:
                start, end = match.span()
            value = doc.content[start:end]
            if spec.accept is not None and not spec.accept(value):
                continue
            c_start, c_end = match.span()
            yield _Hit(spec.rule, spec.label, spec.priority, start, end, c_start, c_end)

    def _plugin_hits(self, doc: Document) -> Iterator[_Hit]:
        content, folded = doc.content, doc.folded
        runs = doc.line_runs()  # line index -> longest token run on it
        # Plugins needing a long token are checked line by line, on lines holding one; the
        # others (keyword, URL password, key header) first against the whole text.
        idle = {name for name, spec in _UNGATED_BY_RUN if not _admits_text(doc, spec)}
        if not runs and len(idle) == len(_UNGATED_BY_RUN):
            return  # without loading detect-secrets at all
        starts = doc.line_starts
        lines = set(runs)
        for name, spec in _UNGATED_BY_RUN:
            if name not in idle:
                for literal in spec.gate:
                    pos = folded.find(literal)
                    while pos != -1:
                        lines.add(bisect.bisect_right(starts, pos) - 1)
                        pos = folded.find(literal, pos + 1)
        thresholds, tiers = self.tiers
        active: dict[int, list[tuple[BasePlugin, PluginRule]]] = {}
        for index in sorted(lines):
            run = runs.get(index, 0)
            tier = bisect.bisect_right(thresholds, run) - 1
            if tier < 0:
                continue
            plugins = active.get(tier)
            if plugins is None:
                plugins = active[tier] = [(p, r) for n, p, r in tiers[tier] if n not in idle]
            line_start = starts[index]
            line_end = starts[index + 1] - 1 if index + 1 < len(starts) else len(content)
            line = content[line_start:line_end]
            low = folded[line_start:line_end]
            for plugin, spec in plugins:
                if spec.admits(low, line, run):
                    yield from self._run_plugin(plugin, spec, line, line_start)

    def _run_plugin(
        self, plugin: BasePlugin, spec: PluginRule, line: str, line_start: int
    ) -> Iterator[_Hit]:
        for pos, value in _plugin_values(plugin, line):
            if not self._plausible(plugin, spec.rule, value):
                continue
            if spec.rule == "secret.jwt":  # the plugin's lazy regex stops before the signature
                tail = _JWT_TAIL.match(line, pos + len(value))
                if tail is not None:
                    value = line[pos : tail.end()].rstrip(".")
            rule, label = spec.rule, spec.label
            if rule == "secret.aws-access-key" and not _AWS_KEY_ID.fullmatch(value):
                rule, label = "secret.aws-secret-key", "AWS secret access key"
            start = line_start + pos
            end = start + len(value)
            yield _Hit(rule, label, spec.priority, start, end, start, end)

    @staticmethod
    def _plausible(plugin: BasePlugin, rule: str, value: str) -> bool:
        if rule in _GENERIC_RULES and looks_like_placeholder(value):
            return False
        if rule in _ENTROPY_RULES:
            if len(value) < MIN_ENTROPY_LENGTH or is_digest_id(value):
                return False
            from detect_secrets.filters.heuristic import is_potential_uuid, is_sequential_string

            if is_potential_uuid(value) or is_sequential_string(value):
                return False
            entropy: float = plugin.calculate_shannon_entropy(value)  # type: ignore[attr-defined]
            limit: float = plugin.entropy_limit  # type: ignore[attr-defined]
            return entropy > limit
        return True
