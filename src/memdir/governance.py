"""Policy administration and purge.

The policy of a store is the file ``/.memdir/policy.yaml`` in that store — versioned like any
file, so its history is the file's history and a bad change can be reverted — and the built-in
default (DESIGN.md's layout) while that file does not exist. Writing it goes through the normal
commit path, where the writer refuses a malformed policy whole.

Purge removes a path's whole history — every version of every file that ever lived at the
path, their content, hashes and search rows — and leaves a tombstone commit naming who purged
what and when. It is for content that must not be kept at all (a deletion request, a leak in a
path name); redaction is the lighter tool when only some content must go.
"""

from __future__ import annotations

import sqlalchemy as sa

from memdir.access import PRINCIPALS
from memdir.base import ServiceBase
from memdir.core.errors import Forbidden, NotFound
from memdir.core.model import CommitResult, OpResult, Principal, Provenance, Write
from memdir.core.paths import validate_path
from memdir.core.policy import DEFAULT_POLICY_YAML, POLICY_PATH, Decision, parse_policy
from memdir.storage.schema import (
    blobs,
    file_meta,
    file_reads,
    files,
    heads,
    proposals,
    versions,
)
from memdir.writer import CommitWriter

__all__ = ["GovernanceMixin"]


class GovernanceMixin(ServiceBase):
    """``policy show|set|check`` and ``purge``."""

    def policy_text(self, principal: Principal, store: str) -> tuple[str, bool]:
        """The policy in force (YAML) and whether it is the built-in default. Admin only."""
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            self._access(repo, row.id, principal).require("admin", POLICY_PATH)
            head = repo.head(row.id, POLICY_PATH)
            if head is None:
                return DEFAULT_POLICY_YAML, True
            return repo.blob(row.id, head.sha256) or "", False

    def set_policy(
        self, principal: Principal, store: str, text: str, provenance: Provenance | None = None
    ) -> CommitResult:
        """Replace the policy; a malformed one is refused whole and the old one stays."""
        parse_policy(text)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            head = repo.head(row.id, POLICY_PATH)
            current = None if head is None else str(head.sha256)

        def apply(writer: CommitWriter) -> list[OpResult]:
            op = Write(POLICY_PATH, text, if_match=current, if_absent=current is None)
            return [writer.apply(op)]

        return self._run(principal, store, provenance, ["set_policy", text, current], apply)

    def check_policy(
        self, principal: Principal, store: str, subject: Principal, action: str, path: str
    ) -> Decision:
        """Explain what ``subject`` may do: the decision, the rule and the reason."""
        from memdir.core.policy import ACTIONS

        if action not in ACTIONS:
            from memdir.core.errors import InvalidInput

            raise InvalidInput(f"unknown action {action!r}; use {', '.join(ACTIONS)}")
        validate_path(path)
        if subject.id != principal.id:
            self.require_admin(principal, PRINCIPALS, "explain another principal's rights")
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            return self._access(repo, row.id, subject).check(action, path)

    def purge(
        self, principal: Principal, store: str, path: str, provenance: Provenance | None = None
    ) -> CommitResult:
        """Remove every trace of ``path``'s history; leaves a tombstone commit."""
        validate_path(path)
        counts = {"files": 0, "versions": 0}

        def apply(writer: CommitWriter) -> list[OpResult]:
            writer.access.require("admin", path)
            conn, store_id = writer.repo.conn, writer.store_id
            file_ids = sorted(
                {
                    int(f)
                    for f in conn.execute(
                        sa.select(versions.c.file_id).where(
                            versions.c.store_id == store_id,
                            sa.or_(versions.c.path == path, versions.c.old_path == path),
                        )
                    ).scalars()
                }
            )
            if not file_ids:
                raise NotFound(f"{path} has no history in this store", path=path)
            # every file purged also loses the versions it had elsewhere: all theirs to purge?
            elsewhere = conn.execute(
                sa.select(versions.c.path, versions.c.old_path).where(
                    versions.c.file_id.in_(file_ids)
                )
            ).all()
            places = {p for pair in elsewhere for p in pair if p is not None}
            if not all(writer.access.allowed("admin", p) for p in places):
                raise Forbidden(
                    f"{writer.access.principal.id} may not purge {path}: its files also have "
                    "history where you may not administer; ask an administrator of the store",
                    path=path,
                )
            shas = set(
                conn.execute(
                    sa.select(versions.c.sha256).where(versions.c.file_id.in_(file_ids))
                ).scalars()
            )
            for file_id in file_ids:
                writer.repo.unindex_file(file_id, store_id=store_id)
            counts["files"] = len(file_ids)
            counts["versions"] = conn.execute(
                sa.delete(versions).where(versions.c.file_id.in_(file_ids))
            ).rowcount
            conn.execute(sa.delete(heads).where(heads.c.file_id.in_(file_ids)))
            for table in (file_meta, file_reads):
                conn.execute(sa.delete(table).where(table.c.file_id.in_(file_ids)))
            conn.execute(sa.delete(files).where(files.c.id.in_(file_ids)))
            for sha in shas - {None}:
                still_used = conn.execute(
                    sa.select(versions.c.id)
                    .where(versions.c.store_id == store_id, versions.c.sha256 == sha)
                    .limit(1)
                ).first()
                if still_used is None:
                    conn.execute(
                        sa.delete(blobs).where(blobs.c.store_id == store_id, blobs.c.sha256 == sha)
                    )
            for prop in conn.execute(
                sa.select(proposals.c.id, proposals.c.paths).where(proposals.c.store_id == store_id)
            ).all():
                if path in prop.paths:  # a proposal holds content too
                    conn.execute(sa.delete(proposals).where(proposals.c.id == prop.id))
            return [OpResult("purge", path, 0, 0, "purged", None, 0)]

        reason = (provenance.reason if provenance and provenance.reason else None) or (
            f"purged the whole history of {path}"
        )
        base = provenance or Provenance()
        tomb = Provenance(
            session=base.session,
            transcript=base.transcript,
            reason=reason,
            source_kind=base.source_kind,
            idempotency_key=base.idempotency_key,
        )
        return self._run(principal, store, tomb, ["purge", path], apply)
