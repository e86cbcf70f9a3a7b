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

Every other text a later reader sees is screened too, under the same policy: each path a
change adds — a create's, a rename's target; a file already at its path had its name screened
when it got there — (as written, and with ``/ - _ .`` read as spaces so that
``/org/ignore-all-previous-instructions.md`` reads as the sentence it is), the provenance
``reason``, ``session`` and ``transcript`` strings (shown by ``log``, ``blame`` and the review
queue), and a proposal's rationale and evidence (every string value but ids and scopes). A
finding there names its ``field`` (``content`` otherwise); a secret in a path name is masked
in the messages and findings that quote the path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Final

from memdir.core.errors import ScreeningRefused
from memdir.core.model import Insert, Operation, Provenance, Rename, StrReplace, Write
from memdir.core.policy import Policy

__all__ = ["FIELDS", "Screened", "Verdict", "default_screen", "screen_operations", "verdict"]

Screen = Callable[..., Sequence[Any]]


def default_screen(content: str, *, path: str, source_kind: str | None = None) -> Sequence[Any]:
    """:func:`memdir.guard.screen`, imported on the first text screened: the guard's patterns
    compile at its import, which a process that only reads (a CLI read, a search) never pays."""
    from memdir.guard import screen

    return screen(content, path=path, source_kind=source_kind)


#: What a finding was found in -> how messages name it (``content`` and ``path`` name the path).
FIELDS: Final = {
    "content": "",
    "path": "the path name",
    "reason": "the commit reason",
    "session": "the session id",
    "transcript": "the transcript reference",
    "rationale": "the proposal rationale",
    "evidence": "the proposal evidence",
}
#: Read as spaces in a second screening of a path name (same length: offsets hold).
_PATH_SPACES: Final = str.maketrans("/-_.", "    ")
#: Evidence values under these keys are ids and scopes, not text for a reader.
_EVIDENCE_IDS: Final = frozenset({"transcript_id", "scopes", "first_event", "last_event"})


@dataclass(frozen=True)
class Screened:
    """A finding in one text of a change (``finding`` as a plain dict).

    ``field`` is a key of :data:`FIELDS`; ``op_index`` is -1 for the change's own texts
    (reason, session, transcript, rationale, evidence) and ``path`` then the first path.
    """

    op_index: int
    path: str
    finding: dict[str, Any]
    field: str = "content"


@dataclass(frozen=True)
class Verdict:
    """Findings with their actions; ``quarantine`` non-empty means: make a proposal.

    ``paths`` are the real paths of the findings, in order (a finding's ``path`` is masked
    when the path itself holds a secret); a change-level finding is recorded on the first
    path of the change.
    """

    findings: tuple[dict[str, Any], ...]
    quarantine: bool
    paths: tuple[str, ...] = ()

    def allowed_by_path(self) -> dict[str, list[dict[str, Any]]]:
        """Findings per (real) path they are recorded on."""
        out: dict[str, list[dict[str, Any]]] = {}
        paths = self.paths or tuple(f["path"] for f in self.findings)
        for finding, path in zip(self.findings, paths, strict=True):
            out.setdefault(path, []).append(finding)
        return out


def _added_text(op: Operation) -> str | None:
    if isinstance(op, Write):
        return op.content
    if isinstance(op, StrReplace):
        return op.new
    if isinstance(op, Insert):
        return op.text
    return None


def _added_paths(op: Operation) -> list[str]:
    """The path names an operation adds to the store: a create's path, a rename's target.

    An overwrite (``if_match``), an edit or a delete names a file already at that path — its
    name was screened when it was created there (and the operation fails if it is not) — so,
    like content already reviewed, it is not screened again by every later change.
    """
    if isinstance(op, Rename):
        return [op.new_path]
    if isinstance(op, Write) and op.if_match is None:
        return [op.path]
    return []


