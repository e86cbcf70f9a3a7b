"""memdir store benchmark: the Python API against hand-written raw SQL, in the same run.

Usage::

    python benchmarks/store.py [--files 10000 100000] [--versions N] [--db URL] [--raw-db URL]
                               [--ops N] [--queries N] [--seed S] [--json OUT]
    python benchmarks/store.py --synchronous-cost [--synchronous-dir DIR] [--ops N]

For each file count it loads a deterministic pseudo-English corpus (100-400 words per file,
Zipf-distributed vocabulary, paths ``/projects/pN/<topic>/fileM.md``) into a memdir store and,
beside it, into a raw baseline database; with ``--versions N`` it then grows the history of
both (CAS overwrites, 500 per commit) until each holds N versions. Beyond the first
``--create-sample`` files, loading is set-up, not measurement: by default the bulk loader of
``benchmarks/_bulk.py`` writes the rows those commits would make and the store is read back
through the service before anything is timed (``--load service`` commits through the service
instead; ``--check-loader`` compares the two row for row). It then measures
create, read, CAS overwrite, str_replace, search and grep on both, interleaved in small chunks
so machine noise hits both.

The raw baselines do the same work with the least machinery:

- SQLite (stdlib ``sqlite3``, WAL, ``synchronous=NORMAL``): a ``heads`` table (path -> file id,
  version, sha256), a ``versions`` table holding each version's content, and an FTS5 table with
  memdir's tokenizer. create = one transaction inserting head + version + FTS5 row; read =
  one SELECT by path; CAS overwrite = ``UPDATE heads ... WHERE path=? AND sha256=?`` + version
  insert + FTS5 update in one transaction; str_replace = read + replace + that CAS write in one
  transaction; search = the same FTS5 MATCH (OR of quoted terms, bm25 with memdir's column
  weights, LIMIT 10, snippet()); grep = SELECT every content under the prefix + Python ``re``.
- PostgreSQL (psycopg 3): the same tables, with memdir's weighted ``tsvector`` column and GIN
  index, and the same ``phraseto_tsquery`` / ``ts_rank`` / ``ts_headline`` query.

Targets (from the issue): read and CAS overwrite p95 within 3x of raw; search p95 within 2x.

``--synchronous-cost`` measures the price of SQLite's durability levels instead: two memdir
stores in ``--synchronous-dir`` (default: a temporary directory — put it on the disk memdir
will use, since the cost is that disk's fsync), one opened with ``?synchronous=normal`` and one
with ``?synchronous=full``, the same creates and CAS overwrites interleaved on both; it prints
create and CAS overwrite p50/p95 per level and FULL's cost over NORMAL.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import random
import re
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any, Protocol

import sqlalchemy as sa
from _bulk import (
    MemdirLoader,
    RawLoader,
    check_store,
    compare_loads,
    materialise,
    plan_history,
)
from _common import Stats, fmt, format_table, run_interleaved, time_calls, write_json

import memdir
from memdir import OWNER, Provenance, Write
from memdir.search.query import STOP_WORDS as MEMDIR_STOP_WORDS

# The script's directory is on sys.path (first) only so that _common imports. Drop it now, so a
# sibling script cannot shadow a module imported later: benchmarks/http_bench.py shadowed the
# standard `http` package that urllib imports lazily during memdir's write screening.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _HERE]

REPO = Path(__file__).resolve().parent.parent
TOKENIZER = "porter unicode61 remove_diacritics 2"
BULK_BATCH = 500

# --- corpus ------------------------------------------------------------------------------

#: Real English function words at the top of the frequency ranking, so text reads like prose.
FUNCTION_WORDS = (
    "the", "of", "and", "to", "a", "in", "is", "that", "for", "it",
    "with", "as", "on", "was", "by", "this", "be", "are", "or", "from",
)  # fmt: skip
TOPICS = ("notes", "decisions", "commands", "failures", "conventions", "people", "tasks", "design")
_ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
    "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr", "sh", "sl", "sp", "st",
    "th", "tr",
)  # fmt: skip
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ea", "ee", "ie", "oa", "oo", "ou")
_CODAS = ("", "", "", "n", "r", "l", "m", "t", "nd", "rt", "st", "ck", "mp", "x", "ng")
MARKER = "[[rev {}]]"


@dataclass(frozen=True)
class Doc:
    path: str
    content: str


class Corpus:
    """Deterministic pseudo-English documents over a Zipf-distributed vocabulary.

    The vocabulary is ``FUNCTION_WORDS`` followed by ``vocab_size`` generated pseudo-words
    (shorter ones more frequent); word of rank r has weight 1 / r**s. Every document is a
    function of (seed, index, variant), so both sides of the benchmark see identical text.
    """

    def __init__(self, seed: int, vocab_size: int = 50_000, zipf_s: float = 1.0) -> None:
        self.seed = seed
        rng = random.Random(f"vocab:{seed}")
        banned = set(FUNCTION_WORDS) | MEMDIR_STOP_WORDS
        found: dict[str, None] = {}
        while len(found) < vocab_size:
            syllables = rng.choices((1, 2, 3, 4), weights=(3, 5, 3, 1))[0]
            word = "".join(rng.choice(_ONSETS) + rng.choice(_NUCLEI) for _ in range(syllables))
            word += rng.choice(_CODAS)
            if len(word) >= 3 and word not in banned:
                found[word] = None
        self.pseudo: list[str] = sorted(found, key=len)  # stable: random order within a length
        self.words: list[str] = [*FUNCTION_WORDS, *self.pseudo]
        self.cum_weights: list[float] = list(
            accumulate(1.0 / (rank**zipf_s) for rank in range(1, len(self.words) + 1))
        )

    def band(self, name: str) -> list[str]:
        """Pseudo-words (never function words) of a frequency band."""
        size = len(self.pseudo)
        if name == "common":
            return self.pseudo[:200]
        if name == "middling":
            return self.pseudo[500:5000]
        if name == "rare":
            return self.pseudo[size // 5 :]
        raise ValueError(name)

    def content(self, index: int, variant: int | str = 0, rev: int = 0) -> str:
        rng = random.Random(f"doc:{self.seed}:{index}:{variant}")
        total = rng.randint(100, 400)
        words = rng.choices(self.words, cum_weights=self.cum_weights, k=total)
        title = " ".join(words[:3]).capitalize()
        paragraphs: list[str] = []
        sentences: list[str] = []
        pos = 3
        while pos < total:
            length = rng.randint(6, 18)
            chunk = words[pos : pos + length]
            pos += length
            sentences.append(" ".join(chunk).capitalize() + ".")
            if len(sentences) >= rng.randint(2, 5):
                paragraphs.append(" ".join(sentences))
                sentences = []
        if sentences:
            paragraphs.append(" ".join(sentences))
        body = "\n\n".join(paragraphs)
        return f"# {title}\n\n{MARKER.format(rev)}\n\n{body}\n"


def file_path(index: int, n_files: int) -> str:
    projects = max(4, n_files // 500)
    project = index % projects
    topic = TOPICS[(index // projects) % len(TOPICS)]
    return f"/projects/p{project}/{topic}/file{index}.md"


# --- workload items -----------------------------------------------------------------------


@dataclass(frozen=True)
class CasItem:
    path: str
    content: str


@dataclass(frozen=True)
class ReplaceItem:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class ListItem:
    prefix: str  # a directory (ls, history) or a pattern (glob)


@dataclass(frozen=True)
class SearchItem:
    kind: str  # rare | middling | common
    terms: tuple[str, ...]

    @property
    def text(self) -> str:
        return " ".join(self.terms)


@dataclass(frozen=True)
class GrepItem:
    pattern: str
    prefix: str


def make_queries(corpus: Corpus, count: int, seed: int) -> list[SearchItem]:
    rng = random.Random(f"queries:{seed}")
    kinds = ("rare", "middling", "common")
    out: list[SearchItem] = []
    for i in range(count):
        kind = kinds[i % 3]
        terms = tuple(dict.fromkeys(rng.sample(corpus.band(kind), rng.randint(2, 6))))
        out.append(SearchItem(kind, terms))
    return out


# --- backends -----------------------------------------------------------------------------


class Backend(Protocol):
    """One side of the benchmark. Every method does one operation's whole work."""

    def create(self, doc: Doc) -> None: ...
    def bulk_create(self, docs: Sequence[Doc]) -> None: ...
    def bulk_overwrite(self, items: Sequence[CasItem]) -> None: ...
    def read(self, path: str) -> None: ...
    def cas_write(self, item: CasItem) -> None: ...
    def str_replace(self, item: ReplaceItem) -> None: ...
    def search(self, item: SearchItem) -> None: ...
    def grep(self, item: GrepItem) -> None: ...
    def close(self) -> None: ...


