"""History, diffs, reverts, redaction and grep: the service's look backwards and across.

History is never rewritten. A revert is a new commit that puts back an earlier state; a
redaction removes content (and its sha256) from versions but keeps who and when.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from memdir.access import Access, missing
from memdir.base import ServiceBase, unknown_store
from memdir.core.edits import unified_diff
from memdir.core.errors import Conflict, Forbidden, InvalidInput, NotFound
from memdir.core.limits import MAX_INT64, check_int
from memdir.core.model import (
    ChangeBatch,
    ChangeEvent,
    CommitInfo,
    CommitResult,
    FileView,
    GrepMatch,
    OpResult,
    Principal,
    Provenance,
    VersionInfo,
)
from memdir.core.paths import normalize_prefix, validate_path
from memdir.core.regex import GrepPattern, compile_grep, required_literals
from memdir.core.results import RedactionPlan
from memdir.rows import aware, utcnow, version_info, view
from memdir.storage.repository import Repository, Row
from memdir.writer import CommitWriter

__all__ = ["CommitChange", "CommitDetail", "HistoryMixin", "RedactionPlan"]

MAX_GREP_MATCHES = 10_000
#: Commits fetched for an id prefix before visibility filtering (6+ hex characters name one
#: commit among millions; more matches than this are reported as ambiguous).
MAX_PREFIX_MATCHES = 64


@dataclass(frozen=True)
class CommitChange:
    """One change of a commit as the caller may see it.

    ``before`` is the text of the file's previous version and ``after`` the text this change
    left (None: there was none — created, deleted — or it was redacted, see ``redacted``, or
    the previous version lies under a path the caller may not read).
    """

    change: VersionInfo
    before_path: str | None
    before: str | None
    after: str | None
    redacted: bool


@dataclass(frozen=True)
class CommitDetail:
    """A commit with its provenance and the changes the caller may read (nothing else)."""

    commit: CommitInfo
    changes: tuple[CommitChange, ...]


class HistoryMixin(ServiceBase):
    """Reading the past and putting it back."""

    # --- resolving files and versions -----------------------------------------------------
    # Content taken from a version needs read on the path that version was written under:
    # a version the caller may not read is reported exactly as a version that does not exist,
    # and a path it may not read exactly as a file that never existed (no counts, no paths).

    def _file_id(self, repo: Repository, store_id: int, path: str) -> int:
        """The live file at ``path``, else the last file that lived there."""
        head = repo.head(store_id, path)
        if head is not None:
            return int(head.file_id)
        file_id = repo.last_file_at(store_id, path)
        if file_id is None:
            raise missing(path)
        return file_id

    def _version_row(
        self, repo: Repository, store_id: int, access: Access, path: str, number: int
    ) -> Row:
        """Version ``number`` of the file at ``path``, if ``access`` may read both ``path``
        and the path that version was written under; else the one not-found of each."""
        access.require_read(path)
        file_id = self._file_id(repo, store_id, path)
        row = repo.version(file_id, number)
        if row is None or not access.can_read(row.path):
            raise no_version(path, number)
        return row

    def _version_content(self, repo: Repository, store_id: int, row: Row) -> str:
        """The content of a version row already checked readable (see :meth:`_version_row`)."""
        if row.redacted_at is not None:
            raise NotFound(
                f"version {row.number} of {row.path} was redacted; its content is gone",
                path=row.path,
                version=row.number,
            )
        if row.sha256 is None:
            raise NotFound(
                f"version {row.number} of {row.path} is its deletion and has no content; "
                f"read version {row.number - 1}",
                path=row.path,
                version=row.number,
            )
        content = repo.blob(store_id, row.sha256)
        if content is None:
            raise NotFound(f"the content of version {row.number} of {row.path} is missing")
        return content

    def _read(
        self, repo: Repository, store_id: int, access: Access, path: str, version: int | None
    ) -> FileView:
        """The current file at ``path`` or one of its versions, as ``access`` may read it."""
        if version is None:
            access.require_read(path)
            head = repo.head(store_id, path)
            if head is None:
                raise missing(path)
            content = repo.blob(store_id, head.sha256)
            return view(head, content or "")
        row = self._version_row(repo, store_id, access, path, version)
        content = self._version_content(repo, store_id, row)
        return FileView(
            path=row.path,
            content=content,
            sha256=row.sha256,
            version=row.number,
            size=row.size,
            file_id=row.file_id,
            revision=row.revision,
            updated_at=aware(row.created_at),
        )

    # --- history and diff -----------------------------------------------------------------

    def file_history(
        self, principal: Principal, store: str, path: str, *, limit: int | None = None
    ) -> list[VersionInfo]:
        """Every version of the file at ``path`` (across renames), newest first."""
        validate_path(path)
        if limit is not None:
            check_int("limit", limit, minimum=1)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            access.require_read(path)
            file_id = self._file_id(repo, row.id, path)
            return _visible(access, [version_info(v) for v in repo.file_versions(file_id, limit)])

    def history(
        self,
        principal: Principal,
        store: str,
        *,
        actor: str | None = None,
        session: str | None = None,
        prefix: str | None = None,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        before_revision: int | None = None,
        limit: int = 50,
    ) -> list[CommitInfo]:
        """Commits of the store, newest first, with their changes; filters combine (AND).

        Only commits with a change the caller may read count, and toward ``limit`` too: the
        window is widened past hidden commits until ``limit`` visible ones are found or the
        commits run out, so a page is never cut short by what the caller cannot see. With
        ``prefix``, a commit counts only if a readable change is under it.
        """
        check_int("limit", limit, minimum=1)
        if before_revision is not None:
            check_int("before_revision", before_revision)
        directory = normalize_prefix(prefix) if prefix else None
        selected: list[Row] = []
        changes: dict[str, list[VersionInfo]] = {}
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            cursor, window = before_revision, limit
            while True:
                rows = repo.commits(
                    row.id,
                    actor=actor,
                    session=session,
                    prefix=directory,
                    since=None if since is None else aware(since).astimezone(dt.UTC),
                    until=None if until is None else aware(until).astimezone(dt.UTC),
                    before_revision=cursor,
                    limit=window,
                    prefixes=access.read_prefixes(),
                )
                found: dict[str, list[VersionInfo]] = {}
                for v in repo.commit_versions([c.id for c in rows]):
                    found.setdefault(v.commit_id, []).append(version_info(v))
                if access.policy is not None:  # keep only what the caller may read
                    found = {k: _visible(access, v) for k, v in found.items()}
                    kept = [c for c in rows if _touches(found.get(c.id, []), directory)]
                else:
                    kept = list(rows)
                selected.extend(kept[: limit - len(selected)])
                changes.update(found)
                if len(selected) >= limit or len(rows) < window:
                    break
                cursor, window = rows[-1].revision, min(window * 4, 10_000)
        rows = selected
        return [
            CommitInfo(
                id=c.id,
                revision=c.revision,
                actor=c.actor,
                created_at=aware(c.created_at),
                session=c.session,
                transcript=c.transcript,
                reason=c.reason,
                source_kind=c.source_kind,
                changes=tuple(changes.get(c.id, ())),
                proposal=c.proposal_id,
            )
            for c in rows
        ]

    def changes(
        self, principal: Principal, store: str, *, after: int = 0, limit: int = 100
    ) -> ChangeBatch:
        """The change feed: commits after revision ``after``, oldest first, filtered by read.

        Follow it by passing the returned ``next_after`` back; ``revision`` is the store's
        revision at the time of the call.
        """
        check_int("after", after)
        check_int("limit", limit, minimum=1)
        limit = min(limit, 1000)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            rows = repo.commits_after(row.id, after, limit)
            changes: dict[str, list[VersionInfo]] = {}
            for v in repo.commit_versions([c.id for c in rows]):
                changes.setdefault(v.commit_id, []).append(version_info(v))
        events = []
        for c in rows:
            visible = _visible(access, changes.get(c.id, []))
            if visible or access.policy is None:
                events.append(
                    ChangeEvent(
                        revision=c.revision,
                        commit=c.id,
                        actor=c.actor,
                        created_at=aware(c.created_at),
                        changes=tuple(visible),
                        proposal=c.proposal_id,
                    )
                )
        next_after = rows[-1].revision if rows else after
        return ChangeBatch(tuple(events), next_after, max(int(row.revision), next_after))

    def diff(
        self, principal: Principal, store: str, path: str, a: int, b: int | None = None
    ) -> str:
        """Unified diff from version ``a`` to version ``b`` (default: the current content)."""
        validate_path(path)
        check_int("a", a, minimum=-MAX_INT64)
        if b is not None:
            check_int("b", b, minimum=-MAX_INT64)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            old = self._read(repo, row.id, access, path, a)
            new = self._read(repo, row.id, access, path, b)
        # git's a/ b/ names (so `git apply` and `patch -p1` take it from the store's root) and
        # the version after a tab, where patch tools read a timestamp.
        return unified_diff(
            old.content,
            new.content,
            f"a{old.path}",
            f"b{new.path}",
            a_date=f"version {old.version}",
            b_date=f"version {new.version}",
        )

    # --- reverts --------------------------------------------------------------------------

    def revert_file(
        self,
        principal: Principal,
        store: str,
        path: str,
        to_version: int,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Put the content of ``to_version`` back as a new version of the same file.

        Only content goes back: a live file keeps its current path, a deleted file comes back
        where it was when deleted. (Reverting a commit, by contrast, also undoes renames.)
        """
        validate_path(path)
        check_int("to_version", to_version, minimum=-MAX_INT64)

        def apply(writer: CommitWriter) -> list[OpResult]:
            access = writer.access
            target = self._version_row(writer.repo, writer.store_id, access, path, to_version)
            content = self._version_content(writer.repo, writer.store_id, target)
            file_id = int(target.file_id)
            head = writer.repo.head_by_file(file_id)
            where = head.path if head is not None else writer.repo.file_versions(file_id, 1)[0].path
            if not access.can_read(where):  # the file lives on (or died) out of sight
                raise missing(path)
            return self._restore(writer, file_id, where, content)

        request = ["revert_file", path, to_version]
        return self._run(principal, store, provenance, request, apply)

    def revert_commit(
        self,
        principal: Principal,
        store: str,
        commit_id: str,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Undo a whole commit: every file it touched goes back to its state before it.

        Refused (:class:`Conflict`) when a touched file has changed since; revert those files
        one by one with :meth:`revert_file` instead.
        """

        def apply(writer: CommitWriter) -> list[OpResult]:
            access = writer.access
            commit = self._commit_row(writer.repo, writer.store_id, access, commit_id)
            touched: dict[int, list[Row]] = {}
            for v in writer.repo.commit_versions([commit.id]):
                touched.setdefault(int(v.file_id), []).append(v)
            befores = {
                f: writer.repo.version(f, rows[0].number - 1) if rows[0].number > 1 else None
                for f, rows in touched.items()
            }
            seen = [p for rows in touched.values() for v in rows for p in (v.path, v.old_path)]
            seen += [b.path for b in befores.values() if b is not None]
            seen += [h.path for f in touched if (h := writer.repo.head_by_file(f)) is not None]
            if not all(access.can_read(p) for p in seen if p is not None):
                raise Forbidden(
                    f"{access.principal.id} may not revert commit {commit.id} as a whole: it "
                    "also changed files you may not read; revert your files one by one with "
                    "`memdir revert PATH --to-version N`",
                    commit=commit.id,
                )
            results: list[OpResult] = []
            for file_id, rows in touched.items():
                results.extend(self._undo_file(writer, file_id, rows[0], rows[-1]))
            return results

        request = ["revert_commit", commit_id]
        return self._run(principal, store, provenance, request, apply)

    def _commit_row(self, repo: Repository, store_id: int, access: Access, commit_id: str) -> Row:
        """The one commit whose id starts with ``commit_id`` among those ``access`` may see
        (a commit with at least one readable change, as in :meth:`history`)."""
        if len(commit_id) < 6:
            raise InvalidInput(f"commit id {commit_id!r} is too short; give at least 6 characters")
        rows = repo.commits_by_prefix(store_id, commit_id.lower(), limit=MAX_PREFIX_MATCHES)
        if access.policy is not None and rows:
            readable: set[str] = set()
            for v in repo.commit_versions([c.id for c in rows]):
                if access.can_read(v.path):
                    readable.add(str(v.commit_id))
            rows = [c for c in rows if c.id in readable]
        if not rows:
            raise NotFound(f"no commit {commit_id!r} in this store; see `memdir log`")
        if len(rows) > 1:
            raise InvalidInput(f"commit id {commit_id!r} is ambiguous; give more characters")
        return rows[0]

    def _undo_file(
        self, writer: CommitWriter, file_id: int, first: Row, last: Row
    ) -> list[OpResult]:
        head = writer.repo.head_by_file(file_id)
        now_number = None if head is None else head.version
        if (last.operation == "deleted" and head is not None) or (
            last.operation != "deleted" and now_number != last.number
        ):
            raise Conflict(
                f"cannot revert: {last.path} has changed since that commit (it was version "
                f"{last.number}); revert the file with `memdir revert {last.path} "
                "--to-version N`",
                path=last.path,
            )
        if first.number == 1:  # the commit created it: remove it
            return [] if head is None else [writer.delete(head, "revert")]
        before = writer.repo.version(file_id, first.number - 1)
        assert before is not None
        if before.operation == "deleted":
            return [] if head is None else [writer.delete(head, "revert")]
        content = self._version_content(writer.repo, writer.store_id, before)
        return self._restore(writer, file_id, before.path, content)

    def _restore(
        self, writer: CommitWriter, file_id: int, path: str, content: str
    ) -> list[OpResult]:
        """Bring file ``file_id`` to ``content`` at ``path``: re-create, move and/or modify."""
        head = writer.repo.head_by_file(file_id)
        if head is None:
            number = writer.latest_number(file_id) + 1
            return [writer.create(path, content, "revert", file_id=file_id, number=number)]
        results: list[OpResult] = []
        if head.path != path:
            results.append(writer.move(head, path, "revert"))
            head = writer.repo.head(writer.store_id, path)
            assert head is not None
        current = writer.repo.blob(writer.store_id, head.sha256)
        if current != content:
            results.append(writer.modify(head, content, "revert"))
        return results

    # --- redaction ------------------------------------------------------------------------

    def redact(
        self,
        principal: Principal,
        store: str,
        path: str,
        version: int,
        *,
        dry_run: bool = False,
    ) -> RedactionPlan:
        """Remove the content of a version — and of every version holding the same content.

        The current version of a live file cannot be redacted (overwrite or delete it first).
        Who and when stay on every version; content and sha256 go, as does the stored blob
        once no version or live file holds it. Needs ``admin`` on ``path`` and read on the path
        the version was written under; the other versions holding the content are redacted
        where the caller has ``admin`` too and left alone (unnamed, uncounted) elsewhere, so
        the plan depends only on what the caller may see.
        """
        validate_path(path)
        check_int("version", version, minimum=-MAX_INT64)
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            access.require("admin", path)
            # Serialise with committers: one may be making this content current right now.
            if not repo.lock_store(row.id):
                raise unknown_store(store)
            target = self._version_row(repo, row.id, access, path, version)
            if not access.allowed("admin", target.path):
                raise no_version(path, version)
            if target.sha256 is None:
                what = "already redacted" if target.redacted_at else "a deletion, with no content"
                raise Conflict(f"version {version} of {path} is {what}", path=path)
            sha = str(target.sha256)
            live = [p for p in repo.heads_with_sha(row.id, sha) if access.can_read(p)]
            if live:
                raise Conflict(
                    f"cannot redact: the content of {path} version {version} is current in "
                    f"{', '.join(live)}; overwrite or delete it first, then redact",
                    path=path,
                    current_in=live,
                )
            # admin *and* read: a deny-read rule binds administrators too, and the plan names
            # the paths it lists
            rows = [
                v
                for v in repo.versions_with_sha(row.id, sha)
                if access.can_read(v.path) and access.allowed("admin", v.path)
            ]
            affected = tuple(version_info(v) for v in rows)
            if not dry_run:
                repo.redact_versions(row.id, sha, [v.id for v in rows], principal.id, utcnow())
        return RedactionPlan(sha256=sha, versions=affected, done=not dry_run)

    # --- one commit -----------------------------------------------------------------------

    def commit_detail(self, principal: Principal, store: str, commit_id: str) -> CommitDetail:
        """A commit (by id, or a prefix of 6+ characters naming one) with the content before
        and after each of its changes — only the changes on paths the caller may read.

        The commit exists for the caller exactly when :meth:`history` would list it (one
        readable change, else the one not-found of an absent commit); its other changes are
        not listed, counted or hinted at. Text before a change is taken only from a version
        written under a readable path (a rename from an unreadable path shows as created).
        """
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            commit = self._commit_row(repo, row.id, access, commit_id)
            out: list[CommitChange] = []
            for v in repo.commit_versions([commit.id]):
                if not access.can_read(v.path):
                    continue
                info = _visible(access, [version_info(v)])[0]
                previous = repo.version(int(v.file_id), int(v.number) - 1) if v.number > 1 else None
                if previous is not None and not access.can_read(previous.path):
                    previous = None
                before = None
                if previous is not None and previous.sha256 is not None:
                    before = repo.blob(row.id, previous.sha256)
                after = repo.blob(row.id, v.sha256) if v.sha256 is not None else None
                gone = v.redacted_at is not None or (
                    previous is not None and previous.redacted_at is not None
                )
                out.append(CommitChange(info, previous.path if previous else None,
                                        before, after, gone))  # fmt: skip
        return CommitDetail(
            CommitInfo(
                id=commit.id,
                revision=commit.revision,
                actor=commit.actor,
                created_at=aware(commit.created_at),
                session=commit.session,
                transcript=commit.transcript,
                reason=commit.reason,
                source_kind=commit.source_kind,
                changes=tuple(c.change for c in out),
                proposal=commit.proposal_id,
            ),
            tuple(out),
        )

    # --- grep -----------------------------------------------------------------------------

    def grep(
        self,
        principal: Principal,
        store: str,
        pattern: str,
        *,
        prefix: str = "/",
        ignore_case: bool = False,
        context: int = 0,
        limit: int = 1000,
        include_expired: bool = False,
    ) -> list[GrepMatch]:
        """Lines of current content matching a regular expression, in path order (expired
        files left out unless ``include_expired``)."""
        check_int("limit", limit, minimum=1)
        check_int("context", context)
        directory = normalize_prefix(prefix)
        compiled = compile_grep(pattern, ignore_case=ignore_case)
        limit = max(1, min(limit, MAX_GREP_MATCHES))
        matches: list[GrepMatch] = []
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            literals = required_literals(pattern, ignore_case=ignore_case)
            if ignore_case:  # databases fold case reliably for ASCII only
                literals = [lit for lit in literals if lit.isascii()]
            access = self._access(repo, row.id, principal)
            candidates = repo.grep_candidates(
                row.id, directory, literals, ignore_case, access.read_prefixes()
            )
            hidden = self._hidden(repo, row.id, access, include_expired)
            for head in candidates:
                # The access check comes before any pattern work, and every line is
                # searched: a whole-content pre-check must not miss line-anchored patterns.
                if not access.can_read(head.path) or head.path in hidden:
                    continue
                if not compiled.may_match(head.content):
                    continue
                matches.extend(_grep_file(head.path, head.content, compiled, context))
                if len(matches) >= limit:
                    return matches[:limit]
        return matches


def no_version(path: str, number: int) -> NotFound:
    """The one message for a version that does not exist or may not be read (no count)."""
    return NotFound(
        f"{path} has no version {number} you may read; list its versions with `memdir log {path}`",
        path=path,
        version=number,
    )


def _touches(changes: list[VersionInfo], directory: str | None) -> bool:
    """Some of these (visible) changes are at or under ``directory`` (None: anywhere)."""
    if directory is None or directory == "/":
        return bool(changes)
    below = directory.rstrip("/") + "/"
    return any(
        p is not None and (p == directory or p.startswith(below))
        for v in changes
        for p in (v.path, v.old_path)
    )


def _visible(access: Access, versions: list[VersionInfo]) -> list[VersionInfo]:
    """Versions at readable paths, with unreadable rename origins hidden."""
    if access.policy is None:
        return versions
    out = []
    for v in versions:
        if not access.can_read(v.path):
            continue
        if v.old_path is not None and not access.can_read(v.old_path):
            v = replace(v, old_path=None)
        out.append(v)
    return out


def _grep_file(path: str, content: str, pattern: GrepPattern, context: int) -> list[GrepMatch]:
    lines = content.splitlines()
    out: list[GrepMatch] = []
    for index, line in enumerate(lines):
        if pattern.search(line):
            out.append(
                GrepMatch(
                    path=path,
                    line=index + 1,
                    text=line,
                    before=tuple(lines[max(0, index - context) : index]),
                    after=tuple(lines[index + 1 : index + 1 + context]),
                )
            )
    return out
