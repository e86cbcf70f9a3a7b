"""Write screening in the service: run the guard on what a change adds, decide by policy.

The guard (:mod:`memdir.guard`) only detects. Here each finding gets the action the store's
policy assigns it (``screening:`` in ``/.memdir/policy.yaml``; secrets are rejected and the rest
quarantined by default):

- any ``reject`` → :class:`~memdir.core.errors.ScreeningRefused` with every finding;
- else any ``quarantine`` → the change becomes a proposal flagged with its findings;
- else the change lands and ``allow``-ed findings are recorded on the versions they concern.

Nothing the guard flags is silently dropped. Only the text a change adds is screened — the new
content of a write, the replacement of a ``str_replace``, the inserted text — so content already
reviewed is not flagged again by every later edit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memdir.core.errors import ScreeningRefused
from memdir.core.model import Insert, Operation, Provenance, StrReplace, Write
from memdir.core.policy import Policy

__all__ = ["Screened", "Verdict", "screen_operations", "verdict"]

Screen = Callable[..., Sequence[Any]]


@dataclass(frozen=True)
class Screened:
    """A finding in one operation's added text (``finding`` as a plain dict)."""

    op_index: int
    path: str
    finding: dict[str, Any]


@dataclass(frozen=True)
class Verdict:
    """Findings with their actions; ``quarantine`` non-empty means: make a proposal."""

    findings: tuple[dict[str, Any], ...]
    quarantine: bool

    def allowed_by_path(self) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {}
        for finding in self.findings:
            out.setdefault(finding["path"], []).append(finding)
        return out


def _added_text(op: Operation) -> str | None:
    if isinstance(op, Write):
        return op.content
    if isinstance(op, StrReplace):
        return op.new
    if isinstance(op, Insert):
        return op.text
    return None


def screen_operations(
    operations: Sequence[Operation], provenance: Provenance | None, screen: Screen
) -> list[Screened]:
    """Run the guard over the text each operation adds."""
    source_kind = provenance.source_kind if provenance else None
    found: list[Screened] = []
    for index, op in enumerate(operations):
        text = _added_text(op)
        if text is None:
            continue
        for finding in screen(text, path=op.path, source_kind=source_kind):
            found.append(Screened(index, op.path, asdict(finding)))
    return found


def verdict(found: Sequence[Screened], policy: Policy) -> Verdict:
    """Apply the policy's screening actions; raises :class:`ScreeningRefused` on any reject."""
    decided = [
        {
            **s.finding,
            "path": s.path,
            "op": s.op_index,
            "action": policy.screening_action(s.finding["rule"], s.finding["category"]),
        }
        for s in found
    ]
    rejected = [f for f in decided if f["action"] == "reject"]
    if rejected:
        first = rejected[0]
        raise ScreeningRefused(
            f"write screening refused {first['path']}: {first['reason']} (rule {first['rule']}, "
            f"line {first['line']}); remove it — memory is shared and kept forever",
            findings=decided,
        )
    return Verdict(tuple(decided), any(f["action"] == "quarantine" for f in decided))
