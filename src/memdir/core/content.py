"""Content rules and the sha256 contract.

The sha256 of a memory file is the lowercase hex SHA-256 of its content's UTF-8 bytes, with no
normalisation of any kind (line endings, trailing newline, Unicode form): a client can compute
it from the bytes it holds, and it is the file's ETag on every surface.

Content is UTF-8 text of at most ``max_bytes`` bytes (100 kB by default, configurable). Lone
surrogates cannot be encoded and are refused, and so is NUL (U+0000): PostgreSQL text cannot
hold it, and every backend must accept the same content. Beyond that, screening (a later layer)
decides what text is acceptable, not this module.
"""

from __future__ import annotations

import hashlib

from memdir.core.errors import ContentTooLarge, InvalidContent

__all__ = ["DEFAULT_MAX_BYTES", "check_content", "decode_content", "sha256_hex", "verify_sha256"]

DEFAULT_MAX_BYTES = 100_000


def sha256_hex(content: str) -> str:
    """The content hash contract: lowercase hex SHA-256 of the UTF-8 bytes."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def verify_sha256(content: str, sha256: str) -> bool:
    """Re-derive the hash of ``content`` and compare it with a stored one."""
    return sha256_hex(content) == sha256


def decode_content(data: bytes, *, source: str = "content") -> str:
    """Decode bytes as strict UTF-8, naming the first bad byte's offset when it is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidContent(
            f"{source} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            "memdir stores UTF-8 text only — re-encode the file as UTF-8",
            offset=exc.start,
        ) from None


def check_content(content: str, max_bytes: int) -> int:
    """Validate ``content`` and return its size in bytes.

    Raises :class:`InvalidContent` if it cannot be encoded as UTF-8 (lone surrogates) and
    :class:`ContentTooLarge` if it is over ``max_bytes``.
    """
    if not isinstance(content, str):
        raise InvalidContent(f"content must be text, received {type(content).__name__}")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidContent(
            f"content is not valid Unicode text (a lone surrogate at character {exc.start}); "
            "send UTF-8 text",
            offset=exc.start,
        ) from None
    nul = content.find("\x00")
    if nul >= 0:
        raise InvalidContent(
            f"content holds a NUL character (U+0000) at character {nul}; memdir stores text, "
            "remove it or store the data encoded (e.g. base64)",
            offset=nul,
        )
    if size > max_bytes:
        raise ContentTooLarge(
            f"content is {size} bytes, over the limit of {max_bytes}; split it into several "
            "files or raise the limit (MEMDIR_MAX_FILE_BYTES)",
            size=size,
            limit=max_bytes,
        )
    return size
