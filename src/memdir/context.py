"""ContextMixin: the memory a session starts with, expiry, and the stale report.

The service half of :mod:`memdir.core.context`: it gathers, through the caller's access
decisions, one row per readable live file (``heads`` ⟕ ``file_meta`` ⟕ ``file_reads``, no
content), the bodies of the core files, and — with a query — the search ranks of readable
matches; the core module orders, renders and cuts them. A file the caller may not read never
reaches the assembly, so nothing of it (path, summary, count) can appear in the output.

**Expiry** is one decision, :meth:`memdir.base.ServiceBase._expired`: a file whose
``expires`` has come, or a file under ``/tasks/`` that names none and was last changed more than
``task_expiry_days`` ago, is hidden from context, search, grep, ls, glob and the tree unless
the caller asks for it (``include_expired``); reading it by path still works and says so.

The **stale report** lists, per scope, readable files that are expired, due for review
(``review_after`` has come), not read in ``days`` days (by their recorded reads, else their
last change), or contradicted by a dream (an open dream proposal the caller may see that
changes the file because recent sessions contradict it), each with its last writer.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter
from collections.abc import Iterator, Sequence

import sqlalchemy as sa

from memdir.access import Access, scope_decides_bound
from memdir.base import ServiceBase
from memdir.core.context import (
    DEFAULT_BUDGET,
    SCOPE_ORDER,
    Assembled,
    Item,
    assemble_ordered,
    scope_of,
)
from memdir.core.errors import InvalidInput
from memdir.core.frontmatter import split_frontmatter
from memdir.core.limits import check_int
from memdir.core.model import Principal
from memdir.core.paths import validate_path
from memdir.core.results import StaleFile
from memdir.proposals import visible
from memdir.rows import utcnow
from memdir.search.query import parse_query
from memdir.storage.context_query import ContextFile, ContextQuery
from memdir.storage.meta import ContextRow, context_rows
from memdir.storage.repository import Repository
from memdir.storage.schema import heads, proposals

_log = logging.getLogger(__name__)

__all__ = ["STALE_REASONS", "ContextMixin", "StaleFile"]

#: The reasons a file is stale, in the order the report gives them.
STALE_REASONS = ("expired", "review-due", "unread", "contradicted")
#: Search ranks context asks for with ``query`` (files beyond rank by recent use).
_RANKED = 200


def _name_check(what: str, value: str | None) -> None:
    if value is not None and (not value or "/" in value):
        raise InvalidInput(
            f"{what} must be a single path segment (a {what} name), received {value!r}",
            **{what: value},
        )


class ContextMixin(ServiceBase):
    """Context assembly, expiry and staleness over the caller's readable files."""

    # --- expiry of a file read by path ----------------------------------------------------

    def expired_at(self, path: str, content: str, updated_at: dt.datetime) -> dt.datetime | None:
        """When a file read by path expired (None: it has not), from the content just read —
        the hot read path pays for no query (frontmatter is parsed only when it names
        ``expires``)."""
        from memdir.core.expiry import expired_at

        return expired_at(path, content, updated_at, self.task_expiry_days, utcnow())

    def _record_hits(self, repo: Repository, store_id: int, paths: Sequence[str]) -> None:
        """Record a read of each search hit (their file ids, in the search's transaction)."""
        found = repo.conn.execute(
            sa.select(heads.c.file_id).where(heads.c.store_id == store_id, heads.c.path.in_(paths))
        )
        self.reads.record(store_id, [int(f) for (f,) in found])

    # --- context ----------------------------------------------------------------------------

    def context(
        self,
        principal: Principal,
        store: str,
        *,
        project: str | None = None,
        task: str | None = None,
        query: str | None = None,
        budget: int = DEFAULT_BUDGET,
        include_expired: bool = False,
    ) -> Assembled:
        """The principal's context in ``store``: core files whole, skills, an index; at most
        ``budget`` estimated tokens (see :mod:`memdir.core.context`).

        ``project`` / ``task`` keep only that project's (task's) scope among the projects
        (tasks) the caller may read; other scopes stay. ``query`` orders each scope by search
        rank. Records a read of each core file it shows whole.
        """
        _name_check("project", project)
        _name_check("task", task)
        check_int("budget", budget, minimum=1)
        now = utcnow()
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            scope = access.read_scope()
            expired = self._expired(repo, row.id, access, now) if query else {}
            ranks = self._ranks(repo, row.id, access, query, expired, include_expired)
            found = ContextQuery(
                repo, row.id, scope, now=now, task_expiry_days=self.task_expiry_days,
                include_expired=include_expired, project=project, task=task, ranks=ranks,
            )  # fmt: skip
            # counts by key ranges in SQL; the policy decides only the rows between whole
            # and bound, and the expired ones (few, by their index) are taken out
            counts: Counter[str] = Counter()
            for (kind, _), n in found.counts().items():
                counts[SCOPE_ORDER[kind]] += n
            if not scope_decides_bound(scope):
                counts.subtract(scope_of(p)[0] for p in found.undecided()
                                if not access.can_read(p))  # fmt: skip
            hidden = 0
            for e in found.expired_files():
                if e.decided or access.can_read(e.path):
                    hidden += 1
                    if not include_expired:
                        counts[SCOPE_ORDER[e.kind]] -= 1
            if include_expired:
                hidden = 0
            counts = +counts
            core: dict[str, int] = {}

            def items() -> Iterator[Item]:
                # the per-path decision stays the final word on every file the output shows
                for r in found.rows():
                    if not access.can_read(r.path):
                        if r.decided:  # a bug in the ranges: never shown, and said loudly
                            _log.error("read scope of %s disagrees on %s", principal.id, r.path)
                        continue
                    if r.core:
                        core[r.path] = r.file_id
                    yield self._item(r, now, ranks.get(r.path))

            title = f"Memory for {principal.id} in store {store}"
            if project is not None:
                title += f", project {project}"
            if task is not None:
                title += f", task {task}"
            assembled = assemble_ordered(
                items(), counts, budget=budget, title=title, hidden_expired=hidden
            )
        self.reads.record(row.id, [core[i.path] for i in assembled.core])
        return assembled

    @staticmethod
    def _item(r: ContextFile, now: dt.datetime, rank: int | None) -> Item:
        body = None
        if r.core:
            content = r.content or ""
            try:
                _, body = split_frontmatter(content)
            except InvalidInput:
                body = content
        review = r.review_after
        return Item(
            r.path,
            r.summary,
            r.used_at,
            r.core,
            r.name if r.skill and r.name else None,
            review if review is not None and review <= now else None,
            r.verify,
            r.source_kind == "agent-inferred",
            r.expired_at,
            rank,
            body,
            scope_of(r.path),
        )

    def _ranks(
        self,
        repo: Repository,
        store_id: int,
        access: Access,
        query: str | None,
        expired: dict[str, dt.datetime],
        include_expired: bool,
    ) -> dict[str, int]:
        """Search positions of the readable (and unless asked, unexpired) matches."""
        if not query:
            return {}
        parsed = parse_query(query)
        if parsed.empty:
            return {}

        def readable(path: str) -> bool:
            return access.can_read(path) and (include_expired or path not in expired)

        rows = repo.search(store_id, parsed, "/", _RANKED, readable, access.read_prefixes())
        return {path: index + 1 for index, (path, *_rest) in enumerate(rows)}

    # --- the stale report -------------------------------------------------------------------

    def stale(
        self,
        principal: Principal,
        store: str,
        *,
        days: int = 30,
        prefix: str = "/",
        reasons: Sequence[str] | None = None,
    ) -> list[StaleFile]:
        """Readable stale files under ``prefix`` by scope (task, agent, user, project, org,
        other), then path. ``days``: a file not read (else not changed) in that many days is
        ``unread``. ``reasons`` keeps only files with one of them."""
        check_int("days", days, minimum=1)
        wanted = set(reasons or STALE_REASONS)
        unknown = wanted - set(STALE_REASONS)
        if unknown:
            raise InvalidInput(
                f"unknown stale reason {sorted(unknown)[0]!r}; choose from "
                + ", ".join(STALE_REASONS),
                reasons=sorted(unknown),
            )
        if prefix != "/":
            validate_path(prefix.rstrip("/") or "/")
        now = utcnow()
        cutoff = now - dt.timedelta(days=days)
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            expired = self._expired(repo, row.id, access, now)
            contradicted = self._contradicted(repo, row.id, access)
            out: list[StaleFile] = []
            scope = access.read_scope()  # decided once; the policy only between whole and bound
            for r in context_rows(repo, row.id, access.read_prefixes()):
                path = r.path
                if not path.startswith(prefix) or path.startswith("/.memdir/"):
                    continue
                verdict = scope.decided(path)
                if not (access.can_read(path) if verdict is None else verdict):
                    continue
                found = _reasons(r, now, cutoff, days, expired, contradicted)
                found = [(k, d) for k, d in found if k in wanted]
                if not found:
                    continue
                kind, name = scope_of(path)
                out.append(
                    StaleFile(
                        path=path, scope=kind, scope_name=name,
                        reasons=tuple(k for k, _ in found), details=tuple(d for _, d in found),
                        last_writer=r.actor, updated_at=r.updated_at, last_read_at=r.read_at,
                    )
                )  # fmt: skip
        return sorted(out, key=lambda s: (SCOPE_ORDER.index(s.scope), s.scope_name, s.path))

    def _contradicted(self, repo: Repository, store_id: int, access: Access) -> dict[str, str]:
        """path → the open dream proposal (visible to the caller) that contradicts it."""
        rows = repo.conn.execute(
            sa.select(proposals)
            .where(
                proposals.c.store_id == store_id,
                proposals.c.status == "open",
                proposals.c.origin == "dream",
            )
            .order_by(proposals.c.created_at, proposals.c.id)
        )
        out: dict[str, str] = {}
        for prop in rows:
            stats = prop.statistics if isinstance(prop.statistics, dict) else {}
            if stats.get("miner") != "stale_memory" and stats.get("coverage") != "contradicted":
                continue
            if not visible(prop, access):
                continue
            for path in prop.paths or ():
                out.setdefault(str(path), str(prop.id))
        return out


def _reasons(
    r: ContextRow,
    now: dt.datetime,
    cutoff: dt.datetime,
    days: int,
    expired: dict[str, dt.datetime],
    contradicted: dict[str, str],
) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    path = r.path
    if path in expired:
        found.append(("expired", f"expired {expired[path].date().isoformat()}"))
    review = r.review_after
    if review is not None and review <= now:
        found.append(("review-due", f"review due since {review.date().isoformat()}"))
    read = r.read_at
    last = read or r.updated_at
    if last <= cutoff:
        what = f"last read {read.date().isoformat()}" if read else "never read"
        found.append(("unread", f"{what}; not read in {days} days"))
    if path in contradicted:
        found.append(
            ("contradicted", f"a dream says recent sessions contradict it (proposal "
                             f"{contradicted[path]})")
        )  # fmt: skip
    return found