@dataclass
class Outputs:
    """What each side returned, kept for the consistency checks after timing."""

    sha: dict[str, str] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)
    searches: list[list[tuple[str, float]]] = field(default_factory=list)  # (path, score)
    greps: list[int] = field(default_factory=list)
    listings: list[list[tuple[str, int]]] = field(default_factory=list)  # (path, files)


class MemdirBackend:
    """memdir through its Python API, as the owner principal."""

    def __init__(self, svc: memdir.MemoryService, store: str) -> None:
        self.svc = svc
        self.store = store
        self.out = Outputs()
        self.provenance = Provenance(source_kind="import", reason="benchmark bulk load")
        self.history = Provenance(source_kind="import", reason="benchmark history growth")

    def create(self, doc: Doc) -> None:
        result = self.svc.write(OWNER, self.store, doc.path, doc.content, if_absent=True)
        self.out.sha[doc.path] = result.results[0].sha256 or ""

    def bulk_create(self, docs: Sequence[Doc]) -> None:
        ops = [Write(d.path, d.content, if_absent=True) for d in docs]
        result = self.svc.commit(OWNER, self.store, ops, self.provenance)
        for op in result.results:
            self.out.sha[op.path] = op.sha256 or ""

    def bulk_overwrite(self, items: Sequence[CasItem]) -> None:
        ops = [Write(i.path, i.content, if_match=self.out.sha[i.path]) for i in items]
        result = self.svc.commit(OWNER, self.store, ops, self.history)
        for op in result.results:
            self.out.sha[op.path] = op.sha256 or ""

    def read(self, path: str) -> None:
        self.out.reads.append(self.svc.read(OWNER, self.store, path).sha256)

    def cas_write(self, item: CasItem) -> None:
        expected = self.out.sha[item.path]
        result = self.svc.write(OWNER, self.store, item.path, item.content, if_match=expected)
        self.out.sha[item.path] = result.results[0].sha256 or ""

    def str_replace(self, item: ReplaceItem) -> None:
        result = self.svc.str_replace(OWNER, self.store, item.path, item.old, item.new)
        self.out.sha[item.path] = result.results[0].sha256 or ""

    def search(self, item: SearchItem) -> None:
        hits = self.svc.search(OWNER, self.store, item.text, limit=10)
        # memdir returns rank positions, not scores (docs/permissions.md): order only
        self.out.searches.append([(h.path, float(h.rank)) for h in hits])

    def grep(self, item: GrepItem) -> None:
        matches = self.svc.grep(OWNER, self.store, item.pattern, prefix=item.prefix, limit=10_000)
        self.out.greps.append(len(matches))

    def ls(self, item: ListItem) -> None:
        entries = self.svc.ls(OWNER, self.store, item.prefix)
        self.out.listings.append([(e.path, e.files or 0) for e in entries])

    def glob(self, item: ListItem) -> None:
        found = self.svc.glob(OWNER, self.store, item.prefix)
        self.out.listings.append([(p, 0) for p in found])

    def prefix_history(self, item: ListItem) -> None:
        commits = self.svc.history(OWNER, self.store, prefix=item.prefix, limit=20)
        self.out.listings.append([(c.id, len(c.changes)) for c in commits])

    def version_count(self) -> int:
        with self.svc.db.engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM versions WHERE store_id = "
                        "(SELECT id FROM stores WHERE name = :name)"
                    ),
                    {"name": self.store},
                ).scalar_one()
            )

    def size_bytes(self) -> int:
        """The whole memdir database (every store in it; the benchmark's is the only big one)."""
        url = self.svc.db.url
        if url.get_backend_name() == "sqlite":
            return _file_bytes(Path(url.database or ""))
        raw = self.svc.db.engine.raw_connection()
        try:
            return _pg_schema_bytes(raw.driver_connection, "public")
        finally:
            raw.close()

    def close(self) -> None:
        self.svc.db.close()


def _sha(content: str) -> tuple[str, int]:
    data = content.encode("utf-8")
    return hashlib.sha256(data).hexdigest(), len(data)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _prefix_range(prefix: str) -> tuple[str, str]:
    base = prefix.rstrip("/")
    return base + "/", base + "0"


def _raw_ls(execute: Any, mark: str, prefix: str) -> list[tuple[str, int]]:
    """A directory's children by hand: one indexed probe per child (the next path after the
    last child's key range) and, for a directory, ``count(*)`` over its key range."""
    lo, hi = _prefix_range(prefix)
    base = len(lo)
    nxt = f"SELECT path FROM heads WHERE path >= {mark} AND path < {mark} ORDER BY path LIMIT 1"
    count = f"SELECT count(*) FROM heads WHERE path >= {mark} AND path < {mark}"
    out: list[tuple[str, int]] = []
    cursor = lo
    while (row := execute(nxt, (cursor, hi)).fetchone()) is not None:
        path = str(row[0])
        slash = path.find("/", base)
        if slash < 0:
            out.append((path, 0))
            cursor = path + "\x00"
            continue
        child = path[:slash]
        files = int(execute(count, (child + "/", child + "0")).fetchone()[0])
        out.append((child, files))
        cursor = child + "0"
    return sorted(out)


def _raw_glob(execute: Any, mark: str, pattern: str) -> list[tuple[str, int]]:
    """Paths under the pattern's literal directory, matched by a regex of the pattern."""
    literal = pattern.split("*", 1)[0].rsplit("/", 1)[0] or "/"
    lo, hi = _prefix_range(literal)
    regex = re.compile("".join("[^/]*" if ch == "*" else re.escape(ch) for ch in pattern) + r"\Z")
    rows = execute(
        f"SELECT path FROM heads WHERE path >= {mark} AND path < {mark} ORDER BY path", (lo, hi)
    )
    return [(str(r[0]), 0) for r in rows if regex.match(str(r[0]))]


