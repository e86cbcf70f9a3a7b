"""Evidence a proposer supplies, checked against the transcripts it names.

An agent's proposal may carry evidence: items naming a ``transcript_id``, an event range
(``first_event``..``last_event``, positions in the transcript's stored order) and an
``excerpt``. Nothing the proposer writes decides who sees it or vouches for it:

- the ``scopes`` (which decide who sees the excerpt, see ``proposals._visible_evidence``) are
  always the named transcript's *stored* scope labels, never the proposer's — and an item
  whose transcript does not exist, or that the proposer may not read, gets ``{}`` (the
  scopes of an unlabelled transcript: administrators only, the proposer included or not);
- ``verified`` is set here: ``true`` only when the transcript exists and the proposer may read
  it, the event range lies inside it, and every part of the excerpt (parts split at ``…`` or
  ``...``, whitespace collapsed) occurs, in order, in the text of those events; otherwise
  ``false``, with ``unverified`` saying why (in the same words for a missing transcript and
  one the proposer may not read). Viewers see unverified evidence marked as such.

Items naming no transcript are kept as the proposer's claim, ``verified: false``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

import sqlalchemy as sa

from memdir.access import Access
from memdir.storage.repository import Repository
from memdir.storage.schema import transcript_events
from memdir.transcripts.service import allowed as transcript_allowed
from memdir.transcripts.store import TranscriptRows, info_from_row

__all__ = ["MAX_EVIDENCE_ITEMS", "verify_evidence"]

#: Evidence items checked per proposal; more are refused by the caller's limits, not here.
MAX_EVIDENCE_ITEMS: Final = 200
_SPACE: Final = re.compile(r"\s+")
_ELLIPSIS: Final = re.compile(r"…|\.\.\.")
_CONTROL: Final = ("scopes", "verified", "unverified", "hidden")


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def _event_text(row: Any) -> str:
    parts = [row.name, row.text]
    if row.input is not None:
        try:
            value = json.loads(row.input)
        except ValueError:
            value = row.input
        parts.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
        if isinstance(value, Mapping):
            parts.extend(str(v) for v in value.values() if isinstance(v, str))
    return "\n".join(str(p) for p in parts if p)


def _occurs(excerpt: str, haystack: str) -> bool:
    """Every ellipsis-separated part of ``excerpt`` occurs in ``haystack``, in order."""
    at = 0
    found_any = False
    for part in (_squash(p) for p in _ELLIPSIS.split(excerpt)):
        if not part:
            continue
        found = haystack.find(part, at)
        if found < 0:
            return False
        at, found_any = found + len(part), True
    return found_any


def _index(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _check(repo: Repository, store_id: int, access: Access, item: dict[str, Any]) -> None:
    """Set ``verified`` (and ``scopes``, ``unverified``) on one item, in place."""
    tid = item.get("transcript_id")
    if not isinstance(tid, str) or not tid:
        item.update(verified=False, unverified="names no transcript")
        return
    row = TranscriptRows(repo).by_id(store_id, tid)
    scopes = info_from_row(row).scopes() if row is not None else None
    if row is None or scopes is None or not transcript_allowed(access, scopes, "read"):
        # Unknown provenance: shown, like an unlabelled transcript, to administrators only.
        item.update(scopes={}, verified=False, unverified=f"transcript {tid[:80]} does not exist")
        return
    item["scopes"] = scopes
    events = int(row.events or 0)
    first, last = item.get("first_event"), item.get("last_event")
    lo = 0 if first is None else _index(first)
    hi = (events - 1 if first is None else lo) if last is None else _index(last)
    if lo is None or hi is None or not 0 <= lo <= hi < events:
        item.update(
            verified=False,
            unverified=f"event range {first!r}..{last!r} is not inside the transcript's "
            f"{events} events (0..{events - 1})",
        )
        return
    excerpt = item.get("excerpt")
    if excerpt is None:
        item["verified"] = True
        return
    if not isinstance(excerpt, str):
        item.update(verified=False, unverified="the excerpt is not text")
        return
    e = transcript_events.c
    rows = repo.conn.execute(
        sa.select(e.name, e.text, e.input)
        .where(e.transcript_id == tid, e.seq >= lo, e.seq <= hi)
        .order_by(e.seq)
    )
    haystack = _squash("\n".join(_event_text(r) for r in rows))
    if _occurs(excerpt, haystack):
        item["verified"] = True
    else:
        item.update(verified=False, unverified=f"the excerpt does not occur in events {lo}..{hi}")


def verify_evidence(repo: Repository, store_id: int, access: Access, evidence: Any) -> Any:
    """``evidence`` with every item checked (see the module docstring); other shapes kept.

    A list of items or a single item (a JSON object) is checked; the proposer's own
    ``scopes``, ``verified``, ``unverified`` and ``hidden`` keys are dropped first.
    """
    if isinstance(evidence, Mapping):
        return verify_evidence(repo, store_id, access, [evidence])[0]
    if not isinstance(evidence, list):
        return evidence
    out: list[Any] = []
    for number, raw in enumerate(evidence):
        if not isinstance(raw, Mapping):
            out.append(raw)
            continue
        item = {k: v for k, v in raw.items() if k not in _CONTROL}
        if number < MAX_EVIDENCE_ITEMS:
            _check(repo, store_id, access, item)
        else:
            item.update(verified=False, unverified="not checked: too many evidence items")
        out.append(item)
    return out
