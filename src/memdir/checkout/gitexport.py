"""``memdir export --git DIR``: the store's history as a git repository (dulwich, no git CLI).

One git commit per store commit, oldest first, on branch ``main``: author and committer are
the commit's actor (``agent:ci-bot <agent.ci-bot@memdir>``) at its time; the message is the
commit's reason, then trailers with its provenance — ``Memdir-Revision``, ``Memdir-Commit``,
``Session``, ``Transcript``, ``Source-Kind``, ``Proposal``, ``Dream-Run``, ``Redacted`` — so
``git log --format='%(trailers:key=Session)'`` finds a session's changes. A rename is a
rename (same blob, new path), so ``git log --follow`` follows it.

Only what the acting principal may read is exported: commits with no readable change are left
out, and unreadable files never enter a tree. Redacted content was deleted from the store and
never reaches git: a redacted version is written as a one-line placeholder; purged history no
longer exists to export. Re-running appends the commits after the last one exported (its
``Memdir-Revision``); if content already exported has been redacted since, appending cannot
remove it, so the export refuses and says to export afresh into a new directory.

The working tree is checked out at the new head (the directory is a mirror: edits there are
overwritten by the next export; use ``memdir checkout`` to edit).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memdir.core.errors import Conflict, InvalidInput, MemdirError
from memdir.core.model import CommitInfo, Principal, VersionInfo
from memdir.core.paths import normalize_prefix
from memdir.service import MemoryService

__all__ = ["GitExportReport", "export_git"]

BRANCH = b"refs/heads/main"
STATE = "memdir-export.json"
PAGE = 1000


@dataclass(frozen=True)
class GitExportReport:
    """What an export did: commits added now, the store revision and git commit at the head."""

    directory: str
    added: int
    total: int
    revision: int
    head: str | None


def _placeholder(v: VersionInfo) -> bytes:
    return (f"[redacted: version {v.version} of {v.path} was redacted in memdir; its content "
            "is gone]\n").encode()  # fmt: skip


def _one_line(value: str) -> str:
    return " ".join(value.split())


def _identity(actor: str) -> bytes:
    email = actor.replace(":", ".") + "@memdir"
    return f"{actor} <{email}>".encode()


class _Trees:
    """The current tree as directories of entries; only changed directories are rebuilt."""

    def __init__(self) -> None:
        from dulwich.objects import Tree

        self.dirs: dict[str, dict[bytes, tuple[int, bytes]]] = {"": {}}
        self.ids: dict[str, bytes] = {"": Tree().id}
        self.dirty: set[str] = set()
        self.new: list[Any] = []

    def load(self, store: Any, tree_id: bytes, name: str = "") -> None:
        """Fill from an existing tree (resuming an export)."""
        tree = store[tree_id]
        entries: dict[bytes, tuple[int, bytes]] = {}
        for item in tree.items():
            entries[item.path] = (item.mode, item.sha)
            if item.mode == 0o040000:
                self.load(store, item.sha, f"{name}/{item.path.decode()}".lstrip("/"))
        self.dirs[name] = entries
        self.ids[name] = tree_id

    def blob_at(self, path: str) -> bytes | None:
        directory, _, leaf = path.rpartition("/")
        entry = self.dirs.get(directory, {}).get(leaf.encode())
        return None if entry is None else entry[1]

    def put(self, path: str, blob: bytes) -> None:
        directory, _, leaf = path.rpartition("/")
        parts = directory.split("/") if directory else []
        for depth in range(len(parts) + 1):
            self.dirty.add("/".join(parts[:depth]))
            self.dirs.setdefault("/".join(parts[:depth]), {})
        self.dirs[directory][leaf.encode()] = (0o100644, blob)

    def remove(self, path: str) -> None:
        directory, _, leaf = path.rpartition("/")
        if self.dirs.get(directory, {}).pop(leaf.encode(), None) is None:
            return
        parts = directory.split("/") if directory else []
        for depth in range(len(parts) + 1):
            self.dirty.add("/".join(parts[:depth]))

    def root(self) -> bytes:
        """Rebuild the dirty directories, deepest first; returns the root tree id."""
        from dulwich.objects import Tree

        for name in sorted(self.dirty, key=lambda d: -d.count("/") - (1 if d else 0)):
            entries = self.dirs.get(name, {})
            parent, _, leaf = name.rpartition("/")
            if not entries and name:
                self.dirs.pop(name, None)
                self.ids.pop(name, None)
                self.dirs.get(parent, {}).pop(leaf.encode(), None)
                continue
            tree = Tree()
            for entry_name, (mode, sha) in entries.items():
                tree.add(entry_name, mode, sha)  # type: ignore[arg-type]
            self.new.append(tree)
            self.ids[name] = tree.id
            if name:
                self.dirs.setdefault(parent, {})[leaf.encode()] = (0o040000, tree.id)
        self.dirty.clear()
        return self.ids[""]


def _history(svc: MemoryService, principal: Principal, store: str, prefix: str) -> list[CommitInfo]:
    """Every commit the principal may see under ``prefix``, oldest first."""
    found: list[CommitInfo] = []
    before: int | None = None
    while True:
        page = svc.history(principal, store, prefix=None if prefix == "/" else prefix,
                           before_revision=before, limit=PAGE)  # fmt: skip
        found.extend(page)
        if len(page) < PAGE:
            break
        before = page[-1].revision
    found.reverse()
    return found


def _under(prefix: str, path: str | None) -> str | None:
    """``path`` relative to ``prefix`` (the git path), or None outside it."""
    if path is None:
        return None
    if prefix == "/":
        return path[1:]
    return path[len(prefix) + 1 :] if path.startswith(prefix + "/") else None


def export_git(
    svc: MemoryService, principal: Principal, store: str, dest: Path, *, prefix: str = "/"
) -> GitExportReport:
    """Write (or extend) a git repository at ``dest`` with the store's history."""
    from dulwich.errors import NotGitRepository
    from dulwich.objects import Blob, Commit
    from dulwich.repo import Repo

    prefix = normalize_prefix(prefix)
    dest = Path(dest)
    meta = {"store": store, "principal": principal.id, "prefix": prefix}
    fresh = not dest.exists() or (dest.is_dir() and not any(dest.iterdir()))
    if fresh:
        dest.mkdir(parents=True, exist_ok=True)
        repo = Repo.init(str(dest))
        state: dict[str, Any] = {**meta, "revision": 0, "commits": 0, "redacted": []}
    else:
        try:
            repo = Repo(str(dest))
            state = json.loads(Path(repo.controldir(), STATE).read_text(encoding="utf-8"))
        except (OSError, ValueError, NotGitRepository) as exc:  # not ours to extend
            raise InvalidInput(
                f"{dest} exists and is not a memdir git export ({exc}); export into a new or "
                "empty directory",
                directory=str(dest),
            ) from None
        if {k: state.get(k) for k in meta} != meta:
            raise InvalidInput(
                f"{dest} is an export of store {state.get('store')!r} under "
                f"{state.get('prefix')!r} as {state.get('principal')}; export this one into a "
                "new directory",
                directory=str(dest),
            )
    try:
        return _export(svc, principal, store, prefix, dest, repo, state, Blob, Commit)
    finally:
        repo.close()


