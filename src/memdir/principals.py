"""Principals and tokens: who may act, and the credentials they act with.

A token is ``mdr_`` + 43 URL-safe base64 characters (32 random bytes). It is shown once, when
created; the database keeps only its SHA-256, so a leaked database does not leak credentials.
A token may expire, be revoked, and narrow its principal's rights to some path globs and
actions — never widen them: every request passes the policy *and* the token's scope.

Managing principals and tokens needs the database owner or a member of the ``admins`` group
whose token allows ``admin`` on the resource (:func:`memdir.access.database_check`); a token
created by a narrowed token is at most as narrow, and the last member of ``admins`` stays.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from typing import Any

import sqlalchemy as sa

from memdir.access import PRINCIPALS, TOKENS
from memdir.base import ServiceBase
from memdir.core.errors import Conflict, Forbidden, InvalidInput, NotFound, Unauthenticated
from memdir.core.globs import compile_glob
from memdir.core.model import OWNER, Principal, TokenScope
from memdir.core.policy import ACTIONS
from memdir.core.results import PrincipalInfo, TokenInfo
from memdir.rows import aware, utcnow
from memdir.storage.schema import principals, tokens

__all__ = ["PrincipalInfo", "PrincipalsMixin", "TokenInfo", "hash_token"]

TOKEN_PREFIX = "mdr_"


def hash_token(token: str) -> str:
    """What the database stores of a token: the lowercase hex SHA-256 of its text."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _principal(row: Any, scope: TokenScope | None = None) -> Principal:
    return Principal(
        id=row.id,
        groups=frozenset(row.groups),
        projects=tuple(row.projects),
        tasks=tuple(row.tasks),
        acts_for=row.acts_for,
        scope=scope,
    )


def _info(row: Any) -> PrincipalInfo:
    return PrincipalInfo(
        id=row.id,
        kind=row.kind,
        groups=tuple(row.groups),
        projects=tuple(row.projects),
        tasks=tuple(row.tasks),
        acts_for=row.acts_for,
        created_at=aware(row.created_at),
    )


def _token_info(row: Any, token: str | None = None) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        principal=row.principal_id,
        name=row.name,
        paths=tuple(row.scope_paths),
        actions=tuple(row.scope_actions),
        created_at=aware(row.created_at),
        expires_at=aware(row.expires_at) if row.expires_at else None,
        revoked_at=aware(row.revoked_at) if row.revoked_at else None,
        token=token,
    )


def _covers(outer: str, inner: str) -> bool:
    """Every path glob ``inner`` matches is matched by ``outer`` (decided conservatively:
    the same glob, or ``outer`` is ``LITERAL/**`` and ``inner`` starts with ``LITERAL/``)."""
    if outer == inner:
        return True
    if not outer.endswith("/**"):
        return False
    base = outer[:-3]
    if any(c in base for c in "*?["):
        return False
    return base == "" or inner == base or inner.startswith(base + "/")


def _within(
    actor: str, scope: TokenScope, paths: tuple[str, ...], actions: tuple[str, ...]
) -> None:
    """Refuse a token scope wider than the actor's own (a token never mints a wider one)."""
    wider = [a for a in actions if a not in scope.actions
             and not (a == "propose" and "write" in scope.actions)]  # fmt: skip
    outside = [p for p in paths if not any(_covers(o, p) for o in scope.paths)]
    if wider or outside:
        asked = ", ".join([*wider, *outside])
        raise Forbidden(
            f"{actor} acts with a token narrowed to actions {', '.join(sorted(scope.actions))} "
            f"on {', '.join(scope.paths)}; a token it creates may not be wider (received "
            f"{asked}): ask for actions and paths within that",
            principal=actor,
            actions=wider,
            paths=outside,
        )


def _names(values: tuple[str, ...] | list[str], what: str) -> list[str]:
    out = []
    for value in values:
        if not value or "/" in value or any(c.isspace() for c in value):
            raise InvalidInput(f"invalid {what} {value!r}: no spaces or '/'")
        out.append(value)
    return sorted(set(out))


