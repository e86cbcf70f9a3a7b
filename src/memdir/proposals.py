"""The review queue: proposals, and accepting, rejecting and rebasing them.

A proposal is a pending commit: operations, each with the sha256 its path had when it was
proposed (``base_sha256``), plus author, origin (``agent``, ``quarantine``, ``dream``),
rationale, evidence, statistics and screening findings. Statuses: ``open`` → ``accepted`` |
``rejected`` | ``conflicted`` | ``superseded``.

Accepting applies the operations through the normal commit path (compare-and-swap, versions,
provenance; the commit links back to the proposal). A path whose content moved on since the
base is rebased when that is safe — a ``str_replace`` whose old text still occurs exactly once
in the current content — and the rebase is recorded in the proposal's notes. Anything else
makes the proposal ``conflicted`` until someone rebases it by hand.

Who sees a proposal: whoever may read every path it touches — by the viewer's rights now, so an
author that lost a project no longer sees its proposals there (an author keeps seeing its own
proposal on a path it may only propose to). Conflict notes store sha256 references only; the
base, current and proposed text are rendered when the proposal is viewed, for a viewer that may
read the path now, and left out for anyone else.

Revisions and screening: ``revision`` is a digest of a proposal's operations and findings.
Every rebase screens the operations again and records the new findings (so the revision
changes); accepting screens them again too, and refuses (:class:`Conflict`) when screening now
finds something the proposal did not show, after recording it. ``accept_proposal(...,
revision=R)`` accepts only if the proposal is still at revision ``R`` — what the reviewer saw;
the REST API, the web form and ``memdir proposals accept --revision`` send it. Without a
revision (the CLI's plain ``accept``), the caller accepts the proposal as it stands when the
accept runs.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import sqlalchemy as sa

from memdir.access import Access
from memdir.base import ServiceBase
from memdir.core.edits import apply_insert, apply_str_replace
from memdir.core.errors import Conflict, EditConflict, InvalidInput, NotFound, RevisionChanged
from memdir.core.limits import check_int
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
from memdir.core.results import Proposal
from memdir.evidence import verify_evidence
from memdir.rows import aware, utcnow
from memdir.screening import verdict
from memdir.storage.repository import Repository, Row
from memdir.storage.schema import proposals
from memdir.transcripts.service import allowed as transcript_allowed
from memdir.writer import CommitWriter

__all__ = [
    "ORIGINS",
    "STATUSES",
    "Proposal",
    "ProposalsMixin",
    "operation_paths",
    "revision_of",
    "sources_readable",
    "visible",
]

ORIGINS = ("agent", "quarantine", "dream")
STATUSES = ("open", "accepted", "rejected", "conflicted", "superseded")


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
                    **({"verified": item["verified"]} if "verified" in item else {}),
                }
        out.append(item)
    return out


def revision_of(operations: Any, findings: Any) -> str:
    """The revision a reviewer sees: a digest of the stored operations and findings."""
    data = json.dumps([operations, findings], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def visible(row: Row, access: Access) -> bool:
    """May ``access.principal`` see this proposal? Read on every path it touches, by the
    rights it has now — or, for its author, propose on a path it may not read.

    A dream's proposal is derived from transcripts, so its viewer must also read, now and
    through its token, every class of transcript its text and counts come from (the
    ``source_scopes`` placement recorded in its statistics) and every transcript its evidence
    names: placement at run time checked
    the readers registered then by the policy alone, and a narrowed token or a later change
    of rights must not reveal text drawn from sessions the viewer may not read."""
    mine = row.author == access.principal.id
    if not all(access.can_read(p) or (mine and access.allowed("propose", p)) for p in row.paths):
        return False
    if row.origin != "dream":
        return True
    statistics = row.statistics if isinstance(row.statistics, dict) else {}
    sources = statistics.get("source_scopes")
    scopes = [s for s in sources if isinstance(s, dict)] if isinstance(sources, list) else []
    if isinstance(row.evidence, list):
        scopes += [
            item.get("scopes") or {}
            for item in row.evidence
            if isinstance(item, dict) and "transcript_id" in item
        ]
    return sources_readable(access, scopes)


def sources_readable(access: Access, scopes: Sequence[Mapping[str, str]]) -> bool:
    """May ``access.principal`` see text and counts drawn from transcripts of these scope
    classes? It must read, now and through its token, every one of them (the transcripts'
    rule). The one decision for what a dream derived: its proposals (:func:`visible`) and its
    run's report and counts (``DreamsMixin``)."""
    return all(transcript_allowed(access, dict(s), "read") for s in scopes)


def _visible_ops(operations: Sequence[dict[str, Any]], access: Access | None) -> tuple[Any, ...]:
    """Operations as the viewer may see them: no base sha256 of a path it may not read."""
    if access is None:
        return tuple(operations)
    return tuple(
        op if access.can_read(str(op.get("path"))) else {**op, "base_sha256": None}
        for op in operations
    )


_TEXTS = ("base", "current", "proposed")


