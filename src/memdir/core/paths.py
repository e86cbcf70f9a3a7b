"""Memory paths: the one validator every surface calls.

A path is ``/``-rooted, in Unicode NFC, made of segments that are not empty, ``.`` or ``..``,
that hold no control (Cc) or format (Cf, which includes the bidi overrides and zero-width
characters) characters, each at most 255 bytes of UTF-8, the whole at most 1,024 bytes.
Paths are case-sensitive. Non-NFC input is refused rather than silently normalised: a client
that computed a path one way must find the file under that same string.

Because a path is what people and models read to decide what a file is, characters that make
two different paths look the same are refused too (never normalised, for the same reason):

- line and paragraph separators (U+2028, U+2029) and every space but U+0020 (no-break and
  ideographic spaces, ...);
- default-ignorable characters that render as nothing (Hangul fillers U+3164 / U+FFA0 /
  U+115F / U+1160, variation selectors, the combining grapheme joiner, ...);
- the replacement character U+FFFD, the sign of text decoded with errors;
- characters whose compatibility form (NFKC) is ASCII: fullwidth ``／`` ``Ａ``, ligatures,
  superscript digits — write the ASCII character itself;
- a word (a run of letters) mixing scripts that look alike (``pаypal.md`` with a Cyrillic
  ``а``); a word's letters are from one script, or Latin with Han, Hiragana, Katakana,
  Hangul or Bopomofo, as Japanese, Chinese and Korean names are written. Scripts are told
  apart by the Unicode character name (``LATIN``, ``CYRILLIC``, ``GREEK``, ...).

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
_WORDS = re.compile(r"[^\W\d_]+")
_PLAIN = re.compile(r"(?:/(?!\.\.?(?:/|\Z))[\x20-\x2e\x30-\x7e]{1,255})+\Z")


# Default_Ignorable_Code_Point (Unicode DerivedCoreProperties) not already Cc / Cf.
_IGNORABLE = (
    (0x034F, 0x034F), (0x115F, 0x1160), (0x17B4, 0x17B5), (0x180B, 0x180F), (0x2065, 0x2065),
    (0x3164, 0x3164), (0xFE00, 0xFE0F), (0xFFA0, 0xFFA0), (0xFFF0, 0xFFF8),
    (0x1BCA0, 0x1BCA3), (0xE0000, 0xE0FFF),
)  # fmt: skip
#: Slashes and backslashes that NFKC does not fold to ASCII but that look like one.
_SLASHES = frozenset("\u2044\u2215\u2571\u29f8\u1735\u2216\u2572\u29f5\u29f9\ufe68")
#: Scripts that may share a word, with or without Latin (as CJK names are written).
_WITH_LATIN = ({"CJK", "HIRAGANA", "KATAKANA"}, {"CJK", "BOPOMOFO"}, {"CJK", "HANGUL"})
#: Character-name prefixes that are not scripts (Common letters such as MODIFIER LETTER ...).
_NOT_SCRIPTS = frozenset({"MODIFIER", "SMALL", "FULLWIDTH", "HALFWIDTH", "MATHEMATICAL"})
#: Letters shared by several scripts (the prolonged sound mark ー), and display names.
_COMMON = frozenset({"KATAKANA-HIRAGANA"})
_SHOWN = {"CJK": "Han"}


def _bad(path: str, why: str) -> InvalidPath:
    return InvalidPath(f"invalid path {path!r}: {why}; {_FIX}", path=path, reason=why)


def _ignorable(code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in _IGNORABLE)


def _look_alike(ch: str) -> str | None:
    """Why ``ch`` (not printable ASCII) may not be in a path, or None if it may."""
    category = unicodedata.category(ch)
    code = ord(ch)
    if category in ("Cc", "Cf", "Cs"):
        return f"it contains the control or format character U+{code:04X}"
    if category in ("Zl", "Zp"):
        return f"it contains the line or paragraph separator U+{code:04X}"
    if category == "Zs":
        return f"it contains the space character U+{code:04X}; only ' ' (U+0020) is a space"
    if _ignorable(code):
        return f"it contains U+{code:04X}, a character that renders as nothing"
    if code == 0xFFFD:
        return "it contains U+FFFD, the replacement character of text decoded with errors"
    if ch in _SLASHES:
        return f"it contains U+{code:04X} {ch!r}, a look-alike of a slash"
    folded = unicodedata.normalize("NFKC", ch)
    if folded != ch and folded.isascii():
        return f"it contains U+{code:04X} {ch!r}, a look-alike of {folded!r}; write {folded!r}"
    return None


def _script(ch: str) -> str | None:
    """The script of a letter, from its Unicode name (None for a non-letter or Common)."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    words = unicodedata.name(ch, "").split()
    while words and words[0] in _NOT_SCRIPTS:
        words = words[1:]
    return words[0] if words and words[0] not in _COMMON else None


def _mixed_scripts(segment: str) -> str | None:
    """Why a word (a run of letters and marks) of a segment mixes look-alike scripts, or None.

    Words, not whole segments: ``привет.md`` is a Cyrillic word and a Latin extension.
    """
    for word in _WORDS.findall(segment):
        scripts = {s for s in map(_script, word) if s is not None}
        if len(scripts) < 2:
            continue
        rest = scripts - {"LATIN"}
        if any(rest <= allowed for allowed in _WITH_LATIN):
            continue  # e.g. Japanese: Han, Hiragana, Katakana (and Latin) together
        names = " and ".join(sorted(_SHOWN.get(s, s.title()) for s in scripts))
        return (
            f"the word {word!r} mixes {names} letters, which can look alike; write each word "
            "in one script"
        )
    return None


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
        if not (" " <= ch <= "~"):
            why = _look_alike(ch)
            if why is not None:
                raise _bad(path, why)
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
        if not segment.isascii():
            why = _mixed_scripts(segment)
            if why is not None:
                raise _bad(path, why)
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