class PrincipalsMixin(ServiceBase):
    """Principal and token management, and authentication."""

    def add_principal(
        self,
        actor: Principal,
        principal_id: str,
        *,
        groups: tuple[str, ...] = (),
        projects: tuple[str, ...] = (),
        tasks: tuple[str, ...] = (),
        acts_for: str | None = None,
    ) -> PrincipalInfo:
        """Register a principal (``agent:NAME``, ``user:NAME`` or ``service:NAME``)."""
        self.require_admin(actor, PRINCIPALS, "register principals")
        parsed = Principal.parse(principal_id)
        if parsed.is_owner:
            raise InvalidInput("'owner' is the database owner and cannot be registered")
        if acts_for is not None:
            Principal.parse(f"user:{acts_for}")
        with self.db.write() as repo:
            conn = repo.conn
            if conn.execute(sa.select(principals.c.id).where(principals.c.id == parsed.id)).first():
                raise Conflict(f"principal {parsed.id} already exists", principal=parsed.id)
            conn.execute(
                sa.insert(principals).values(
                    id=parsed.id,
                    kind=parsed.kind,
                    groups=_names(groups, "group"),
                    projects=_names(projects, "project"),
                    tasks=_names(tasks, "task"),
                    acts_for=acts_for,
                    created_at=utcnow(),
                )
            )
            row = conn.execute(sa.select(principals).where(principals.c.id == parsed.id)).one()
        return _info(row)

    def list_principals(self, actor: Principal) -> list[PrincipalInfo]:
        self.require_admin(actor, PRINCIPALS, "list principals")
        with self.db.read() as repo:
            rows = repo.conn.execute(sa.select(principals).order_by(principals.c.id)).all()
        return [_info(r) for r in rows]

    def principal_info(self, actor: Principal, principal_id: str) -> PrincipalInfo:
        """A registered principal, or the database owner (never registered: no ``created_at``)."""
        if actor.id != principal_id:
            self.require_admin(actor, PRINCIPALS, "see other principals")
        if principal_id == OWNER.id:
            return PrincipalInfo(OWNER.id, "owner", (), (), (), None, None)
        with self.db.read() as repo:
            row = repo.conn.execute(
                sa.select(principals).where(principals.c.id == principal_id)
            ).first()
        if row is None:
            raise self._unknown(principal_id)
        return _info(row)

    def remove_principal(self, actor: Principal, principal_id: str) -> None:
        """Remove a principal and revoke its tokens (its commits keep naming it).

        The last member of the ``admins`` group cannot be removed (:class:`Conflict`): the
        database would be left with no administrator any token can act as. The check and the
        delete share one write transaction, with the principals' rows locked (PostgreSQL), so
        two administrators removing each other at once cannot both succeed.
        """
        self.require_admin(actor, PRINCIPALS, "remove principals")
        with self.db.write() as repo:
            conn = repo.conn
            rows = conn.execute(
                sa.select(principals.c.id, principals.c.groups).with_for_update()
            ).all()
            target = next((r for r in rows if r.id == principal_id), None)
            if target is None:
                raise self._unknown(principal_id)
            admins = [r.id for r in rows if "admins" in r.groups]
            if admins == [principal_id]:
                raise Conflict(
                    f"{principal_id} is the last member of the 'admins' group; register another "
                    "administrator first (`memdir principal add user:NAME --group admins`), "
                    "then remove it",
                    principal=principal_id,
                )
            conn.execute(sa.delete(tokens).where(tokens.c.principal_id == principal_id))
            conn.execute(sa.delete(principals).where(principals.c.id == principal_id))

    def resolve(self, principal_id: str) -> Principal:
        """The registered principal with this id (``owner`` needs no registration)."""
        parsed = Principal.parse(principal_id)
        if parsed.is_owner:
            return parsed
        with self.db.read() as repo:
            row = repo.conn.execute(
                sa.select(principals).where(principals.c.id == parsed.id)
            ).first()
        if row is None:
            raise self._unknown(parsed.id)
        return _principal(row)

    @staticmethod
    def _unknown(principal_id: str) -> NotFound:
        return NotFound(
            f"unknown principal {principal_id!r}; register it with "
            f"`memdir principal add {principal_id}`",
            principal=principal_id,
        )

    # --- tokens ---------------------------------------------------------------------------

    def create_token(
        self,
        actor: Principal,
        principal_id: str,
        *,
        name: str | None = None,
        paths: tuple[str, ...] | None = None,
        actions: tuple[str, ...] | None = None,
        expires_in: dt.timedelta | None = None,
    ) -> TokenInfo:
        """Create a token for a registered principal; the secret is in the result only.

        ``paths`` and ``actions`` default to the actor's own token scope (every path and
        action for an unnarrowed actor). A token created by a narrowed token is at most as
        narrow: asking for an action or a path glob its scope does not cover is Forbidden.
        """
        self.require_admin(actor, TOKENS, "create tokens")
        scope = actor.scope
        if paths is None:
            paths = scope.paths if scope is not None else ("/**",)
        if actions is None:
            actions = tuple(sorted(scope.actions)) if scope is not None else ACTIONS
        if scope is not None:
            _within(actor.id, scope, paths, actions)
        for pattern in paths:
            if not pattern.startswith("/"):
                raise InvalidInput(f"token path {pattern!r} must start with '/'")
            compile_glob(pattern)
        bad = [a for a in actions if a not in ACTIONS]
        if bad or not actions:
            raise InvalidInput(f"unknown token actions {bad}; use {', '.join(ACTIONS)}")
        if expires_in is not None and expires_in <= dt.timedelta(0):
            raise InvalidInput("a token's lifetime must be positive")
        self.resolve(principal_id)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        token_id = "tok_" + secrets.token_hex(8)
        with self.db.write() as repo:
            repo.conn.execute(
                sa.insert(tokens).values(
                    id=token_id,
                    principal_id=principal_id,
                    token_hash=hash_token(secret),
                    name=name,
                    scope_paths=list(paths),
                    scope_actions=sorted(set(actions)),
                    created_at=now,
                    expires_at=now + expires_in if expires_in else None,
                )
            )
            row = repo.conn.execute(sa.select(tokens).where(tokens.c.id == token_id)).one()
        return _token_info(row, secret)

    def list_tokens(self, actor: Principal, principal_id: str | None = None) -> list[TokenInfo]:
        self.require_admin(actor, TOKENS, "list tokens")
        query = sa.select(tokens).order_by(tokens.c.created_at)
        if principal_id is not None:
            query = query.where(tokens.c.principal_id == principal_id)
        with self.db.read() as repo:
            return [_token_info(r) for r in repo.conn.execute(query).all()]

    def revoke_token(self, actor: Principal, token_id: str) -> TokenInfo:
        self.require_admin(actor, TOKENS, "revoke tokens")
        with self.db.write() as repo:
            conn = repo.conn
            conn.execute(
                sa.update(tokens)
                .where(tokens.c.id == token_id, tokens.c.revoked_at.is_(None))
                .values(revoked_at=utcnow())
            )
            row = conn.execute(sa.select(tokens).where(tokens.c.id == token_id)).first()
        if row is None:
            raise NotFound(f"no token {token_id!r}; see `memdir token list`", token=token_id)
        return _token_info(row)

    def authenticate(self, token: str) -> Principal:
        """The principal a token stands for, narrowed by its scope; Unauthenticated if not valid."""
        refused = Unauthenticated(
            "the token is not valid (unknown, revoked or expired); ask an admin for a new one "
            "with `memdir token create`"
        )
        if not token.startswith(TOKEN_PREFIX):
            raise refused
        with self.db.read() as repo:
            row = repo.conn.execute(
                sa.select(
                    principals,
                    tokens.c.scope_paths,
                    tokens.c.scope_actions,
                    tokens.c.expires_at,
                    tokens.c.revoked_at,
                )
                .join(principals, principals.c.id == tokens.c.principal_id)
                .where(tokens.c.token_hash == hash_token(token))
            ).first()
        if row is None or row.revoked_at is not None:
            raise refused
        if row.expires_at is not None and aware(row.expires_at) <= utcnow():
            raise refused
        scope = TokenScope(tuple(row.scope_paths), frozenset(row.scope_actions))
        full = TokenScope()
        return _principal(row, None if scope == full else scope)
