"""One FTS5 table per store on SQLite (``search_fts_<store id>``); nothing on PostgreSQL.

FTS5's posting lists and statistics are table-wide: with every store in one table, the time of
a search depended on the other stores' documents. The rows move to their store's table (the
rowid stays the file id) and the shared table goes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def _store_ids() -> list[int]:
    return [int(r[0]) for r in op.get_bind().exec_driver_sql("SELECT id FROM stores").all()]


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    from memdir.search.fts5 import TOKENIZER

    for store_id in _store_ids():
        table = f"search_fts_{store_id}"
        op.execute(f"DROP TABLE IF EXISTS {table}")
        op.execute(f"CREATE VIRTUAL TABLE {table} USING fts5(path, body, tokenize = '{TOKENIZER}')")
        op.execute(
            f"INSERT INTO {table} (rowid, path, body) SELECT s.rowid, s.path, s.body "
            f"FROM search_fts s JOIN files f ON f.id = s.rowid WHERE f.store_id = {store_id}"
        )
    op.execute("DROP TABLE IF EXISTS search_fts")


def downgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    from memdir.search.fts5 import TOKENIZER

    op.execute(f"CREATE VIRTUAL TABLE search_fts USING fts5(path, body, tokenize = '{TOKENIZER}')")
    for store_id in _store_ids():
        table = f"search_fts_{store_id}"
        op.execute(
            f"INSERT INTO search_fts (rowid, path, body) SELECT rowid, path, body FROM {table}"
        )
        op.execute(f"DROP TABLE IF EXISTS {table}")
