"""The SQLAlchemy Core schema: one definition for SQLite and PostgreSQL.

Tables and their invariants:

- ``stores``: one row per store; ``revision`` is the store's counter row, incremented by the
  committing transaction itself (``UPDATE ... RETURNING``), so revisions are gap-free and, as
  the row lock serialises committers, totally ordered — on one server or many.
- ``blobs``: content stored once per (store, sha256). Redaction deletes a blob.
- ``files``: a file's stable identity (its integer id survives renames); nothing else.
- ``heads``: the live tree. ``(store_id, path)`` is the key; a row exists iff the file exists.
  ``sha256`` is the compare-and-swap column.
- ``versions``: one immutable row per mutation of a file (``number`` 1, 2, 3, ... per file).
  ``sha256`` is NULL for deletions and for redacted versions.
- ``commits``: one row per atomic change set, with provenance and the store revision it made;
  ``(store_id, actor, idempotency_key)`` is unique and holds the first attempt's result.
- ``idempotency_keys``: the same for mutations that make no commit (stores, principals,
  tokens, proposal reviews): per (principal, sha256 of the key), the request's hash and the
  first attempt's result — NULL while that attempt is still running.

Paths compare in binary order on both dialects (``COLLATE "C"`` on PostgreSQL), which the
directory range scans of :func:`memdir.core.paths.descendant_range` rely on. The full-text
index is dialect-specific and lives in the dialect modules, outside this metadata.
"""

from __future__ import annotations

import sqlalchemy as sa

__all__ = [
    "HEAD_REVISION",
    "blobs",
    "commits",
    "dream_runs",
    "file_meta",
    "file_reads",
    "files",
    "heads",
    "idempotency_keys",
    "impact_sql",
    "metadata",
    "principals",
    "proposals",
    "stores",
    "tokens",
    "transcript_events",
    "transcripts",
    "versions",
]

#: The Alembic revision this code expects; a test keeps it equal to the migrations' head.
HEAD_REVISION = "0010"

metadata = sa.MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

PathType = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
Sha = sa.String(64)
Time = sa.DateTime(timezone=True)

stores = sa.Table(
    "stores",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("name", sa.String(63), nullable=False, unique=True),
    sa.Column("revision", sa.BigInteger, nullable=False, server_default="0"),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("archived_at", Time, nullable=True),
)

blobs = sa.Table(
    "blobs",
    metadata,
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), primary_key=True),
    sa.Column("sha256", Sha, primary_key=True),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("content", sa.Text, nullable=False),
)

files = sa.Table(
    "files",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False, index=True),
    sa.Column("created_revision", sa.BigInteger, nullable=False),
)

