"""Access decisions for one principal in one store, inside one transaction.

:class:`Access` combines the store's policy (the admin-only file ``/.memdir/policy.yaml``, or
the built-in default) with the token scope the principal authenticated with, and turns
decisions into the errors DESIGN.md prescribes: no read right → :class:`NotFound` (the same
message a missing file gets, so existence never leaks); a read right but not the action →
:class:`Forbidden`.

Database-wide administration (principals, tokens, stores, metrics, other principals' dream
runs, unlabelled transcripts) is one decision, :func:`database_check`, on a resource under
:data:`DATABASE_PREFIX` (``/.memdir/db/tokens``, ...): the database owner, or a member of the
``admins`` group, narrowed by its token exactly as a path action is (the token must allow the
action and one of its path globs must match the resource). No store's policy can grant it.
``memdir policy check PRINCIPAL admin /.memdir/db/tokens`` explains it.

Read comes before every other action: :meth:`Access.require` refuses a path the principal may
not read with NotFound whatever the action (write, propose, admin), so writing, moving,
editing or deleting a file the caller cannot read answers exactly as a missing file does, and
no state of that path is looked at or reported.

Compiled policies are cached by the policy file's sha256, so a changed policy takes effect on
the next transaction and an unchanged one is parsed once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memdir.core.errors import Forbidden, NotFound
from memdir.core.globs import compile_glob, literal_prefix
from memdir.core.model import Principal, TokenScope
from memdir.core.paths import is_under
from memdir.core.policy import (
    DEFAULT_POLICY_YAML,
    POLICY_PATH,
    CompiledPolicy,
    Decision,
    parse_policy,
)
from memdir.core.ranges import ReadScope, intersect_prefixes

if TYPE_CHECKING:  # the CLI's read fast path decides access without SQLAlchemy
    from memdir.storage.repository import Repository

__all__ = [
    "DATABASE",
    "DATABASE_PREFIX",
    "DATABASE_RULE",
    "DREAM_RUNS",
    "METRICS",
    "PRINCIPALS",
    "STORES",
    "TOKENS",
    "TRANSCRIPTS",
    "Access",
    "PolicyCache",
    "database_check",
    "is_database_resource",
    "missing",
    "narrowed",
    "scope_decides_bound",
    "unplaceable",
]

#: Database-wide resources: not files of any store, but named like paths so that a token's
#: path globs narrow them (``/**`` covers them all; ``/org/**`` none).
DATABASE_PREFIX = "/.memdir/db"
DATABASE = DATABASE_PREFIX
PRINCIPALS = DATABASE_PREFIX + "/principals"
TOKENS = DATABASE_PREFIX + "/tokens"
STORES = DATABASE_PREFIX + "/stores"
METRICS = DATABASE_PREFIX + "/metrics"
DREAM_RUNS = DATABASE_PREFIX + "/dreams"
TRANSCRIPTS = DATABASE_PREFIX + "/transcripts"
#: The built-in rule that decides database-wide administration (no store policy changes it).
DATABASE_RULE = "database-admins"
_DATABASE_REASON = "members of the admins group administer the database"


def is_database_resource(path: str) -> bool:
    """``path`` names a database-wide resource (decided by :func:`database_check`)."""
    return path == DATABASE_PREFIX or path.startswith(DATABASE_PREFIX + "/")


def narrowed(decision: Decision, scope: TokenScope | None) -> Decision:
    """``decision`` narrowed by a token scope: an allow stands only if the token allows the
    action (``write`` covers ``propose``) and one of its path globs matches the path."""
    if not decision.allowed or scope is None:
        return decision
    action, path = decision.action, decision.path
    if action not in scope.actions and not (action == "propose" and "write" in scope.actions):
        return Decision(False, action, path, decision.principal, None,
                        f"the token does not allow {action}")  # fmt: skip
    if not any(compile_glob(p).match(path) for p in scope.paths):
        return Decision(False, action, path, decision.principal, None,
                        "the token is limited to " + ", ".join(scope.paths))  # fmt: skip
    return decision


def database_check(principal: Principal, action: str, resource: str = DATABASE) -> Decision:
    """May ``principal`` do ``action`` on the database-wide ``resource``?

    The owner may; a member of the ``admins`` group may (rule :data:`DATABASE_RULE`, which
    grants ``admin`` and so every action), narrowed by its token; nobody else may.
    """
    if principal.is_owner:
        return Decision(True, action, resource, principal.id, None, "database owner")
    if "admins" not in principal.groups:
        return Decision(False, action, resource, principal.id, None,
                        "only the database owner and members of the 'admins' group administer "
                        "the database")  # fmt: skip
    allowed = Decision(True, action, resource, principal.id, DATABASE_RULE,
                       f"allowed by rule {DATABASE_RULE}: {_DATABASE_REASON}")  # fmt: skip
    return narrowed(allowed, principal.scope)


def missing(path: str) -> NotFound:
    """The one message for a file that does not exist or may not be seen."""
    return NotFound(f"{path} does not exist", hint="find", path=path)


def unplaceable(path: str) -> NotFound:
    """The one message for creating (or moving a file to) a path the caller may not read.

    It is the same whether something exists at ``path`` or not, so a refused create is no
    existence oracle; it is a NotFound (404 / exit 5) like every answer about such a path.
    """
    return NotFound(
        f"cannot create {path}: it is not among the paths you may read and write",
        hint="placeable",
        path=path,
    )


def scope_decides_bound(scope: ReadScope) -> bool:
    """Does ``scope`` decide every path of its bound (each bound prefix lies under a whole
    one), so that no path needs the per-path decision outside memdir's own files?"""
    if scope.whole is None:
        return True
    bound = scope.bound if scope.bound is not None else ("/",)
    return all(any(is_under(b, w) for w in scope.whole) for b in bound)


