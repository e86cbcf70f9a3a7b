"""Turning storage rows into the core's result values (shared by the service modules)."""

from __future__ import annotations

import datetime as dt

from memdir.core.model import Entry, FileView, VersionInfo
from memdir.storage.repository import Row

__all__ = ["aware", "entry", "utcnow", "version_info", "view"]


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def aware(value: dt.datetime) -> dt.datetime:
    """SQLite returns naive datetimes; every stored time is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def view(head: Row, content: str) -> FileView:
    return FileView(
        path=head.path,
        content=content,
        sha256=head.sha256,
        version=head.version,
        size=head.size,
        file_id=head.file_id,
        revision=head.revision,
        updated_at=aware(head.updated_at),
    )


def entry(head: Row) -> Entry:
    return Entry(
        path=head.path, kind="file", size=head.size, sha256=head.sha256, version=head.version
    )


def version_info(row: Row) -> VersionInfo:
    """A version row joined with its commit (see Repository._versions_query)."""
    return VersionInfo(
        file_id=row.file_id,
        version=row.number,
        operation=row.operation,
        path=row.path,
        sha256=row.sha256,
        size=row.size,
        commit=row.commit_id,
        revision=row.revision,
        actor=row.actor,
        created_at=aware(row.created_at),
        old_path=row.old_path,
        redacted=row.redacted_at is not None,
        reason=row.reason,
        session=row.session,
        source_kind=row.source_kind,
        findings=tuple(row.findings or ()),
    )