heads = sa.Table(
    "heads",
    metadata,
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), primary_key=True),
    sa.Column("path", PathType, primary_key=True),
    sa.Column("file_id", sa.BigInteger, sa.ForeignKey("files.id"), nullable=False, unique=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("sha256", Sha, nullable=False),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("revision", sa.BigInteger, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
)

# --- context metadata (migration 0008) -------------------------------------------------------
# ``file_meta``: what context assembly, expiry and the stale report need of a live file without
# reading its content, derived from the current version when it is written (one row per file,
# by its stable id): ``summary`` (frontmatter description, else the first heading), a skill's
# ``name``, ``core``, ``expires_at`` / ``review_after`` resolved to moments (durations counted
# from the version's time), ``no_expiry`` (``expires: never``), the ``verify`` hint, and the
# version's writer (``actor``) and provenance ``source_kind``.
# ``file_reads``: the last time the file was read (by path, in context or in search results),
# flushed in batches by :class:`memdir.reads.ReadLog`; never a version.
file_meta = sa.Table(
    "file_meta",
    metadata,
    sa.Column("file_id", sa.BigInteger, sa.ForeignKey("files.id"), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False),
    sa.Column("summary", sa.Text, nullable=True),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("core", sa.Boolean, nullable=False),
    sa.Column("skill", sa.Boolean, nullable=False),
    sa.Column("expires_at", Time, nullable=True),
    sa.Column("no_expiry", sa.Boolean, nullable=False),
    sa.Column("review_after", Time, nullable=True),
    sa.Column("verify", sa.Text, nullable=True),
    sa.Column("actor", sa.String(200), nullable=True),
    sa.Column("source_kind", sa.String(32), nullable=True),
    sa.Index(None, "store_id", "expires_at"),
    sa.Index(None, "store_id", "core", "skill"),  # 0010: context's core files and skills
)

file_reads = sa.Table(
    "file_reads",
    metadata,
    sa.Column("file_id", sa.BigInteger, sa.ForeignKey("files.id"), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False),
    sa.Column("read_at", Time, nullable=False),
    sa.Index(None, "store_id"),
)

commits = sa.Table(
    "commits",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False),
    sa.Column("revision", sa.BigInteger, nullable=False),
    sa.Column("actor", sa.String(200), nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("session", sa.Text, nullable=True),
    sa.Column("transcript", sa.Text, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("source_kind", sa.String(32), nullable=True),
    sa.Column("idempotency_key", sa.String(4000), nullable=True),
    sa.Column("request_hash", Sha, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("proposal_id", sa.String(32), nullable=True),
    sa.UniqueConstraint("store_id", "revision"),
    sa.UniqueConstraint("store_id", "actor", "idempotency_key"),
    sa.Index(None, "store_id", "actor"),
    sa.Index(None, "store_id", "session"),
)

versions = sa.Table(
    "versions",
    metadata,
    sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False),
    sa.Column("file_id", sa.BigInteger, sa.ForeignKey("files.id"), nullable=False),
    sa.Column("number", sa.Integer, nullable=False),
    sa.Column("commit_id", sa.String(32), sa.ForeignKey("commits.id"), nullable=False),
    sa.Column("revision", sa.BigInteger, nullable=False),
    sa.Column("operation", sa.String(16), nullable=False),
    sa.Column("path", PathType, nullable=False),
    sa.Column("old_path", PathType, nullable=True),
    sa.Column("sha256", Sha, nullable=True),
    sa.Column("size", sa.Integer, nullable=False),
    sa.Column("redacted_at", Time, nullable=True),
    sa.Column("redacted_by", sa.String(200), nullable=True),
    sa.Column("findings", sa.JSON, nullable=True),
    sa.UniqueConstraint("file_id", "number"),
    sa.Index(None, "store_id", "path"),
    sa.Index(None, "store_id", "sha256"),
    sa.Index(None, "commit_id"),
    # Renames only (migration 0009): prefix history finds a file moved out of a directory by
    # its old path without scanning every version; a write that is not a rename skips it.
    sa.Index(
        None,
        "store_id",
        "old_path",
        sqlite_where=sa.text("old_path IS NOT NULL"),
        postgresql_where=sa.text("old_path IS NOT NULL"),
    ),
)

principals = sa.Table(
    "principals",
    metadata,
    sa.Column("id", sa.String(200), primary_key=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("groups", sa.JSON, nullable=False),
    sa.Column("projects", sa.JSON, nullable=False),
    sa.Column("tasks", sa.JSON, nullable=False),
    sa.Column("acts_for", sa.String(200), nullable=True),
    sa.Column("created_at", Time, nullable=False),
)

tokens = sa.Table(
    "tokens",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("principal_id", sa.String(200), sa.ForeignKey("principals.id"), nullable=False),
    sa.Column("token_hash", Sha, nullable=False, unique=True),
    sa.Column("name", sa.String(200), nullable=True),
    sa.Column("scope_paths", sa.JSON, nullable=False),
    sa.Column("scope_actions", sa.JSON, nullable=False),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("expires_at", Time, nullable=True),
    sa.Column("revoked_at", Time, nullable=True),
    sa.Index(None, "principal_id"),
)

proposals = sa.Table(
    "proposals",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("store_id", sa.Integer, sa.ForeignKey("stores.id"), nullable=False),
    sa.Column("author", sa.String(200), nullable=False),
    sa.Column("origin", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("operations", sa.JSON, nullable=False),
    sa.Column("paths", sa.JSON, nullable=False),
    sa.Column("rationale", sa.Text, nullable=True),
    sa.Column("evidence", sa.JSON, nullable=True),
    sa.Column("statistics", sa.JSON, nullable=True),
    sa.Column("findings", sa.JSON, nullable=True),
    sa.Column("notes", sa.JSON, nullable=True),
    sa.Column("session", sa.Text, nullable=True),
    sa.Column("source_kind", sa.String(32), nullable=True),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    sa.Column("reviewer", sa.String(200), nullable=True),
    sa.Column("reviewed_at", Time, nullable=True),
    sa.Column("review_comment", sa.Text, nullable=True),
    sa.Column("commit_id", sa.String(32), nullable=True),
    sa.Column("run_id", sa.String(32), nullable=True),  # the dream run it came from (0005)
    sa.Index(None, "store_id", "status"),
    sa.Index(None, "run_id"),
    # 0010: the queue by time; by impact, an expression index made by the migration only
    sa.Index(None, "store_id", "status", "created_at", "id"),
)

# --- transcripts (migration 0004) -----------------------------------------------------------
# ``transcripts``: one row per imported agent session, keyed by (store, source format, session
# id); ``events`` is the number of event rows it has. Scope labels (project, user, agent, task)
# decide who reads it. ``transcript_events``: its ordered events, ``seq`` 0, 1, 2, ... and
# ``key`` (the source-derived identity that makes re-import of a grown session append only what
# is new). JSON values are stored as text. Deleting a store or a transcript cascades.

transcripts = sa.Table(
    "transcripts",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column(
        "store_id", sa.Integer, sa.ForeignKey("stores.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("format", sa.String(64), nullable=False),
    sa.Column("session_id", sa.Text, nullable=False),
    sa.Column("parent_session", sa.Text, nullable=True),
    sa.Column("project", sa.Text, nullable=True),
    sa.Column("user", sa.Text, nullable=True),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("task", sa.Text, nullable=True),
    sa.Column("labels", sa.Text, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("score", sa.Float, nullable=True),
    sa.Column("started_at", Time, nullable=True),
    sa.Column("ended_at", Time, nullable=True),
    sa.Column("events", sa.Integer, nullable=False),
    sa.Column("tool_calls", sa.Integer, nullable=False),
    sa.Column("tool_errors", sa.Integer, nullable=False),
    sa.Column("redactions", sa.Integer, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
    sa.Column("imported_at", Time, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    sa.Column("imported_by", sa.String(200), nullable=False),
    sa.UniqueConstraint("store_id", "format", "session_id"),
    sa.Index(None, "store_id", "started_at"),
)

transcript_events = sa.Table(
    "transcript_events",
    metadata,
    sa.Column(
        "transcript_id",
        sa.String(32),
        sa.ForeignKey("transcripts.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("seq", sa.Integer, primary_key=True),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("role", sa.String(16), nullable=True),
    sa.Column("ts", Time, nullable=True),
    sa.Column("name", sa.Text, nullable=True),
    sa.Column("call_id", sa.Text, nullable=True),
    sa.Column("text", sa.Text, nullable=True),
    sa.Column("input", sa.Text, nullable=True),
    sa.Column("is_error", sa.Boolean, nullable=True),
    sa.Column("exit_code", sa.Integer, nullable=True),
    sa.Column("duration_ms", sa.Float, nullable=True),
    sa.Column("usage", sa.Text, nullable=True),
    sa.Column("model", sa.Text, nullable=True),
    sa.Column("message_id", sa.Text, nullable=True),
    sa.Column("raw", sa.Text, nullable=True),
    sa.UniqueConstraint("transcript_id", "key"),
)

# --- dream runs (migration 0005) ------------------------------------------------------------
# One row per dream run: who ran it, the store revision it pinned, what it selected (filters
# and the id window) and its configuration, the memory manifest it read (path -> sha256 at the
# pinned revision, so a resumed run sees the same memory), progress, the engine checkpoint (JSON
# text, rewritten as the run goes so an interrupted run resumes without repeating work), model
# usage and cost, and the final report. Proposals name their run in ``proposals.run_id``.

dream_runs = sa.Table(
    "dream_runs",
    metadata,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column(
        "store_id", sa.Integer, sa.ForeignKey("stores.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("principal", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("revision", sa.Integer, nullable=False),
    sa.Column("selection", sa.JSON, nullable=False),
    sa.Column("config", sa.JSON, nullable=False),
    sa.Column("memory", sa.JSON, nullable=False),
    sa.Column("selected", sa.Integer, nullable=False),
    sa.Column("processed", sa.Integer, nullable=False),
    sa.Column("checkpoint", sa.Text, nullable=True),
    sa.Column("usage", sa.JSON, nullable=True),
    sa.Column("report", sa.JSON, nullable=True),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("created_at", Time, nullable=False),
    sa.Column("updated_at", Time, nullable=False),
    sa.Column("finished_at", Time, nullable=True),
    sa.Index(None, "store_id", "created_at"),
)

idempotency_keys = sa.Table(
    "idempotency_keys",
    metadata,
    sa.Column("principal", sa.String(200), primary_key=True),
    sa.Column("key_hash", Sha, primary_key=True),  # keys may be long; index their hash
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("request_hash", Sha, nullable=False),
    sa.Column("result", sa.Text, nullable=True),
    sa.Column("created_at", Time, nullable=False),
)


def impact_sql(dialect: str) -> str:
    """The queue's impact key as SQL text: ``statistics.sessions`` as a float when it is a
    JSON number, else 0 (never a cast error). Literal text, not bound parameters, because the
    index of migration 0010 is on this very expression and a database matches an expression
    index only against the same expression."""
    if dialect == "postgresql":
        return ("CASE WHEN json_typeof(statistics -> 'sessions') = 'number' "
                "THEN CAST(statistics ->> 'sessions' AS FLOAT) ELSE 0.0 END")  # fmt: skip
    return ("CASE WHEN json_type(statistics, '$.sessions') IN ('integer', 'real') "
            "THEN CAST(json_extract(statistics, '$.sessions') AS FLOAT) ELSE 0.0 END")  # fmt: skip