def _visible_notes(
    row: Row, repo: Repository | None, access: Access | None
) -> tuple[dict[str, Any], ...]:
    """Notes with conflict text rendered now, for a viewer that may read the path now.

    A conflict note stores ``base_sha256``/``current_sha256`` (and the operation's index);
    its text is looked up at view time. Anyone who may not read the path gets the note
    without text or sha256 values.
    """
    out: list[dict[str, Any]] = []
    for note in row.notes or ():
        path = note.get("path") if isinstance(note, dict) else None
        if not isinstance(path, str) or not (
            "current_sha256" in note or any(k in note for k in _TEXTS)
        ):
            out.append(note)
            continue
        if access is not None and not access.can_read(path):
            hidden = {k: v for k, v in note.items() if k not in (*_TEXTS, "base_sha256",
                                                                 "current_sha256")}  # fmt: skip
            out.append({**hidden, "withheld": "you may not read this path"})
            continue
        if any(k in note for k in _TEXTS) or repo is None:  # stored by an earlier release
            out.append(note)
            continue
        base_sha, current_sha = note.get("base_sha256"), note.get("current_sha256")
        base = repo.blob(row.store_id, base_sha) if base_sha else None
        current = repo.blob(row.store_id, current_sha) if current_sha else None
        proposed = None
        index = note.get("op_index")
        if isinstance(index, int) and 0 <= index < len(row.operations):
            fields = {k: v for k, v in row.operations[index].items() if k != "base_sha256"}
            proposed = _proposed_text(operation_from_dict(fields), base)
        out.append({**note, "base": base, "current": current, "proposed": proposed})
    return tuple(out)


#: In a listing, each text an operation carries is cut to this many characters.
LIST_TEXT_CHARS = 500
_OP_TEXTS = ("content", "old", "new", "text")


def _summarised(data: dict[str, Any]) -> dict[str, Any]:
    """An operation as a listing shows it: every text over :data:`LIST_TEXT_CHARS` cut, with
    ``truncated`` naming the fields cut and ``<field>_bytes`` their full size (UTF-8)."""
    long = [k for k in _OP_TEXTS if isinstance(data.get(k), str) and len(data[k]) > LIST_TEXT_CHARS]
    if not long:
        return data
    out = dict(data)
    for key in long:
        out[f"{key}_bytes"] = len(data[key].encode("utf-8"))
        out[key] = data[key][:LIST_TEXT_CHARS]
    out["truncated"] = long
    return out


