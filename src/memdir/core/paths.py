"""Memory paths: the one validator every surface calls.

A path is ``/``-rooted, in Unicode NFC, made of segments that are not empty, ``.`` or ``..``,
that hold no control (Cc) or format (Cf, which includes the bidi overrides and zero-width
characters) characters, each at most 255 bytes of UTF-8, the whole at most 1,024 bytes.
Paths are case-sensitive. Non-NFC input is refused rather than silently normalised: a client
that computed a path one way must find the file under that same string.

A path names a file or a directory, never both; that rule needs the store and lives in the
service, but the helpers it uses (ancestors, the key range of a directory) live here.
"""

from __future__ import annotations

import re
import unicodedata

from memdir.core.errors import InvalidPath

__all__ = [
    "MAX_PATH_BYTES",
    "MAX_SEGMENT_BYTES",
    "ancestors",
    "basename",
    "descendant_range",
    "is_under",
    "join",
    "normalize_prefix",
    "parent",
    "validate_path",
]

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255

_FIX = "paths look like /projects/acme/conventions.md"

# Most paths are plain ASCII: one regex proves them valid without the per-character checks.
# Segments of printable ASCII other than '/', not made only of dots, at most 255 bytes.
_PLAIN = re.compile(r"(?:/(?!\.\.?(?:/|\Z))[\x20-\x2e\x30-\x7e]{1,255})+\Z")


def _bad(path: str, why: str) -> InvalidPath:
    return InvalidPath(f"invalid path {path!r}: {why}; {_FIX}", path=path, reason=why)


def validate_path(path: str) -> str:
    """Return ``path`` unchanged if it is a valid file path, else raise :class:`InvalidPath`.

    The root ``/`` itself is a directory and is not a valid file path.
    """
    if not isinstance(path, str):
        raise InvalidPath(f"invalid path {path!r}: expected a string", path=repr(path))
    if len(path) <= MAX_PATH_BYTES and _PLAIN.match(path):
        return path
    if not path.startswith("/"):
        raise _bad(path, "it must start with '/'")
    if path == "/":
        raise _bad(path, "'/' is the root directory, not a file")
    encoded = path.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_PATH_BYTES:
        raise _bad(path, f"it is {len(encoded)} bytes, over the limit of {MAX_PATH_BYTES}")
    for ch in path:
        category = unicodedata.category(ch)
        if category in ("Cc", "Cf", "Cs"):
            raise _bad(path, f"it contains the control or format character U+{ord(ch):04X}")
    if unicodedata.normalize("NFC", path) != path:
        raise _bad(path, "it is not in Unicode NFC form; normalise it to NFC")
    for segment in path[1:].split("/"):
        if segment == "":
            raise _bad(path, "it has an empty segment ('//' or a trailing '/')")
        if segment in (".", ".."):
            raise _bad(path, f"it has a {segment!r} segment")
        size = len(segment.encode("utf-8"))
        if size > MAX_SEGMENT_BYTES:
            raise _bad(path, f"a segment is {size} bytes, over the limit of {MAX_SEGMENT_BYTES}")
    return path


def normalize_prefix(prefix: str | None) -> str:
    """Return a directory prefix in canonical form: ``/`` or ``/a/b`` (no trailing slash).

    ``None`` and ``""`` mean the root. A trailing slash is accepted and dropped.
    """
    if prefix is None or prefix in ("", "/"):
        return "/"
    stripped = prefix[:-1] if prefix.endswith("/") else prefix
    validate_path(stripped)
    return stripped


def parent(path: str) -> str:
    """The directory holding ``path`` (``/`` for a top-level file)."""
    head = path.rsplit("/", 1)[0]
    return head or "/"


def basename(path: str) -> str:
    """The last segment of ``path``."""
    return path.rsplit("/", 1)[1]


def join(directory: str, name: str) -> str:
    """Join a directory prefix and a relative name."""
    return (directory.rstrip("/") + "/" + name.lstrip("/")) if name else directory


def ancestors(path: str) -> list[str]:
    """Every proper ancestor directory of ``path`` except the root, shortest first.

    ``/a/b/c.md`` -> ``['/a', '/a/b']``. Used to check that no ancestor is a file.
    """
    parts = path[1:].split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def descendant_range(directory: str) -> tuple[str, str]:
    """The half-open key range ``[lo, hi)`` of every path strictly under ``directory``.

    Paths under ``/a`` all start with ``/a/``; ``'0'`` is the character after ``'/'``, so
    ``[/a/, /a0)`` holds exactly them in binary (code point) order, which both SQLite and
    PostgreSQL (with ``COLLATE "C"``) use for these columns.
    """
    base = "" if directory == "/" else directory
    return base + "/", base + "0"


def is_under(path: str, directory: str) -> bool:
    """True if ``path`` is ``directory`` itself or lies beneath it."""
    if directory == "/":
        return True
    return path == directory or path.startswith(directory + "/")
