"""The review queue: proposals, and accepting, rejecting and rebasing them.

A proposal is a pending commit: operations, each with the sha256 its path had when it was
proposed (``base_sha256``), plus author, origin (``agent``, ``quarantine``, ``dream``),
rationale, evidence, statistics and screening findings. Statuses: ``open`` → ``accepted`` |
``rejected`` | ``conflicted`` | ``superseded``.

Accepting applies the operations through the normal commit path (compare-and-swap, versions,
provenance; the commit links back to the proposal). A path whose content moved on since the
base is rebased when that is safe — a ``str_replace`` whose old text still occurs exactly once
in the current content — and the rebase is recorded in the proposal's notes. Anything else
makes the proposal ``conflicted``, with base, current and proposed text, until someone rebases
it by hand.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import sqlalchemy as sa

from memdir.access import Access
from memdir.base import ServiceBase
from memdir.core.edits import apply_insert, apply_str_replace
from memdir.core.errors import Conflict, EditConflict, InvalidInput, NotFound
from memdir.core.model import (
    CommitResult,
    Delete,
    Insert,
    Operation,
    OpResult,
    Principal,
    Provenance,
    Rename,
    StrReplace,
    Write,
    operation_from_dict,
)
from memdir.rows import aware, utcnow
from memdir.screening import verdict
from memdir.storage.repository import Repository, Row
from memdir.storage.schema import proposals
from memdir.transcripts.service import allowed as transcript_allowed
from memdir.writer import CommitWriter

__all__ = ["ORIGINS", "STATUSES", "Proposal", "ProposalsMixin", "operation_paths"]

ORIGINS = ("agent", "quarantine", "dream")
STATUSES = ("open", "accepted", "rejected", "conflicted", "superseded")


@dataclass(frozen=True)
class Proposal:
    id: str
    store: str
    author: str
    origin: str
    status: str
    operations: tuple[dict[str, Any], ...]
    paths: tuple[str, ...]
    rationale: str | None
    evidence: Any
    statistics: Any
    findings: Any
    notes: tuple[dict[str, Any], ...]
    created_at: dt.datetime
    updated_at: dt.datetime
    reviewer: str | None
    reviewed_at: dt.datetime | None
    review_comment: str | None
    commit: str | None
    run: str | None = None


def operation_paths(op: Operation) -> list[str]:
    """Every path an operation touches (a rename touches two)."""
    return [op.path, op.new_path] if isinstance(op, Rename) else [op.path]


def _visible_evidence(evidence: Any, access: Access | None) -> Any:
    """Evidence as ``access`` may see it: excerpts from transcripts it cannot read are withheld.

    Items that name a transcript carry its ``scopes``; the viewer sees the excerpt only if it may
    read that transcript (the transcripts' rule). Others keep the reference and ``hidden: true``
    (that evidence exists, and how much), without the excerpt or the transcript id.
    """
    if access is None or not isinstance(evidence, list):
        return evidence
    out: list[Any] = []
    for item in evidence:
        if isinstance(item, dict) and "scopes" in item and "transcript_id" in item:
            scopes = item.get("scopes") or {}
            if not transcript_allowed(access, scopes, "read"):
                item = {
                    "hidden": True,
                    "first_event": item.get("first_event"),
                    "last_event": item.get("last_event"),
                    "reason": "from a transcript you may not read",
                }
        out.append(item)
    return out


def _proposal(row: Row, store: str, access: Access | None = None) -> Proposal:
    return Proposal(
        id=row.id,
        store=store,
        author=row.author,
        origin=row.origin,
        status=row.status,
        operations=tuple(row.operations),
        paths=tuple(row.paths),
        rationale=row.rationale,
        evidence=_visible_evidence(row.evidence, access),
        statistics=row.statistics,
        findings=row.findings,
        notes=tuple(row.notes or ()),
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        reviewer=row.reviewer,
        reviewed_at=aware(row.reviewed_at) if row.reviewed_at else None,
        review_comment=row.review_comment,
        commit=row.commit_id,
        run=row.run_id,
    )


def _ops(row: Row) -> list[tuple[Operation, str | None]]:
    out = []
    for data in row.operations:
        fields = {k: v for k, v in data.items() if k != "base_sha256"}
        out.append((operation_from_dict(fields), data.get("base_sha256")))
    return out


def _proposed_text(op: Operation, base: str | None) -> str | None:
    try:
        if isinstance(op, Write):
            return op.content
        if base is None or isinstance(op, Delete | Rename):
            return None
        if isinstance(op, StrReplace):
            return apply_str_replace(op.path, base, op.old, op.new)
        return apply_insert(op.path, base, op.line, op.text)
    except EditConflict:
        return None


class _Conflicted(Exception):
    def __init__(self, conflicts: list[dict[str, Any]]) -> None:
        self.conflicts = conflicts


class ProposalsMixin(ServiceBase):
    """Create, list, show, accept, reject and rebase proposals."""

    def _insert_proposal(
        self,
        repo: Repository,
        store_id: int,
        author: Principal,
        operations: Sequence[Operation],
        *,
        origin: str,
        rationale: str | None = None,
        evidence: Any = None,
        statistics: Any = None,
        findings: Any = None,
        provenance: Provenance | None = None,
        run_id: str | None = None,
    ) -> str:
        """Record a proposal in the open transaction; returns its id.

        An open proposal by the same author over exactly the same paths is superseded by the
        new one — except one from the same dream run (a run may propose two changes to one
        file; a later run's proposal does supersede an earlier run's).
        """
        if origin not in ORIGINS:
            raise InvalidInput(f"unknown proposal origin {origin!r}; use {', '.join(ORIGINS)}")
        stored: list[dict[str, Any]] = []
        seen: set[str] = set()
        for op in operations:
            data = asdict(op)
            if op.path not in seen:
                head = repo.head(store_id, op.path)
                data["base_sha256"] = None if head is None else head.sha256
            seen.update(operation_paths(op))
            stored.append(data)
        paths = sorted({p for op in operations for p in operation_paths(op)})
        now = utcnow()
        proposal_id = "p_" + uuid.uuid4().hex[:20]
        superseded = repo.conn.execute(
            sa.select(proposals.c.id, proposals.c.paths, proposals.c.run_id).where(
                proposals.c.store_id == store_id,
                proposals.c.author == author.id,
                proposals.c.status == "open",
            )
        ).all()
        for old in superseded:
            if run_id is not None and old.run_id == run_id:
                continue
            if sorted(old.paths) == paths:
                self._set_status(repo, old.id, "superseded", note=f"superseded by {proposal_id}")
        provenance = provenance or Provenance()
        repo.conn.execute(
            sa.insert(proposals).values(
                id=proposal_id,
                store_id=store_id,
                author=author.id,
                origin=origin,
                status="open",
                operations=stored,
                paths=paths,
                rationale=rationale or provenance.reason,
                evidence=evidence,
                statistics=statistics,
                findings=findings,
                notes=[],
                session=provenance.session,
                source_kind=provenance.source_kind,
                run_id=run_id,
                created_at=now,
                updated_at=now,
            )
        )
        return proposal_id

    def _set_status(
        self, repo: Repository, proposal_id: str, status: str, *, note: str | None = None,
        extra_notes: Sequence[dict[str, Any]] = (), **values: Any,
    ) -> None:  # fmt: skip
        row = repo.conn.execute(
            sa.select(proposals.c.notes).where(proposals.c.id == proposal_id)
        ).one()
        notes = list(row.notes or [])
        notes.extend(extra_notes)
        if note:
            notes.append({"at": utcnow().isoformat(), "note": note})
        repo.conn.execute(
            sa.update(proposals)
            .where(proposals.c.id == proposal_id)
            .values(status=status, notes=notes, updated_at=utcnow(), **values)
        )

    def _proposal_row(self, repo: Repository, store_id: int, access: Access, pid: str) -> Row:
        row = repo.conn.execute(
            sa.select(proposals).where(proposals.c.id == pid, proposals.c.store_id == store_id)
        ).first()
        visible = row is not None and (
            row.author == access.principal.id or all(access.can_read(p) for p in row.paths)
        )
        if row is None or not visible:
            raise NotFound(f"no proposal {pid!r} in this store; see `memdir proposals list`")
        return row

    # --- public ---------------------------------------------------------------------------

    def propose(
        self,
        principal: Principal,
        store: str,
        operations: Sequence[Operation],
        *,
        rationale: str | None = None,
        evidence: Any = None,
        statistics: Any = None,
        origin: str = "agent",
        provenance: Provenance | None = None,
    ) -> Proposal:
        """Queue ``operations`` for review (needs ``propose`` on every path they touch)."""
        if not operations:
            raise InvalidInput("a proposal needs at least one operation")
        found = self._screen_ops(operations, provenance, rationale=rationale, evidence=evidence)
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            self._writable_store(row)
            access = self._access(repo, row.id, principal)
            for op in operations:
                for path in operation_paths(op):
                    access.require("propose", path)
            screened = verdict(found, self._policy(repo, row.id))  # raises on a reject
            pid = self._insert_proposal(
                repo, row.id, principal, operations, origin=origin, rationale=rationale,
                evidence=evidence, statistics=statistics,
                findings=list(screened.findings) or None, provenance=provenance,
            )  # fmt: skip
            return self._proposal_view(repo, row, access, pid)

    def _proposal_view(self, repo: Repository, row: Row, access: Access, pid: str) -> Proposal:
        return _proposal(self._proposal_row(repo, row.id, access, pid), row.name, access)

    def list_proposals(
        self, principal: Principal, store: str, *, status: str | None = "open", limit: int = 100
    ) -> list[Proposal]:
        """Proposals the caller may see (it may read every path they touch), newest first."""
        if status is not None and status not in STATUSES:
            raise InvalidInput(f"unknown status {status!r}; use {', '.join(STATUSES)}")
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            query = sa.select(proposals).where(proposals.c.store_id == row.id)
            if status is not None:
                query = query.where(proposals.c.status == status)
            out: list[Proposal] = []
            for p in repo.conn.execute(query.order_by(proposals.c.created_at.desc())):
                if p.author == principal.id or all(access.can_read(x) for x in p.paths):
                    out.append(_proposal(p, row.name, access))
                    if len(out) >= limit:
                        break
            return out

    def get_proposal(self, principal: Principal, store: str, proposal_id: str) -> Proposal:
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            return self._proposal_view(
                repo, row, self._access(repo, row.id, principal), proposal_id
            )

    def reject_proposal(
        self, principal: Principal, store: str, proposal_id: str, comment: str | None = None
    ) -> Proposal:
        """Reject an open or conflicted proposal (needs ``write`` on every path it touches)."""
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            prop = self._proposal_row(repo, row.id, access, proposal_id)
            self._reviewable(prop)
            for path in prop.paths:
                access.require("write", path)
            self._set_status(
                repo, prop.id, "rejected", reviewer=principal.id, reviewed_at=utcnow(),
                review_comment=comment,
            )  # fmt: skip
            return self._proposal_view(repo, row, access, proposal_id)

    @staticmethod
    def _reviewable(prop: Row) -> None:
        if prop.status not in ("open", "conflicted"):
            raise Conflict(
                f"proposal {prop.id} is {prop.status}; only open or conflicted proposals can be "
                "reviewed",
                proposal=prop.id,
                status=prop.status,
            )

    def accept_proposal(
        self, principal: Principal, store: str, proposal_id: str, comment: str | None = None
    ) -> CommitResult:
        """Apply an open proposal as a commit linked to it (``write`` on every path needed).

        Raises :class:`Conflict` (and marks the proposal ``conflicted``) when a path changed
        in a way that cannot be rebased automatically.
        """
        prop = self.get_proposal(principal, store, proposal_id)
        if prop.status != "open":
            raise Conflict(
                f"proposal {proposal_id} is {prop.status}"
                + ("; rebase it with `memdir proposals rebase`" if prop.status == "conflicted"
                   else ""),
                proposal=proposal_id,
                status=prop.status,
            )  # fmt: skip
        provenance = _accept_provenance(prop)
        rebase_notes: list[dict[str, Any]] = []

        def apply(writer: CommitWriter) -> list[OpResult]:
            row = writer.repo.conn.execute(
                sa.select(proposals).where(proposals.c.id == proposal_id)
            ).one()
            if row.status != "open":
                raise Conflict(f"proposal {proposal_id} is {row.status}", proposal=proposal_id)
            for path in row.paths:  # protected files take their review from an admin
                if self._protected(writer.repo, writer.store_id, writer.access, path):
                    writer.access.require("admin", path)
            plan = self._rebase_plan(writer, _ops(row), rebase_notes)
            results = [writer.apply(op) for op in plan]
            self._set_status(
                writer.repo, proposal_id, "accepted", extra_notes=rebase_notes,
                reviewer=principal.id, reviewed_at=utcnow(), review_comment=comment,
                commit_id=writer.commit_id,
            )  # fmt: skip
            return results

        try:
            return self._run(
                principal, store, provenance, ["accept", proposal_id], apply,
                proposal_id=proposal_id,
            )  # fmt: skip
        except _Conflicted as conflicted:
            with self.db.write() as repo:
                self._set_status(
                    repo, proposal_id, "conflicted", extra_notes=conflicted.conflicts,
                    note="the files changed since the proposal; rebase it by hand",
                )  # fmt: skip
            raise Conflict(
                f"proposal {proposal_id} conflicts with changes made since it was proposed "
                f"({', '.join(c['path'] for c in conflicted.conflicts)}); it is now "
                "conflicted — see `memdir proposals show` and rebase it",
                proposal=proposal_id,
                conflicts=conflicted.conflicts,
            ) from None

    def _rebase_plan(
        self,
        writer: CommitWriter,
        ops: list[tuple[Operation, str | None]],
        notes: list[dict[str, Any]],
    ) -> list[Operation]:
        """Operations ready to apply, with preconditions set; raise _Conflicted if unsafe."""
        plan: list[Operation] = []
        conflicts: list[dict[str, Any]] = []
        seen: set[str] = set()
        repo, store_id = writer.repo, writer.store_id
        for op, base in ops:
            if op.path in seen:
                plan.append(op)
                continue
            seen.update(operation_paths(op))
            head = repo.head(store_id, op.path)
            current = None if head is None else str(head.sha256)
            if current == base:
                plan.append(_pinned(op, current))
                continue
            current_text = None if head is None else repo.blob(store_id, current or "")
            if isinstance(op, StrReplace) and current_text is not None:
                try:
                    apply_str_replace(op.path, current_text, op.old, op.new)
                except EditConflict:
                    pass
                else:
                    plan.append(_pinned(op, current))
                    notes.append({
                        "at": utcnow().isoformat(), "path": op.path,
                        "note": "rebased automatically: the old text still occurs exactly "
                                "once in the current version",
                    })  # fmt: skip
                    continue
            base_text = repo.blob(store_id, base) if base else None
            conflicts.append({
                "path": op.path, "op": op.op, "base_sha256": base, "current_sha256": current,
                "base": base_text, "current": current_text,
                "proposed": _proposed_text(op, base_text),
            })  # fmt: skip
        if conflicts:
            raise _Conflicted(conflicts)
        return plan

    def rebase_proposal(
        self,
        principal: Principal,
        store: str,
        proposal_id: str,
        *,
        content: str | None = None,
    ) -> Proposal:
        """Rebase a conflicted (or open) proposal onto the current files by hand.

        With ``content`` (single-path proposals), the proposal becomes a full write of that
        content over the current version. Without it, every operation is re-based on the
        current sha256 as it stands — which still fails for a ``str_replace`` whose old text is
        gone; give ``content`` then.
        """
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            prop = self._proposal_row(repo, row.id, access, proposal_id)
            self._reviewable(prop)
            if prop.author != principal.id:
                for path in prop.paths:
                    access.require("write", path)
            ops = [op for op, _ in _ops(prop)]
            if content is not None:
                if len(prop.paths) != 1:
                    raise InvalidInput(
                        "rebasing with new content needs a proposal that touches one path; "
                        f"this one touches {len(prop.paths)}"
                    )
                ops = [Write(prop.paths[0], content)]
                verdict(self._screen_ops(ops, None), self._policy(repo, row.id))
            else:
                self._check_rebasable(repo, row.id, ops)
            stored = []
            seen: set[str] = set()
            for op in ops:
                data = asdict(op)
                if op.path not in seen:
                    head = repo.head(row.id, op.path)
                    data["base_sha256"] = None if head is None else head.sha256
                seen.update(operation_paths(op))
                stored.append(data)
            self._set_status(
                repo, prop.id, "open", operations=stored,
                note=f"rebased by hand by {principal.id}",
            )  # fmt: skip
            return self._proposal_view(repo, row, access, proposal_id)

    @staticmethod
    def _check_rebasable(repo: Repository, store_id: int, ops: list[Operation]) -> None:
        for op in ops:
            if isinstance(op, StrReplace | Insert):
                head = repo.head(store_id, op.path)
                text = None if head is None else repo.blob(store_id, head.sha256)
                if text is None:
                    raise Conflict(f"{op.path} no longer exists; rebase with new content")
                try:
                    if isinstance(op, StrReplace):
                        apply_str_replace(op.path, text, op.old, op.new)
                    else:
                        apply_insert(op.path, text, op.line, op.text)
                except EditConflict as exc:
                    raise Conflict(
                        f"cannot rebase as it is: {exc.message}; rebase with new content (--file)",
                        path=op.path,
                    ) from None


def _accept_provenance(prop: Proposal) -> Provenance:
    """The commit's provenance: a dream proposal's names its run and its evidence transcripts."""
    if prop.run is None:
        return Provenance(reason=prop.rationale, source_kind=None)
    ids: list[str] = []
    for item in prop.evidence if isinstance(prop.evidence, list) else ():
        tid = item.get("transcript_id") if isinstance(item, dict) else None
        if isinstance(tid, str) and tid not in ids:
            ids.append(tid)
    transcripts = ",".join(ids)[:4000] or None
    reason = f"dream run {prop.run}: {prop.rationale or ''}".strip()[:4000]
    return Provenance(session=prop.run, transcript=transcripts, reason=reason, source_kind="dream")


def _pinned(op: Operation, sha: str | None) -> Operation:
    """``op`` with its precondition set to the sha256 just checked."""
    if isinstance(op, Write):
        return Write(op.path, op.content, if_match=sha, if_absent=sha is None)
    if isinstance(op, StrReplace):
        return StrReplace(op.path, op.old, op.new, if_match=sha)
    if isinstance(op, Insert):
        return Insert(op.path, op.line, op.text, if_match=sha)
    if isinstance(op, Delete):
        return Delete(op.path, if_match=sha)
    return Rename(op.path, op.new_path, if_match=sha)
