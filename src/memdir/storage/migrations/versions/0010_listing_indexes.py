"""Indexes for listings decided in SQL: context's core files and skills, the review queue by
impact and by time.

- ``file_meta (store_id, core, skill)``: context streams core files and skills first, so it
  finds them without reading every file's metadata.
- ``proposals (store_id, status, <impact>, id)``: the queue's default order, sessions affected
  when ``statistics.sessions`` is a JSON number (else 0), then id — the very expression
  :func:`memdir.storage.schema.impact_sql` puts in the ORDER BY, so the database walks the index
  instead of sorting every open proposal. Expression indexes exist on SQLite (3.9+) and
  PostgreSQL, each with its own JSON functions.
- ``proposals (store_id, status, created_at, id)``: the queue by time.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from memdir.storage.schema import impact_sql

    op.create_index("ix_file_meta_store_id_core_skill", "file_meta", ["store_id", "core", "skill"])
    op.create_index(
        "ix_proposals_store_id_status_created_at_id", "proposals",
        ["store_id", "status", "created_at", "id"],
    )  # fmt: skip
    impact = impact_sql(op.get_bind().dialect.name)
    op.execute(
        f"CREATE INDEX ix_proposals_store_id_status_impact_id ON proposals "
        f"(store_id, status, ({impact}), id)"
    )


def downgrade() -> None:
    op.drop_index("ix_proposals_store_id_status_impact_id", "proposals")
    op.drop_index("ix_proposals_store_id_status_created_at_id", "proposals")
    op.drop_index("ix_file_meta_store_id_core_skill", "file_meta")
