"""A partial index on ``versions (store_id, old_path)`` for renames (see schema.py).

History filtered by a directory keeps a commit that moved a file out of it; without an index
on ``old_path`` that test read every version of the store. Only renames set ``old_path``, so
the index holds one entry per rename and other writes never touch it.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_versions_store_id_old_path",
        "versions",
        ["store_id", "old_path"],
        sqlite_where=sa.text("old_path IS NOT NULL"),
        postgresql_where=sa.text("old_path IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_versions_store_id_old_path", table_name="versions")
