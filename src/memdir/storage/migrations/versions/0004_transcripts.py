"""Transcripts: imported agent sessions and their ordered events.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Time = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "transcripts",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("store_id", sa.Integer, nullable=False),
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
        sa.PrimaryKeyConstraint("id", name="pk_transcripts"),
        sa.UniqueConstraint(
            "store_id", "format", "session_id", name="uq_transcripts_store_id_format_session_id"
        ),
        sa.ForeignKeyConstraint(
            ["store_id"], ["stores.id"], name="fk_transcripts_store_id_stores", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_transcripts_store_id_started_at", "transcripts", ["store_id", "started_at"])
    op.create_table(
        "transcript_events",
        sa.Column("transcript_id", sa.String(32), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
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
        sa.PrimaryKeyConstraint("transcript_id", "seq", name="pk_transcript_events"),
        sa.UniqueConstraint("transcript_id", "key", name="uq_transcript_events_transcript_id_key"),
        sa.ForeignKeyConstraint(
            ["transcript_id"],
            ["transcripts.id"],
            name="fk_transcript_events_transcript_id_transcripts",
            ondelete="CASCADE",
        ),
    )


def downgrade() -> None:
    op.drop_table("transcript_events")
    op.drop_index("ix_transcripts_store_id_started_at", "transcripts")
    op.drop_table("transcripts")
