"""Verbs for the review queue: propose, proposals list|show|accept|reject|rebase."""

from __future__ import annotations

import json
from typing import Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, read_content, verb
from memdir.cli.files import parse_operations, report
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.edits import apply_insert, apply_str_replace, unified_diff
from memdir.core.errors import EditConflict, InvalidInput, NotFound
from memdir.proposals import ORIGINS
from memdir.review_queue import SORTS, QueueFilter, impact_of, proposal_title


def _change(op: dict[str, Any]) -> list[str]:
    """The text an operation removes (-) and adds (+), indented under it."""

    def block(sign: str, text: str) -> list[str]:
        return [f"    {sign} {line}" for line in text.splitlines() or [""]]

    if op["op"] == "str_replace":
        return block("-", op["old"]) + block("+", op["new"])
    if op["op"] == "insert":
        return [f"    after line {op['line']}:", *block("+", op["text"])]
    if op["op"] == "write":
        return block("+", op["content"])
    return []


def _evidence_line(item: dict[str, Any]) -> str:
    """One evidence item: where it points, whether it was verified, its excerpt's start."""
    if item.get("hidden"):
        return f"hidden ({item.get('reason')})"
    where = f"transcript {item.get('transcript_id')} events {item.get('first_event')}.." + str(
        item.get("last_event")
    )
    doubt = f" UNVERIFIED: {item.get('unverified')}" if item.get("verified") is False else ""
    text = " ".join(str(item.get("excerpt") or "").split())[:120]
    return f"{where}{doubt}" + (f": {text}" if text else "")


def _statistics(stats: Any) -> list[str]:
    """The statistics a dream (or an agent) attached, one ``key: value`` a line."""
    if not isinstance(stats, dict):
        return [] if stats is None else [f"  statistics: {json.dumps(stats, default=str)}"]
    lines = ["statistics:"]
    for key, value in stats.items():
        if key == "source_scopes":
            continue
        shown = value if isinstance(value, str | int | float) else json.dumps(value, default=str)
        lines.append(f"  {key}: {shown}")
    return lines if len(lines) > 1 else []


def _after(op: dict[str, Any], current: str | None) -> str | None:
    """The text ``op`` leaves (None: it cannot apply to ``current`` as it is)."""
    try:
        if op["op"] == "write":
            return str(op["content"])
        if op["op"] == "delete":
            return ""
        if current is None or op["op"] == "rename":
            return None
        if op["op"] == "str_replace":
            return apply_str_replace(op["path"], current, op["old"], op["new"])
        return apply_insert(op["path"], current, int(op["line"]), op["text"])
    except (EditConflict, KeyError, ValueError):
        return None


def _diff(app: App, p: Any) -> list[str]:
    """The diff: for an accepted proposal, what its commit applied against the version before;
    otherwise what it would change against the current content (as the caller may read it)."""
    service = app.service()
    if p.status == "accepted":
        lines = [f"applied by commit {p.commit}:"]
        for change in service.applied_changes(app.principal, app.store, p.id):
            old = f"{change.path}@{change.version - 1}" if change.before is not None else "(absent)"
            text = unified_diff(change.before or "", change.after or "", old,
                                f"{change.path}@{change.version}")  # fmt: skip
            lines.extend(text.splitlines() or [f"{change.path}: no change"])
        return lines
    lines = ["diff against the current content:"]
    texts: dict[str, str | None] = {}
    for op in p.operations:
        path = str(op.get("path"))
        if path not in texts:
            try:
                texts[path] = service.read(app.principal, app.store, path).content
            except NotFound:
                texts[path] = None
        current = texts[path]
        after = _after(op, current)
        if after is None:
            lines.append(f"{op['op']} {path}: does not apply to the current content as it is")
            continue
        before = "(absent)" if current is None else f"{path} (current)"
        lines.extend(unified_diff(current or "", after, before, f"{path} (proposed)").splitlines())
        texts[path] = after
    return lines


def _render(p: Any, app: App | None = None) -> str:
    lines = [
        proposal_title(p),
        f"proposal {p.id} ({p.status}, origin {p.origin}) by {p.author} at "
        f"{p.created_at:%Y-%m-%d %H:%M:%S}Z, revision {p.revision}"
        + (f", dream run {p.run}" if p.run else ""),
    ]
    if p.rationale:
        lines.append(f"rationale: {p.rationale}")
    lines.extend(_statistics(p.statistics))
    for op in p.operations:
        target = f" -> {op['new_path']}" if op.get("new_path") else ""
        lines.append(f"  {op['op']} {op['path']}{target} (base {str(op.get('base_sha256'))[:12]})")
        lines.extend(_change(op))
    for item in p.evidence if isinstance(p.evidence, list) else []:
        if isinstance(item, dict):
            lines.append("  evidence: " + _evidence_line(item))
            excerpt = str(item.get("excerpt") or "") if not item.get("hidden") else ""
            lines.extend(f"    | {line}" for line in excerpt.splitlines()[:12])
    for finding in p.findings or []:
        lines.append(f"  finding {finding['rule']} ({finding['action']}): {finding['reason']}")
    for note in p.notes:
        if "withheld" in note:
            lines.append(f"  CONFLICT on {note['path']} (text withheld: {note['withheld']})")
        elif "base" in note or "current" in note:
            lines.append(f"  CONFLICT on {note['path']}:")
            for key in ("base", "current", "proposed"):
                text = note.get(key)
                lines.append(f"    --- {key} ---")
                lines.extend(f"    {line}" for line in (text or "(none)").splitlines())
        else:
            lines.append(f"  note: {note.get('note')}")
    if p.reviewer:
        lines.append(f"reviewed by {p.reviewer}: {p.review_comment or ''}".rstrip())
    if app is not None:
        lines.extend(_diff(app, p))
    return "\n".join(lines)