def _proposal(
    row: Row,
    store: str,
    access: Access | None = None,
    repo: Repository | None = None,
    *,
    summary: bool = False,
) -> Proposal:
    operations = _visible_ops(row.operations, access)
    if summary:
        operations = tuple(_summarised(op) for op in operations)
    return Proposal(
        id=row.id,
        store=store,
        author=row.author,
        origin=row.origin,
        status=row.status,
        operations=operations,
        paths=tuple(row.paths),
        rationale=row.rationale,
        evidence=_visible_evidence(row.evidence, access),
        statistics=row.statistics,
        findings=row.findings,
        notes=_visible_notes(row, repo, access),
        created_at=aware(row.created_at),
        updated_at=aware(row.updated_at),
        reviewer=row.reviewer,
        reviewed_at=aware(row.reviewed_at) if row.reviewed_at else None,
        review_comment=row.review_comment,
        commit=row.commit_id,
        run=row.run_id,
        revision=revision_of(row.operations, row.findings),
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


class _Rescreened(Exception):
    """Internal: screening at accept found what the proposal did not show."""

    def __init__(self, findings: list[dict[str, Any]]) -> None:
        self.findings = findings


def _finding_key(finding: Any) -> tuple[str, str, str]:
    f = finding if isinstance(finding, dict) else {}
    return (str(f.get("rule")), str(f.get("path")), str(f.get("line")))


def _unseen(found: Sequence[dict[str, Any]], shown: Any) -> list[dict[str, Any]]:
    """Findings in ``found`` that the stored findings ``shown`` do not list."""
    known = {_finding_key(f) for f in shown or ()}
    return [f for f in found if _finding_key(f) not in known]


def _merge_findings(stored: Any, screened: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A rebased proposal's findings: the new screening's, plus its dream flags."""
    kept = [f for f in stored or () if isinstance(f, dict) and f.get("category") == "dream"]
    return [*screened, *kept]


def _check_revision(row: Row, revision: str | None) -> None:
    if revision is None:
        return
    now = revision_of(row.operations, row.findings)
    if not revision:
        raise RevisionChanged(
            f"the accept of proposal {row.id} names no revision; show the proposal again and "
            f"accept the revision it shows ({now})",
            proposal=row.id,
            revision=now,
        )
    if revision != now:
        raise RevisionChanged(
            f"proposal {row.id} changed since you saw it: you reviewed revision {revision[:40]}, "
            f"it is now revision {now} (rebased or screened again) — show it again and review "
            "the current revision",
            proposal=row.id,
            revision=now,
            received=revision[:40],
        )


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
        self._check_operations(operations, "proposal")  # dream runs and quarantines too
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
        if row is None or not visible(row, access):
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
        """Queue ``operations`` for review (needs ``propose`` on every path they touch).

        ``evidence`` is checked against the transcripts it names (:mod:`memdir.evidence`):
        each item gets ``verified`` and the transcript's stored scopes, never the caller's.
        """
        self._check_operations(operations, "proposal")
        found = self._screen_ops(operations, provenance, rationale=rationale, evidence=evidence)
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            self._writable_store(row)
            access = self._access(repo, row.id, principal)
            for op in operations:
                for path in operation_paths(op):
                    access.require("propose", path)
            screened = verdict(found, self._policy(repo, row.id))  # raises on a reject
            checked = verify_evidence(repo, row.id, access, evidence)
            pid = self._insert_proposal(
                repo, row.id, principal, operations, origin=origin, rationale=rationale,
                evidence=checked, statistics=statistics,
                findings=list(screened.findings) or None, provenance=provenance,
            )  # fmt: skip
            return self._proposal_view(repo, row, access, pid)

    def _proposal_view(self, repo: Repository, row: Row, access: Access, pid: str) -> Proposal:
        return _proposal(self._proposal_row(repo, row.id, access, pid), row.name, access, repo)

    def list_proposals(
        self, principal: Principal, store: str, *, status: str | None = "open", limit: int = 100
    ) -> list[Proposal]:
        """Proposals the caller may see (see :func:`visible`), newest first.

        A listing summarises: each operation's texts are cut to :data:`LIST_TEXT_CHARS`
        characters (``truncated`` names the fields cut); :meth:`get_proposal` shows them whole.
        """
        check_int("limit", limit, minimum=1)
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
                if visible(p, access):
                    out.append(_proposal(p, row.name, access, repo, summary=True))
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
        self,
        principal: Principal,
        store: str,
        proposal_id: str,
        comment: str | None = None,
        *,
        revision: str | None = None,
    ) -> CommitResult:
        """Apply an open proposal as a commit linked to it (``write`` on every path needed).

        ``revision`` is the proposal revision the reviewer saw: when given and the proposal has
        changed since (a rebase, new findings), :class:`Conflict` and nothing is applied.
        The operations are screened again as they are applied: a finding the policy rejects
        refuses the accept (:class:`~memdir.core.errors.ScreeningRefused`); one the proposal
        did not show is recorded on it and refuses the accept (:class:`Conflict`) until it is
        reviewed again. Raises :class:`Conflict` (and marks the proposal ``conflicted``) when a
        path changed in a way that cannot be rebased automatically.
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
            _check_revision(row, revision)
            for path in row.paths:
                writer.access.require("write", path)
                if self._protected(writer.repo, writer.store_id, writer.access, path):
                    writer.access.require("admin", path)  # protected files: an admin reviews
            plan = self._rebase_plan(writer, _ops(row), rebase_notes)
            found = verdict(
                self._screen_ops(plan, Provenance(source_kind=row.source_kind)),
                self._policy(writer.repo, writer.store_id),
            )  # raises on a reject
            unseen = _unseen(found.findings, row.findings)
            if unseen:
                raise _Rescreened(_merge_findings(row.findings, found.findings))
            results = [writer.apply(op) for op in plan]
            self._set_status(
                writer.repo, proposal_id, "accepted", extra_notes=rebase_notes,
                reviewer=principal.id, reviewed_at=utcnow(), review_comment=comment,
                commit_id=writer.commit_id,
            )  # fmt: skip
            return results

        try:
            return self._run(
                principal, store, provenance, ["accept", proposal_id, revision], apply,
                proposal_id=proposal_id,
            )  # fmt: skip
        except _Rescreened as rescreened:
            with self.db.write() as repo:
                repo.conn.execute(
                    sa.update(proposals)
                    .where(proposals.c.id == proposal_id)
                    .values(findings=rescreened.findings or None, updated_at=utcnow())
                )
                now = revision_of(
                    repo.conn.execute(
                        sa.select(proposals.c.operations).where(proposals.c.id == proposal_id)
                    ).scalar_one(),
                    rescreened.findings or None,
                )
            raise Conflict(
                f"proposal {proposal_id} was not accepted: screening now finds what it did not "
                f"show ({', '.join(sorted({f['rule'] for f in rescreened.findings}))}); the "
                f"findings are recorded — review it again (revision {now}) and accept that",
                proposal=proposal_id,
                revision=now,
            ) from None
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
        for index, (op, base) in enumerate(ops):
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
            # References only: the text is rendered when viewed, for whoever may read it then.
            conflicts.append({
                "path": op.path, "op": op.op, "op_index": index, "base_sha256": base,
                "current_sha256": current,
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

        The rebased operations are screened again (a reject refuses the rebase) and their
        findings replace the old ones, so the proposal's revision changes: an accept naming
        the revision seen before the rebase is refused.

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
            else:
                self._check_rebasable(repo, row.id, ops)
            screened = verdict(  # every rebase is screened again; raises on a reject
                self._screen_ops(ops, Provenance(source_kind=prop.source_kind)),
                self._policy(repo, row.id),
            )
            findings = _merge_findings(prop.findings, screened.findings)
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
                repo, prop.id, "open", operations=stored, findings=findings or None,
                note=f"rebased by hand by {principal.id}; screened again",
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
