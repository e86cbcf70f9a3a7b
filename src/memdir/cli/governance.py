"""Verbs for who may do what: principal, token, policy, purge."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import click

from memdir.cli.app import App, make_provenance, provenance_options, read_content, verb
from memdir.cli.files import report
from memdir.cli.main import cli
from memdir.cli.output import emit
from memdir.core.errors import InvalidInput


@cli.group("principal")
def principal() -> None:
    """Register, list, show and remove principals (agents, users, services)."""


@verb(principal, "add")
@click.argument("principal_id", metavar="ID")
@click.option("--group", "groups", multiple=True, help="A group (repeatable); 'admins' is special.")
@click.option("--project", "projects", multiple=True, help="A project it works on (repeatable).")
@click.option("--task", "tasks", multiple=True, help="A task it works on (repeatable).")
@click.option("--acts-for", metavar="USER", help="The user an agent acts for (name, not id).")
def principal_add(
    app: App, principal_id: str, groups: tuple[str, ...], projects: tuple[str, ...],
    tasks: tuple[str, ...], acts_for: str | None,
) -> None:  # fmt: skip
    """Register a principal: agent:NAME, user:NAME or service:NAME."""
    info = app.service().add_principal(
        app.principal, principal_id, groups=groups, projects=projects, tasks=tasks,
        acts_for=acts_for,
    )  # fmt: skip
    emit(app.as_json, info, f"added {info.id}")


@verb(principal, "list")
def principal_list(app: App) -> None:
    """List registered principals."""
    infos = app.service().list_principals(app.principal)
    lines = [
        f"{p.id}\tgroups={','.join(p.groups) or '-'}\tprojects={','.join(p.projects) or '-'}"
        f"\ttasks={','.join(p.tasks) or '-'}" + (f"\tacts-for={p.acts_for}" if p.acts_for else "")
        for p in infos
    ]
    emit(app.as_json, infos, "\n".join(lines))


@verb(principal, "show")
@click.argument("principal_id", metavar="ID")
def principal_show(app: App, principal_id: str) -> None:
    """Show one principal."""
    info = app.service().principal_info(app.principal, principal_id)
    emit(app.as_json, info, "\n".join(f"{k}: {v}" for k, v in info.__dict__.items()))


@verb(principal, "rm")
@click.argument("principal_id", metavar="ID")
def principal_rm(app: App, principal_id: str) -> None:
    """Remove a principal and its tokens (its commits keep its name)."""
    app.service().remove_principal(app.principal, principal_id)
    emit(app.as_json, {"removed": principal_id}, f"removed {principal_id}")


@cli.group("token")
def token() -> None:
    """Create, list and revoke bearer tokens."""


def _duration(value: str | None) -> dt.timedelta | None:
    if value is None:
        return None
    match = re.fullmatch(r"(\d+)([smhd])", value)
    if not match:
        raise InvalidInput(f"invalid duration {value!r}: use a number and s, m, h or d (30d)")
    seconds = {"s": 1, "m": 60, "h": 3600, "d": 86400}[match.group(2)]
    return dt.timedelta(seconds=int(match.group(1)) * seconds)


@verb(token, "create")
@click.argument("principal_id", metavar="PRINCIPAL")
@click.option("--name", help="A label to recognise the token by.")
@click.option("--path", "paths", multiple=True,
              help="Only these path globs (repeatable; default: every path, or those of the "
              "token you act with).")  # fmt: skip
@click.option("--action", "actions", multiple=True,
              type=click.Choice(["read", "propose", "write", "admin"]),
              help="Only these actions (repeatable; default: all, or those of the token you "
              "act with).")  # fmt: skip
@click.option("--expires", metavar="DURATION", help="Lifetime such as 12h or 30d.")
def token_create(
    app: App, principal_id: str, name: str | None, paths: tuple[str, ...],
    actions: tuple[str, ...], expires: str | None,
) -> None:  # fmt: skip
    """Create a token for PRINCIPAL and print it once (only its hash is kept)."""
    info = app.service().create_token(
        app.principal, principal_id, name=name, paths=paths or None, actions=actions or None,
        expires_in=_duration(expires),
    )  # fmt: skip
    human = f"{info.token}\n(token {info.id} for {info.principal}; shown once — store it now)"
    emit(app.as_json, info, human)


@verb(token, "list")
@click.option("--principal", "principal_id", help="Only this principal's tokens.")
def token_list(app: App, principal_id: str | None) -> None:
    """List tokens (never the secrets)."""
    infos = app.service().list_tokens(app.principal, principal_id)
    lines = [
        f"{t.id}\t{t.principal}\t{t.name or '-'}\t{','.join(t.paths)}\t{','.join(t.actions)}"
        + ("\trevoked" if t.revoked_at else "")
        + (f"\texpires {t.expires_at:%Y-%m-%d %H:%M}" if t.expires_at else "")
        for t in infos
    ]
    emit(app.as_json, infos, "\n".join(lines))


@verb(token, "revoke")
@click.argument("token_id", metavar="TOKEN_ID")
def token_revoke(app: App, token_id: str) -> None:
    """Revoke a token: it stops working at once."""
    info = app.service().revoke_token(app.principal, token_id)
    emit(app.as_json, info, f"revoked {info.id}")


@cli.group("policy")
def policy() -> None:
    """Show, set and explain the store's access policy."""


@verb(policy, "show")
def policy_show(app: App) -> None:
    """Print the policy in force (the built-in default until one is set)."""
    text, default = app.service().policy_text(app.principal, app.store)
    emit(app.as_json, {"policy": text, "default": default}, text)


@verb(policy, "set")
@click.argument("file", default="-")
@provenance_options
def policy_set(app: App, file: str, **prov: Any) -> None:
    """Replace the policy with FILE (YAML; default stdin). A bad policy changes nothing."""
    result = app.service().set_policy(
        app.principal, app.store, read_content(file), make_provenance(prov)
    )
    report(app, result)


@verb(policy, "check")
@click.argument("subject", metavar="PRINCIPAL")
@click.argument("action", type=click.Choice(["read", "propose", "write", "admin"]))
@click.argument("path")
def policy_check(app: App, subject: str, action: str, path: str) -> None:
    """Explain whether PRINCIPAL may do ACTION on PATH: the decision, rule and reason."""
    svc = app.service()
    decision = svc.check_policy(app.principal, app.store, svc.resolve(subject), action, path)
    verdict = "allowed" if decision.allowed else "denied"
    emit(app.as_json, decision.to_dict(),
         f"{verdict}: {subject} {action} {path}\nrule: {decision.rule or '-'}\n"
         f"reason: {decision.reason}")  # fmt: skip
    if not decision.allowed:
        raise SystemExit(4)


@verb(cli, "purge")
@click.argument("path")
@click.option("--yes", is_flag=True, help="Confirm: every version of PATH goes for good.")
@provenance_options
def purge(app: App, path: str, yes: bool, **prov: Any) -> None:
    """Remove a path's whole history (admin); a tombstone commit records who and when."""
    if not yes:
        raise InvalidInput(f"purging {path} removes its whole history for good; add --yes")
    result = app.service().purge(app.principal, app.store, path, make_provenance(prov))
    emit(app.as_json, result, f"purged {path} (revision {result.revision}, commit {result.commit})")
