"""Context metadata and last reads: ``file_meta`` and ``file_reads`` (see schema.py).

``file_meta`` is filled for every live file from its current content, its version's time and
its writer, so context, expiry and the stale report work on a store written before this
migration; ``file_reads`` starts empty (reads are recorded from now on).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "file_meta",
        sa.Column("file_id", sa.BigInteger, nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
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
        sa.ForeignKeyConstraint(["file_id"], ["files.id"], name="fk_file_meta_file_id_files"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_file_meta_store_id_stores"),
        sa.PrimaryKeyConstraint("file_id", name="pk_file_meta"),
    )
    op.create_index("ix_file_meta_store_id_expires_at", "file_meta", ["store_id", "expires_at"])
    op.create_table(
        "file_reads",
        sa.Column("file_id", sa.BigInteger, nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
        sa.Column("read_at", Time, nullable=False),
        sa.ForeignKeyConstraint(["file_id"], ["files.id"], name="fk_file_reads_file_id_files"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_file_reads_store_id_stores"),
        sa.PrimaryKeyConstraint("file_id", name="pk_file_reads"),
    )
    op.create_index("ix_file_reads_store_id", "file_reads", ["store_id"])
    _backfill()


def _backfill() -> None:
    """A ``file_meta`` row for every live file, as the writer would have written it."""
    import datetime as dt

    from memdir.core.frontmatter import describe

    bind = op.get_bind()
    times = ("expires_at", "review_after")
    booleans = ("core", "skill", "no_expiry")
    meta = sa.table(
        "file_meta",
        *(sa.column(c, Time if c in times else sa.Boolean if c in booleans else None)
          for c in ("file_id", "store_id", "summary", "name", "core", "skill", "expires_at",
                    "no_expiry", "review_after", "verify", "actor", "source_kind")),
    )  # fmt: skip
    rows = bind.execute(
        sa.text(
            "SELECT h.store_id, h.path, h.file_id, h.updated_at, b.content, c.actor, "
            "c.source_kind FROM heads h JOIN blobs b ON b.store_id = h.store_id AND "
            "b.sha256 = h.sha256 LEFT JOIN versions v ON v.file_id = h.file_id AND "
            "v.number = h.version LEFT JOIN commits c ON c.id = v.commit_id"
        )
    )
    batch: list[dict[str, object]] = []
    for store_id, path, file_id, updated, content, actor, source_kind in rows:
        if isinstance(updated, str):
            updated = dt.datetime.fromisoformat(updated)
        if updated.tzinfo is None:
            updated = updated.replace(tzinfo=dt.UTC)
        d = describe(path, content, updated)
        batch.append(dict(file_id=file_id, store_id=store_id, summary=d.summary, name=d.name,
                          core=d.core, skill=d.skill, expires_at=d.expires_at,
                          no_expiry=d.no_expiry, review_after=d.review_after, verify=d.verify,
                          actor=actor, source_kind=source_kind))  # fmt: skip
        if len(batch) >= 1000:
            bind.execute(meta.insert(), batch)
            batch = []
    if batch:
        bind.execute(meta.insert(), batch)


def downgrade() -> None:
    op.drop_table("file_reads")
    op.drop_table("file_meta")