@verb(cli, "propose")
@click.argument("ops_file", metavar="FILE", default="-")
@click.option("--rationale", help="Why the change should be made.")
@click.option("--evidence", help="Evidence as JSON (e.g. transcript ids and excerpts).")
@provenance_options
def propose(
    app: App, ops_file: str, rationale: str | None, evidence: str | None, **prov: Any
) -> None:
    """Queue operations (JSON, as for `memdir commit`) for review instead of applying them."""
    try:
        evidence_data = json.loads(evidence) if evidence else None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"--evidence is not valid JSON: {exc.msg}") from None
    proposal = app.service().propose(
        app.principal, app.store, parse_operations(read_content(ops_file)),
        rationale=rationale, evidence=evidence_data, provenance=make_provenance(prov),
    )  # fmt: skip
    emit(app.as_json, proposal, proposal.id)


@cli.group("proposals")
def proposals() -> None:
    """The review queue: list, show, accept, reject and rebase proposals."""


@verb(proposals, "list")
@click.option(
    "--status",
    default="open",
    show_default=True,
    type=click.Choice(["open", "accepted", "rejected", "conflicted", "superseded", "all"]),
)
@click.option("--limit", type=int, default=100, show_default=True)
@click.option(
    "--sort",
    type=click.Choice(SORTS),
    default="impact",
    show_default=True,
    help="impact: sessions affected first; time: newest first; scope: by path.",
)
@click.option("--run", "run_id", help="Only proposals of this dream run.")
@click.option("--origin", type=click.Choice(ORIGINS), help="Only proposals of this origin.")
def proposals_list(
    app: App, status: str, limit: int, sort: str, run_id: str | None, origin: str | None
) -> None:
    """List proposals you may see, with their titles (what each would change)."""
    where = QueueFilter(status=None if status == "all" else status, run=run_id, origin=origin)
    items = app.service().proposal_queue(app.principal, app.store, where, sort=sort,
                                         limit=limit).items  # fmt: skip
    lines = []
    for p in items:
        sessions = impact_of(p.statistics).get("sessions")
        impact = f"\t{sessions:g} sessions" if sessions is not None else ""
        lines.append(f"{p.id}\t{p.status}\t{p.origin}\t{p.author}\t{proposal_title(p)}{impact}")
    emit(app.as_json, items, "\n".join(lines))


@verb(proposals, "show")
@click.argument("proposal_id", metavar="ID")
def proposals_show(app: App, proposal_id: str) -> None:
    """Show a proposal: operations, findings, notes; base/current/proposed text if conflicted."""
    proposal = app.service().get_proposal(app.principal, app.store, proposal_id)
    emit(app.as_json, proposal, _render(proposal, app))


@verb(proposals, "accept")
@click.argument("proposal_id", metavar="ID")
@click.option("--comment", help="A note for the record.")
@click.option(
    "--revision",
    help="The revision `proposals show` printed: accept only if the proposal is still at it "
    "(exit 3 if it changed). Without it, the proposal is accepted as it stands now.",
)
def proposals_accept(app: App, proposal_id: str, comment: str | None, revision: str | None) -> None:
    """Apply a proposal as a commit (needs write on every path it touches)."""
    result = app.service().accept_proposal(
        app.principal, app.store, proposal_id, comment, revision=revision
    )
    report(app, result)


@verb(proposals, "reject")
@click.argument("proposal_id", metavar="ID")
@click.option("--comment", help="Why it is rejected.")
def proposals_reject(app: App, proposal_id: str, comment: str | None) -> None:
    """Reject a proposal."""
    proposal = app.service().reject_proposal(app.principal, app.store, proposal_id, comment)
    emit(app.as_json, proposal, f"rejected {proposal.id}")


@verb(proposals, "rebase")
@click.argument("proposal_id", metavar="ID")
@click.option("--file", "file", help="New content for a single-file proposal ('-' for stdin).")
def proposals_rebase(app: App, proposal_id: str, file: str | None) -> None:
    """Rebase a conflicted proposal onto the current files, optionally with new content."""
    content = read_content(file) if file is not None else None
    proposal = app.service().rebase_proposal(app.principal, app.store, proposal_id, content=content)
    emit(app.as_json, proposal, f"rebased {proposal.id}; it is {proposal.status}")
