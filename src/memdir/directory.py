"""The service's side of memory as a directory: checkout listings and version contents.

A checkout (``memdir checkout``, :mod:`memdir.checkout`) needs, in one reader snapshot, every
file the caller may read under a prefix with its sha256 and version, the store revision, and
what the caller may do to each file — so it can make the files the caller may not change
read-only on disk and send changes that need review as proposals of their own, instead of
letting one protected file turn a whole sync into a proposal. :meth:`checkout_files` is that
listing (paged by path, content optional); :meth:`version_contents` gives a git export the
content of the versions it writes, checked readable one by one.
"""

from __future__ import annotations

from collections.abc import Sequence

from memdir.access import Access
from memdir.base import ServiceBase
from memdir.core.limits import check_int
from memdir.core.model import Principal
from memdir.core.paths import normalize_prefix, validate_path
from memdir.core.results import MAX_CHECKOUT_PAGE, CheckoutFile, CheckoutPage, Rights
from memdir.storage.repository import Repository, Row

__all__ = ["MAX_CHECKOUT_PAGE", "CheckoutFile", "CheckoutPage", "DirectoryMixin", "Rights"]


class DirectoryMixin(ServiceBase):
    """Listings and contents for checkouts and git exports."""

    def checkout_files(
        self,
        principal: Principal,
        store: str,
        prefix: str = "/",
        *,
        after: str | None = None,
        limit: int = MAX_CHECKOUT_PAGE,
        content: bool = False,
    ) -> CheckoutPage:
        """Readable live files under ``prefix`` after path ``after``, with the caller's rights.

        Only readable files are listed (what the caller may not read does not exist here
        either); the rights are those a commit would apply at this snapshot, so a checkout
        can mark read-only what a sync could never send.
        """
        directory = normalize_prefix(prefix)
        check_int("limit", limit, minimum=1)
        limit = min(limit, MAX_CHECKOUT_PAGE)
        if after is not None:
            validate_path(after)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            heads = []
            for head in repo.heads_under(row.id, directory, prefixes=access.read_prefixes()):
                if (after is not None and head.path <= after) or not access.can_read(head.path):
                    continue
                heads.append(head)
                if len(heads) > limit:
                    break
            more = len(heads) > limit
            heads = heads[:limit]
            files = []
            for head in heads:
                text = repo.blob(row.id, head.sha256) if content else None
                files.append(
                    CheckoutFile(
                        path=head.path,
                        sha256=head.sha256,
                        version=int(head.version),
                        size=int(head.size),
                        rights=self._rights(repo, row, access, head.path),
                        content=text,
                    )
                )
            return CheckoutPage(
                revision=int(row.revision),
                files=tuple(files),
                next_after=files[-1].path if more and files else None,
            )

    def path_rights(
        self, principal: Principal, store: str, paths: Sequence[str]
    ) -> list[Rights | None]:
        """What a commit by the caller would do to each path now: ``write``, ``propose``,
        ``read``; None where the caller may not read the path (nothing can be created there).

        A sync asks this before creating files, so a new file that needs review becomes a
        proposal of its own rather than turning the whole sync into one.
        """
        check_int("paths", len(paths), minimum=0, maximum=MAX_CHECKOUT_PAGE)
        for path in paths:
            validate_path(path)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            return [
                self._rights(repo, row, access, path) if access.can_read(path) else None
                for path in paths
            ]

    def _rights(self, repo: Repository, row: Row, access: Access, path: str) -> Rights:
        """The rights on a readable path (archived stores are read-only for everyone)."""
        if row.archived_at is not None:
            return "read"
        if access.policy is None:
            return "write"
        if access.allowed("write", path):
            return "propose" if self._protected(repo, row.id, access, path) else "write"
        return "propose" if access.allowed("propose", path) else "read"

    def version_contents(
        self, principal: Principal, store: str, refs: Sequence[tuple[int, int]]
    ) -> dict[tuple[int, int], str | None]:
        """The content of each ``(file_id, version)`` the caller may read, in one snapshot.

        A version written under a path the caller may not read is left out (as if it did not
        exist); a deletion or a redacted version maps to None — its content is gone.
        """
        out: dict[tuple[int, int], str | None] = {}
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            for file_id, number in refs:
                version = repo.version(file_id, number)
                if version is None or not access.can_read(version.path):
                    continue
                if version.sha256 is None or version.redacted_at is not None:
                    out[(file_id, number)] = None
                else:
                    out[(file_id, number)] = repo.blob(row.id, version.sha256)
        return out
