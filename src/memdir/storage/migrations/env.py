"""Alembic environment: always runs on a connection handed in by memdir.storage.migrate."""

from __future__ import annotations

from typing import Any

from alembic import context

from memdir.storage.schema import metadata

# The dialect-specific full-text index and the queue's impact index (an expression in each
# dialect's JSON functions, migration 0010) are outside the metadata; autogenerate skips them.
_IGNORED_PREFIXES = ("search_fts", "search_index", "ix_proposals_store_id_status_impact_id")


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    if type_ == "table" and name is not None and name.startswith(_IGNORED_PREFIXES):
        return False
    return not (type_ == "index" and name is not None and name.startswith(_IGNORED_PREFIXES))


connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    include_name=include_name,
    transactional_ddl=True,
    render_as_batch=connection.dialect.name == "sqlite",
)
context.run_migrations()
