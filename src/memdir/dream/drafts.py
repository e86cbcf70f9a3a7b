"""Drafts: each kept pattern that warrants a change becomes concrete operations for review.

By coverage and miner:

- ``new`` — a new note, ``Write(path, content, if_absent=True)``, one file per pattern so
  drafts never collide: ``<scope>/<category>/<slug>.md`` where the category is
  ``known-failures`` (tool errors, recoveries, loops), ``navigation`` (exploration),
  ``preferences`` (corrections) or ``findings`` (model findings), and the slug comes from the
  subject (``npm-ci-frozen-lockfile``); a slug already used in the run or in memory gets a
  short hash of the pattern key. The note has frontmatter (``description``, ``source: dream``,
  ``tags``, and ``dream_pattern`` — the pattern id, so the next run sees it as covered) and a
  short body: what fails or what is asked, what works, how often, how to check;
- ``covered-failing`` — strengthen the note that already says it: ``Insert`` ``core: true``
  into its frontmatter (or a frontmatter block holding it), or, when it is core already,
  append a line saying it is still missed;
- ``contradicted`` (a recovery whose failed command memory states, stale memory) — a
  ``StrReplace`` of the stale command by the one that works, or, when no replacement was seen,
  by the command annotated as failing; when the text is not unique in the file, a full
  ``Write`` with ``if_match`` replacing every occurrence;
- consolidation — ``Delete`` (with ``if_match``) of an expired file, and of all but one of a
  group of near-duplicates (the longest is kept). Review-due files are reported, not changed.

Scope (:func:`scope_of`): all of a correction's sessions from one user -> ``/users/<u>``; all
of a pattern's sessions from one project -> ``/projects/<p>``; otherwise ``/org``.

Confidence (0..1, :func:`confidence`): support (sessions — distinct tasks when the sessions
name tasks — against three times ``min_sessions``) 0.35, prevalence (the higher of the fleet's
and, for a one-project pattern, its project's, against three times the miner's threshold) 0.2,
consistency (the top variant's share, 1 without variants) 0.3, examples (against
``max_examples``) 0.15. When sessions have outcomes, the outcome lift weighs 0.2 (0 at lift
0.5 or less, 0.5 at 1 — no effect —, 1 from 1.5) and the others 0.3, 0.15, 0.25 and 0.1.

A miner with its own ``note`` / ``category`` / ``slug_source`` (see :mod:`.miners.base`)
writes its new notes itself; ``note`` returning None means the pattern is reported only.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Final

from memdir.core.content import DEFAULT_MAX_BYTES, check_content
from memdir.core.errors import InvalidPath
from memdir.core.model import Delete, Insert, Operation, StrReplace, Write
from memdir.core.paths import validate_path
from memdir.dream.miners.consolidation import frontmatter_of
from memdir.dream.miners.signature import PLACEHOLDERS, literal_phrase
from memdir.dream.model import Draft, MemoryFile, Pattern, Thresholds

__all__ = ["CATEGORY", "confidence", "make_draft", "scope_of", "slug"]

CATEGORY: Final = {
    "tool_errors": "known-failures",
    "recovery": "known-failures",
    "loops": "known-failures",
    "exploration": "navigation",
    "corrections": "preferences",
    "model": "findings",
}
_SLUG: Final = re.compile(r"[^a-z0-9]+")


def slug(text: str, limit: int = 60) -> str:
    """Lowercase letters and digits joined by ``-``, at most ``limit`` characters."""
    out = _SLUG.sub("-", text.lower()).strip("-")[:limit].rstrip("-")
    return out or "pattern"


def _only(counts: Mapping[str, int], sessions: int) -> str | None:
    labelled = [label for label in counts if label]
    if len(labelled) == 1 and counts[labelled[0]] == sessions:
        return labelled[0]
    return None


def _valid(directory: str) -> bool:
    try:
        validate_path(directory)
    except InvalidPath:
        return False
    return "/" not in directory[1:].split("/", 1)[-1]


def scope_of(pattern: Pattern) -> str:
    """The directory the evidence supports (see the module docstring)."""
    user = _only(pattern.users, pattern.sessions)
    if pattern.miner == "corrections" and user and _valid(f"/users/{user}"):
        return f"/users/{user}"
    project = _only(pattern.projects, pattern.sessions)
    if project and _valid(f"/projects/{project}"):
        return f"/projects/{project}"
    return "/org"


def confidence(pattern: Pattern, thresholds: Thresholds) -> float:
    """How sure the draft is, 0..1 (see the module docstring)."""
    evidence = pattern.tasks if pattern.tasks else pattern.sessions
    support = min(1.0, evidence / max(1, 3 * thresholds.min_sessions))
    needed = thresholds.prevalence_for(pattern.miner)
    observed = max(pattern.prevalence, pattern.project_prevalence or 0.0)
    prevalence = min(1.0, observed / (3 * needed)) if needed > 0 else 1.0
    total = sum(pattern.variants.values())
    consistency = max(pattern.variants.values()) / total if total else 1.0
    examples = min(1.0, len(pattern.examples) / max(1, thresholds.max_examples))
    lift = pattern.lift
    if lift is None:
        score = 0.35 * support + 0.2 * prevalence + 0.3 * consistency + 0.15 * examples
    else:
        outcome = min(1.0, max(0.0, lift - 0.5))  # lift 1 (no effect) 0.5, lift 1.5+ 1
        score = (
            0.3 * support + 0.15 * prevalence + 0.25 * consistency + 0.1 * examples
            + 0.2 * outcome
        )  # fmt: skip
    return round(score, 3)


def _clean(text: str) -> str:
    """A normalised input fit to quote: placeholders would mislead, so keep the literal run."""
    return literal_phrase(text) if any(p in text for p in PLACEHOLDERS) else text


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _statistics_line(pattern: Pattern) -> str:
    projects = sorted(p for p in pattern.projects if p)
    when = ""
    if pattern.first_seen and pattern.last_seen:
        when = f"; first seen {pattern.first_seen.date()}, last seen {pattern.last_seen.date()}"
    named = len([a for a in pattern.agents if a])  # transcripts without an agent name: none
    line = (
        f"Seen in {pattern.sessions} of {pattern.sessions_selected} sessions "
        f"({pattern.prevalence:.1%})"
        + (f", {_count(named, 'agent')}" if named else "")
        + (f", projects: {', '.join(projects[:8])}" if projects else "")
        + when
        + "."
    )
    scoped = pattern.project_prevalence
    if scoped is not None and pattern.project_selected != pattern.sessions_selected:
        line += (
            f" In project {pattern.project}: {pattern.sessions} of {pattern.project_selected} "
            f"sessions ({scoped:.1%})."
        )
    if pattern.tasks and pattern.tasks < pattern.sessions:
        line += f" The sessions are trials of {_count(pattern.tasks, 'distinct task')}."
    if pattern.known and pattern.baseline_known and pattern.lift is not None:
        rate = pattern.failed / pattern.known
        base = pattern.baseline_failed / pattern.baseline_known
        line += (
            f" Sessions with it failed {pattern.failed} of {pattern.known} times ({rate:.0%}) "
            f"against {base:.0%} of all sessions: lift {pattern.lift:.2f}."
        )
    return line


def _body(pattern: Pattern) -> tuple[str, str, list[str]]:
    """(title, description, body lines) of a new note for ``pattern``."""
    s = pattern.subject
    if pattern.miner == "tool_errors":
        what = s.get("command") or s.get("tool")
        return (
            f"`{what}` fails: {literal_phrase(s.get('signature', '')) or s.get('signature')}",
            f"Known failure of {what}: {s.get('signature', '')}"[:200],
            [
                f"`{s.get('input', '')}` (tool `{s.get('tool')}`) keeps failing with:",
                "",
                "```",
                str(s.get("signature", "")),
                "```",
                "",
                *_next_steps(pattern),
                "How to check: run it once and compare the error before retrying it unchanged.",
            ],
        )
    if pattern.miner == "recovery":
        total = sum(pattern.variants.values())
        top = pattern.variants.get(str(s.get("change")), 0)
        others = [f"- {v} ({n}x)" for v, n in pattern.variants.items() if v != s.get("change")]
        label, side = _recovery_parts(pattern)
        return (
            f"`{label}` fails with `{side}`; {s.get('change')} works",
            f"{label}: {s.get('change')} (`{side}` fails)"[:200],
            [
                f"- Fails: `{s.get('failed')}` (tool `{s.get('tool')}`)",
                f"- Works: `{s.get('fixed')}` — {s.get('change')} (worked in {top} of "
                f"{s.get('failure_sessions', total)} sessions where it failed)",
                *(["", "Other fixes seen:", *others[:4]] if others else []),
                "",
                f"How to check: run `{s.get('fixed')}`.",
            ],
        )
    if pattern.miner == "corrections":
        wordings = [f'- "{v}" ({n}x)' for v, n in list(pattern.variants.items())[:4]]
        return (
            f"Preference: {s.get('text')}",
            f"Users asked: {s.get('text')}"[:200],
            [
                f'Users corrected agents with "{s.get("text")}" (key terms: '
                f"{', '.join(s.get('terms', []))}). Follow it without being asked.",
                "",
                "Wordings seen:",
                *wordings,
            ],
        )
    if pattern.miner == "exploration":
        lookup = str(s.get("input", ""))
        target = lookup.split(" ", 1)[-1]
        return (
            f"Where to look: {target}",
            f"Sessions often start by looking up {target}"[:200],
            [
                f"Agents often begin by `{lookup}` (tool `{s.get('tool')}`). Start from "
                f"`{target}` instead of searching for it.",
                "",
                f"How to check: `{target}` still exists where this says.",
            ],
        )
    if pattern.miner == "loops":
        endings = ", ".join(f"{v}: {n}" for v, n in pattern.variants.items())
        return (
            f"Loop: `{s.get('input')}` repeated without progress",
            f"Agents retry {s.get('tool')} `{s.get('input')}` unchanged"[:200],
            [
                f"Agents called `{s.get('input')}` (tool `{s.get('tool')}`) three or more times "
                f"in a row ({endings}). Retrying it unchanged does not help: read the result, "
                "change the input, or stop and ask.",
            ],
        )
    title = str(s.get("title") or pattern.title)
    body = [str(s.get("detail", ""))]
    if pattern.miner == "model" and s.get("fix"):  # the fix the model read in the evidence
        body += ["", f"Fix the sessions show: `{_clean(str(s['fix']))}`"]
    return title, title[:200], body


def _next_steps(pattern: Pattern) -> list[str]:
    """What the sessions did after the error (the tool errors miner's variants), the most
    frequent first: the fix they show, with how often it was taken."""
    if not pattern.variants:
        return []
    total = sum(pattern.variants.values())
    ranked = sorted(pattern.variants.items(), key=lambda kv: (-kv[1], kv[0]))
    top, count = ranked[0]
    if top.startswith("then "):
        steps = top.removeprefix("then ").removesuffix(" worked")
        fix = f"Fix the sessions show: after it, {steps} worked ({count} of {total} sessions)."
    elif top.endswith("succeeded"):
        fix = (
            "Fix the sessions show: continue without it instead of retrying — in "
            f"{count} of {total} sessions the agent went on without the result and the session "
            "succeeded."
        )
    else:
        fix = f"No fix seen: in {count} of {total} sessions the agent {top}."
    others = [f"- {v} ({n} of {total})" for v, n in ranked[1:4]]
    return [fix, *(["", "Also seen after it:", *others] if others else []), ""]


def _note(pattern: Pattern, made: tuple[str, str, list[str]]) -> str:
    title, description, body = made
    head = [
        "---",
        f"description: {json.dumps(' '.join(description.split()), ensure_ascii=False)}",
        "source: dream",
        f"tags: {json.dumps(['dream', pattern.miner])}",
        f"dream_pattern: {json.dumps(pattern.id, ensure_ascii=False)}",
        "---",
        "",
        f"# {' '.join(title.split())[:200]}",
        "",
    ]
    return "\n".join([*head, *body, "", _statistics_line(pattern), ""])


def _recovery_parts(pattern: Pattern) -> tuple[str, str]:
    """(command words or tool, failing side) of a recovery, from its key when it is readable."""
    parts = pattern.key.split("|")
    if pattern.key.startswith("h:") or len(parts) < 2:
        return str(pattern.subject.get("tool")), _clean(str(pattern.subject.get("failed", "")))
    return parts[-2], parts[-1]


def _slug_source(pattern: Pattern) -> str:
    s = pattern.subject
    if pattern.miner == "tool_errors":
        return f"{s.get('command') or s.get('tool')} {literal_phrase(str(s.get('signature', '')))}"
    if pattern.miner == "recovery":
        label, side = _recovery_parts(pattern)
        return " ".join(dict.fromkeys(f"{label} {side}".split()))
    if pattern.miner == "corrections":
        return " ".join(s.get("terms", []))
    if pattern.miner == "exploration":
        return str(s.get("input", "")).split(" ", 1)[-1]
    if pattern.miner == "loops":
        return f"loop {_clean(str(s.get('input', '')))}"
    return str(s.get("title") or pattern.title)


def _new_path(pattern: Pattern, taken: set[str], miner: Any) -> str:
    category = getattr(miner, "category", None) or CATEGORY.get(pattern.miner, "findings")
    source = getattr(miner, "slug_source", None)
    named = source(pattern) if source is not None else _slug_source(pattern)
    directory = f"{scope_of(pattern)}/{category}"
    path = f"{directory}/{slug(named)}.md"
    if path in taken:
        digest = hashlib.sha256(pattern.id.encode("utf-8")).hexdigest()[:8]
        path = f"{directory}/{slug(named, 50)}-{digest}.md"
    return validate_path(path)


def _replace(file: MemoryFile, old: str, new: str, note: str) -> Operation:
    """``old`` -> ``new`` (+ ``note``) in a file: an edit when ``old`` is unique, else a rewrite."""
    quoted = f"`{old}`"
    if file.content.count(quoted) == 1:
        return StrReplace(file.path, quoted, f"`{new}`{note}")
    if file.content.count(old) == 1:
        return StrReplace(file.path, old, new + note)
    return Write(file.path, file.content.replace(old, new + note), if_match=file.sha256)


def _stale_operations(pattern: Pattern, memory: Mapping[str, MemoryFile]) -> list[Operation]:
    s = pattern.subject
    if pattern.miner == "stale_memory":
        targets, old = [str(s.get("path"))], str(s.get("claim"))
        fixes = [v for v in pattern.variants if v and not any(p in v for p in PLACEHOLDERS)]
    else:
        targets, old = pattern.memory_paths, _clean(str(s.get("failed", "")))
        fixed = str(s.get("fixed", ""))
        fixes = [fixed] if fixed and not any(p in fixed for p in PLACEHOLDERS) else []
    last = pattern.last_seen.date() if pattern.last_seen else "recently"
    new, note = (fixes[0], "") if fixes else (old, f" (fails in recent sessions, last {last})")
    return [_replace(memory[p], old, new, note) for p in targets if p in memory and old]


def _strengthen(pattern: Pattern, file: MemoryFile) -> Operation:
    meta = frontmatter_of(file)
    if not meta and not file.content.startswith("---"):
        return Insert(file.path, 0, "---\ncore: true\n---", if_match=file.sha256)
    if meta.get("core") is not True:
        return Insert(file.path, 1, "core: true", if_match=file.sha256)
    lines = len(file.content.splitlines())
    note = (
        f"> Still missed in {pattern.sessions} sessions (last {pattern.last_seen}): {pattern.title}"
    )
    return Insert(file.path, lines, note, if_match=file.sha256)


def _consolidate(pattern: Pattern, memory: Mapping[str, MemoryFile]) -> list[Operation]:
    paths = [p for p in pattern.subject.get("paths", []) if p in memory]
    reason = pattern.subject.get("reason")
    if reason == "expired":
        return [Delete(p, if_match=memory[p].sha256) for p in paths]
    if reason == "duplicate" and len(paths) > 1:
        keep = min(paths, key=lambda p: (-len(memory[p].content), len(p), p))
        return [Delete(p, if_match=memory[p].sha256) for p in paths if p != keep]
    return []


def _rationale(pattern: Pattern, operations: list[Operation]) -> str:
    s = pattern.subject
    if pattern.miner == "consolidation":
        return f"The store holds {s.get('reason')} memory: {', '.join(s.get('paths', []))}."
    why = _statistics_line(pattern)
    if pattern.coverage == "covered-failing":
        why += (
            f" Memory already says it ({', '.join(pattern.memory_paths)}), yet sessions still "
            "fail after it changed: make it always loaded."
        )
    elif pattern.coverage == "contradicted":
        why += (
            f" Memory states what now fails ({', '.join(pattern.memory_paths) or s.get('path')})."
        )
    # a variant that is only the tool's name (a lookup's "Bash") tells a reviewer nothing
    named_variants = [(v, n) for v, n in pattern.variants.items() if v and v != s.get("tool")]
    if named_variants:
        total = sum(pattern.variants.values())
        shown = ", ".join(f"{v} ({n} of {total})" for v, n in named_variants[:3])
        why += f" Variants: {shown}."
    return why


def make_draft(
    pattern: Pattern,
    thresholds: Thresholds,
    memory: Mapping[str, MemoryFile],
    taken: set[str],
    plugins: Mapping[str, Any] | None = None,
) -> Draft | None:
    """The draft for a kept pattern, or None when it warrants no change (review-due, or a
    miner whose ``note`` gives none).

    ``plugins`` maps miner names to the run's miners: a miner with ``note`` writes its own
    new notes (and ``category`` / ``slug_source`` place them); the built-in rules write the
    others'.
    """
    miner = (plugins or {}).get(pattern.miner)
    operations: list[Operation]
    if pattern.miner == "consolidation":
        operations = _consolidate(pattern, memory)
        score = 0.9 if pattern.subject.get("reason") == "expired" else 0.7
    else:
        score = confidence(pattern, thresholds)
        if pattern.coverage == "contradicted" or pattern.miner == "stale_memory":
            operations = _stale_operations(pattern, memory)
        elif pattern.coverage == "covered-failing":
            operations = [_strengthen(pattern, memory[p]) for p in pattern.memory_paths[:1]]
        else:
            own = getattr(miner, "note", None)
            made = own(pattern) if own is not None else _body(pattern)
            if made is None:
                return None
            path = _new_path(pattern, taken, miner)
            content = _note(pattern, made)
            check_content(content, DEFAULT_MAX_BYTES)
            operations = [Write(path, content, if_absent=True)]
    if not operations:
        return None
    for op in operations:
        taken.add(op.path)
    evidence: list[dict[str, Any]] = [
        e.to_json() for e in pattern.examples[: thresholds.max_examples]
    ]
    flags = ["from model findings: verify before accepting"] if pattern.miner == "model" else []
    return Draft(pattern, operations, _rationale(pattern, operations), evidence, score, flags)