def _export(
    svc: MemoryService,
    principal: Principal,
    store: str,
    prefix: str,
    dest: Path,
    repo: Any,
    state: dict[str, Any],
    Blob: Any,
    Commit: Any,
) -> GitExportReport:
    done = int(state["revision"])
    commits = _history(svc, principal, store, prefix)
    redacted = sorted(
        [v.file_id, v.version]
        for c in commits
        if c.revision <= done
        for v in c.changes
        if v.redacted and _under(prefix, v.path) is not None
    )
    if any(r not in state["redacted"] for r in redacted):
        raise Conflict(
            f"content exported to {dest} has been redacted in the store since; a git history "
            "cannot be rewritten by appending, so export afresh into a new directory (and "
            "delete this one, which still holds the content)",
            directory=str(dest),
        )
    new = [c for c in commits if c.revision > done]
    trees = _Trees()
    parent: bytes | None = None
    if BRANCH in repo.refs:
        parent = repo.refs[BRANCH]
        trees.load(repo.object_store, repo.object_store[parent].tree)
    objects: list[Any] = []
    runs: dict[str, str | None] = {}
    for batch in _batches(new, PAGE):
        refs = [(v.file_id, v.version) for c in batch for v in c.changes if v.sha256 is not None]
        contents = svc.version_contents(principal, store, refs)
        for info in batch:
            marks: list[str] = []
            for v in info.changes:
                path = _under(prefix, v.path)
                old = _under(prefix, v.old_path)
                if old is not None and old != path:
                    trees.remove(old)
                if path is None:
                    continue
                if v.operation == "deleted":
                    trees.remove(path)
                    continue
                content = contents.get((v.file_id, v.version))
                if content is None:
                    data = _placeholder(v)
                    if v.redacted:
                        marks.append(f"{v.path}@{v.version}")
                else:
                    data = content.encode("utf-8")
                blob = Blob.from_string(data)
                objects.append(blob)
                trees.put(path, blob.id)
            commit = Commit()
            commit.tree = trees.root()
            commit.parents = [parent] if parent is not None else []
            commit.author = commit.committer = _identity(info.actor)
            stamp = int(info.created_at.astimezone(dt.UTC).timestamp())
            commit.author_time = commit.commit_time = stamp
            commit.author_timezone = commit.commit_timezone = 0
            commit.encoding = b"UTF-8"
            commit.message = _message(svc, principal, store, info, marks, runs).encode()
            objects.extend(trees.new)
            trees.new.clear()
            objects.append(commit)
            parent = commit.id
    if objects:
        repo.object_store.add_objects([(o, None) for o in objects])
    if parent is not None and new:
        repo.refs[BRANCH] = parent
        repo.refs.set_symbolic_ref(b"HEAD", BRANCH)
        from dulwich import porcelain

        porcelain.reset(repo, "hard", parent)
    total = int(state.get("commits", 0)) + len(new)
    state.update(
        revision=max([done] + [c.revision for c in new]),
        commits=total,
        redacted=sorted(
            [v.file_id, v.version]
            for c in commits
            for v in c.changes
            if v.redacted and _under(prefix, v.path) is not None
        ),
    )
    Path(repo.controldir(), STATE).write_text(json.dumps(state), encoding="utf-8")
    head = None if parent is None else parent.decode()
    return GitExportReport(str(dest), len(new), total, int(state["revision"]), head)