def _evidence_text(evidence: Any, out: list[str], key: str | None = None) -> None:
    """Collect the string values of agent-supplied evidence (ids and scopes left out)."""
    if key in _EVIDENCE_IDS:
        return
    if isinstance(evidence, str):
        out.append(evidence)
    elif isinstance(evidence, dict):
        for name, value in evidence.items():
            _evidence_text(value, out, str(name))
    elif isinstance(evidence, (list, tuple)):
        for value in evidence:
            _evidence_text(value, out)


def screen_operations(
    operations: Sequence[Operation],
    provenance: Provenance | None,
    screen: Screen,
    *,
    rationale: str | None = None,
    evidence: Any = None,
) -> list[Screened]:
    """Run the guard over every text of a change a later reader sees (see the module doc):
    the text each operation adds, the paths they name, the provenance strings, and a
    proposal's ``rationale`` and ``evidence``."""
    source_kind = provenance.source_kind if provenance else None
    found: list[Screened] = []
    for index, op in enumerate(operations):
        text = _added_text(op)
        if text is not None:
            for finding in screen(text, path=op.path, source_kind=source_kind):
                found.append(Screened(index, op.path, asdict(finding)))
        for path in _added_paths(op):
            found.extend(_screen_path(index, path, screen))
    first = operations[0].path if operations else "/"
    texts: list[tuple[str, str | None]] = []
    if provenance is not None:
        texts += [(name, getattr(provenance, name)) for name in ("reason", "session", "transcript")]
    texts.append(("rationale", rationale))
    pieces: list[str] = []
    _evidence_text(evidence, pieces)
    texts.append(("evidence", "\n".join(pieces)))
    for name, value in texts:
        if value:
            for finding in screen(value, path=first, source_kind=None):
                found.append(Screened(-1, first, asdict(finding), name))
    return found


def _screen_path(index: int, path: str, screen: Screen) -> list[Screened]:
    """A path name's findings: as written, then (new rules only) with separators as spaces —
    unless it holds a secret, which the spaced reading would quote unmasked."""
    findings = [asdict(f) for f in screen(path, path=path, source_kind=None)]
    if not any(f["category"] == "secret" for f in findings):
        rules = {f["rule"] for f in findings}
        spaced = path.translate(_PATH_SPACES)
        findings += [f for f in map(asdict, screen(spaced, path=path)) if f["rule"] not in rules]
    return [Screened(index, path, finding, "path") for finding in findings]


def _masked_path(path: str, found: Sequence[Screened]) -> str:
    """``path`` with every secret found in the path name itself masked."""
    from memdir.guard.base import mask_secret

    spans = sorted(
        (s.finding["start"], s.finding["end"])
        for s in found
        if s.field == "path" and s.path == path and s.finding["category"] == "secret"
    )
    out, pos = [], 0
    for start, end in spans:
        if start >= pos:
            out += [path[pos:start], mask_secret(path[start:end])]
            pos = end
    return "".join(out) + path[pos:]


def verdict(found: Sequence[Screened], policy: Policy) -> Verdict:
    """Apply the policy's screening actions; raises :class:`ScreeningRefused` on any reject."""
    shown = {s.path: _masked_path(s.path, found) for s in found}
    decided = [
        {
            **s.finding,
            "path": shown[s.path],
            "op": s.op_index,
            "field": s.field,
            "action": policy.screening_action(s.finding["rule"], s.finding["category"]),
        }
        for s in found
    ]
    rejected = [f for f in decided if f["action"] == "reject"]
    if rejected:
        first = rejected[0]
        where = FIELDS.get(first["field"], first["field"])
        what = f"{where} {first['path']}" if first["field"] == "path" else where or first["path"]
        if first["field"] not in ("content", "path"):
            what = f"{what} of the change to {first['path']}"
        raise ScreeningRefused(
            f"write screening refused {what}: {first['reason']} (rule {first['rule']}, "
            f"line {first['line']}); remove it — memory is shared and kept forever",
            findings=decided,
        )
    return Verdict(
        tuple(decided),
        any(f["action"] == "quarantine" for f in decided),
        tuple(s.path for s in found),
    )
