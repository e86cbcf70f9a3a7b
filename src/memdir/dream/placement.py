"""Placement: each kept pattern goes only where every reader may read what it came from.

The rule (DESIGN.md): *a proposal's text and statistics come only from transcripts that every
reader of its target path may read.* A draft's text — title, body, rationale, variants, the
projects and counts in its statistics, its evidence — is derived from its pattern's sessions,
so before a draft is kept:

1. its target paths are those of its operations (the new note under the scope
   :func:`~memdir.dream.drafts.scope_of` picks, or the memory file it edits);
2. each source class of the pattern (the scope labels of its sessions' transcripts) must pass
   ``audience(paths, scopes)``: every principal that may read one of those paths may read a
   transcript with those labels (the run service decides it over the registered principals
   and the store's policy, see ``DreamsMixin._audience``) — and so must every class whose
   text that class's signals carry from other sessions (:attr:`Pattern.requires`: a
   correction keyed by the terms of a session in another project); a class passes only with
   all it requires, and the draft's ``sources`` name them all;
3. when every class passes, the draft stands — its statistics counting, as the denominator,
   only the selected sessions whose class passes too; when some do not, the pattern is split
   by project (each project's sessions placed on their own, so a pattern seen only in project
   ``beta``'s sessions can only go to ``/projects/beta/``, never ``/org/``), and a pattern of
   one project is restricted to the classes that pass. A restricted pattern is thresholded
   and checked against memory again, with its own counts; one with no class left is left out.

Without an ``audience`` (pure engine use, tests, the backtest) every class passes, and the
drafts are exactly what they were before placement existed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final

from memdir.dream.decide import MemoryIndex, coverage, threshold_reason
from memdir.dream.drafts import make_draft
from memdir.dream.model import Draft, MemoryFile, Pattern, Thresholds
from memdir.dream.reduce import Reducer, source_scopes

__all__ = ["Audience", "place"]

#: ``audience(paths, scopes)``: may every reader of any of ``paths`` read a transcript with
#: these scope labels?
Audience = Callable[[tuple[str, ...], Mapping[str, str]], bool]

_MAX_STEPS: Final = 64  # splits and restrictions tried per pattern (each strictly smaller)


def _paths(draft: Draft) -> tuple[str, ...]:
    out = {op.path for op in draft.operations}
    out |= {p for op in draft.operations if (p := getattr(op, "new_path", None))}
    return tuple(sorted(out))


def _project(cls: str) -> str:
    return source_scopes(cls).get("project", "")


def _text_classes(pattern: Pattern, classes: Sequence[str]) -> list[str]:
    """``classes`` and every class their signals carry text from, each once, sorted."""
    out = set(classes)
    for cls in classes:
        out.update(pattern.requires.get(cls, ()))
    return sorted(out)


def _passes(audience: Audience, paths: tuple[str, ...], pattern: Pattern, cls: str) -> bool:
    """May every reader of ``paths`` read ``cls`` and every class it carries text from?"""
    return all(audience(paths, source_scopes(c)) for c in _text_classes(pattern, [cls]))


def place(
    pattern: Pattern,
    reducer: Reducer,
    thresholds: Thresholds,
    memory: Mapping[str, MemoryFile],
    index: MemoryIndex,
    taken: set[str],
    audience: Audience | None,
    store_miners: frozenset[str],
) -> tuple[list[Draft], list[tuple[Pattern, str]]]:
    """The drafts ``pattern`` may become (see the module docstring), and what was left out.

    ``taken`` (paths already used by the run's drafts) grows by the kept drafts' paths only.
    """
    if audience is None or not pattern.sources:  # store-level patterns come from no session
        draft = make_draft(pattern, thresholds, memory, taken, index.plugins)
        return ([draft] if draft is not None else []), []
    every = tuple(sorted(pattern.sources))
    drafts: list[Draft] = []
    left: list[tuple[Pattern, str]] = []
    queue: list[tuple[str, ...]] = [every]
    tried: set[tuple[str, ...]] = set()
    while queue and len(tried) < _MAX_STEPS:
        classes = queue.pop(0)
        if classes in tried:
            continue
        tried.add(classes)
        whole = classes == every
        candidate = pattern
        if not whole:
            candidate = reducer.restricted(pattern.id, classes, pattern.sessions_selected)
            candidate.coverage, candidate.memory_paths = coverage(candidate, index, store_miners)
            if candidate.coverage == "covered":
                left.append((candidate, f"already covered by {', '.join(candidate.memory_paths)}"))
                continue
        trial = set(taken)
        draft = make_draft(candidate, thresholds, memory, trial, index.plugins)
        if draft is None:
            continue
        paths = _paths(draft)
        passing = tuple(c for c in classes if _passes(audience, paths, candidate, c))
        if passing != classes:
            groups: dict[str, list[str]] = {}
            for cls in classes:
                groups.setdefault(_project(cls), []).append(cls)
            if len(groups) > 1:
                queue.extend(tuple(g) for _, g in sorted(groups.items()))
            elif passing:
                queue.append(passing)
            else:
                left.append((candidate, _unsafe(paths)))
            continue
        selected = sum(
            n for cls, n in reducer.selected_by_class.items() if audience(paths, source_scopes(cls))
        )
        if whole and selected == pattern.sessions_selected:
            taken |= trial
            draft.sources = [source_scopes(c) for c in _text_classes(candidate, classes)]
            drafts.append(draft)
            continue
        final = reducer.restricted(pattern.id, classes, selected)
        reason = threshold_reason(final, thresholds, store_miners)
        if reason is None:
            final.coverage, final.memory_paths = coverage(final, index, store_miners)
            if final.coverage == "covered":
                reason = f"already covered by {', '.join(final.memory_paths)}"
        if reason is not None:
            left.append((final, f"{reason} (counting only what every reader of "
                                f"{', '.join(paths)} may read)"))  # fmt: skip
            continue
        trial = set(taken)
        draft = make_draft(final, thresholds, memory, trial, index.plugins)
        if draft is None:
            continue
        moved = _paths(draft)
        if moved != paths and not all(_passes(audience, moved, final, c) for c in classes):
            left.append((final, _unsafe(moved)))
            continue
        taken |= trial
        draft.sources = [source_scopes(c) for c in _text_classes(final, classes)]
        drafts.append(draft)
    return drafts, left


def _unsafe(paths: Sequence[str]) -> str:
    return (
        f"not proposed to {', '.join(paths)}: its sessions come from transcripts that some "
        "readers of it may not read"
    )
