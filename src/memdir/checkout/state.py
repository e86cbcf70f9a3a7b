"""A checkout's state file and the mapping between memory paths and files on disk.

The state file ``.memdir-checkout.json`` sits at the top of the checkout. It records, for each
file, the sha256 and version the directory was last in step with (the *base*: what a sync
sends as ``If-Match``), the caller's rights on it, the store revision the checkout has seen,
the open conflicts and the proposals a sync queued. It never holds a token or any content.

It is written atomically (a temporary file renamed over it), so a sync interrupted at any
point leaves either the old state or the new one; the old one is always safe, because the
base only ever decides *whether* a change is sent, and the store's compare-and-swap decides
whether it lands.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from memdir.core.errors import InvalidInput

__all__ = [
    "STATE_FILE",
    "THEIRS",
    "Base",
    "Conflict",
    "Pending",
    "State",
    "file_sha256",
    "ignored",
    "local_path",
    "memory_path",
    "scan",
]

STATE_FILE = ".memdir-checkout.json"
#: The suffix of the store's side of a conflict, beside the local file (``a.md.theirs``).
THEIRS = ".theirs"
FORMAT = 1
#: Temporary files a sync makes next to the files it replaces (never synced).
TEMP_PREFIX = ".memdir-tmp-"
#: Names editors and tools leave beside files for a moment: never synced.
_EDITOR_SUFFIXES = ("~", ".swp", ".swo", ".swx", ".tmp")


@dataclass(frozen=True)
class Base:
    """The store's file a local file was last in step with."""

    sha256: str
    version: int
    rights: str = "write"


@dataclass(frozen=True)
class Conflict:
    """An open conflict at a path: ``theirs`` is the store's sha256 (None: deleted there).

    While ``path + .theirs`` exists the path is held back; deleting it resolves the conflict.
    """

    theirs: str | None


@dataclass(frozen=True)
class Pending:
    """A change a sync queued as a proposal: the sha256 sent (None: a deletion)."""

    proposal: str
    sha256: str | None


@dataclass
class State:
    """Everything a sync needs to know about a checkout besides the files themselves."""

    store: str
    prefix: str
    source: dict[str, Any]
    revision: int = 0
    files: dict[str, Base] = field(default_factory=dict)
    conflicts: dict[str, Conflict] = field(default_factory=dict)
    proposals: dict[str, Pending] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path) -> State:
        path = directory / STATE_FILE
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise InvalidInput(
                f"{directory} is not a memdir checkout (no {STATE_FILE}); make one with "
                "`memdir checkout [PREFIX] DIR`",
                directory=str(directory),
            ) from None
        except (OSError, ValueError) as exc:
            raise InvalidInput(f"cannot read {path}: {exc}", path=str(path)) from None
        if data.get("format") != FORMAT:
            raise InvalidInput(
                f"{path} has format {data.get('format')!r}; this memdir reads format {FORMAT}"
            )
        return cls(
            store=data["store"],
            prefix=data["prefix"],
            source=data.get("source", {}),
            revision=int(data.get("revision", 0)),
            files={p: Base(**b) for p, b in data.get("files", {}).items()},
            conflicts={p: Conflict(**c) for p, c in data.get("conflicts", {}).items()},
            proposals={p: Pending(**q) for p, q in data.get("proposals", {}).items()},
        )

    def snapshot(self) -> tuple[Any, ...]:
        """Everything :meth:`save` writes, to compare (the records are frozen)."""
        return (
            self.store,
            self.prefix,
            self.revision,
            dict(self.source),
            dict(self.files),
            dict(self.conflicts),
            dict(self.proposals),
        )

    def save(self, directory: Path) -> None:
        """Write the state atomically (temporary file, fsync, rename)."""
        data = {
            "format": FORMAT,
            "store": self.store,
            "prefix": self.prefix,
            "source": self.source,
            "revision": self.revision,
            "files": {p: asdict(b) for p, b in sorted(self.files.items())},
            "conflicts": {p: asdict(c) for p, c in sorted(self.conflicts.items())},
            "proposals": {p: asdict(q) for p, q in sorted(self.proposals.items())},
        }
        target = directory / STATE_FILE
        temp = directory / f"{TEMP_PREFIX}state"
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, ensure_ascii=False)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)


def memory_path(prefix: str, relative: str) -> str:
    """The memory path of a file at ``relative`` (POSIX, no leading slash) in a checkout."""
    return ("" if prefix == "/" else prefix) + "/" + relative


def local_path(directory: Path, prefix: str, path: str) -> Path:
    """Where the memory file ``path`` (under ``prefix``) lives in the checkout."""
    relative = path[len(prefix) :] if prefix != "/" else path
    return directory.joinpath(*relative.lstrip("/").split("/"))


def ignored(name: str) -> bool:
    """A name no sync sends: the state file, a sync's temporaries, editors' leftovers."""
    return (
        name == STATE_FILE
        or name.startswith((TEMP_PREFIX, ".#"))
        or name.endswith(_EDITOR_SUFFIXES)
        or name == "4913"  # vim's probe for a writable directory
    )


def file_sha256(data: bytes) -> str:
    """The store's content hash of a file's bytes (sha256 of UTF-8 is sha256 of the bytes)."""
    return hashlib.sha256(data).hexdigest()


def scan(directory: Path) -> Iterator[tuple[str, Path]]:
    """Every regular file of the checkout as (relative POSIX path, file), in path order;
    directories named ``.git`` and ignored names are skipped, symbolic links are not files.

    One ``scandir`` per directory and no stat beyond what it reports: a sync of a large
    checkout walks every file, so the walk costs what ``find`` would."""
    top = os.fspath(directory)

    def walk(folder: str, relative: str) -> Iterator[tuple[str, Path]]:
        try:
            with os.scandir(folder) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError:
            return  # gone or unreadable since the parent listed it: nothing to send
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name != ".git":
                        yield from walk(entry.path, f"{relative}{name}/")
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
            except OSError:
                continue
            if not ignored(name):
                yield relative + name, Path(entry.path)

    yield from walk(top, "")