def _batches(items: list[CommitInfo], size: int) -> Iterator[list[CommitInfo]]:
    batch: list[CommitInfo] = []
    versions = 0
    for item in items:
        batch.append(item)
        versions += len(item.changes)
        if versions >= size:
            yield batch
            batch, versions = [], 0
    if batch:
        yield batch


def _message(
    svc: MemoryService,
    principal: Principal,
    store: str,
    info: CommitInfo,
    redacted: list[str],
    runs: dict[str, str | None],
) -> str:
    subject = info.reason.strip() if info.reason and info.reason.strip() else (
        f"memdir revision {info.revision}")  # fmt: skip
    trailers = [("Memdir-Revision", str(info.revision)), ("Memdir-Commit", info.id)]
    for key, value in (("Session", info.session), ("Transcript", info.transcript),
                       ("Source-Kind", info.source_kind), ("Proposal", info.proposal)):  # fmt: skip
        if value:
            trailers.append((key, _one_line(value)))
    if info.proposal:
        if info.proposal not in runs:
            try:
                runs[info.proposal] = svc.get_proposal(principal, store, info.proposal).run
            except MemdirError:
                runs[info.proposal] = None
        run = runs[info.proposal]
        if run:
            trailers.append(("Dream-Run", run))
    trailers.extend(("Redacted", r) for r in redacted)
    return subject + "\n\n" + "".join(f"{k}: {v}\n" for k, v in trailers)
