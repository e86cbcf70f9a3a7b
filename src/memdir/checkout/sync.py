"""Checkout and sync: memory as a plain directory, kept in step with the store by CAS.

One code path serves the embedded database and ``memdir serve``: both go through an SDK
:class:`~memdir.Client` (the local transport runs the same REST app in-process).

A sync compares, per file, three sha256s — the *base* (what the checkout was last in step
with, from the state file), the *local* file and the *remote* head:

=============  ===============  ===============================================================
local          remote           what happens
=============  ===============  ===============================================================
= base         = base           nothing
= base         changed          pulled into the directory (the file was untouched here)
changed        = base           sent, with ``If-Match: base`` (create: ``If-None-Match: *``;
                                a deletion and a create of the same content: a rename)
changed        changed alike    nothing to send; the base moves on
changed        changed apart    a conflict: both kept (``a.md`` and ``a.md.theirs``), exit 3
=============  ===============  ===============================================================

Every change with ``write`` rights goes into one commit (several only beyond the server's
per-commit limits) with the sync's provenance. A change to a file whose changes need review
(propose-only rights, a protected file) is sent on its own and becomes a proposal, reported
per file (exit 6); the working file stays as written. A change to a file the caller may only
read is refused and kept (exit 4). If the store moves between the listing and the commit, the
commit's preconditions fail, nothing applies, and the sync lists again — so a sync never
overwrites a change it has not seen, and it never loses a local one: a file is replaced on disk
only after checking that it still holds the base, through a hard link that also catches an
append racing the replacement.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memdir.checkout.state import (
    TEMP_PREFIX,
    THEIRS,
    Base,
    Conflict,
    Pending,
    State,
    file_sha256,
    ignored,
    local_path,
    memory_path,
    scan,
)
from memdir.core.content import decode_content
from memdir.core.errors import InvalidInput, MemdirError, NotFound, PreconditionFailed, Proposed
from memdir.core.model import CommitResult, Delete, Operation, Provenance, Rename, Write
from memdir.core.paths import normalize_prefix, validate_path
from memdir.directory import CheckoutFile

if TYPE_CHECKING:
    from memdir.sdk import Client

__all__ = ["CheckoutReport", "SyncReport", "checkout", "sync"]

#: Operations and content bytes per commit: below the server's defaults (1,000 operations,
#: a 10 MiB body), so a sync is one commit unless it is larger than that.
MAX_OPS_PER_COMMIT = 500
MAX_BYTES_PER_COMMIT = 4 << 20
#: Pulls above this many files read the whole listing with content instead of file by file.
BULK_PULL = 64
ATTEMPTS = 5


@dataclass(frozen=True)
class Change:
    """One file a sync sent or pulled: ``operation`` created | modified | deleted | renamed."""

    path: str
    operation: str
    old_path: str | None = None


@dataclass(frozen=True)
class Problem:
    """A file a sync could not bring in step, and what to do about it."""

    path: str
    message: str
    proposal: str | None = None


@dataclass
class SyncReport:
    """What one sync did. ``exit_code``: 3 if a conflict is open, else 2 for files refused as
    invalid, 4 for files the caller may not change, 6 for changes queued as proposals, else 0."""

    directory: str
    revision: int = 0
    commits: list[str] = field(default_factory=list)
    sent: list[Change] = field(default_factory=list)
    pulled: list[Change] = field(default_factory=list)
    conflicts: list[Problem] = field(default_factory=list)
    proposals: list[Problem] = field(default_factory=list)
    invalid: list[Problem] = field(default_factory=list)
    forbidden: list[Problem] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        for problems, code in ((self.conflicts, 3), (self.invalid, 2), (self.forbidden, 4),
                               (self.proposals, 6)):  # fmt: skip
            if problems:
                return code
        return 0

    def lines(self) -> list[str]:
        """The report for people, one line per file."""
        out = []
        marks = {"created": "A", "modified": "M", "deleted": "D", "renamed": "R"}
        for c in self.sent:
            was = f"{c.old_path} -> " if c.old_path else ""
            out.append(f"sent   {marks.get(c.operation, '?')} {was}{c.path}")
        for c in self.pulled:
            out.append(f"pulled {marks.get(c.operation, '?')} {c.path}")
        for kind, problems in (("CONFLICT", self.conflicts), ("proposal", self.proposals),
                               ("invalid", self.invalid), ("refused", self.forbidden)):  # fmt: skip
            out.extend(f"{kind} {p.path}: {p.message}" for p in problems)
        if self.commits:
            out.append(f"{len(self.sent)} changes in commit {', '.join(self.commits)} "
                       f"(revision {self.revision})")  # fmt: skip
        elif not out:
            out.append(f"up to date at revision {self.revision}")
        return out


@dataclass(frozen=True)
class CheckoutReport:
    directory: str
    prefix: str
    revision: int
    files: int
    read_only: int
    skipped: tuple[str, ...] = ()


def _mode(rights: str) -> int:
    return 0o444 if rights == "read" else 0o644


def _visible(prefix: str, files: Iterable[CheckoutFile]) -> dict[str, CheckoutFile]:
    """The listed files a checkout holds (a name no sync could send back is left out)."""
    return {f.path: f for f in files if not ignored(f.path.rsplit("/", 1)[1])}


def checkout(
    client: Client, prefix: str, directory: Path, *, source: dict[str, Any] | None = None
) -> CheckoutReport:
    """Write every file the client's principal may read under ``prefix`` into ``directory``
    (new or empty) with the state file; files it may not change are made read-only."""
    prefix = normalize_prefix(prefix)
    directory = Path(directory)
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise InvalidInput(
            f"checkout destination {directory} exists and is not an empty directory; choose a "
            "new one (or `memdir sync` an existing checkout)",
            directory=str(directory),
        )
    directory.mkdir(parents=True, exist_ok=True)
    listing = client.checkout_files(prefix, content=True)
    state = State(store=client.store, prefix=prefix, source=source or {},
                  revision=listing.revision)  # fmt: skip
    files = _visible(prefix, listing.files)
    skipped = tuple(f.path for f in listing.files if f.path not in files)
    made: set[Path] = set()
    for f in files.values():
        target = local_path(directory, prefix, f.path)
        if target.parent not in made:
            target.parent.mkdir(parents=True, exist_ok=True)
            made.add(target.parent)
        _create(target, (f.content or "").encode(), _mode(f.rights))
        state.files[f.path] = Base(f.sha256, f.version, f.rights)
    state.save(directory)  # last: until it exists the directory is no checkout
    read_only = sum(1 for f in files.values() if f.rights == "read")
    return CheckoutReport(str(directory), prefix, listing.revision, len(files), read_only,
                          skipped)  # fmt: skip


def sync(
    client: Client,
    directory: Path,
    *,
    reason: str | None = None,
    session: str | None = None,
) -> SyncReport:
    """Send the directory's changes as one commit and pull the store's into untouched files.

    Retries (listing again) when the store moves between the listing and the commit; never
    overwrites a change on either side it has not seen.
    """
    directory = Path(directory)
    state = State.load(directory)
    if state.store != client.store:
        raise InvalidInput(
            f"{directory} is a checkout of store {state.store!r}, not {client.store!r}; sync it "
            f"with --store {state.store}",
            store=state.store,
        )
    provenance = Provenance(session=session, reason=reason)
    loaded = state.snapshot()
    for attempt in range(ATTEMPTS):
        report = SyncReport(str(directory))
        try:
            _Sync(client, directory, state, report, provenance).run()
        except PreconditionFailed:
            if attempt + 1 == ATTEMPTS:
                raise
            state = State.load(directory)  # nothing of this attempt applied; look again
            continue
        break
    if state.snapshot() != loaded:  # a sync that changed nothing rewrites nothing
        state.save(directory)
    return report


@dataclass
class _Local:
    sha256: str
    file: Path


class _Sync:
    """One attempt: list, decide, send, pull, record. Raises PreconditionFailed (nothing of
    the attempt applied, the state untouched) when the store moved since the listing."""

    def __init__(
        self,
        client: Client,
        directory: Path,
        state: State,
        report: SyncReport,
        provenance: Provenance,
    ) -> None:
        self.client, self.directory, self.state = client, directory, state
        self.report, self.provenance = report, provenance
        self.prefix = state.prefix
        self.direct: list[tuple[Operation, int]] = []
        self.review: list[Operation] = []
        self.pulls: list[str] = []
        self.clashes: list[str] = []
        self.adopt: list[str] = []

    # --- looking -----------------------------------------------------------------------------

    def _scan(self) -> dict[str, _Local]:
        conflicts = self.state.conflicts
        out: dict[str, _Local] = {}
        for relative, file in scan(self.directory):
            path = memory_path(self.prefix, relative)
            if path.endswith(THEIRS) and path[: -len(THEIRS)] in conflicts:
                continue
            try:
                sha = file_sha256(file.read_bytes())
            except OSError:
                continue  # gone since the walk saw it: as if never there
            out[path] = _Local(sha, file)
        return out

    def _content(self, path: str, local: _Local) -> str | None:
        """The file's text, or None after reporting why it cannot be sent."""
        try:
            validate_path(path)
            return decode_content(local.file.read_bytes(), source=str(local.file))
        except MemdirError as error:
            self.report.invalid.append(Problem(path, error.message))
        except OSError as exc:
            self.report.invalid.append(Problem(path, f"cannot read it: {exc.strerror}"))
        return None

    def run(self) -> None:
        state, report = self.state, self.report
        local = self._scan()
        listing = self.client.checkout_files(self.prefix)
        remote = _visible(self.prefix, listing.files)
        report.revision = max(listing.revision, state.revision)
        paths = sorted(set(state.files) | set(local) | set(remote) | set(state.conflicts))
        creates: list[str] = []
        for path in paths:
            b = state.files.get(path)
            base = None if b is None else b.sha256
            mine = local.get(path)
            here = None if mine is None else mine.sha256
            theirs = remote.get(path)
            there = None if theirs is None else theirs.sha256
            if path in state.conflicts:
                if self._theirs_file(path).exists():
                    report.conflicts.append(
                        Problem(path, _UNRESOLVED.format(name=self._name(path)))
                    )
                    continue
                del state.conflicts[path]  # resolved: the base is the side merged against
            pending = state.proposals.get(path)
            if pending is not None:
                if there == pending.sha256 and there != base:
                    self.adopt.append(path)  # accepted as proposed
                    continue
                if here == pending.sha256 and there == base:
                    report.proposals.append(Problem(path, self._waiting(pending), pending.proposal))
                    continue
            if here == base:
                if there != base:
                    self.pulls.append(path)
            elif there == base:
                if base is None:
                    creates.append(path)
                else:
                    assert theirs is not None
                    self._local_change(path, mine, base, theirs.rights)
            elif here == there:
                self.adopt.append(path)
            else:
                self.clashes.append(path)
        self._creates(creates, local)
        self._renames()
        commits = self._send()
        self._propose()
        self._bring(remote)
        for path in paths:  # rights can change without content: keep the modes in step
            b, theirs = state.files.get(path), remote.get(path)
            if b is not None and theirs is not None and b.rights != theirs.rights:  # noqa: SIM102
                if b.sha256 == theirs.sha256:
                    state.files[path] = Base(b.sha256, b.version, theirs.rights)
                    self._chmod(path, theirs.rights)
        for result in commits:
            report.commits.append(result.commit)
            report.revision = max(report.revision, result.revision)
        state.revision = report.revision

    def _waiting(self, pending: Pending) -> str:
        """What became of a proposal this checkout queued (asked once per sync and file)."""
        try:
            status = self.client.proposal(pending.proposal).status
        except MemdirError:
            status = "unknown"
        if status in ("open", "conflicted"):
            return f"still waits for review as proposal {pending.proposal} ({status})"
        return (
            f"proposal {pending.proposal} was {status}; your text is kept here and not sent "
            "again: change the file to propose anew"
        )

    # --- deciding ----------------------------------------------------------------------------

    def _local_change(self, path: str, mine: _Local | None, base: str, rights: str) -> None:
        if rights == "read":
            self.report.forbidden.append(Problem(path, _READ_ONLY))
            return
        if mine is None:
            self._add(Delete(path, if_match=base), rights, 0)
            return
        text = self._content(path, mine)
        if text is not None:
            self._add(Write(path, text, if_match=base), rights, len(text))

    def _creates(self, paths: list[str], local: dict[str, _Local]) -> None:
        valid: list[str] = []
        for path in paths:
            try:
                validate_path(path)
            except MemdirError as error:
                self.report.invalid.append(Problem(path, error.message))
                continue
            valid.append(path)
        if not valid:
            return
        owner = self.client.acts_as_owner
        rights = ["write"] * len(valid) if owner else self.client.path_rights(valid)
        for path, right in zip(valid, rights, strict=True):
            if right is None or right == "read":
                why = _NO_CREATE if right is None else _READ_ONLY
                self.report.forbidden.append(Problem(path, why))
                continue
            text = self._content(path, local[path])
            if text is not None:
                self._add(Write(path, text, if_absent=True), right, len(text))

    def _add(self, op: Operation, rights: str, size: int) -> None:
        if rights == "write":
            self.direct.append((op, size))
        else:
            self.review.append(op)

    def _renames(self) -> None:
        """A deletion and a create of the same content in one sync are a rename."""
        deleted: dict[str, list[int]] = {}
        created: dict[str, list[int]] = {}
        for index, (op, _) in enumerate(self.direct):
            if isinstance(op, Delete) and op.if_match is not None:
                deleted.setdefault(op.if_match, []).append(index)
            elif isinstance(op, Write) and op.if_absent:
                created.setdefault(file_sha256(op.content.encode()), []).append(index)
        replaced: dict[int, Operation | None] = {}
        for sha, gone in deleted.items():
            new = created.get(sha, [])
            if len(gone) == 1 and len(new) == 1:
                old_op, new_op = self.direct[gone[0]][0], self.direct[new[0]][0]
                replaced[gone[0]] = Rename(old_op.path, new_op.path, if_match=sha)
                replaced[new[0]] = None
        if replaced:
            self.direct = [
                (replaced.get(i, op) or op, size)
                for i, (op, size) in enumerate(self.direct)
                if not (i in replaced and replaced[i] is None)
            ]

    # --- sending -----------------------------------------------------------------------------

    def _send(self) -> list[CommitResult]:
        chunks: list[list[Operation]] = [[]]
        size = 0
        for op, length in self.direct:
            if chunks[-1] and (len(chunks[-1]) >= MAX_OPS_PER_COMMIT
                               or size + length > MAX_BYTES_PER_COMMIT):  # fmt: skip
                chunks.append([])
                size = 0
            chunks[-1].append(op)
            size += length
        results: list[CommitResult] = []
        for ops in chunks:
            if not ops:
                continue
            try:
                result = self.client.commit(ops, provenance=self.provenance)
            except Proposed as queued:  # the screening quarantined it: all of it waits
                self._queued(ops, str(queued.details.get("proposal")), queued.message)
                continue
            results.append(result)
            self._record(result)
        return results

    def _record(self, result: CommitResult) -> None:
        files = self.state.files
        for r in result.results:
            if r.operation == "deleted":
                files.pop(r.path, None)
            else:
                if r.old_path is not None:
                    files.pop(r.old_path, None)
                assert r.sha256 is not None
                files[r.path] = Base(r.sha256, r.version, "write")
            self.state.proposals.pop(r.path, None)
            self.report.sent.append(Change(r.path, r.operation, r.old_path))

    def _propose(self) -> None:
        """Each change that needs review goes on its own, so each file gets its proposal."""
        for op in self.review:
            try:
                result = self.client.commit([op], provenance=self.provenance)
            except Proposed as queued:
                self._queued([op], str(queued.details.get("proposal")), queued.message)
            except PreconditionFailed as error:
                self.report.forbidden.append(Problem(op.path, error.message))
            else:  # the rights grew since the listing: it applied after all
                self.report.commits.append(result.commit)
                self._record(result)

    def _queued(self, ops: list[Operation], proposal: str, message: str) -> None:
        for op in ops:
            sent = None if isinstance(op, Delete) else file_sha256(_text(op).encode())
            self.state.proposals[op.path] = Pending(proposal, sent)
            self.report.proposals.append(Problem(op.path, message, proposal))

    # --- pulling and conflicts -----------------------------------------------------------------

    def _bring(self, remote: dict[str, CheckoutFile]) -> None:
        state = self.state
        for path in self.adopt:
            theirs = remote.get(path)
            state.proposals.pop(path, None)
            if theirs is None:
                state.files.pop(path, None)
            else:
                state.files[path] = Base(theirs.sha256, theirs.version, theirs.rights)
        wanted = [p for p in self.pulls + self.clashes if p in remote]
        contents = self._fetch(wanted, remote)
        for path in self.pulls:
            self._pull(path, contents.get(path))
        for path in self.clashes:
            self._clash(path, contents.get(path))

    def _fetch(self, paths: list[str], remote: dict[str, CheckoutFile]) -> dict[str, CheckoutFile]:
        """Current content of ``paths`` (a file deleted meanwhile is left out)."""
        if len(paths) > BULK_PULL:
            listing = self.client.checkout_files(self.prefix, content=True)
            wanted = set(paths)
            return {f.path: f for f in listing.files if f.path in wanted}
        out: dict[str, CheckoutFile] = {}
        for path in paths:
            try:
                view = self.client.read(path)
            except NotFound:
                continue
            out[path] = CheckoutFile(path, view.sha256, view.version, view.size,
                                     remote[path].rights, view.content)  # fmt: skip
        return out

    def _pull(self, path: str, theirs: CheckoutFile | None) -> None:
        file = local_path(self.directory, self.prefix, path)
        b = self.state.files.get(path)
        expected = None if b is None else b.sha256
        if theirs is None:
            if b is None:
                return
            if _remove_checked(file, expected):
                self.state.files.pop(path, None)
                self.report.pulled.append(Change(path, "deleted"))
                _prune(file.parent, self.directory)
            else:
                self._clash(path, None)
            return
        data = (theirs.content or "").encode()
        if _replace_checked(file, data, expected, theirs.rights):
            self.state.files[path] = Base(theirs.sha256, theirs.version, theirs.rights)
            self.report.pulled.append(Change(path, "created" if b is None else "modified"))
        else:
            self._clash(path, theirs)

    def _clash(self, path: str, theirs: CheckoutFile | None) -> None:
        """Keep both sides: ours in place, theirs beside it; the base becomes theirs, so the
        resolved file is sent with ``If-Match`` on what the user merged against."""
        state = self.state
        name = self._name(path)
        if theirs is None:
            state.files.pop(path, None)
            state.conflicts[path] = Conflict(None)
            message = _DELETED_THERE.format(name=name)
        else:
            target = self._theirs_file(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            _atomic_write(target, (theirs.content or "").encode(), 0o644)
            state.files[path] = Base(theirs.sha256, theirs.version, theirs.rights)
            state.conflicts[path] = Conflict(theirs.sha256)
            message = _BOTH_CHANGED.format(name=name)
        state.proposals.pop(path, None)
        self.report.conflicts.append(Problem(path, message))

    def _theirs_file(self, path: str) -> Path:
        file = local_path(self.directory, self.prefix, path)
        return file.with_name(file.name + THEIRS)

    def _name(self, path: str) -> str:
        return local_path(self.directory, self.prefix, path).relative_to(self.directory).as_posix()

    def _chmod(self, path: str, rights: str) -> None:
        with contextlib.suppress(OSError):
            os.chmod(local_path(self.directory, self.prefix, path), _mode(rights))


def _text(op: Operation) -> str:
    return op.content if isinstance(op, Write) else ""


_UNRESOLVED = (
    "conflict not resolved yet: merge {name}.theirs into {name}, delete {name}.theirs, then run "
    "`memdir sync` again"
)
_BOTH_CHANGED = (
    "changed here and in the store: your text is in {name}, the store's in {name}.theirs; merge "
    "them into {name}, delete {name}.theirs and sync again"
)
_DELETED_THERE = (
    "you changed it but it was deleted in the store; your text stays in {name}: sync again to "
    "re-create it, or delete {name} to accept the deletion"
)
_READ_ONLY = "you may only read this file; your change is kept here but was not sent"
_NO_CREATE = "you may not create files here; the file is kept here but was not sent"


# --- files on disk ---------------------------------------------------------------------------


def _atomic_write(target: Path, data: bytes, mode: int) -> None:
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _create(target: Path, data: bytes, mode: int) -> None:
    """A new file in a directory the checkout made (never replaces one: ``O_EXCL``). No
    temporary and rename as for a replacement: the checkout is not one until its state file
    is written, after every file."""
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        _write_all(fd, data)
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _holds(file: Path, expected: str | None) -> bool:
    try:
        return file_sha256(file.read_bytes()) == expected
    except FileNotFoundError:
        return expected is None


def _replace_checked(target: Path, data: bytes, expected: str | None, rights: str) -> bool:
    """Put ``data`` at ``target`` only if it still holds ``expected`` (None: absent).

    A hard link keeps the old file's inode in reach: if a writer appended to it after the
    check but before the rename, the link shows it and the old file is put back (False).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=TEMP_PREFIX, dir=target.parent)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    os.chmod(temp, _mode(rights))
    if expected is None:
        try:
            os.link(temp, target)  # never clobbers a file created here meanwhile
        except FileExistsError:
            return False
        finally:
            os.unlink(temp)
        return True
    keep = target.with_name(f"{TEMP_PREFIX}keep-{target.name}")
    try:
        os.link(target, keep)
    except FileNotFoundError:
        os.unlink(temp)
        return False
    try:
        if not _holds(keep, expected):
            os.unlink(temp)
            return False
        os.replace(temp, target)
        if not _holds(keep, expected):  # an append raced the rename: put it back
            os.replace(keep, target)
            return False
        return True
    finally:
        keep.unlink(missing_ok=True)


def _remove_checked(target: Path, expected: str | None) -> bool:
    """Delete ``target`` only if it still holds ``expected`` (see :func:`_replace_checked`)."""
    keep = target.with_name(f"{TEMP_PREFIX}keep-{target.name}")
    try:
        os.link(target, keep)
    except FileNotFoundError:
        return True
    try:
        if not _holds(keep, expected):
            return False
        target.unlink()
        if not _holds(keep, expected):
            os.link(keep, target)
            return False
        return True
    finally:
        keep.unlink(missing_ok=True)


def _prune(directory: Path, top: Path) -> None:
    """Remove directories left empty by pulled deletions, up to the checkout's top."""
    while directory != top and top in directory.parents:
        try:
            directory.rmdir()
        except OSError:
            return
        directory = directory.parent
