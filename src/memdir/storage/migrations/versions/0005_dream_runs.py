"""Dream runs, and the run a proposal came from.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None

Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "dream_runs",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
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
        sa.PrimaryKeyConstraint("id", name="pk_dream_runs"),
        sa.ForeignKeyConstraint(
            ["store_id"], ["stores.id"], name="fk_dream_runs_store_id_stores", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_dream_runs_store_id_created_at", "dream_runs", ["store_id", "created_at"])
    with op.batch_alter_table("proposals") as batch:
        batch.add_column(sa.Column("run_id", sa.String(32), nullable=True))
        batch.create_index("ix_proposals_run_id", ["run_id"])


def downgrade() -> None:
    with op.batch_alter_table("proposals") as batch:
        batch.drop_index("ix_proposals_run_id")
        batch.drop_column("run_id")
    op.drop_index("ix_dream_runs_store_id_created_at", table_name="dream_runs")
    op.drop_table("dream_runs")
