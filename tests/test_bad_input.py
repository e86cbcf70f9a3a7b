"""Bad input is refused with the right error class, a message naming what was received, and
no change at all: the store revision, the commits and every live file stay as they were.

Runs on every backend (``svc`` fixture).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import memdir
from helpers import STORE, Snapshot, assert_consistent, sha, snapshot
from memdir import (
    OWNER,
    ContentTooLarge,
    Delete,
    EditConflict,
    InvalidContent,
    InvalidInput,
    InvalidPath,
    MemdirError,
    MemoryService,
    NotFound,
    PathConflict,
    Provenance,
    Rename,
    StrReplace,
    Write,
)


@pytest.fixture
def store(svc: MemoryService) -> MemoryService:
    """A store with a little in it, so that "nothing changed" means something."""
    svc.write(OWNER, STORE, "/ok.md", "fine\n", if_absent=True)
    svc.write(OWNER, STORE, "/dir/file.md", "in a directory\n", if_absent=True)
    svc.write(OWNER, STORE, "/ok.md", "fine, twice\n", if_match=sha("fine\n"))
    return svc


def refused(
    svc: MemoryService,
    error: type[MemdirError],
    call: Callable[[], Any],
    *names: str,
    before: Snapshot | None = None,
) -> MemdirError:
    """Run ``call``; it must raise exactly ``error`` naming each of ``names``, changing nothing."""
    before = before or snapshot(svc)
    with pytest.raises(MemdirError) as info:
        call()
    exc = info.value
    assert type(exc) is error, f"{type(exc).__name__}: {exc.message}"
    for name in names:
        assert name in exc.message, f"{name!r} not in {exc.message!r}"
    assert "\n" not in exc.message
    assert snapshot(svc) == before
    return exc


# --- paths -----------------------------------------------------------------------------------


def _long_path(total: int) -> str:
    """A path of exactly ``total`` bytes made of valid segments."""
    path = ""
    while len(path) + 101 <= total:
        path += "/" + "p" * 100
    rest = total - len(path)
    path += "/" + "q" * (rest - 1) if rest > 1 else ""
    if rest == 1:  # widen the last segment by one byte
        path = path[:-100] + "p" * 101
    assert len(path.encode()) == total
    return path


BAD_PATHS = {
    "dotdot": "/a/../b.md",
    "dotdot-leading": "/../etc/passwd",
    "empty-segment": "/a//b.md",
    "dot-segment": "/a/./b.md",
    "no-leading-slash": "a/b.md",
    "trailing-slash": "/a/b/",
    "root": "/",
    "empty": "",
    "bell": "/a\x07b.md",
    "newline": "/a\nb.md",
    "nul": "/a\x00b.md",
    "bidi-override": "/a\u202eb.md",
    "zero-width-space": "/a\u200bb.md",
    "bom": "/\ufeffa.md",
    "non-nfc": "/cafe\u0301.md",
    "segment-256-bytes": "/" + "s" * 256,
    "segment-256-bytes-multibyte": "/d/" + "é" * 128,
    "path-1025-bytes": _long_path(1025),
    "lone-surrogate": "/a\ud800.md",
}


@pytest.mark.parametrize("path", BAD_PATHS.values(), ids=BAD_PATHS.keys())
def test_bad_paths_are_refused_everywhere(store: MemoryService, path: str) -> None:
    svc = store
    before = snapshot(svc)
    shown = repr(path)[1:-1]  # the message quotes the received path with repr()
    calls: list[Callable[[], Any]] = [
        lambda: svc.write(OWNER, STORE, path, "x", if_absent=True),
        lambda: svc.write(OWNER, STORE, path, "x", if_match=sha("x")),
        lambda: svc.str_replace(OWNER, STORE, path, "x", "y"),
        lambda: svc.insert(OWNER, STORE, path, 0, "x"),
        lambda: svc.delete(OWNER, STORE, path),
        lambda: svc.rename(OWNER, STORE, path, "/elsewhere.md"),
        lambda: svc.rename(OWNER, STORE, "/ok.md", path),
        lambda: svc.read(OWNER, STORE, path),
        lambda: svc.file_history(OWNER, STORE, path),
        lambda: svc.revert_file(OWNER, STORE, path, 1),
        lambda: svc.redact(OWNER, STORE, path, 1),
        lambda: svc.diff(OWNER, STORE, path, 1),
        lambda: svc.commit(
            OWNER, STORE, [Write("/fresh.md", "x", if_absent=True), Write(path, "x")]
        ),
        lambda: svc.commit(
            OWNER, STORE, [StrReplace("/ok.md", "twice", "thrice"), Rename("/ok.md", path)]
        ),
    ]
    for call in calls:
        exc = refused(svc, InvalidPath, call, shown, before=before)
        assert exc.details["path"] == path
    assert_consistent(svc)


@pytest.mark.parametrize("prefix", ["/a/../b", "a/b", "/a//b", "/x\u202e", "/e\u0301"])
def test_bad_prefixes_are_refused(store: MemoryService, prefix: str) -> None:
    svc = store
    shown = repr(prefix.rstrip("/"))[1:-1]
    for call in [
        lambda: svc.ls(OWNER, STORE, prefix),
        lambda: svc.grep(OWNER, STORE, "x", prefix=prefix),
        lambda: svc.search(OWNER, STORE, "x", prefix=prefix),
        lambda: svc.history(OWNER, STORE, prefix=prefix),
        lambda: list(svc.iter_files(OWNER, STORE, prefix)),
    ]:
        refused(svc, InvalidPath, call, shown)


def test_longest_valid_names_are_accepted(store: MemoryService) -> None:
    for path in ["/" + "s" * 255, "/d/" + "é" * 127 + "x", _long_path(1024)]:
        store.write(OWNER, STORE, path, "edge", if_absent=True)
        assert store.read(OWNER, STORE, path).content == "edge"
    store.write(OWNER, STORE, "/caf\u00e9.md", "nfc is fine", if_absent=True)
    assert_consistent(store)


def test_a_file_cannot_be_where_a_directory_is(store: MemoryService) -> None:
    exc = refused(
        store, PathConflict, lambda: store.write(OWNER, STORE, "/dir", "x", if_absent=True), "/dir"
    )
    assert exc.details["holds"] == "/dir/file.md"
    refused(store, PathConflict, lambda: store.rename(OWNER, STORE, "/ok.md", "/dir"), "/dir")


def test_a_directory_cannot_be_where_a_file_is(store: MemoryService) -> None:
    exc = refused(
        store,
        PathConflict,
        lambda: store.write(OWNER, STORE, "/ok.md/child.md", "x", if_absent=True),
        "/ok.md/child.md",
    )
    assert exc.details["file"] == "/ok.md"
    refused(
        store,
        PathConflict,
        lambda: store.write(OWNER, STORE, "/dir/file.md/a/b.md", "x", if_absent=True),
        "/dir/file.md",
    )
    refused(
        store,
        PathConflict,
        lambda: store.rename(OWNER, STORE, "/ok.md", "/dir/file.md/ok.md"),
        "/dir/file.md",
    )


# --- content ---------------------------------------------------------------------------------


@pytest.fixture
def small(store: MemoryService, backend: str) -> Iterator[MemoryService]:
    """The same database through a service whose size limit is 1000 bytes."""
    service = memdir.open(backend, create=True, max_file_bytes=1000)
    try:
        yield service
    finally:
        service.db.close()


def test_content_over_the_limit(small: MemoryService) -> None:
    svc = small
    exc = refused(
        svc,
        ContentTooLarge,
        lambda: svc.write(OWNER, STORE, "/big.md", "x" * 1001, if_absent=True),
        "1001",
        "1000",
    )
    assert (exc.details["size"], exc.details["limit"]) == (1001, 1000)
    # bytes of UTF-8 count, not characters
    refused(
        svc,
        ContentTooLarge,
        lambda: svc.write(OWNER, STORE, "/big.md", "é" * 501, if_absent=True),
        "1002",
    )
    edge = "é" * 499 + "xy"  # exactly 1000 bytes
    svc.write(OWNER, STORE, "/edge.md", edge, if_absent=True)
    # edits that would grow a file past the limit
    refused(
        svc,
        ContentTooLarge,
        lambda: svc.str_replace(OWNER, STORE, "/edge.md", "xy", "xyz"),
        "1001",
    )
    refused(svc, ContentTooLarge, lambda: svc.insert(OWNER, STORE, "/edge.md", 0, "x"), "1002")
    refused(
        svc,
        ContentTooLarge,
        lambda: svc.write(OWNER, STORE, "/edge.md", "y" * 5000, if_match=sha(edge)),
        "5000",
    )
    refused(
        svc,
        ContentTooLarge,
        lambda: svc.commit(
            OWNER,
            STORE,
            [Write("/small.md", "s", if_absent=True), StrReplace("/edge.md", "xy", "xyz")],
        ),
        "1001",
    )
    assert_consistent(svc)


def test_lone_surrogate_content(store: MemoryService) -> None:
    exc = refused(
        store,
        InvalidContent,
        lambda: store.write(OWNER, STORE, "/s.md", "abc\ud800def", if_absent=True),
        "surrogate",
        "character 3",
    )
    assert exc.details["offset"] == 3
    refused(
        store,
        InvalidContent,
        lambda: store.str_replace(OWNER, STORE, "/ok.md", "twice", "\udfff"),
        "surrogate",
    )


def test_nul_content(store: MemoryService) -> None:
    exc = refused(
        store,
        InvalidContent,
        lambda: store.write(OWNER, STORE, "/n.md", "ab\x00c", if_absent=True),
        "NUL",
        "character 2",
    )
    assert exc.details["offset"] == 2


@pytest.mark.parametrize(
    ("content", "line"),
    [
        ("---\nkey: [unclosed\n---\nbody\n", 3),
        ("---\ntitle: fine\nkey: [unclosed\n---\nbody\n", 4),
        ("---\ngood: 1\n  bad indent: 2\n---\n", 3),
        ("---\ntitle: no closing line\nbody\n", 1),
        ("---\n- a list\n- not a mapping\n---\nbody\n", 2),
        ("---\njust a string\n---\n", 2),
    ],
    ids=["unclosed-flow", "unclosed-flow-line-4", "bad-indent", "unterminated", "list", "scalar"],
)
def test_malformed_frontmatter(store: MemoryService, content: str, line: int) -> None:
    exc = refused(
        store,
        InvalidContent,
        lambda: store.write(OWNER, STORE, "/fm.md", content, if_absent=True),
        f"line {line}",
        "frontmatter",
    )
    assert exc.details["line"] == line
    # the same refusal when an edit breaks good frontmatter, and inside a bigger commit
    store.write(OWNER, STORE, "/good.md", "---\ntitle: ok\n---\nbody\n", if_absent=True)
    before = snapshot(store)
    refused(
        store,
        InvalidContent,
        lambda: store.commit(
            OWNER,
            STORE,
            [
                Write("/other.md", "fine", if_absent=True),
                Write("/good.md", content, if_match=sha("---\ntitle: ok\n---\nbody\n")),
            ],
        ),
        f"line {line}",
        before=before,
    )


def test_an_edit_that_breaks_frontmatter_is_refused(store: MemoryService) -> None:
    store.write(OWNER, STORE, "/fm.md", "---\ntags: [a, b]\n---\nbody\n", if_absent=True)
    exc = refused(
        store,
        InvalidContent,
        lambda: store.str_replace(OWNER, STORE, "/fm.md", "[a, b]", "[a, b"),
        "frontmatter",
    )
    assert exc.details["line"] == 3


# --- unknown things --------------------------------------------------------------------------


def test_unknown_version(store: MemoryService) -> None:
    for call in [
        lambda: store.read(OWNER, STORE, "/ok.md", version=3),
        lambda: store.read(OWNER, STORE, "/ok.md", version=0),
        lambda: store.diff(OWNER, STORE, "/ok.md", 1, 3),
        lambda: store.revert_file(OWNER, STORE, "/ok.md", 3),
        lambda: store.redact(OWNER, STORE, "/ok.md", 3),
    ]:
        exc = refused(store, NotFound, call, "/ok.md")
        assert exc.details["version"] in (0, 3)
        assert f"version {exc.details['version']}" in exc.message


def test_unknown_file(store: MemoryService) -> None:
    for call in [
        lambda: store.read(OWNER, STORE, "/nope.md"),
        lambda: store.read(OWNER, STORE, "/nope.md", version=1),
        lambda: store.str_replace(OWNER, STORE, "/nope.md", "a", "b"),
        lambda: store.delete(OWNER, STORE, "/nope.md"),
        lambda: store.rename(OWNER, STORE, "/nope.md", "/n2.md"),
        lambda: store.file_history(OWNER, STORE, "/nope.md"),
        lambda: store.commit(OWNER, STORE, [Write("/n.md", "n"), Delete("/nope.md")]),
    ]:
        exc = refused(store, NotFound, call, "/nope.md")
        assert exc.details["path"] == "/nope.md"


def test_unknown_store(store: MemoryService) -> None:
    for call in [
        lambda: store.read(OWNER, "nostore", "/ok.md"),
        lambda: store.write(OWNER, "nostore", "/ok.md", "x", if_absent=True),
        lambda: store.commit(OWNER, "nostore", [Write("/a.md", "a")]),
        lambda: store.ls(OWNER, "nostore"),
        lambda: store.search(OWNER, "nostore", "fine"),
        lambda: store.grep(OWNER, "nostore", "fine"),
        lambda: store.history(OWNER, "nostore"),
        lambda: store.store_info(OWNER, "nostore"),
        lambda: store.archive_store(OWNER, "nostore"),
        lambda: store.delete_store(OWNER, "nostore"),
        lambda: store.revert_commit(OWNER, "nostore", "abcdef"),
        lambda: store.redact(OWNER, "nostore", "/ok.md", 1),
    ]:
        exc = refused(store, NotFound, call, "'nostore'")
        assert exc.details["store"] == "nostore"
    assert [s.name for s in store.list_stores(OWNER)] == [STORE]


def test_unknown_commit(store: MemoryService) -> None:
    refused(store, NotFound, lambda: store.revert_commit(OWNER, STORE, "abcdef0123"), "abcdef0123")
    refused(store, InvalidInput, lambda: store.revert_commit(OWNER, STORE, "abc"), "'abc'")


def test_other_bad_arguments(store: MemoryService) -> None:
    refused(store, InvalidInput, lambda: store.create_store(OWNER, "Bad Name"), "'Bad Name'")
    refused(store, InvalidInput, lambda: store.grep(OWNER, STORE, "(x"), "'(x'")
    refused(store, InvalidInput, lambda: store.search(OWNER, STORE, "x", limit=0), "0")
    refused(store, EditConflict, lambda: store.insert(OWNER, STORE, "/ok.md", 5, "x"), "line 5")
    with pytest.raises(InvalidInput) as info:
        Provenance(source_kind="rumour")
    assert "'rumour'" in info.value.message
    with pytest.raises(InvalidInput) as info:
        Provenance(reason="r" * 4001)
    assert "4001" in info.value.message
