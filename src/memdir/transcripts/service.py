"""Transcripts in the service: import, list, show, export and purge, under the store's policy.

Who may do what — labels are scopes. A transcript's scope labels each name a directory
(project ``P`` -> ``/projects/P``, user ``U`` -> ``/users/U``, agent ``A`` -> ``/agents/A``,
task ``T`` -> ``/tasks/T``), checked through the store's policy and the caller's token as the
right on a path directly in it (``/projects/P/*``):

- read (list, show, export): ``read`` on every directory its labels name;
- import (create or grow): ``write`` on every one (for a grown transcript, of its stored
  labels — labels are set when a transcript is first imported and never change after);
- purge: ``admin`` on every one.

An unlabelled transcript is for administrators only (the database owner, or a member of the
``admins`` group whose token, if any, is not narrowed to some paths). What a caller may not
read does not exist for it: the same NotFound, and never counted or listed.

Each transcript is stored atomically — in its own savepoint of a writer transaction shared
by up to :data:`BATCH_SESSIONS` transcripts, or in a transaction of its own: a transcript that
fails (no right, bad label, a database error) leaves nothing behind and the import goes on
with the next one.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import sqlalchemy as sa

from memdir.access import TRANSCRIPTS, Access, database_check
from memdir.base import ServiceBase
from memdir.core.errors import Forbidden, InvalidInput, LimitExceeded, MemdirError, NotFound
from memdir.core.model import Principal
from memdir.core.paths import validate_path
from memdir.core.ranges import label_names
from memdir.storage.repository import Repository
from memdir.transcripts.common import dumps
from memdir.transcripts.model import (
    OUTCOMES,
    SCOPE_LABELS,
    Event,
    ImportedTranscript,
    ImportReport,
    Labels,
    Problem,
    Transcript,
    TranscriptInfo,
    TranscriptView,
    scope_paths,
)
from memdir.transcripts.store import (
    ListFilter,
    TranscriptRows,
    event_from_row,
    info_from_row,
    readable_clause,
)

if TYPE_CHECKING:  # the importers (formats, reader, redaction) load on the first import call
    from memdir.transcripts.reader import Source
    from memdir.transcripts.redact import Redactor

__all__ = ["TranscriptPage", "TranscriptsMixin", "validate_label"]

_FORMAT: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_SESSION_ID: Final = 512
#: An import stores up to this many transcripts, or about this many events, per writer
#: transaction (each in its own savepoint): the SQLite write lock is held for tens of ms.
BATCH_SESSIONS: Final = 100
BATCH_EVENTS: Final = 5_000


@dataclass(frozen=True)
class TranscriptPage:
    """One page of ``list_transcripts``; pass ``next_cursor`` back for the next (None: done)."""

    items: list[TranscriptInfo]
    next_cursor: str | None


def validate_label(kind: str, value: str) -> str:
    """A scope label must be one path segment (it names ``/<kind>s/<value>``)."""
    if not value or "/" in value:
        raise InvalidInput(
            f"invalid {kind} label {value!r}: use one path segment (no '/'), as in "
            f"{SCOPE_LABELS[kind]}<name>",
            label=kind,
        )
    try:
        validate_path(SCOPE_LABELS[kind] + value)
    except InvalidInput as error:
        raise InvalidInput(
            f"invalid {kind} label {value[:80]!r}: {error.message}", label=kind
        ) from None
    return value


def allowed(access: Access, scopes: dict[str, str], action: str) -> bool:
    """May ``access.principal`` do ``action`` on a transcript with these scope labels?

    The right on a directory is asked as the right on ``<directory>/*`` (a path directly in
    it): the policy engine indexes a rule such as ``/projects/{project}/**`` under its literal
    directory and consults it for paths *below* that directory only.
    """
    if not scopes:
        # Unlabelled: the database-wide decision, its token narrowing applied to ``action``.
        return database_check(access.principal, action, TRANSCRIPTS).allowed
    return all(access.allowed(action, path + "/*") for path in scope_paths(scopes))


def readable_labels(access: Access) -> Any:
    """The caller's transcript read rights as one SQL clause, decided once per request: the
    label names it may read per kind (:func:`memdir.core.ranges.label_names`) and whether it
    reads unlabelled transcripts. :func:`allowed` still decides each row that comes back."""
    scope = access.read_scope()
    names = {kind: label_names(scope, root) for kind, root in SCOPE_LABELS.items()}
    unlabelled = database_check(access.principal, "read", TRANSCRIPTS).allowed
    return readable_clause(names, unlabelled)


def _missing(transcript_id: str) -> NotFound:
    return NotFound(
        f"transcript {transcript_id} does not exist; list transcripts with "
        "`memdir transcripts list`",
        transcript=transcript_id,
    )


class TranscriptsMixin(ServiceBase):
    """Agent session transcripts: see the module docstring for the rules."""

    # --- import ---------------------------------------------------------------------------

    def import_transcripts(
        self,
        principal: Principal,
        store: str,
        sources: Iterable[Source],
        *,
        format: str | None = None,
        labels: Labels | None = None,
        progress: Callable[[int], None] | None = None,
        redactor: Redactor | None = None,
    ) -> ImportReport:
        """Import every session in ``sources`` (files, pushed bytes); see :class:`ImportReport`.

        ``format`` forces an importer (else detected per source); ``labels`` set scope labels
        and tags on every new transcript, over the source's own; ``progress`` is called with
        byte counts as input is read. A source over ``max_transcript_bytes`` is refused
        (:class:`LimitExceeded`) before anything is read. Secrets are redacted by
        ``redactor`` (default: the guard's secret detectors).
        """
        for kind in SCOPE_LABELS:
            value = getattr(labels, kind, None) if labels else None
            if value is not None:
                validate_label(kind, value)
        sources = list(sources)
        for source in sources:  # every file within the limit before any is read
            if source.size is not None and source.size > self.max_transcript_bytes:
                raise LimitExceeded(
                    f"transcript {source.name} is {source.size} bytes, over the limit of "
                    f"{self.max_transcript_bytes}; split it or raise MEMDIR_MAX_TRANSCRIPT_BYTES",
                    file=source.name,
                    size=source.size,
                    limit=self.max_transcript_bytes,
                )
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            self._writable_store(row)
            access = self._access(repo, row.id, principal)
        from memdir.transcripts.importing import read_source
        from memdir.transcripts.reader import ParseContext
        from memdir.transcripts.redact import Redactor

        redactor = redactor or Redactor()
        before_total, before = redactor.total, dict(redactor.counts)
        ctx = ParseContext(cleaner=redactor.clean, redaction_total=lambda: redactor.total,
                           progress=progress)  # fmt: skip
        report = ImportReport()
        batch: list[Transcript] = []
        events = 0
        for source in sources:
            report.files += 1
            report.bytes += source.size or 0
            for transcript in read_source(source, ctx, format):
                report.sessions += 1
                batch.append(transcript)
                events += len(transcript.events)
                if len(batch) >= BATCH_SESSIONS or events >= BATCH_EVENTS:
                    self._import_batch(principal, row.id, access, batch, labels, report)
                    batch, events = [], 0
        self._import_batch(principal, row.id, access, batch, labels, report)
        report.skipped.extend(ctx.skipped)
        report.warnings.extend(ctx.warnings)
        report.ignored_records = ctx.ignored
        report.redactions = redactor.total - before_total  # a redactor may be reused
        report.redactions_by_rule = {
            rule: count - before.get(rule, 0)
            for rule, count in sorted(redactor.counts.items())
            if count > before.get(rule, 0)
        }
        return report

    def _import_batch(
        self,
        principal: Principal,
        store_id: int,
        access: Access,
        batch: list[Transcript],
        labels: Labels | None,
        report: ImportReport,
    ) -> None:
        """Store ``batch`` in one writer transaction, each transcript in a savepoint of its own.

        One commit for many small transcripts instead of one each (a commit, its ``BEGIN
        IMMEDIATE`` and its WAL pages cost more than a τ-bench session's rows). A transcript
        whose savepoint fails is rolled back alone; what was staged before it is committed,
        then it is stored on its own (:meth:`_import_one`, which reports its error), then the
        rest follows: transcripts are stored in input order, as one by one. If the batch
        cannot commit, each of its transcripts is stored on its own.
        """
        while batch:
            if len(batch) == 1:
                self._import_one(principal, store_id, access, batch[0], labels, report)
                return
            staged: list[tuple[ImportedTranscript, list[Event]]] = []
            try:
                with self.db.write() as repo:
                    for transcript in batch:
                        result = self._stage(repo, principal, store_id, access, transcript, labels)
                        if result is None:
                            break
                        staged.append(result)
            except (MemdirError, sa.exc.SQLAlchemyError):
                staged = []
            for done, added in staged:
                _record(report, done, added)
            if len(staged) < len(batch):
                failed = batch[len(staged)]
                self._import_one(principal, store_id, access, failed, labels, report)
            batch = batch[len(staged) + 1 :]

    def _stage(
        self,
        repo: Repository,
        principal: Principal,
        store_id: int,
        access: Access,
        transcript: Transcript,
        labels: Labels | None,
    ) -> tuple[ImportedTranscript, list[Event]] | None:
        """One transcript written in a savepoint of ``repo``'s transaction; None if anything
        failed (rolled back to the savepoint; :meth:`_import_batch` retries it on its own,
        where an error that recurs is reported, and any other exception propagates)."""
        try:
            _apply_labels(transcript, labels)
        except MemdirError:
            return None
        # Fixed SQL on the driver cursor: SQLAlchemy's begin_nested() compiles two statements
        # per call, which costs more than the rows of a small transcript.
        repo.raw("SAVEPOINT memdir_import")
        try:
            result = self._write_transcript(repo, principal, store_id, access, transcript)
        except Exception:  # retried alone by the caller: reported or raised there
            repo.raw("ROLLBACK TO SAVEPOINT memdir_import")
            repo.raw("RELEASE SAVEPOINT memdir_import")
            return None
        repo.raw("RELEASE SAVEPOINT memdir_import")
        return result

    def _import_one(
        self,
        principal: Principal,
        store_id: int,
        access: Access,
        transcript: Transcript,
        labels: Labels | None,
        report: ImportReport,
    ) -> None:
        try:
            _apply_labels(transcript, labels)
            done, added = self._store_transcript(principal, store_id, access, transcript)
        except MemdirError as error:
            reason = f"session {transcript.session_id[:80]!r} not imported: {error.message}"
            report.failed.append(Problem(transcript.origin, transcript.line, reason))
            return
        except (sa.exc.SQLAlchemyError, RecursionError, ValueError) as error:
            reason = (f"session {transcript.session_id[:80]!r} not imported: "
                      f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")  # fmt: skip
            report.failed.append(Problem(transcript.origin, transcript.line, reason))
            return
        _record(report, done, added)

    def _store_transcript(
        self, principal: Principal, store_id: int, access: Access, t: Transcript
    ) -> tuple[ImportedTranscript, list[Event]]:
        """One transcript in one writer transaction (see :meth:`_write_transcript`)."""
        with self.db.write() as repo:
            return self._write_transcript(repo, principal, store_id, access, t)

    def _write_transcript(
        self, repo: Repository, principal: Principal, store_id: int, access: Access, t: Transcript
    ) -> tuple[ImportedTranscript, list[Event]]:
        """Create the transcript, or append its new events, in ``repo``'s transaction.

        Returns what happened and the events added.
        """
        now = dt.datetime.now(dt.UTC)
        rows = TranscriptRows(repo)
        state = rows.store_open(store_id)
        if not state:
            raise (NotFound if state is None else Forbidden)(
                "the store was deleted or archived during the import", store_id=store_id
            )
        existing = rows.find(store_id, t.format, t.session_id)
        if existing is None:
            self._require(access, t.scopes(), "write", "import")
            tid = secrets.token_hex(8)
            rows.insert(_new_row(tid, store_id, t, principal, now))
            rows.append_events(tid, 0, t.events)
            done = ImportedTranscript(tid, t.format, t.session_id, "new", len(t.events))
            return done, t.events
        info = info_from_row(existing)
        if not allowed(access, info.scopes(), "read"):  # its labels are not the caller's to see
            raise Forbidden(
                f"{access.principal.id} may not add to session {t.session_id[:80]!r}: it was "
                "imported before under labels you may not write; import it under another "
                "session id",
                action="write",
            )
        self._require(access, info.scopes(), "write", "add to")
        keys = rows.event_keys(info.id)
        new = [e for e in t.events if e.key not in keys]
        if not new:
            return ImportedTranscript(info.id, t.format, t.session_id, "unchanged", 0), []
        rows.append_events(info.id, info.events, new)
        rows.update(info.id, _grown_row(existing, t, new, now))
        return ImportedTranscript(info.id, t.format, t.session_id, "grown", len(new)), new

    @staticmethod
    def _require(access: Access, scopes: dict[str, str], action: str, verb: str) -> None:
        if allowed(access, scopes, action):
            return
        where = ", ".join(scope_paths(scopes)) or "unlabelled transcripts (administrators only)"
        raise Forbidden(
            f"{access.principal.id} may not {verb} transcripts of {where}: {action} is needed "
            f"on each; label the import (--project/--agent/--user/--task) with scopes you may "
            f"{action}",
            action=action,
        )

    # --- reads ----------------------------------------------------------------------------

    def list_transcripts(
        self,
        principal: Principal,
        store: str,
        *,
        since: dt.datetime | None = None,
        until: dt.datetime | None = None,
        agent: str | None = None,
        project: str | None = None,
        user: str | None = None,
        task: str | None = None,
        outcome: str | None = None,
        has_errors: bool | None = None,
        format: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> TranscriptPage:
        """Readable transcripts, newest first (by start), filtered; ``limit`` per page."""
        if limit < 1:
            raise InvalidInput(f"limit must be at least 1, received {limit}")
        if outcome is not None and outcome not in OUTCOMES:
            raise InvalidInput(
                f"outcome must be one of {', '.join(OUTCOMES)}, received {outcome!r}"
            )
        where = ListFilter(
            since=_utc(since), until=_utc(until), agent=agent, project=project, user=user,
            task=task, outcome=outcome, has_errors=has_errors, format=format,
        )  # fmt: skip
        after = _decode_cursor(cursor)
        items: list[TranscriptInfo] = []
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            rows = TranscriptRows(repo)
            window = max(limit + 1, 64)
            scope = readable_labels(access)
            while len(items) <= limit:
                batch = rows.page(row.id, where, after, window, scope)
                for found in batch:
                    info = info_from_row(found)
                    after = (info.started_at, info.id)
                    if allowed(access, info.scopes(), "read"):
                        items.append(info)
                        if len(items) > limit:
                            break
                if len(batch) < window:
                    break
        more = len(items) > limit
        items = items[:limit]
        last = items[-1] if items else None
        next_cursor = _encode_cursor(last.started_at, last.id) if more and last else None
        return TranscriptPage(items, next_cursor)

    def get_transcript(
        self, principal: Principal, store: str, transcript_id: str
    ) -> TranscriptView:
        """A readable transcript with its events, parent and (readable) sub-agent sessions."""
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            rows = TranscriptRows(repo)
            found = self._resolve(rows, row.id, access, transcript_id)
            info = info_from_row(found)
            events = [event_from_row(e) for e in rows.events(info.id)]
            parent = None
            if info.parent_session is not None:
                up = rows.find(row.id, info.format, info.parent_session)
                if up is not None and allowed(access, info_from_row(up).scopes(), "read"):
                    parent = up.id
            children = tuple(
                c.id
                for c in rows.children(row.id, info.format, info.session_id)
                if allowed(access, info_from_row(c).scopes(), "read")
            )
            return TranscriptView(info, json.loads(found.meta), events, parent, children)

    def export_transcript(
        self, principal: Principal, store: str, transcript_id: str
    ) -> Iterator[str]:
        """The transcript in the generic JSONL form, line by line (streamed from the database).

        Access is checked before the first line is produced.
        """
        with self.db.read() as repo:
            row = self._store_row(repo, store)
            access = self._access(repo, row.id, principal)
            found = self._resolve(TranscriptRows(repo), row.id, access, transcript_id)
            store_id, tid = row.id, found.id
        return self._export(store_id, tid)

    def _export(self, store_id: int, transcript_id: str) -> Iterator[str]:
        from memdir.transcripts.generic import export_lines

        with self.db.read() as repo:
            rows = TranscriptRows(repo)
            found = rows.by_id(store_id, transcript_id)
            if found is None:
                return
            events = (event_from_row(e) for e in rows.events(transcript_id))
            yield from export_lines(info_from_row(found), json.loads(found.meta), events)

    def purge_transcript(
        self, principal: Principal, store: str, transcript_id: str
    ) -> TranscriptInfo:
        """Delete a transcript and all its events for good (``admin`` on its scopes)."""
        with self.db.write() as repo:
            row = self._store_row(repo, store)
            self._writable_store(row)
            access = self._access(repo, row.id, principal)
            rows = TranscriptRows(repo)
            found = self._resolve(rows, row.id, access, transcript_id)
            info = info_from_row(found)
            self._require(access, info.scopes(), "admin", "purge")
            rows.delete(info.id)
            return info

    @staticmethod
    def _resolve(rows: TranscriptRows, store_id: int, access: Access, transcript_id: str) -> Any:
        """The readable transcript with this id or unique id prefix (4+ characters)."""
        found = rows.by_id(store_id, transcript_id)
        if found is None and 4 <= len(transcript_id) < 16:
            matches = [m for m in rows.by_prefix(store_id, transcript_id, 64)
                       if allowed(access, info_from_row(m).scopes(), "read")]  # fmt: skip
            if len(matches) > 1:
                raise InvalidInput(
                    f"transcript id prefix {transcript_id!r} is ambiguous; give more characters",
                    transcript=transcript_id,
                )
            found = matches[0] if matches else None
        if found is None or not allowed(access, info_from_row(found).scopes(), "read"):
            raise _missing(transcript_id)
        return found


# --- rows and labels ------------------------------------------------------------------------


def _apply_labels(t: Transcript, labels: Labels | None) -> None:
    """Caller's labels over the source's; then check every value the store will keep."""
    if labels is not None:
        for kind in SCOPE_LABELS:
            value = getattr(labels, kind)
            if value is not None:
                setattr(t, kind, value)
        t.labels = tuple(dict.fromkeys([*t.labels, *labels.tags]))
    for kind, value in t.scopes().items():
        validate_label(kind, value)
    if not _FORMAT.match(t.format):
        raise InvalidInput(
            f"invalid format name {t.format[:80]!r}: use 1-64 letters, digits, . _ -"
        )
    if not t.session_id or len(t.session_id) > MAX_SESSION_ID:
        raise InvalidInput(f"session id must be 1-{MAX_SESSION_ID} characters")
    if t.parent_session is not None and len(t.parent_session) > MAX_SESSION_ID:
        t.parent_session = None
    if any(len(tag) > 200 for tag in t.labels):
        raise InvalidInput("labels must be at most 200 characters each")


def _record(report: ImportReport, done: ImportedTranscript, added: list[Event]) -> None:
    """Count a stored transcript in the report."""
    report.transcripts.append(done)
    setattr(report, done.status, getattr(report, done.status) + 1)
    calls, errors = _counts(added)
    report.events += len(added)
    report.tool_calls += calls
    report.tool_errors += errors


def _counts(events: list[Event]) -> tuple[int, int]:
    calls = errors = 0
    for event in events:
        if event.kind == "tool_call":
            calls += 1
        elif event.kind == "tool_result" and event.is_error:
            errors += 1
    return calls, errors


def _dumps(value: Any) -> str:
    return dumps(value)


def _new_row(
    tid: str, store_id: int, t: Transcript, principal: Principal, now: dt.datetime
) -> dict[str, Any]:
    calls, errors = _counts(t.events)
    return {
        "id": tid, "store_id": store_id, "format": t.format, "session_id": t.session_id,
        "parent_session": t.parent_session, "project": t.project, "user": t.user,
        "agent": t.agent, "task": t.task, "labels": _dumps(list(t.labels)),
        "outcome": t.outcome, "score": t.score, "started_at": t.started_at,
        "ended_at": t.ended_at, "events": len(t.events), "tool_calls": calls,
        "tool_errors": errors, "redactions": t.redactions, "meta": _dumps(t.meta),
        "imported_at": now, "updated_at": now, "imported_by": principal.id,
    }  # fmt: skip


def _grown_row(existing: Any, t: Transcript, new: list[Event], now: dt.datetime) -> dict[str, Any]:
    """What a grown transcript's row becomes: counts add up, times widen, labels stay."""
    calls, errors = _counts(new)
    info = info_from_row(existing)
    times = [x for x in (info.started_at, t.started_at) if x is not None]
    ends = [x for x in (info.ended_at, t.ended_at) if x is not None]
    meta = {**t.meta, **json.loads(existing.meta)}
    values: dict[str, Any] = {
        "events": info.events + len(new),
        "tool_calls": info.tool_calls + calls,
        "tool_errors": info.tool_errors + errors,
        "redactions": max(info.redactions, t.redactions),
        "started_at": min(times) if times else None,
        "ended_at": max(ends) if ends else None,
        "labels": _dumps(list(dict.fromkeys([*info.labels, *t.labels]))),
        "meta": _dumps(meta),
        "updated_at": now,
    }
    if t.outcome != "unknown":
        values["outcome"], values["score"] = t.outcome, t.score
    if info.parent_session is None and t.parent_session is not None:
        values["parent_session"] = t.parent_session
    return values


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """Times are stored in UTC; compare in UTC (naive means UTC)."""
    if value is None:
        return None
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def _encode_cursor(started: dt.datetime | None, transcript_id: str) -> str:
    return f"{started.isoformat() if started else ''}|{transcript_id}"


def _decode_cursor(cursor: str | None) -> tuple[dt.datetime | None, str] | None:
    if not cursor:
        return None
    started, sep, transcript_id = cursor.rpartition("|")
    try:
        when = dt.datetime.fromisoformat(started) if started else None
    except ValueError:
        when = None
        sep = ""
    if not sep or not transcript_id:
        raise InvalidInput(f"invalid cursor {cursor[:80]!r}: pass back a next_cursor as given")
    return when, transcript_id