class PolicyCache:
    """Compiled policies by the sha256 of their source (None: the built-in default)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_sha: dict[str | None, CompiledPolicy] = {}

    def get(self, repo: Repository, store_id: int) -> CompiledPolicy:
        head = repo.head(store_id, POLICY_PATH)
        sha = None if head is None else str(head.sha256)
        return self.get_by_sha(sha, lambda: repo.blob(store_id, sha or "") or "")

    def get_by_sha(self, sha: str | None, load: Callable[[], str]) -> CompiledPolicy:
        """The compiled policy whose source has this sha256 (``load`` fetches it on a miss)."""
        with self._lock:
            found = self._by_sha.get(sha)
        if found is not None:
            return found
        text = DEFAULT_POLICY_YAML if sha is None else load()
        compiled = CompiledPolicy(parse_policy(text))
        with self._lock:
            if len(self._by_sha) > 64:
                self._by_sha.clear()
            self._by_sha[sha] = compiled
        return compiled


@dataclass
class Access:
    """What ``principal`` may do in one store (evaluated lazily, per path)."""

    principal: Principal
    policy: CompiledPolicy | None  # None for the database owner: no policy to load

    def check(self, action: str, path: str) -> Decision:
        """The policy's decision, narrowed by the principal's token scope.

        A database-wide resource (:func:`is_database_resource`) is decided by
        :func:`database_check`, never by the store's policy.
        """
        if is_database_resource(path):
            return database_check(self.principal, action, path)
        if self.policy is None:
            return Decision(True, action, path, self.principal.id, None, "database owner")
        return narrowed(self.policy.check(self.principal, action, path), self.principal.scope)

    def read_prefixes(self) -> tuple[str, ...] | None:
        """Directory prefixes bounding every path this caller may read (None: anything).

        The policy's read prefixes intersected with the token scope's; listing queries use
        them as key ranges (:mod:`memdir.core.ranges`), ``can_read`` still decides each path.
        """
        if self.policy is None:
            return None
        prefixes = self.policy.read_prefixes(self.principal)
        scope = self.principal.scope
        if scope is not None:
            prefixes = intersect_prefixes(prefixes, [literal_prefix(p) for p in scope.paths])
        return prefixes

    def read_scope(self) -> ReadScope:
        """This caller's read rights as key ranges (:class:`~memdir.core.ranges.ReadScope`),
        decided once: the policy's whole prefixes intersected with the token's (a token glob
        ``PREFIX/**`` matches every path below it; a token without ``read`` reads nothing),
        and :meth:`read_prefixes` as the bound. Equivalent to :meth:`can_read` wherever it
        decides (tests/test_read_scope.py checks it against the per-path decision)."""
        if self.policy is None:
            return ReadScope(None, None)
        whole = self.policy.whole_read_prefixes(self.principal)
        scope = self.principal.scope
        if scope is not None:
            if "read" not in scope.actions:
                whole = ()
            else:
                rooted = [p if p.startswith("/") else "/" + p for p in scope.paths]
                token = [
                    literal_prefix(p) for p in rooted if p == literal_prefix(p).rstrip("/") + "/**"
                ]
                whole = intersect_prefixes(whole, token)
        return ReadScope(() if whole is None else whole, self.read_prefixes())

    def reads_everything(self) -> bool:
        """May this caller read every file of the store outside ``/.memdir/`` (the owner, or
        a policy granting read on ``/**`` and denying it none, through an unnarrowed token)?
        Search ranks with the index's own statistics only then (:meth:`memdir.service`)."""
        if self.policy is None:
            return True
        return self.principal.scope is None and self.policy.reads_everything(self.principal)

    def allowed(self, action: str, path: str) -> bool:
        """``check(action, path).allowed``; without a token scope, by the policy's reason-free
        test (:meth:`CompiledPolicy.allows`), which listings run on every row."""
        if self.policy is None or self.principal.scope is not None or is_database_resource(path):
            return self.check(action, path).allowed
        return self.policy.allows(self.principal, action, path)

    def can_read(self, path: str) -> bool:
        return self.allowed("read", path)

    def require_read(self, path: str, *, new: bool = False) -> None:
        """Raise NotFound unless the principal may read ``path``.

        ``new``: the caller means to create ``path`` (a write without ``if_match``, a rename's
        target), so the refusal says it cannot be created there, not that it does not exist.
        """
        if not self.can_read(path):
            raise unplaceable(path) if new else missing(path)

    def require(self, action: str, path: str, *, new: bool = False) -> None:
        """Allow ``action`` on ``path`` or raise NotFound (unreadable) / Forbidden.

        Every action needs read first: without it the answer is NotFound, as for a missing
        file, whatever the action and whatever the path holds (see :meth:`require_read`).
        """
        self.require_read(path, new=new)
        decision = self.check(action, path)
        if decision.allowed:
            return
        raise Forbidden(
            f"{self.principal.id} may not {action} {path}: {decision.reason}",
            path=path,
            action=action,
            rule=decision.rule,
        )
