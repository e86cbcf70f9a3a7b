"""Verbs for the review queue: propose, proposals list|show|accept|reject|rebase."""

from __future__ import annotations

import json
from typing import Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, read_content, verb
from memdir.cli.files import parse_operations, report
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput


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


def _render(p: Any) -> str:
    lines = [
        f"proposal {p.id} ({p.status}, origin {p.origin}) by {p.author} at "
        f"{p.created_at:%Y-%m-%d %H:%M:%S}Z, revision {p.revision}",
    ]
    if p.rationale:
        lines.append(f"rationale: {p.rationale}")
    for op in p.operations:
        target = f" -> {op['new_path']}" if op.get("new_path") else ""
        lines.append(f"  {op['op']} {op['path']}{target} (base {str(op.get('base_sha256'))[:12]})")
        lines.extend(_change(op))
    for item in p.evidence if isinstance(p.evidence, list) else []:
        if isinstance(item, dict):
            lines.append("  evidence: " + _evidence_line(item))
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
def proposals_list(app: App, status: str, limit: int) -> None:
    """List proposals you may see."""
    items = app.service().list_proposals(
        app.principal, app.store, status=None if status == "all" else status, limit=limit
    )
    lines = [
        f"{p.id}\t{p.status}\t{p.origin}\t{p.author}\t{', '.join(p.paths)}"
        + (f"\t{p.rationale}" if p.rationale else "")
        for p in items
    ]
    emit(app.as_json, items, "\n".join(lines))


@verb(proposals, "show")
@click.argument("proposal_id", metavar="ID")
def proposals_show(app: App, proposal_id: str) -> None:
    """Show a proposal: operations, findings, notes; base/current/proposed text if conflicted."""
    proposal = app.service().get_proposal(app.principal, app.store, proposal_id)
    emit(app.as_json, proposal, _render(proposal))


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
