"""Pure helpers that turn service values into what the templates show: no I/O, no HTML.

Memory files, transcripts, proposals (rationale, evidence, statistics) and dream reports are
untrusted text: an agent or a transcript may have put anything in them. These helpers never
build markup — the templates autoescape every value — and they never pass a value into a URL
unless it matches :data:`SAFE_ID` (ids) or is a validated memory path, percent-encoded. A
statistic becomes a bar only when it is a finite number; anything else is shown as text.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote

from markdown_it import MarkdownIt
from markupsafe import Markup

from memdir.core.edits import apply_insert, apply_str_replace, unified_diff
from memdir.core.errors import EditConflict, InvalidContent, InvalidPath
from memdir.core.frontmatter import parse_frontmatter, split_frontmatter
from memdir.core.paths import validate_path

__all__ = [
    "SAFE_ID",
    "Bar",
    "EvidenceItem",
    "MemoryPage",
    "OpPreview",
    "bars",
    "diff_lines",
    "evidence_items",
    "facts",
    "finding_items",
    "markdown_html",
    "memory_marks",
    "memory_page",
    "op_previews",
    "path_url",
    "quality_items",
    "safe_id",
]

#: What an id must look like before it goes into a link (proposal, run, transcript ids).
SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")

#: Width in SVG user units of a full bar (the chart scales with the page).
BAR_WIDTH: Final = 240.0

#: Statistics shown as facts (in this order) when present; others follow by name.
FACT_KEYS: Final = (
    "miner", "sessions", "sessions_selected", "prevalence", "occurrences", "agents",
    "projects", "first_seen", "last_seen", "coverage", "confidence", "flags",
)  # fmt: skip


def safe_id(value: Any) -> str | None:
    """``value`` when it is a plain id that may appear in a link, else None."""
    if isinstance(value, str) and SAFE_ID.fullmatch(value):
        return value
    return None


def path_url(path: str) -> str | None:
    """A memory path percent-encoded for the part of a URL after ``/file``; None if invalid."""
    try:
        validate_path(path)
    except InvalidPath:
        return None
    return quote(path, safe="/")


# --- memory files ---------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryPage:
    """A file split for display: frontmatter as rows (or the reason it does not parse), body."""

    frontmatter: list[tuple[str, str]]
    frontmatter_error: str | None
    body: str


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, default=str)


def memory_page(content: str) -> MemoryPage:
    """Frontmatter as (key, value text) rows and the body after it, for display."""
    try:
        block, body = split_frontmatter(content)
    except InvalidContent as exc:
        return MemoryPage([], exc.message, content)
    if block is None:
        return MemoryPage([], None, content)
    try:
        parsed = parse_frontmatter(content)
    except InvalidContent as exc:
        return MemoryPage([], exc.message, content)
    rows = [(str(key), _text(value)) for key, value in parsed.raw.items()]
    return MemoryPage(rows, None, body)


def _markdown() -> MarkdownIt:
    """CommonMark with raw HTML off (an HTML block or inline tag is shown as text), no
    images (a remote image would be a request the CSP refuses), links validated by the
    library (no ``javascript:``/``data:`` URLs)."""
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.disable("image")
    md.enable("table")
    return md


_MD: Final = _markdown()


def markdown_html(text: str) -> Markup:
    """A memory body rendered as HTML: every tag in it comes from the markdown renderer, which
    escapes all text (raw HTML is disabled), so the result is safe to insert as markup."""
    return Markup(_MD.render(text))


def _day(value: str) -> dt.date | None:
    try:
        return dt.date.fromisoformat(value.strip().strip("\"'")[:10])
    except ValueError:
        return None


def memory_marks(
    rows: Sequence[tuple[str, str]], today: dt.date | None = None
) -> list[tuple[str, str, bool]]:
    """(kind, text, past) for a file's ``expires`` and ``review_after`` frontmatter dates:
    ``past`` when the date has come (expired; review due). A value that is not a date is
    shown as it is, marked not past."""
    today = today or dt.datetime.now(dt.UTC).date()
    out: list[tuple[str, str, bool]] = []
    for key, value in rows:
        if key not in ("expires", "review_after"):
            continue
        day = _day(value)
        if day is None:
            out.append((key, f"{key}: {value.strip(chr(34))} (not a date)", False))
        elif key == "expires":
            past = day <= today
            out.append((key, f"expired on {day}" if past else f"expires on {day}", past))
        else:
            past = day <= today
            out.append((key, f"review due since {day}" if past else f"review after {day}", past))
    return out


# --- diffs ----------------------------------------------------------------------------------


def diff_lines(diff: str) -> list[tuple[str, str]]:
    """(css class, line) for each line of a unified diff: ``add``, ``del``, ``hunk``, ``meta``."""
    out: list[tuple[str, str]] = []
    for line in diff.splitlines():
        if line.startswith(("+++", "---")):
            kind = "meta"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "ctx"
        out.append((kind, line))
    return out


@dataclass(frozen=True)
class OpPreview:
    """One proposed operation against the current content: a diff, or why there is none."""

    op: str
    path: str
    new_path: str | None
    diff: list[tuple[str, str]]
    note: str | None


def _proposed(op: Mapping[str, Any], current: str | None) -> tuple[str | None, str | None]:
    """(text after ``op``, or None when it has none; a note on why, or None)."""
    kind, path, new_path = str(op.get("op", "?")), str(op.get("path", "")), op.get("new_path")
    try:
        if kind == "write":
            return str(op.get("content", "")), None
        if kind == "delete":
            return "", None
        if kind == "rename":
            return None, f"rename to {new_path}"
        if current is None:
            return None, f"{path} does not exist now: this {kind} cannot apply as it is"
        if kind == "str_replace":
            return apply_str_replace(path, current, str(op["old"]), str(op["new"])), None
        if kind == "insert":
            return apply_insert(path, current, int(op["line"]), str(op["text"])), None
        return None, f"unknown operation {kind!r}"
    except EditConflict as exc:
        return None, f"does not apply to the current content: {exc.message}"
    except (KeyError, TypeError, ValueError):
        return None, f"malformed {kind} operation"


def op_previews(
    operations: Sequence[Mapping[str, Any]], read: Callable[[str], str | None]
) -> list[OpPreview]:
    """What each stored operation would change, in order: the first operation on a path is
    diffed against ``read(path)`` (the current content, None when absent), a later one against
    the text the earlier ones produce."""
    texts: dict[str, str | None] = {}
    out: list[OpPreview] = []
    for op in operations:
        kind, path, new_path = str(op.get("op", "?")), str(op.get("path", "")), op.get("new_path")
        if path not in texts:
            texts[path] = read(path)
        current = texts[path]
        proposed, note = _proposed(op, current)
        diff: list[tuple[str, str]] = []
        if proposed is not None:
            label = "(absent)" if current is None else f"{path} (current)"
            diff = diff_lines(unified_diff(current or "", proposed, label, f"{path} (proposed)"))
            note = note or (None if diff else "no change against the current content")
            texts[path] = None if kind == "delete" else proposed
        elif kind == "rename" and isinstance(new_path, str):
            texts[new_path], texts[path] = current, None
        shown_new = str(new_path) if new_path is not None else None
        out.append(OpPreview(kind, path, shown_new, diff, note))
    return out


# --- statistics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Bar:
    """One bar of an inline SVG chart: ``width`` in SVG units out of :data:`BAR_WIDTH`."""

    label: str
    value: str
    width: float
    y: float


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _fraction(value: float, whole: float) -> float:
    return max(0.0, min(1.0, value / whole)) if whole > 0 else 0.0


def bars(stats: Any) -> list[Bar]:
    """Bars for a statistics mapping: prevalence, agents, confidence, and the top variants.

    Each bar is a fraction of a full bar; values that are not finite numbers are skipped.
    """
    if not isinstance(stats, Mapping):
        return []
    rows: list[tuple[str, str, float]] = []
    sessions = _number(stats.get("sessions"))
    selected = _number(stats.get("sessions_selected"))
    if sessions is not None and selected is not None:
        rows.append(
            ("sessions affected", f"{sessions:g} / {selected:g}", _fraction(sessions, selected))
        )
    prevalence = _number(stats.get("prevalence"))
    if prevalence is not None:
        rows.append(("prevalence", f"{100 * prevalence:.1f} %", _fraction(prevalence, 1.0)))
    confidence = _number(stats.get("confidence"))
    if confidence is not None:
        rows.append(("confidence", f"{confidence:.2f}", _fraction(confidence, 1.0)))
    variants = stats.get("variants")
    if isinstance(variants, Mapping):
        counts = [(str(k), _number(v)) for k, v in variants.items()]
        numeric = [(k, v) for k, v in counts if v is not None][:5]
        top = max((v for _, v in numeric), default=0.0)
        rows.extend((k[:60], f"{v:g}", _fraction(v, top)) for k, v in numeric)
    return [
        Bar(label, value, round(fraction * BAR_WIDTH, 1), 6.0 + 22.0 * index)
        for index, (label, value, fraction) in enumerate(rows)
    ]


def facts(stats: Any) -> list[tuple[str, str]]:
    """(name, value text) rows for a statistics value, the known keys first."""
    if not isinstance(stats, Mapping):
        return [] if stats is None else [("statistics", _text(stats))]
    keys = [k for k in FACT_KEYS if k in stats]
    keys += sorted(str(k) for k in stats if k not in FACT_KEYS and k != "variants")
    out = []
    for key in keys:
        value = stats.get(key)
        number = _number(value)
        if key == "prevalence" and number is not None:
            out.append((key, f"{100 * number:.1f} %"))
        elif isinstance(value, list | tuple):
            out.append((key, ", ".join(_text(v) for v in value) or "-"))
        else:
            out.append((key, "-" if value is None else _text(value)))
    return out


# --- evidence -------------------------------------------------------------------------------


@dataclass(frozen=True)
class EvidenceItem:
    """One evidence item: an excerpt with its transcript (``link`` set only for a safe id), or
    a hidden item (the service withheld it), or free-form evidence shown as text."""

    hidden: bool
    transcript: str | None
    first_event: int | None
    last_event: int | None
    text: str
    reason: str | None = None
    #: Set for evidence the service could not verify against its transcript: why not.
    unverified: str | None = None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def evidence_items(evidence: Any) -> list[EvidenceItem]:
    """Evidence as the service returned it (hidden items stay hidden), ready to show."""
    if evidence is None:
        return []
    items: Sequence[Any] = evidence if isinstance(evidence, list) else [evidence]
    out: list[EvidenceItem] = []
    for item in items:
        if not isinstance(item, Mapping):
            out.append(EvidenceItem(False, None, None, None, _text(item)))
            continue
        first, last = _int(item.get("first_event")), _int(item.get("last_event"))
        if item.get("hidden"):
            reason = item.get("reason")
            out.append(EvidenceItem(True, None, first, last, "", _text(reason or "hidden")))
            continue
        excerpt = item.get("excerpt")
        if excerpt is None:
            rest = {k: v for k, v in item.items()
                    if k not in ("transcript_id", "scopes", "verified", "unverified")}  # fmt: skip
            excerpt = _text(rest) if rest else ""
        doubt = None
        if item.get("verified") is False:
            doubt = _text(item.get("unverified") or "not checked against a transcript")
        out.append(
            EvidenceItem(
                False,
                safe_id(item.get("transcript_id")),
                first,
                last,
                _text(excerpt),
                unverified=doubt,
            )
        )
    return out


# --- findings and quality checks ------------------------------------------------------------

#: Characters of context shown either side of a finding's span.
SPAN_CONTEXT: Final = 60


@dataclass(frozen=True)
class FindingItem:
    """A screening finding as a list item: the rule, the reason, where, and the span of the
    text it was found in split as (before, span, after) for highlighting — or the finding's
    own (masked) excerpt when the text is not one the viewer is shown."""

    rule: str
    action: str
    reason: str
    where: str
    before: str
    span: str
    after: str


def _field_text(operations: Sequence[Any], index: Any, name: Any) -> str | None:
    op = operations[index] if isinstance(index, int) and 0 <= index < len(operations) else None
    value = op.get(name) if isinstance(op, Mapping) and isinstance(name, str) else None
    return value if isinstance(value, str) else None


def finding_items(findings: Any, operations: Sequence[Any]) -> list[FindingItem]:
    """Findings ready to list. A secret's span is never taken from the text (its excerpt is
    masked; the text may not be); other spans come from the operation field they cite."""
    out: list[FindingItem] = []
    for f in findings if isinstance(findings, list) else []:
        if not isinstance(f, Mapping):
            out.append(FindingItem("?", "", _text(f), "", "", "", ""))
            continue
        where = " · ".join(
            str(x) for x in (f.get("path"), f.get("field"),
                             f"line {f['line']}" if f.get("line") else None) if x
        )  # fmt: skip
        text = _field_text(operations, f.get("op"), f.get("field"))
        start, end = _int(f.get("start")), _int(f.get("end"))
        secret = f.get("category") == "secret"
        if (
            text is not None
            and not secret
            and start is not None
            and end is not None
            and (0 <= start < end <= len(text))
        ):
            before = text[max(0, start - SPAN_CONTEXT) : start]
            span, after = text[start:end], text[end : end + SPAN_CONTEXT]
        else:
            before, span, after = "", _text(f.get("excerpt") or ""), ""
        rule, action = str(f.get("rule", "?")), str(f.get("action") or "")
        reason = _text(f.get("reason") or "")
        out.append(FindingItem(rule, action, reason, where, before, span, after))
    return out


def quality_items(quality: Any) -> list[tuple[str, str, bool | None]]:
    """(check, value text, passed) rows for a ``quality`` statistic when one is attached.

    Tolerant of its shape: a mapping of check → value (a bool, a number, or a mapping with
    ``passed``/``ok`` and ``value``/``score``), or a list of such mappings with ``name``.
    ``passed`` is None when the value does not say.
    """
    if isinstance(quality, Mapping):
        entries = [(str(k), v) for k, v in quality.items()]
    elif isinstance(quality, list):
        entries = [(str(q.get("name") or q.get("check") or f"check {i + 1}"), q)
                   if isinstance(q, Mapping) else (f"check {i + 1}", q)
                   for i, q in enumerate(quality)]  # fmt: skip
    else:
        return []
    out: list[tuple[str, str, bool | None]] = []
    for name, value in entries[:20]:
        passed: bool | None = None
        shown = value
        if isinstance(value, bool):
            passed, shown = value, "pass" if value else "fail"
        elif isinstance(value, Mapping):
            flag = value.get("passed", value.get("ok", value.get("pass")))
            passed = flag if isinstance(flag, bool) else None
            shown = value.get("value", value.get("score", value.get("reason", "")))
            if shown == "" and passed is not None:
                shown = "pass" if passed else "fail"
        out.append((name[:60], _text(shown)[:80], passed))
    return out
