"""The one entry point every surface calls.

``MemoryService`` methods take the acting :class:`~memdir.core.model.Principal` first: the
actor of every commit is that principal, never a name the caller typed. The flow of a write is
principal → (policy, next layer) → guard → CAS → commit → event; this module owns it, the core
decides, the storage stores.

Reads run in one reader snapshot; writes in one writer transaction whose first statement
increments the store's revision counter (taking its lock), so a commit's operations see one
consistent state and either all apply or none does.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import asdict

from memdir.core.edits import line_slice
from memdir.core.errors import Conflict, InvalidInput, NotFound
from memdir.core.globs import compile_glob, literal_prefix
from memdir.core.model import (
    CommitResult,
    Delete,
    Entry,
    FileView,
    Insert,
    Operation,
    Principal,
    Provenance,
    Rename,
    SearchHit,
    StoreInfo,
    StrReplace,
    Write,
    validate_store_name,
)
from memdir.core.paths import normalize_prefix, validate_path
from memdir.history import HistoryMixin
from memdir.rows import aware, entry, utcnow, view
from memdir.storage.repository import Repository, Row

__all__ = ["MemoryService"]


class MemoryService(HistoryMixin):
    """Store operations over one database, for any principal.

    Construct with ``MemoryService(Database(url), max_file_bytes=...)``; see
    :class:`~memdir.base.ServiceBase`.
    """

    # --- stores ---------------------------------------------------------------------------

    def create_store(self, principal: Principal, name: str, *, exist_ok: bool = False) -> StoreInfo:
        validate_store_name(name)
        with self.db.write() as repo:
            if repo.store(name) is not None:
                if exist_ok:
                    return self._store_info(repo, name)
                raise Conflict(f"store {name!r} already exists", store=name)
            repo.create_store(name, utcnow())
            return self._store_info(repo, name)

    def list_stores(self, principal: Principal) -> list[StoreInfo]:
        with self.db.read() as repo:
            return [self._store_row_info(r) for r in repo.stores()]

    def store_info(self, principal: Principal, name: str) -> StoreInfo:
        with self.db.read() as repo:
            return self._store_info(repo, name)

    def archive_store(self, principal: Principal, name: str) -> StoreInfo:
        """Make a store read-only for good (there is no unarchive)."""
        with self.db.write() as repo:
            row = self._store_row(repo, name)
            if row.archived_at is None:
                repo.archive_store(row.id, utcnow())
            return self._store_info(repo, name)

    def delete_store(self, principal: Principal, name: str) -> None:
        """Delete a store and everything in it: files, versions, commits."""
        with self.db.write() as repo:
            repo.delete_store(self._store_row(repo, name).id)

    def _store_info(self, repo: Repository, name: str) -> StoreInfo:
        row = self._store_row(repo, name)
        return StoreInfo(
            name=row.name,
            revision=row.revision,
            created_at=aware(row.created_at),
            archived_at=aware(row.archived_at) if row.archived_at else None,
            files=repo.count_heads(row.id),
        )

    @staticmethod
    def _store_row_info(row: Row) -> StoreInfo:
        return StoreInfo(
            name=row.name,
            revision=row.revision,
            created_at=aware(row.created_at),
            archived_at=aware(row.archived_at) if row.archived_at else None,
            files=row.files,
        )

    # --- writes ---------------------------------------------------------------------------

    def commit(
        self,
        principal: Principal,
        store: str,
        operations: Sequence[Operation],
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Apply ``operations`` atomically, each against its own precondition.

        All apply or none does. With ``provenance.idempotency_key``, a repeat of the same
        request by the same principal returns the first result (``replayed=True``); the same
        key with a different request is an :class:`IdempotencyMismatch`.
        """
        if not operations:
            raise InvalidInput("a commit needs at least one operation")
        request = ["commit", [asdict(op) for op in operations]]
        return self._run(
            principal, store, provenance, request, lambda w: [w.apply(op) for op in operations]
        )

    def write(
        self,
        principal: Principal,
        store: str,
        path: str,
        content: str,
        *,
        if_match: str | None = None,
        if_absent: bool = False,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        """Create (``if_absent``) or overwrite (``if_match``) a file."""
        op = Write(path, content, if_match=if_match, if_absent=if_absent)
        return self.commit(principal, store, [op], provenance)

    def str_replace(
        self,
        principal: Principal,
        store: str,
        path: str,
        old: str,
        new: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = StrReplace(path, old, new, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    def insert(
        self,
        principal: Principal,
        store: str,
        path: str,
        line: int,
        text: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = Insert(path, line, text, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    def delete(
        self,
        principal: Principal,
        store: str,
        path: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        return self.commit(principal, store, [Delete(path, if_match=if_match)], provenance)

    def rename(
        self,
        principal: Principal,
        store: str,
        path: str,
        new_path: str,
        *,
        if_match: str | None = None,
        provenance: Provenance | None = None,
    ) -> CommitResult:
        op = Rename(path, new_path, if_match=if_match)
        return self.commit(principal, store, [op], provenance)

    # --- reads ----------------------------------------------------------------------------

    def read(
        self,
        principal: Principal,
        store: str,
        path: str,
        *,
        version: int | None = None,
        lines: tuple[int, int | None] | None = None,
    ) -> FileView:
        """A file at its current version, or at ``version``; ``lines`` = (first, last|None)."""
        validate_path(path)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            found = self._read(repo, row.id, path, version)
        if lines is not None:
            content = line_slice(found.content, lines[0], lines[1])
            found = FileView(**{**asdict(found), "content": content})
        return found

    def iter_files(self, principal: Principal, store: str, prefix: str = "/") -> Iterator[FileView]:
        """Every live file under ``prefix`` with its content, in path order, one snapshot."""
        directory = normalize_prefix(prefix)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            for head in repo.heads_under(row.id, directory, with_content=True):
                yield view(head, head.content)

    def ls(
        self, principal: Principal, store: str, prefix: str = "/", *, depth: int | None = 1
    ) -> list[Entry]:
        """The tree under ``prefix``: files, and directories summarised by file count.

        ``depth`` 1 lists the immediate children; None lists every file recursively.
        """
        directory = normalize_prefix(prefix)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            if directory != "/":
                single = repo.head(row.id, directory)
                if single is not None:
                    return [entry(single)]
            entries = self._tree(repo.heads_under(row.id, directory), directory, depth)
        if not entries and directory != "/":
            raise NotFound(f"{directory} does not exist; list the parent with `memdir ls`")
        return entries

    @staticmethod
    def _tree(rows: Iterator[Row], directory: str, depth: int | None) -> list[Entry]:
        base = 0 if directory == "/" else directory.count("/")
        dirs: dict[str, int] = {}
        out: list[Entry] = []
        for head in rows:
            parts = head.path.split("/")
            if depth is None or len(parts) - 1 - base <= depth:
                out.append(entry(head))
            else:
                name = "/".join(parts[: base + 1 + depth])
                dirs[name] = dirs.get(name, 0) + 1
        out.extend(Entry(path=p, kind="dir", files=n) for p, n in dirs.items())
        return sorted(out, key=lambda e: e.path)

    def glob(self, principal: Principal, store: str, pattern: str) -> list[str]:
        """Paths of live files matching a glob (``*``, ``?``, ``[...]``, ``**`` for any depth)."""
        regex = compile_glob(pattern)
        start = literal_prefix(pattern)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            return [h.path for h in repo.heads_under(row.id, start) if regex.match(h.path)]

    def search(
        self, principal: Principal, store: str, query: str, *, prefix: str = "/", limit: int = 10
    ) -> list[SearchHit]:
        """Ranked full-text search over current content (any-term, stemmed, BM25)."""
        from memdir.search.query import parse_query

        directory = normalize_prefix(prefix)
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, received {limit}")
        parsed = parse_query(query)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            rows = repo.search(row.id, parsed, directory, limit)
        return [
            SearchHit(
                path=r.path,
                score=float(r.score),
                snippet=r.snippet,
                sha256=r.sha256,
                version=r.version,
            )
            for r in rows
        ]