def _quote_fts5(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


class CasFailed(Exception):
    pass


class RawSQLite:
    """The least one would write by hand with the stdlib ``sqlite3`` module."""

    SCHEMA = (
        "CREATE TABLE heads (file_id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, "
        "version INTEGER NOT NULL, sha256 TEXT NOT NULL, size INTEGER NOT NULL, "
        "updated_at TEXT NOT NULL)",
        "CREATE TABLE versions (file_id INTEGER NOT NULL, number INTEGER NOT NULL, "
        "sha256 TEXT NOT NULL, size INTEGER NOT NULL, content TEXT NOT NULL, "
        "created_at TEXT NOT NULL, PRIMARY KEY (file_id, number))",
        f"CREATE VIRTUAL TABLE search_fts USING fts5(path, body, tokenize = '{TOKENIZER}')",
    )
    READ = (
        "SELECT h.sha256, h.version, v.content FROM heads h "
        "JOIN versions v ON v.file_id = h.file_id AND v.number = h.version WHERE h.path = ?"
    )
    CAS = (
        "UPDATE heads SET version = version + 1, sha256 = ?, size = ?, updated_at = ? "
        "WHERE path = ? AND sha256 = ? RETURNING file_id, version"
    )
    # bm25 weights as memdir's (path 0.5, body 1.0); snippets only for the 10 rows returned.
    SEARCH_TOPK = (
        "SELECT h.path, -top.score, snippet(search_fts, 1, '[', ']', '…', 24), h.sha256, "
        "h.version FROM (SELECT rowid, bm25(search_fts, 0.5, 1.0) AS score FROM search_fts "
        "WHERE search_fts MATCH ?1 ORDER BY score LIMIT ?2) AS top "
        "JOIN search_fts ON search_fts.rowid = top.rowid "
        "JOIN heads h ON h.file_id = top.rowid "
        "WHERE search_fts MATCH ?1 ORDER BY top.score"
    )
    # The single-SELECT shape memdir uses (snippet evaluated for every matching row).
    SEARCH_FLAT = (
        "SELECT h.path, -bm25(search_fts, 0.5, 1.0), "
        "snippet(search_fts, 1, '[', ']', '…', 24), h.sha256, h.version "
        "FROM search_fts JOIN heads h ON h.file_id = search_fts.rowid "
        "WHERE search_fts MATCH ? ORDER BY bm25(search_fts, 0.5, 1.0) LIMIT ?"
    )

    def __init__(self, path: Path, *, flat_search: bool = False) -> None:
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
        self.path = path
        self.conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA busy_timeout=60000")
        for statement in self.SCHEMA:
            self.conn.execute(statement)
        self.search_sql = self.SEARCH_FLAT if flat_search else self.SEARCH_TOPK
        self.out = Outputs()

    def _insert(self, doc: Doc) -> str:
        c = self.conn
        sha, size = _sha(doc.content)
        now = _now()
        (file_id,) = c.execute(
            "INSERT INTO heads (path, version, sha256, size, updated_at) VALUES (?, 1, ?, ?, ?) "
            "RETURNING file_id",
            (doc.path, sha, size, now),
        ).fetchone()
        c.execute(
            "INSERT INTO versions VALUES (?, 1, ?, ?, ?, ?)", (file_id, sha, size, doc.content, now)
        )
        c.execute(
            "INSERT INTO search_fts (rowid, path, body) VALUES (?, ?, ?)",
            (file_id, doc.path, doc.content),
        )
        return sha

    def create(self, doc: Doc) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.out.sha[doc.path] = self._insert(doc)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def bulk_create(self, docs: Sequence[Doc]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for doc in docs:
                self.out.sha[doc.path] = self._insert(doc)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def bulk_overwrite(self, items: Sequence[CasItem]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            for item in items:
                self.out.sha[item.path] = self._cas(
                    item.path, item.content, self.out.sha[item.path]
                )
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def read(self, path: str) -> None:
        row = self.conn.execute(self.READ, (path,)).fetchone()
        self.out.reads.append(row[0])

    def _cas(self, path: str, content: str, expected: str) -> str:
        c = self.conn
        sha, size = _sha(content)
        now = _now()
        row = c.execute(self.CAS, (sha, size, now, path, expected)).fetchone()
        if row is None:
            raise CasFailed(path)
        file_id, number = row
        c.execute(
            "INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?)",
            (file_id, number, sha, size, content, now),
        )
        c.execute("UPDATE search_fts SET body = ? WHERE rowid = ?", (content, file_id))
        return sha

    def cas_write(self, item: CasItem) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self.out.sha[item.path] = self._cas(item.path, item.content, self.out.sha[item.path])
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def str_replace(self, item: ReplaceItem) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            sha, _version, content = self.conn.execute(self.READ, (item.path,)).fetchone()
            if content.count(item.old) != 1:
                raise ValueError(f"{item.old!r} does not occur exactly once in {item.path}")
            new = content.replace(item.old, item.new, 1)
            self.out.sha[item.path] = self._cas(item.path, new, sha)
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def search(self, item: SearchItem) -> None:
        match = " OR ".join(_quote_fts5(t) for t in item.terms)
        rows = self.conn.execute(self.search_sql, (match, 10)).fetchall()
        self.out.searches.append([(r[0], float(r[1])) for r in rows])

    def grep(self, item: GrepItem) -> None:
        self.out.greps.append(_grep_rows(self._contents(item.prefix), item.pattern))

    def _contents(self, prefix: str) -> Iterator[tuple[str, str]]:
        sql = (
            "SELECT h.path, v.content FROM heads h "
            "JOIN versions v ON v.file_id = h.file_id AND v.number = h.version"
        )
        if prefix == "/":
            return iter(self.conn.execute(sql + " ORDER BY h.path"))
        lo, hi = _prefix_range(prefix)
        return iter(
            self.conn.execute(sql + " WHERE h.path >= ? AND h.path < ? ORDER BY h.path", (lo, hi))
        )

    def bytes_under(self, prefix: str) -> int:
        if prefix == "/":
            return int(self.conn.execute("SELECT coalesce(sum(size), 0) FROM heads").fetchone()[0])
        lo, hi = _prefix_range(prefix)
        row = self.conn.execute(
            "SELECT coalesce(sum(size), 0) FROM heads WHERE path >= ? AND path < ?", (lo, hi)
        ).fetchone()
        return int(row[0])

    def ls(self, item: ListItem) -> None:
        self.out.listings.append(_raw_ls(self.conn.execute, "?", item.prefix))

    def glob(self, item: ListItem) -> None:
        self.out.listings.append(_raw_glob(self.conn.execute, "?", item.prefix))

    def match_count(self, item: SearchItem) -> int:
        match = " OR ".join(_quote_fts5(t) for t in item.terms)
        row = self.conn.execute(
            "SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (match,)
        ).fetchone()
        return int(row[0])

    def checkpoint(self) -> None:
        self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    def version_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM versions").fetchone()[0])

    def size_bytes(self) -> int:
        return _file_bytes(self.path)

    def close(self) -> None:
        self.conn.close()


def _file_bytes(path: Path) -> int:
    """Size of a SQLite database with its WAL."""
    return sum(
        Path(str(path) + suffix).stat().st_size
        for suffix in ("", "-wal")
        if Path(str(path) + suffix).exists()
    )


def _pg_schema_bytes(conn: Any, schema: str) -> int:
    """Tables of a PostgreSQL schema with their indexes and TOAST (``pg_total_relation_size``)."""
    row = conn.execute(
        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
        (schema,),
    ).fetchone()
    return int(row[0])


def _grep_rows(rows: Iterator[tuple[str, str]], pattern: str) -> int:
    regex = re.compile(pattern)
    count = 0
    for _path, content in rows:
        if regex.search(content) is None:
            continue
        for line in content.splitlines():
            if regex.search(line):
                count += 1
    return count


class RawPostgres:
    """The same baseline on PostgreSQL with psycopg 3, in its own schema."""

    SCHEMA_NAME = "memdir_bench_raw"

    def __init__(self, url: str) -> None:
        import psycopg

        self.psycopg = psycopg
        dsn = sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
        self.conn: Any = psycopg.connect(dsn, autocommit=True)
        s = self.SCHEMA_NAME
        self.conn.execute(f"DROP SCHEMA IF EXISTS {s} CASCADE")
        self.conn.execute(f"CREATE SCHEMA {s}")
        self.conn.execute(f"SET search_path TO {s}")
        self.conn.execute(
            "CREATE TABLE heads (file_id BIGSERIAL PRIMARY KEY, "
            'path TEXT COLLATE "C" NOT NULL UNIQUE, version INTEGER NOT NULL, '
            "sha256 TEXT NOT NULL, size INTEGER NOT NULL, updated_at TIMESTAMPTZ NOT NULL)"
        )
        self.conn.execute(
            "CREATE TABLE versions (file_id BIGINT NOT NULL, number INTEGER NOT NULL, "
            "sha256 TEXT NOT NULL, size INTEGER NOT NULL, content TEXT NOT NULL, "
            "created_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (file_id, number))"
        )
        self.conn.execute(
            "CREATE TABLE search_index (file_id BIGINT PRIMARY KEY, "
            'path TEXT COLLATE "C" NOT NULL, body TEXT NOT NULL, '
            "tsv tsvector GENERATED ALWAYS AS ("
            "setweight(to_tsvector('english', path), 'B') || "
            "setweight(to_tsvector('english', body), 'A')) STORED)"
        )
        self.conn.execute("CREATE INDEX search_index_tsv ON search_index USING GIN (tsv)")
        self.out = Outputs()

    def _insert(self, doc: Doc) -> str:
        sha, size = _sha(doc.content)
        c = self.conn
        (file_id,) = c.execute(
            "INSERT INTO heads (path, version, sha256, size, updated_at) "
            "VALUES (%s, 1, %s, %s, now()) RETURNING file_id",
            (doc.path, sha, size),
        ).fetchone()
        c.execute(
            "INSERT INTO versions VALUES (%s, 1, %s, %s, %s, now())",
            (file_id, sha, size, doc.content),
        )
        c.execute(
            "INSERT INTO search_index (file_id, path, body) VALUES (%s, %s, %s)",
            (file_id, doc.path, doc.content),
        )
        return sha

    def create(self, doc: Doc) -> None:
        with self.conn.transaction():
            self.out.sha[doc.path] = self._insert(doc)

    def bulk_create(self, docs: Sequence[Doc]) -> None:
        with self.conn.transaction():
            for doc in docs:
                self.out.sha[doc.path] = self._insert(doc)

    READ = (
        "SELECT h.sha256, h.version, v.content FROM heads h "
        "JOIN versions v ON v.file_id = h.file_id AND v.number = h.version WHERE h.path = %s"
    )

    def read(self, path: str) -> None:
        row = self.conn.execute(self.READ, (path,)).fetchone()
        self.out.reads.append(row[0])

    def _cas(self, path: str, content: str, expected: str) -> str:
        sha, size = _sha(content)
        row = self.conn.execute(
            "UPDATE heads SET version = version + 1, sha256 = %s, size = %s, updated_at = now() "
            "WHERE path = %s AND sha256 = %s RETURNING file_id, version",
            (sha, size, path, expected),
        ).fetchone()
        if row is None:
            raise CasFailed(path)
        file_id, number = row
        self.conn.execute(
            "INSERT INTO versions VALUES (%s, %s, %s, %s, %s, now())",
            (file_id, number, sha, size, content),
        )
        self.conn.execute(
            "UPDATE search_index SET body = %s WHERE file_id = %s", (content, file_id)
        )
        return sha

    def cas_write(self, item: CasItem) -> None:
        with self.conn.transaction():
            self.out.sha[item.path] = self._cas(item.path, item.content, self.out.sha[item.path])

    def bulk_overwrite(self, items: Sequence[CasItem]) -> None:
        with self.conn.transaction():
            for item in items:
                self.out.sha[item.path] = self._cas(
                    item.path, item.content, self.out.sha[item.path]
                )

    def str_replace(self, item: ReplaceItem) -> None:
        with self.conn.transaction():
            sha, _version, content = self.conn.execute(
                self.READ + " FOR UPDATE OF h", (item.path,)
            ).fetchone()
            if content.count(item.old) != 1:
                raise ValueError(f"{item.old!r} does not occur exactly once in {item.path}")
            new = content.replace(item.old, item.new, 1)
            self.out.sha[item.path] = self._cas(item.path, new, sha)

    def search(self, item: SearchItem) -> None:
        tsq = " || ".join("phraseto_tsquery('english', %s)" for _ in item.terms)
        sql = (
            f"WITH q AS (SELECT ({tsq}) AS tsq), top AS ("
            "SELECT s.file_id, s.body, ts_rank(s.tsv, q.tsq) AS score, q.tsq "
            "FROM search_index s, q WHERE s.tsv @@ q.tsq ORDER BY score DESC LIMIT %s) "
            "SELECT h.path, top.score, ts_headline('english', top.body, top.tsq, "
            "'StartSel=[,StopSel=],MaxWords=24,MinWords=8,MaxFragments=1'), h.sha256, h.version "
            "FROM top JOIN heads h ON h.file_id = top.file_id ORDER BY top.score DESC"
        )
        rows = self.conn.execute(sql, (*item.terms, 10)).fetchall()
        self.out.searches.append([(r[0], float(r[1])) for r in rows])

    def grep(self, item: GrepItem) -> None:
        sql = (
            "SELECT h.path, v.content FROM heads h "
            "JOIN versions v ON v.file_id = h.file_id AND v.number = h.version"
        )
        if item.prefix == "/":
            cursor = self.conn.execute(sql + " ORDER BY h.path")
        else:
            lo, hi = _prefix_range(item.prefix)
            cursor = self.conn.execute(
                sql + " WHERE h.path >= %s AND h.path < %s ORDER BY h.path", (lo, hi)
            )
        self.out.greps.append(_grep_rows(iter(cursor), item.pattern))

    def bytes_under(self, prefix: str) -> int:
        if prefix == "/":
            row = self.conn.execute("SELECT coalesce(sum(size), 0) FROM heads").fetchone()
        else:
            lo, hi = _prefix_range(prefix)
            row = self.conn.execute(
                "SELECT coalesce(sum(size), 0) FROM heads WHERE path >= %s AND path < %s",
                (lo, hi),
            ).fetchone()
        return int(row[0])

    def ls(self, item: ListItem) -> None:
        self.out.listings.append(_raw_ls(self.conn.execute, "%s", item.prefix))

    def glob(self, item: ListItem) -> None:
        self.out.listings.append(_raw_glob(self.conn.execute, "%s", item.prefix))

    def match_count(self, item: SearchItem) -> int:
        tsq = " || ".join("phraseto_tsquery('english', %s)" for _ in item.terms)
        row = self.conn.execute(
            f"SELECT count(*) FROM search_index WHERE tsv @@ ({tsq})", item.terms
        ).fetchone()
        return int(row[0])

    def version_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM versions").fetchone()[0])

    def size_bytes(self) -> int:
        return _pg_schema_bytes(self.conn, self.SCHEMA_NAME)

    def checkpoint(self) -> None:
        self.conn.execute("VACUUM ANALYZE heads")
        self.conn.execute("VACUUM ANALYZE versions")
        self.conn.execute("VACUUM ANALYZE search_index")

    def close(self, *, drop: bool = True) -> None:
        if drop:
            self.conn.execute(f"DROP SCHEMA IF EXISTS {self.SCHEMA_NAME} CASCADE")
        self.conn.close()


# --- CLI ------------------------------------------------------------------------------------


@dataclass
class CliTiming:
    memdir_read_ms: float | None
    python_import_memdir_ms: float | None
    raw_python_read_ms: float | None
    note: str = ""


def _median_wall(argv: list[str], runs: int, env: dict[str, str]) -> float:
    times: list[float] = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, capture_output=True, env=env, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def time_cli(
    url: str, store: str, path: str, expected: str, raw_db: Path | None, runs: int
) -> CliTiming:
    """Median wall time of ``memdir --db URL read PATH`` and of two reference commands."""
    exe = REPO / ".venv" / "bin" / "memdir"
    env = {**os.environ, "MEMDIR_STORE": store}
    python = sys.executable
    import_ms = _median_wall([python, "-c", "import memdir"], runs, env)
    raw_ms: float | None = None
    if raw_db is not None:
        code = (
            "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
            f"sys.stdout.write(c.execute({RawSQLite.READ!r}, (sys.argv[2],)).fetchone()[2])"
        )
        raw_ms = _median_wall([python, "-c", code, str(raw_db), path], runs, env)
    if not exe.exists():
        return CliTiming(None, import_ms, raw_ms, f"{exe} does not exist")
    argv = [str(exe), "--db", url, "read", path]
    probe = subprocess.run(argv, capture_output=True, text=True, env=env)
    first_line = expected.splitlines()[0]
    if probe.returncode != 0 or first_line not in probe.stdout:
        why = (probe.stderr.strip().splitlines() or ["no output"])[-1][:160]
        return CliTiming(None, import_ms, raw_ms, f"`memdir read` not runnable yet: {why}")
    return CliTiming(_median_wall(argv, runs, env), import_ms, raw_ms)


# --- the run ----------------------------------------------------------------------------------


@dataclass
class OpResult:
    name: str
    memdir: Stats
    raw: Stats
    note: str = ""

    @property
    def ratio(self) -> float:
        return self.memdir.p95_ms / self.raw.p95_ms if self.raw.p95_ms > 0 else float("nan")

    def to_dict(self) -> dict[str, Any]:
        return {
            "memdir": self.memdir.to_dict(),
            "raw": self.raw.to_dict(),
            "ratio_p95": self.ratio,
            "note": self.note,
        }


#: p95 ratio targets per backend: issue 2 (the store on SQLite) and issue 5 (PostgreSQL).
TARGETS: dict[str, dict[str, float]] = {
    "sqlite": {"read": 3.0, "CAS overwrite": 3.0, "search (all)": 2.0},
    "postgresql": {"read": 2.0, "CAS overwrite": 3.0, "search (all)": 2.0},
}


def _chunks(seq: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(seq), size):
        yield seq[start : start + size]


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def grow_history(
    mem: MemdirBackend,
    raw: RawSQLite | RawPostgres,
    paths: Sequence[str],
    base: Sequence[str],
    revs: dict[str, int],
    extra: int,
) -> tuple[list[float], list[float]]:
    """Add ``extra`` versions to both sides: bulk CAS overwrites, ``BULK_BATCH`` per commit.

    Files are overwritten round-robin (file 0, 1, ..., n-1, 0, ...), so every file ends with
    about ``extra / n`` more versions and no commit touches a file twice. A version's content is
    the file's first content with its ``[[rev N]]`` marker advanced (same size, a new sha256 and
    blob per version); ``revs`` records the marker so str_replace later finds it. Returns the
    per-commit latencies of each side; the side that goes first alternates.
    """
    n = len(paths)
    first = MARKER.format(0)
    lat_m: list[float] = []
    lat_r: list[float] = []
    done = 0
    cursor = 0
    began = last = time.perf_counter()
    _log(f"growing history by {extra:,} versions ({BULK_BATCH} per commit)")
    while done < extra:
        size = min(BULK_BATCH, extra - done, n)
        items: list[CasItem] = []
        for k in range(size):
            i = (cursor + k) % n
            path = paths[i]
            rev = revs.get(path, 0) + 1
            revs[path] = rev
            items.append(CasItem(path, base[i].replace(first, MARKER.format(rev), 1)))
        cursor += size
        sides: list[tuple[Any, list[float]]] = [
            (mem.bulk_overwrite, lat_m),
            (raw.bulk_overwrite, lat_r),
        ]
        if len(lat_m) % 2:
            sides.reverse()
        for fn, out in sides:
            t0 = time.perf_counter()
            fn(items)
            out.append(time.perf_counter() - t0)
        done += size
        now = time.perf_counter()
        if now - last >= 30 or done == extra:
            last = now
            elapsed = now - began
            eta = elapsed / done * (extra - done)
            _log(
                f"history {done:,}/{extra:,} versions ({done / extra:.0%}) in {elapsed:.0f}s, "
                f"ETA {eta:.0f}s; memdir {done / sum(lat_m):,.0f} versions/s, "
                f"raw {done / sum(lat_r):,.0f} versions/s"
            )
    return lat_m, lat_r


def bulk_load(
    mem: MemdirBackend,
    raw: RawSQLite | RawPostgres,
    paths: Sequence[str],
    base: list[str],
    corpus: Corpus,
    sample: int,
    args: argparse.Namespace,
    notes: list[str],
) -> dict[str, int]:
    """Load files ``sample``..n-1 and the history with the bulk loaders, then check the store.

    The same commits as the service path (``_bulk.plan_history``: creates, then round-robin
    overwrites, ``BULK_BATCH`` per commit), written as rows (see ``benchmarks/_bulk.py``) on
    both sides. Returns each overwritten path's last ``[[rev N]]``. Exits when the memdir store
    read back through the service disagrees with the corpus.
    """
    n_files = len(paths)
    began = last = time.perf_counter()
    for i in range(len(base), n_files):
        base.append(corpus.content(i))
    first = MARKER.format(0)

    def content(index: int, rev: int) -> str:
        text = base[index]
        return text if rev == 0 else text.replace(first, MARKER.format(rev), 1)

    total = max(args.versions or n_files, n_files)
    to_load = n_files - sample + total - n_files
    _log(f"bulk-loading {n_files - sample:,} files and {total - n_files:,} more versions")
    mem_loader = MemdirLoader(mem.svc, mem.store, mem.history, content)
    raw_loader = RawLoader(raw.conn, pg=isinstance(raw, RawPostgres))
    revs: dict[str, int] = {}
    done = 0
    for steps in plan_history(n_files, sample, total, BULK_BATCH):
        changes = materialise(steps, paths, content)
        provenance = mem.history if steps[0][1] else mem.provenance
        mem_loader.add_commit(changes, provenance)
        raw_loader.add_commit(changes)
        for v in changes:
            if v.rev:
                revs[v.path] = v.rev
        done += len(changes)
        now = time.perf_counter()
        if now - last >= 30:
            last = now
            _log(f"bulk-loaded {done:,}/{to_load:,} versions in {now - began:.0f}s")
    mem.out.sha.update(mem_loader.finish())
    raw.out.sha.update(raw_loader.finish(content))
    loaded_s = time.perf_counter() - began
    _log(f"bulk-loaded {done:,} versions in {loaded_s:.0f}s; checking the memdir store")
    problems = check_store(
        mem.svc, mem.store, paths, content, revs, revision=mem_loader.revision, seed=args.seed
    )
    if problems:
        raise SystemExit("the bulk-loaded store is not what the service would hold:\n  "
                         + "\n  ".join(problems[:20]))  # fmt: skip
    notes.append(
        f"create measured one file per commit on the first {sample:,} files; the other "
        f"{n_files - sample:,} files and {total - n_files:,} history versions were bulk-loaded "
        f"as rows ({'COPY' if isinstance(raw, RawPostgres) else 'executemany'}, the commits "
        f"svc.commit of {BULK_BATCH} Write ops would make) in {loaded_s:.0f}s, not measured; "
        "the store then read back through the service (contents, versions, history, search)"
    )
    return revs


def run_size(
    n_files: int,
    args: argparse.Namespace,
    corpus: Corpus,
    workdir: Path,
) -> dict[str, Any]:
    seed = args.seed
    rng = random.Random(f"ops:{seed}:{n_files}")
    is_pg = args.db is not None and args.db.startswith(("postgresql", "postgres"))
    store = "default" if not is_pg else f"bench-{n_files}-{os.getpid()}"
    if args.db is None:
        memdir_url = f"sqlite:///{workdir / f'memdir-{n_files}.db'}"
    elif is_pg:
        memdir_url = args.db
    else:
        stem = sa.make_url(args.db).database or str(workdir / "memdir.db")
        memdir_url = f"sqlite:///{stem}.{n_files}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{stem}.{n_files}.db{suffix}").unlink(missing_ok=True)
    svc = memdir.open(memdir_url, create=True)
    svc.create_store(OWNER, store, exist_ok=False)
    mem = MemdirBackend(svc, store)
    raw_db: Path | None = None
    raw: RawSQLite | RawPostgres
    if is_pg:
        raw = RawPostgres(args.raw_db or args.db)
    else:
        raw_db = Path(sa.make_url(memdir_url).database or "").with_suffix(".raw.db")
        raw = RawSQLite(raw_db, flat_search=args.raw_flat_search)

    results: list[OpResult] = []
    notes: list[str] = []
    timings: dict[str, float] = {}
    started = time.perf_counter()

    # create: one file per commit for a sample, then bulk-load the rest.
    sample = min(n_files, args.create_sample)
    paths = [file_path(i, n_files) for i in range(n_files)]
    grow = args.versions is not None and args.versions > n_files
    # Each file's first content, kept when the history is grown (derived from it, cheaply).
    base: list[str] = []
    _log(f"{n_files} files: creating {sample} one by one")
    docs = [Doc(paths[i], corpus.content(i)) for i in range(sample)]
    if grow or args.load == "bulk":
        base.extend(d.content for d in docs)
    gc.collect()
    lat_m, lat_r = run_interleaved(mem.create, raw.create, docs, chunk=100)
    results.append(OpResult("create (if_absent)", Stats.of(lat_m), Stats.of(lat_r)))
    del docs
    if args.load == "bulk" and (sample < n_files or grow):
        revs = bulk_load(mem, raw, paths, base, corpus, sample, args, notes)
        timings["load_s"] = time.perf_counter() - started
    else:
        revs = {}
        if sample < n_files:
            _log(f"bulk-loading files {sample}..{n_files} ({BULK_BATCH} per commit)")
            bulk_m: list[float] = []
            bulk_r: list[float] = []
            t_load = last_log = time.perf_counter()
            for batch in _chunks(range(sample, n_files), BULK_BATCH):
                docs = [Doc(paths[i], corpus.content(i)) for i in batch]
                if grow:
                    base.extend(d.content for d in docs)
                t0 = time.perf_counter()
                mem.bulk_create(docs)
                t1 = time.perf_counter()
                raw.bulk_create(docs)
                t2 = time.perf_counter()
                bulk_m.append(t1 - t0)
                bulk_r.append(t2 - t1)
                if t2 - last_log >= 30 or batch[-1] == n_files - 1:
                    last_log = t2
                    done = batch[-1] + 1 - sample
                    _log(
                        f"bulk-loaded {done:,}/{n_files - sample:,} files in {t2 - t_load:.0f}s; "
                        f"memdir {done / sum(bulk_m):,.0f} files/s, raw {done / sum(bulk_r):,.0f} "
                        "files/s"
                    )
            loaded = n_files - sample
            sm, sr = Stats.of(bulk_m), Stats.of(bulk_r)
            # ops/s in files per second; p50/p95 are per commit of BULK_BATCH files.
            sm = Stats(sm.n, loaded / sum(bulk_m), sm.p50_ms, sm.p95_ms, sm.mean_ms, sm.max_ms)
            sr = Stats(sr.n, loaded / sum(bulk_r), sr.p50_ms, sr.p95_ms, sr.mean_ms, sr.max_ms)
            results.append(
                OpResult(
                    f"bulk create ({BULK_BATCH}/commit)", sm, sr, "ops/s = files/s; p = per commit"
                )
            )
            notes.append(
                f"create measured one file per commit on the first {sample} files; the other "
                f"{loaded} were bulk-loaded through svc.commit with {BULK_BATCH} Write ops per "
                "commit (raw: one transaction per batch)"
            )
        timings["load_s"] = time.perf_counter() - started

    # history: bulk CAS overwrites until each side holds --versions versions.
    if args.versions is not None and not grow:
        _log(f"--versions {args.versions:,} <= {n_files:,} files: no history to grow")
    if grow and args.load == "service":
        t_hist = time.perf_counter()
        hist_m, hist_r = grow_history(mem, raw, paths, base, revs, args.versions - n_files)
        grown = args.versions - n_files
        timings["history_s"] = time.perf_counter() - t_hist
        sm, sr = Stats.of(hist_m), Stats.of(hist_r)
        sm = Stats(sm.n, grown / sum(hist_m), sm.p50_ms, sm.p95_ms, sm.mean_ms, sm.max_ms)
        sr = Stats(sr.n, grown / sum(hist_r), sr.p50_ms, sr.p95_ms, sr.mean_ms, sr.max_ms)
        results.append(
            OpResult(
                f"bulk overwrite ({BULK_BATCH}/commit)",
                sm,
                sr,
                "ops/s = versions/s; p = per commit",
            )
        )
        depth = grown / n_files
        notes.append(
            f"history grown by {grown:,} versions ({depth:.1f} more per file, round-robin) with "
            f"svc.commit of {BULK_BATCH} Write(if_match) ops per commit, source_kind "
            "'import' (raw: the same CAS UPDATE + version INSERT + index UPDATE per version, "
            f"one transaction per batch) in {timings['history_s']:.0f}s"
        )
    del base
    _checkpoint(memdir_url, raw, is_pg)
    versions = mem.version_count()
    raw_versions = raw.version_count()
    sizes = {"memdir_bytes": mem.size_bytes(), "raw_bytes": raw.size_bytes()}
    _log(
        f"measuring on {versions:,} versions (raw {raw_versions:,}); database size memdir "
        f"{sizes['memdir_bytes'] / 1e6:,.0f} MB, raw {sizes['raw_bytes'] / 1e6:,.0f} MB"
    )
    if versions != raw_versions:
        notes.append(f"MISMATCH: memdir holds {versions:,} versions, raw {raw_versions:,}")
    notes.append(
        f"measured on {versions:,} versions; database size memdir "
        f"{sizes['memdir_bytes'] / 1e6:,.0f} MB, raw {sizes['raw_bytes'] / 1e6:,.0f} MB "
        "(after VACUUM / checkpoint)"
    )
    timings["setup_s"] = time.perf_counter() - started

    # read
    _log("read")
    read_paths = rng.choices(paths, k=args.ops)
    gc.collect()
    lat_m, lat_r = run_interleaved(mem.read, raw.read, read_paths, warmup=50)
    results.append(OpResult("read", Stats.of(lat_m), Stats.of(lat_r)))

    # CAS overwrite and str_replace: the same chains on both sides.
    _log("CAS overwrite")
    index_of = {p: i for i, p in enumerate(paths)}
    cas_items: list[CasItem] = []
    for j, path in enumerate(rng.choices(paths, k=args.ops)):
        revs[path] = revs.get(path, 0) + 1
        cas_items.append(CasItem(path, corpus.content(index_of[path], j + 1, revs[path])))
    gc.collect()
    lat_m, lat_r = run_interleaved(mem.cas_write, raw.cas_write, cas_items, warmup=20)
    results.append(OpResult("CAS overwrite", Stats.of(lat_m), Stats.of(lat_r)))

    _log("str_replace")
    rep_items: list[ReplaceItem] = []
    for path in rng.choices(paths, k=args.ops):
        rev = revs.get(path, 0)
        revs[path] = rev + 1
        rep_items.append(ReplaceItem(path, MARKER.format(rev), MARKER.format(rev + 1)))
    gc.collect()
    lat_m, lat_r = run_interleaved(mem.str_replace, raw.str_replace, rep_items, warmup=20)
    results.append(OpResult("str_replace", Stats.of(lat_m), Stats.of(lat_r)))
    _checkpoint(memdir_url, raw, is_pg)

    # search
    _log("search")
    queries = make_queries(corpus, args.queries, seed)
    matched = {q: raw.match_count(q) for q in queries}
    mem.out.searches.clear()
    raw.out.searches.clear()
    for q in queries[:15]:  # warm the FTS pages on both sides
        mem.search(q)
        raw.search(q)
    mem.out.searches.clear()
    raw.out.searches.clear()
    gc.collect()
    lat_m, lat_r = run_interleaved(mem.search, raw.search, queries, chunk=10)
    pairs = list(zip(mem.out.searches, raw.out.searches, strict=True))
    agree = sum({p for p, _ in a} == {p for p, _ in b} for a, b in pairs)
    # memdir gives rank positions (no scores): compare the order of the paths instead.
    same_order = sum([p for p, _ in a] == [p for p, _ in b] for a, b in pairs)
    results.append(
        OpResult(
            "search (all)",
            Stats.of(lat_m),
            Stats.of(lat_r),
            f"same top-10 set on {agree}/{len(queries)} queries, same order on {same_order}",
        )
    )
    for kind in ("rare", "middling", "common"):
        picks = [i for i, q in enumerate(queries) if q.kind == kind]
        avg = statistics.mean(matched[queries[i]] for i in picks)
        results.append(
            OpResult(
                f"  search ({kind})",
                Stats.of([lat_m[i] for i in picks]),
                Stats.of([lat_r[i] for i in picks]),
                f"avg {avg:,.0f} matching files",
            )
        )

    # grep: regexes over middling words (few matches, so the whole range is scanned), over a
    # prefix and the whole store. An alternation has no literal every match must contain; a
    # single word has one (memdir may narrow the candidate files in SQL with it).
    _log("grep")
    words = corpus.band("middling")[:2]
    alternation = r"\b(?:" + "|".join(words) + r")\b"
    literal = r"\b" + words[0] + r"\b"
    grep_out: dict[str, dict[str, float]] = {}
    cases = (
        ("grep /projects/p1/ (a|b)", alternation, "/projects/p1/", args.grep_calls * 3),
        ("grep / (a|b)", alternation, "/", args.grep_calls),
        ("grep / (one word)", literal, "/", args.grep_calls),
    )
    for name, pattern, prefix, calls in cases:
        item = GrepItem(pattern, prefix)
        mem.out.greps.clear()
        raw.out.greps.clear()
        gc.collect()
        lat_m, lat_r = run_interleaved(mem.grep, raw.grep, [item] * (calls + 1), chunk=1, warmup=1)
        scanned = raw.bytes_under(prefix)
        same = mem.out.greps == raw.out.greps
        result = OpResult(
            name,
            Stats.of(lat_m),
            Stats.of(lat_r),
            f"{raw.out.greps[-1]} matching lines{'' if same else ' (MISMATCH)'}",
        )
        results.append(result)
        grep_out[name] = {
            "bytes_scanned": scanned,
            "memdir_mb_s": scanned / 1e6 / (result.memdir.mean_ms / 1000),
            "raw_mb_s": scanned / 1e6 / (result.raw.mean_ms / 1000),
        }

    results += measure_listings(mem, raw, n_files, args.ops)

    read_ok = mem.out.reads == raw.out.reads
    if not read_ok:
        notes.append("MISMATCH: memdir and raw returned different sha256 on reads")
    timings["measure_s"] = time.perf_counter() - started

    # CLI
    _log("CLI read")
    probe = paths[len(paths) // 2]
    expected = svc.read(OWNER, store, probe).content
    cli = time_cli(memdir_url, store, probe, expected, raw_db, args.cli_runs)

    mem.close()
    if isinstance(raw, RawPostgres):
        raw.close(drop=not args.keep)
        if not args.keep:
            cleanup = memdir.open(memdir_url)
            cleanup.delete_store(OWNER, store)
            cleanup.db.close()
    else:
        raw.close()
    timings["total_s"] = time.perf_counter() - started
    return {
        "files": n_files,
        "versions": versions,
        "sizes": sizes,
        "backend": "postgresql" if is_pg else "sqlite",
        "ops": {r.name.strip(): r.to_dict() for r in results},
        "grep": grep_out,
        "cli": cli.__dict__,
        "notes": notes,
        "timings": timings,
        "_results": results,
    }


def measure_listings(
    mem: MemdirBackend, raw: RawSQLite | RawPostgres, n_files: int, ops: int
) -> list[OpResult]:
    """``ls /`` (one entry: /projects with every file), ``ls`` of a project (its topics), a
    narrow ``glob`` (one topic's files) beside the hand-written probes; prefix history (20
    newest commits under one topic, memdir only: the raw schema keeps no commits)."""
    _log("listings")
    calls = max(20, ops // 20)
    project = f"/projects/p{max(4, n_files // 500) - 1}"
    out: list[OpResult] = []
    cases = (
        ("ls /", mem.ls, raw.ls, ListItem("/")),
        (f"ls {project}/", mem.ls, raw.ls, ListItem(project)),
        (f"glob {project}/notes/*.md", mem.glob, raw.glob, ListItem(f"{project}/notes/*.md")),
    )
    for name, fn_m, fn_r, item in cases:
        mem.out.listings.clear()
        raw.out.listings.clear()
        gc.collect()
        lat_m, lat_r = run_interleaved(fn_m, fn_r, [item] * (calls + 3), chunk=5, warmup=3)
        same = mem.out.listings == raw.out.listings
        entries = len(raw.out.listings[-1])
        out.append(
            OpResult(
                name,
                Stats.of(lat_m),
                Stats.of(lat_r),
                f"{entries} entries{'' if same else ' (MISMATCH)'}",
            )
        )
    item = ListItem(f"{project}/notes")
    for _ in range(3):
        mem.prefix_history(item)
    gc.collect()
    lat = time_calls(mem.prefix_history, [item] * calls)
    out.append(
        OpResult(
            f"history prefix={project}/notes/",
            Stats.of(lat),
            Stats.of([]),
            f"{len(mem.out.listings[-1])} commits (limit 20) carrying "
            f"{sum(n for _, n in mem.out.listings[-1]):,} changes; no raw baseline",
        )
    )
    return out


def _checkpoint(memdir_url: str, raw: RawSQLite | RawPostgres, is_pg: bool) -> None:
    """Settle both databases after a write phase (WAL checkpoint / VACUUM ANALYZE)."""
    raw.checkpoint()
    if is_pg:
        engine = sa.create_engine(
            sa.make_url(memdir_url).set(drivername="postgresql+psycopg"),
            isolation_level="AUTOCOMMIT",
        )
        with engine.connect() as conn:
            for table in ("heads", "blobs", "versions", "search_index", "files", "commits"):
                conn.exec_driver_sql(f"VACUUM ANALYZE {table}")
        engine.dispose()
    else:
        database = sa.make_url(memdir_url).database
        lite = sqlite3.connect(str(database))
        lite.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        lite.close()


def _results_of(data: dict[str, Any]) -> list[OpResult]:
    """The rows of a run, live or read back from ``--json`` output."""
    if "_results" in data:
        results: list[OpResult] = data["_results"]
        return results
    out: list[OpResult] = []
    for name, op in data["ops"].items():
        label = f"  {name}" if name.startswith("search (") and name != "search (all)" else name
        memdir_stats, raw_stats = (
            Stats(**{**op[side], "n": int(op[side]["n"])}) for side in ("memdir", "raw")
        )
        out.append(OpResult(label, memdir_stats, raw_stats, op.get("note", "")))
    return out


def check_targets(data: dict[str, Any]) -> tuple[list[str], bool]:
    """PASS/FAIL lines for the backend's targets, and whether all passed."""
    by_name = {r.name: r for r in _results_of(data)}
    lines: list[str] = []
    all_pass = True
    for name, limit in TARGETS[data["backend"]].items():
        r = by_name[name]
        ok = r.ratio <= limit
        all_pass &= ok
        lines.append(
            f"{'PASS' if ok else 'FAIL'}: {name} p95 {r.memdir.p95_ms:.3f} ms is "
            f"{r.ratio:.2f}x raw ({r.raw.p95_ms:.3f} ms); target <= {limit:g}x"
        )
    return lines, all_pass


def _count(n: int) -> str:
    """100000 -> 100k, 1000000 -> 1M, 1500 -> 1.5k."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if n >= size:
            return f"{n / size:.4g}{suffix}"
    return str(n)


def side_by_side(runs: Sequence[dict[str, Any]]) -> str:
    """p95 of memdir and raw, and their ratio, for several runs (e.g. SQLite and PostgreSQL)."""
    headers = ["operation"]
    for data in runs:
        versions = data.get("versions", data["files"])
        label = f"{data['backend']} {_count(data['files'])}f/{_count(versions)}v"
        headers += [f"{label} memdir p95", "raw p95", "ratio"]
    names: list[str] = []
    tables = [{r.name: r for r in _results_of(d)} for d in runs]
    for table in tables:
        names += [n for n in table if n not in names]
    rows = []
    for name in names:
        row = [name]
        for table in tables:
            r = table.get(name)
            if r is None:
                row += ["", "", ""]
            else:
                row += [fmt(r.memdir.p95_ms, 3), fmt(r.raw.p95_ms, 3), fmt(r.ratio, 2) + "x"]
        rows.append(row)
    return "p95 latency in ms, side by side\n" + format_table(headers, rows)


def report(data: dict[str, Any]) -> tuple[str, bool]:
    results = _results_of(data)
    headers = [
        "operation", "memdir ops/s", "p50 ms", "p95 ms", "raw ops/s", "p50 ms", "p95 ms",
        "ratio p95", "note",
    ]  # fmt: skip
    rows = [
        [
            r.name,
            fmt(r.memdir.ops_per_s, 1),
            fmt(r.memdir.p50_ms, 3),
            fmt(r.memdir.p95_ms, 3),
            fmt(r.raw.ops_per_s, 1),
            fmt(r.raw.p50_ms, 3),
            fmt(r.raw.p95_ms, 3),
            fmt(r.ratio, 2) + "x",
            r.note,
        ]
        for r in results
    ]
    lines = [
        f"== {data['files']:,} files, {data.get('versions', data['files']):,} versions, "
        f"{data['backend']} "
        f"(load {data['timings']['load_s']:.0f}s"
        + (
            f", history {data['timings']['history_s']:.0f}s"
            if "history_s" in data["timings"]
            else ""
        )
        + f", total {data['timings']['total_s']:.0f}s) ==",
        format_table(headers, rows),
        "",
    ]
    for name, g in data["grep"].items():
        lines.append(
            f"{name}: {g['bytes_scanned'] / 1e6:.1f} MB scanned per call; memdir "
            f"{g['memdir_mb_s']:.0f} MB/s, raw {g['raw_mb_s']:.0f} MB/s"
        )
    cli: dict[str, Any] = data["cli"]
    cli_text = "n/a" if cli["memdir_read_ms"] is None else f"{cli['memdir_read_ms']:.0f} ms"
    lines.append(
        f"CLI `memdir --db ... read PATH` median wall time: {cli_text}"
        + (f" ({cli['note']})" if cli["note"] else "")
    )
    ref = [f"`python -c 'import memdir'` {cli['python_import_memdir_ms']:.0f} ms"]
    if cli["raw_python_read_ms"] is not None:
        ref.append(f"`python -c <sqlite3 read>` {cli['raw_python_read_ms']:.0f} ms")
    lines.append("  for reference: " + ", ".join(ref))
    for note in data["notes"]:
        lines.append(f"note: {note}")
    target_lines, all_pass = check_targets(data)
    lines += target_lines
    return "\n".join(lines), all_pass


def check_loader(url: str | None, corpus: Corpus) -> int:
    """``--check-loader``: the bulk loader leaves exactly the rows the service would."""
    with tempfile.TemporaryDirectory(prefix="memdir-loadcheck-") as tmp:
        svc = memdir.open(url or f"sqlite:///{tmp}/memdir.db", create=True)
        n_files = 300
        paths = [file_path(i, n_files) for i in range(n_files)]
        base = [corpus.content(i) for i in range(n_files)]
        first = MARKER.format(0)

        def content(index: int, rev: int) -> str:
            return base[index] if rev == 0 else base[index].replace(first, MARKER.format(rev), 1)

        provenance = Provenance(source_kind="import", reason="benchmark bulk load")
        problems = compare_loads(
            svc, paths, content, sample=20, total_versions=1200, batch=100, provenance=provenance
        )
        svc.db.close()
    backend = sa.make_url(url or "sqlite://").get_backend_name()
    for line in problems:
        print(f"DIFFERENT {line}")
    print(f"{'FAIL' if problems else 'PASS'}: bulk loader vs svc.commit on {backend}")
    return 1 if problems else 0


def synchronous_cost(args: argparse.Namespace, corpus: Corpus) -> dict[str, Any]:
    """``--synchronous-cost``: create and CAS overwrite latency, synchronous NORMAL vs FULL."""
    parent = Path(args.synchronous_dir) if args.synchronous_dir else None
    with tempfile.TemporaryDirectory(prefix="memdir-sync-", dir=parent) as tmp:
        sides = {}
        for level in ("normal", "full"):
            svc = memdir.open(f"sqlite:///{tmp}/{level}.db?synchronous={level}", create=True)
            svc.create_store(OWNER, "default")
            sides[level] = MemdirBackend(svc, "default")
        n_files = 200
        paths = [file_path(i, n_files) for i in range(n_files)]
        docs = [Doc(p, corpus.content(i)) for i, p in enumerate(paths)]
        normal, full = sides["normal"], sides["full"]
        create_n, create_f = run_interleaved(normal.create, full.create, docs, chunk=20)
        rng = random.Random(f"sync:{args.seed}")
        revs = dict.fromkeys(paths, 0)
        items = []
        for _ in range(args.ops):
            path = rng.choice(paths)
            revs[path] += 1
            text = docs[paths.index(path)].content
            items.append(CasItem(path, text.replace(MARKER.format(0), MARKER.format(revs[path]))))
        cas_n, cas_f = run_interleaved(normal.cas_write, full.cas_write, items, warmup=20)
        assert normal.out.sha == full.out.sha, "the two stores diverged"
        for side in sides.values():
            side.svc.db.close()
    figures: dict[str, Any] = {"files": n_files, "ops": args.ops, "dir": parent and str(parent)}
    rows = []
    for name, lat_n, lat_f in (("create", create_n, create_f), ("CAS overwrite", cas_n, cas_f)):
        a, b = Stats.of(lat_n), Stats.of(lat_f)
        figures[name] = {"normal": asdict(a), "full": asdict(b)}
        rows.append([name, fmt(a.p50_ms), fmt(a.p95_ms), fmt(b.p50_ms), fmt(b.p95_ms),
                     f"{b.p50_ms / a.p50_ms:.2f}x", f"{b.p95_ms / a.p95_ms:.2f}x"])  # fmt: skip
    headers = ["op (ms)", "NORMAL p50", "NORMAL p95", "FULL p50", "FULL p95", "p50", "p95"]
    print(f"SQLite synchronous=NORMAL vs FULL in {parent or tempfile.gettempdir()} "
          f"({n_files} files, {args.ops} CAS overwrites)")  # fmt: skip
    print(format_table(headers, rows))
    return figures


def source_state() -> str:
    """The memdir commit measured (with ``+dirty`` when the work tree has local changes)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(REPO), "status", "--porcelain", "--", "src"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def print_saved(files: Sequence[str]) -> int:
    """Print the tables and targets of saved runs, then their p95 figures side by side."""
    import json

    runs: list[dict[str, Any]] = []
    all_pass = True
    for name in files:
        saved = json.loads(Path(name).read_text(encoding="utf-8"))
        for data in saved["runs"]:
            text, ok = report(data)
            all_pass &= ok
            print(f"[{name}: memdir {saved.get('source', '?')}, seed {saved.get('seed')}]")
            print(text)
            print()
            runs.append(data)
    if len(runs) > 1:
        print(side_by_side(runs))
        print()
    print(f"overall: {'PASS' if all_pass else 'FAIL'}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--db",
        help="database URL for memdir (default: SQLite files in a temporary directory); "
        "postgresql://USER@HOST:PORT/DB uses a throwaway store and a raw schema there",
    )
    parser.add_argument(
        "--raw-db",
        help="PostgreSQL URL for the raw baseline (default: the --db database, own schema)",
    )
    parser.add_argument(
        "--versions",
        type=int,
        help="grow the history (bulk CAS overwrites) until each store holds N versions in "
        "total before measuring (default: none, one version per file)",
    )
    parser.add_argument(
        "--load",
        choices=("bulk", "service"),
        default="bulk",
        help="how files beyond --create-sample and the history are loaded: 'bulk' writes the "
        "rows the service would (fast; checked afterwards), 'service' goes through svc.commit "
        "(500 ops per commit; hours at 1M versions)",
    )
    parser.add_argument("--ops", type=int, default=2000, help="reads / CAS / str_replace calls")
    parser.add_argument("--queries", type=int, default=300, help="search calls (1/3 per band)")
    parser.add_argument("--grep-calls", type=int, default=5, help="whole-store grep calls")
    parser.add_argument("--create-sample", type=int, default=10_000,
                        help="files created one per commit; the rest are bulk-loaded")  # fmt: skip
    parser.add_argument("--cli-runs", type=int, default=10)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--raw-flat-search", action="store_true",
                        help="raw search with memdir's single-SELECT shape (snippet on every "
                        "match) instead of top-10 first")  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the databases")
    parser.add_argument("--json", metavar="OUT", help="write the figures as JSON")
    parser.add_argument(
        "--from-json",
        nargs="+",
        metavar="FILE",
        help="run nothing: print the tables of earlier --json outputs, and the runs side by side",
    )
    parser.add_argument(
        "--synchronous-cost",
        action="store_true",
        help="run nothing else: create and CAS overwrite p50/p95 on SQLite with "
        "synchronous=normal vs full (--ops overwrites), in --synchronous-dir",
    )
    parser.add_argument(
        "--synchronous-dir",
        metavar="DIR",
        help="where --synchronous-cost puts its databases (default: a temporary directory)",
    )
    parser.add_argument(
        "--check-loader",
        action="store_true",
        help="run nothing else: load one small history (300 files, 1,200 versions) through "
        "svc.commit and through the bulk loader into two stores of the --db database (default: "
        "a temporary SQLite file) and compare every row they hold",
    )
    args = parser.parse_args(argv)
    if args.from_json:
        return print_saved(args.from_json)
    if args.check_loader:
        return check_loader(args.db, Corpus(args.seed))
    if args.synchronous_cost:
        figures = synchronous_cost(args, Corpus(args.seed))
        if args.json:
            write_json(args.json, {"seed": args.seed, "synchronous": figures})
        return 0

    source = source_state()  # before memdir's modules run: the work tree may change meanwhile
    corpus = Corpus(args.seed)
    # SIGTERM (e.g. `kill PID` of a background run) unwinds like Ctrl-C, so the temporary
    # directory below is removed.
    signal.signal(signal.SIGTERM, lambda _sig, _frame: sys.exit(143))
    workdir = Path(tempfile.mkdtemp(prefix="memdir-bench-"))
    out: list[dict[str, Any]] = []
    all_pass = True
    try:
        for n_files in args.files:
            data = run_size(n_files, args, corpus, workdir)
            text, ok = report(data)
            all_pass &= ok
            print(text, flush=True)
            print()
            data.pop("_results")
            out.append(data)
    finally:
        if args.keep:
            print(f"databases kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    source_end = source_state()
    if source_end != source:
        # The modules were imported at the start; git state at the end may differ (e.g. an
        # uncommitted src change made during a long run, which a CLI subprocess would see).
        source = f"{source} (at the end: {source_end})"
    print(f"overall: {'PASS' if all_pass else 'FAIL'} (memdir {source})")
    if args.json:
        write_json(
            args.json,
            {"seed": args.seed, "ops": args.ops, "source": source, "runs": out},
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
