"""Principals, tokens, the review queue; commits link to proposals, versions keep findings.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("id", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("groups", sa.JSON, nullable=False),
        sa.Column("projects", sa.JSON, nullable=False),
        sa.Column("tasks", sa.JSON, nullable=False),
        sa.Column("acts_for", sa.String(200), nullable=True),
        sa.Column("created_at", Time, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_principals"),
    )
    op.create_table(
        "tokens",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("principal_id", sa.String(200), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("scope_paths", sa.JSON, nullable=False),
        sa.Column("scope_actions", sa.JSON, nullable=False),
        sa.Column("created_at", Time, nullable=False),
        sa.Column("expires_at", Time, nullable=True),
        sa.Column("revoked_at", Time, nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_tokens"),
        sa.UniqueConstraint("token_hash", name="uq_tokens_token_hash"),
        sa.ForeignKeyConstraint(
            ["principal_id"], ["principals.id"], name="fk_tokens_principal_id_principals"
        ),
    )
    op.create_index("ix_tokens_principal_id", "tokens", ["principal_id"])
    op.create_table(
        "proposals",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
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
        sa.PrimaryKeyConstraint("id", name="pk_proposals"),
        sa.ForeignKeyConstraint(["store_id"], ["stores.id"], name="fk_proposals_store_id_stores"),
    )
    op.create_index("ix_proposals_store_id_status", "proposals", ["store_id", "status"])
    with op.batch_alter_table("commits") as batch:
        batch.add_column(sa.Column("proposal_id", sa.String(32), nullable=True))
    with op.batch_alter_table("versions") as batch:
        batch.add_column(sa.Column("findings", sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("versions") as batch:
        batch.drop_column("findings")
    with op.batch_alter_table("commits") as batch:
        batch.drop_column("proposal_id")
    op.drop_table("proposals")
    op.drop_table("tokens")
    op.drop_table("principals")
