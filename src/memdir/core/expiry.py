"""When a file read by path has expired: the decision from its content alone, no query.

A file expires at its frontmatter's ``expires`` (a date, a time, or a duration after its last
change; ``never`` keeps it), and a file under ``/tasks/`` without ``expires`` after
``task_expiry_days`` days without a change (0: never). The service and the CLI's read fast
path both ask :func:`expired_at`, so a read says the same thing on either path.
"""

from __future__ import annotations

import datetime as dt

from memdir.core.errors import InvalidInput

__all__ = ["expired_at"]


def expired_at(
    path: str, content: str, updated_at: dt.datetime, task_expiry_days: int, now: dt.datetime
) -> dt.datetime | None:
    """When the file expired (None: it has not, at ``now``). Frontmatter is parsed only when
    the content starts with it and names ``expires`` (the hot read path pays for no parse)."""
    if content.startswith("---") and "expires" in content[:4096]:
        from memdir.core.frontmatter import parse_frontmatter, parse_when

        try:
            front = parse_frontmatter(content)
            when = parse_when("expires", front.expires, updated_at)
        except InvalidInput:
            return None
        if when is not None:
            return when if when <= now else None
        if front.expires is not None:  # never
            return None
    if path.startswith("/tasks/") and task_expiry_days > 0:
        when = updated_at + dt.timedelta(days=task_expiry_days)
        return when if when <= now else None
    return None
