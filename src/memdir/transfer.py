"""Export a store (or a prefix) to a plain directory of markdown files, and import one back.

The round trip is lossless for paths, content and frontmatter: memory paths obey file-system
rules already (segments of at most 255 bytes, no NUL, a path is never both file and
directory), and content is written as its exact UTF-8 bytes. Import reads every regular file,
refuses what memdir would refuse (non-UTF-8, oversize, non-NFC names) before writing anything,
and applies the whole directory as one commit: it lands completely or not at all.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memdir.core.content import decode_content
from memdir.core.errors import Conflict, InvalidInput
from memdir.core.model import Operation, Principal, Provenance, Write
from memdir.core.paths import normalize_prefix, validate_path
from memdir.service import MemoryService

__all__ = ["ImportReport", "export_tree", "import_files", "import_tree"]


def export_tree(
    svc: MemoryService, principal: Principal, store: str, prefix: str, dest: Path
) -> int:
    """Write every live file under ``prefix`` below ``dest``; returns the number written.

    ``dest`` must not exist or be an empty directory, so an export never mixes with stale
    files. Paths are written relative to the root (a prefix keeps its directories).
    """
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise InvalidInput(
            f"export destination {dest} exists and is not an empty directory; choose a new one",
            dest=str(dest),
        )
    count = 0
    for view in svc.iter_files(principal, store, prefix):
        target = dest.joinpath(*view.path[1:].split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(view.content.encode("utf-8"))
        count += 1
    dest.mkdir(parents=True, exist_ok=True)
    return count


@dataclass(frozen=True)
class ImportReport:
    """What an import did: files created, overwritten, left as they were; the commit."""

    created: int
    updated: int
    unchanged: int
    commit: str | None
    revision: int | None


def _scan(source: Path, prefix: str) -> list[tuple[str, Path]]:
    if not source.is_dir():
        raise InvalidInput(f"import source {source} is not a directory", source=str(source))
    found: list[tuple[str, Path]] = []
    for root, dirs, names in os.walk(source):
        dirs.sort()
        for name in sorted(names):
            file = Path(root, name)
            if not file.is_file():
                continue
            relative = file.relative_to(source).as_posix()
            found.append(((prefix.rstrip("/") + "/" + relative), file))
    return found


def import_tree(
    svc: MemoryService,
    principal: Principal,
    store: str,
    source: Path,
    *,
    prefix: str = "/",
    overwrite: bool = False,
    provenance: Provenance | None = None,
) -> ImportReport:
    """Import every regular file below ``source`` under ``prefix`` as one commit.

    A file whose path exists with other content is refused unless ``overwrite`` (which then
    overwrites with ``if_match`` on the content just read, so a concurrent change still fails
    the whole import). Identical files are left alone.
    """
    prefix = normalize_prefix(prefix)
    files = [
        (path, decode_content(file.read_bytes(), source=str(file)))
        for path, file in _scan(source, prefix)
    ]
    return import_files(svc, principal, store, files, overwrite=overwrite, provenance=provenance)


def import_files(
    svc: MemoryService,
    principal: Principal,
    store: str,
    files: Sequence[tuple[str, str]],
    *,
    overwrite: bool = False,
    provenance: Provenance | None = None,
) -> ImportReport:
    """Import ``(store path, content)`` pairs as one commit, as :func:`import_tree` does."""
    operations: list[Operation] = []
    created = updated = unchanged = 0
    clashes: list[str] = []
    common = os.path.commonpath([path for path, _ in files]) if files else "/"
    if any(path == common for path, _ in files):  # one file: its directory
        common = common.rsplit("/", 1)[0] or "/"
    current = {v.path: v.sha256 for v in svc.iter_files(principal, store, common)}
    from memdir.core.content import check_content, sha256_hex

    for path, content in files:
        validate_path(path)
        check_content(content, svc.max_file_bytes)
        sha = sha256_hex(content)
        existing = current.get(path)
        if existing == sha:
            unchanged += 1
        elif existing is None:
            operations.append(Write(path, content, if_absent=True))
            created += 1
        elif overwrite:
            operations.append(Write(path, content, if_match=existing))
            updated += 1
        else:
            clashes.append(path)
    if clashes:
        raise Conflict(
            f"{len(clashes)} files exist with other content (first: {clashes[0]}); nothing "
            "was imported — pass --overwrite to replace them",
            paths=clashes[:20],
        )
    provenance = provenance or Provenance(source_kind="import")
    if not operations:
        return ImportReport(created, updated, unchanged, None, None)
    result = svc.commit(principal, store, operations, provenance)
    return ImportReport(created, updated, unchanged, result.commit, result.revision)
