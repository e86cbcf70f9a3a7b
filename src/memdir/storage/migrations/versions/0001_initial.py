"""The versioned store: stores, blobs, files, heads, commits, versions, full-text index.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

PathType = sa.Text().with_variant(sa.Text(collation="C"), "postgresql")
Id = sa.BigInteger().with_variant(sa.Integer, "sqlite")
Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "stores",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("archived_at", Time, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_stores"),
        sa.UniqueConstraint("name", name="uq_stores_name"),
    )
    op.create_table(
        "blobs",
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("content", sa.Text, nullable=False),
        sa.PrimaryKeyConstraint("store_id", "sha256", name="pk_blobs"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_blobs_store_id_stores"),
    )
    op.create_table(
        "files",
        sa.Column("id", Id, nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("created_revision", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_files"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_files_store_id_stores"),
    )
    op.create_index("ix_files_store_id", "files", ["store_id"])
    op.create_table(
        "heads",
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("path", PathType, nullable=False),
        sa.Column("file_id", sa.BigInteger, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("updated_at", Time, nullable=False),
        sa.PrimaryKeyConstraint("store_id", "path", name="pk_heads"),
        sa.UniqueConstraint("file_id", name="uq_heads_file_id"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_heads_store_id_stores"),
        sa.ForeignKeyConstraint(["file_id"], ["files.id"], name="fk_heads_file_id_files"),
    )
    op.create_table(
        "commits",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("session", sa.Text, nullable=True),
        sa.Column("transcript", sa.Text, nullable=True),
        sa.Column("reason", sa.Text, nullable=True),
        sa.Column("source_kind", sa.String(32), nullable=True),
        sa.Column("idempotency_key", sa.String(4000), nullable=True),
        sa.Column("request_hash", sa.String(64), nullable=True),
        sa.Column("result", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_commits"),
        sa.UniqueConstraint("store_id", "revision", name="uq_commits_store_id_revision"),
        sa.UniqueConstraint(
            "store_id", "actor", "idempotency_key", name="uq_commits_store_id_actor_idempotency_key"
        ),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_commits_store_id_stores"),
    )
    op.create_index("ix_commits_store_id_actor", "commits", ["store_id", "actor"])
    op.create_index("ix_commits_store_id_session", "commits", ["store_id", "session"])
    op.create_table(
        "versions",
        sa.Column("id", Id, nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("file_id", sa.BigInteger, nullable=False),
        sa.Column("number", sa.Integer, nullable=False),
        sa.Column("commit_id", sa.String(32), nullable=False),
        sa.Column("revision", sa.BigInteger, nullable=False),
        sa.Column("operation", sa.String(16), nullable=False),
        sa.Column("path", PathType, nullable=False),
        sa.Column("old_path", PathType, nullable=True),
        sa.Column("sha256", sa.String(64), nullable=True),
        sa.Column("size", sa.Integer, nullable=False),
        sa.Column("redacted_at", Time, nullable=True),
        sa.Column("redacted_by", sa.String(200), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_versions"),
        sa.UniqueConstraint("file_id", "number", name="uq_versions_file_id_number"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_versions_store_id_stores"),
        sa.ForeignKeyConstraint(["file_id"], ["files.id"], name="fk_versions_file_id_files"),
        sa.ForeignKeyConstraint(
            ["commit_id"], ["commits.id"], name="fk_versions_commit_id_commits"
        ),
    )
    op.create_index("ix_versions_store_id_path", "versions", ["store_id", "path"])
    op.create_index("ix_versions_store_id_sha256", "versions", ["store_id", "sha256"])
    op.create_index("ix_versions_commit_id", "versions", ["commit_id"])
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        from memdir.search.fts5 import TOKENIZER

        op.execute(
            f"CREATE VIRTUAL TABLE search_fts USING fts5(path, body, tokenize = '{TOKENIZER}')"
        )
    else:
        op.execute(
            "CREATE TABLE search_index ("
            " file_id BIGINT PRIMARY KEY REFERENCES files(id),"
            " store_id INTEGER NOT NULL REFERENCES stores(id),"
            ' path TEXT COLLATE "C" NOT NULL,'
            " body TEXT NOT NULL,"
            " tsv tsvector GENERATED ALWAYS AS ("
            "  setweight(to_tsvector('english', path), 'B') ||"
            "  setweight(to_tsvector('english', body), 'A')) STORED)"
        )
        op.execute("CREATE INDEX search_index_tsv ON search_index USING GIN (tsv)")
        op.execute("CREATE INDEX search_index_store_path ON search_index (store_id, path)")


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        op.execute("DROP TABLE IF EXISTS search_fts")
    else:
        op.execute("DROP TABLE IF EXISTS search_index")
    for table in ("versions", "commits", "heads", "files", "blobs", "stores"):
        op.drop_table(table)
