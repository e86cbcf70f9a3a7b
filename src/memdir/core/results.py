"""The service's result types that travel beyond it: plain frozen dataclasses, no behaviour.

They live below the service so that what shows them (the SDK, the REST models, the checkout)
needs none of the service's machinery: ``import memdir.sdk`` loads no ``memdir.service``,
``memdir.storage`` or ``memdir.dream`` module (``tests/test_architecture.py`` checks it).
The modules that build them re-export them under their old names (``memdir.proposals``
has ``Proposal``, ``memdir.dreams`` has ``DreamRun``, ...).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Literal

from memdir.core.model import VersionInfo

__all__ = [
    "MAX_CHECKOUT_PAGE",
    "CheckoutFile",
    "CheckoutPage",
    "DreamRun",
    "PrincipalInfo",
    "Proposal",
    "RedactionPlan",
    "Rights",
    "StaleFile",
    "TokenInfo",
]


@dataclass(frozen=True)
class RedactionPlan:
    """What a redaction removes: every version holding the content, listed before it is done."""

    sha256: str
    versions: tuple[VersionInfo, ...]
    done: bool


@dataclass(frozen=True)
class PrincipalInfo:
    id: str
    kind: str
    groups: tuple[str, ...]
    projects: tuple[str, ...]
    tasks: tuple[str, ...]
    acts_for: str | None
    created_at: dt.datetime | None  # None for the database owner, which is never registered


@dataclass(frozen=True)
class TokenInfo:
    """A token's metadata; ``token`` (the secret) is set only in the result of creation."""

    id: str
    principal: str
    name: str | None
    paths: tuple[str, ...]
    actions: tuple[str, ...]
    created_at: dt.datetime
    expires_at: dt.datetime | None
    revoked_at: dt.datetime | None
    token: str | None = None


@dataclass(frozen=True)
class Proposal:
    """A change waiting for review, as a viewer may see it (see :mod:`memdir.proposals`)."""

    id: str
    store: str
    author: str
    origin: str
    status: str
    operations: tuple[dict[str, Any], ...]
    paths: tuple[str, ...]
    rationale: str | None
    evidence: Any
    statistics: Any
    findings: Any
    notes: tuple[dict[str, Any], ...]
    created_at: dt.datetime
    updated_at: dt.datetime
    reviewer: str | None
    reviewed_at: dt.datetime | None
    review_comment: str | None
    commit: str | None
    run: str | None = None
    #: A digest of the operations and findings: what a reviewer saw (see
    #: :mod:`memdir.proposals`).
    revision: str = ""


#: ``write``: a change applies directly; ``propose``: it becomes a proposal (propose-only
#: rights, or a protected file); ``read``: the caller may not change the file at all.
Rights = Literal["write", "propose", "read"]
MAX_CHECKOUT_PAGE = 1000


@dataclass(frozen=True)
class CheckoutFile:
    """One live file as a checkout sees it (``content`` None when not asked for)."""

    path: str
    sha256: str
    version: int
    size: int
    rights: Rights
    content: str | None = None


@dataclass(frozen=True)
class CheckoutPage:
    """Files after a path, in path order, read in one snapshot at store ``revision``.

    ``next_after`` is the path to pass back as ``after`` for the next page (None: the last).
    """

    revision: int
    files: tuple[CheckoutFile, ...]
    next_after: str | None


@dataclass(frozen=True)
class StaleFile:
    """A file the stale report lists: why (``reasons``, each with ``details``), and who last
    wrote it when, and when it was last read (None: no read recorded)."""

    path: str
    scope: str
    scope_name: str
    reasons: tuple[str, ...]
    details: tuple[str, ...]
    last_writer: str | None
    updated_at: dt.datetime
    last_read_at: dt.datetime | None


@dataclass(frozen=True)
class DreamRun:
    """A run as its principal and administrators see it."""

    id: str
    store: str
    principal: str
    status: str
    revision: int
    selection: dict[str, Any]
    config: dict[str, Any]
    selected: int
    processed: int
    usage: dict[str, Any] | None
    report: dict[str, Any] | None
    error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    finished_at: dt.datetime | None
    #: ids of the proposals the run queued (from its report)
    proposals: tuple[str, ...] = ()
    #: Why the report, counts and proposal ids are left out (None when they are shown): the
    #: run read transcripts the viewer may not read now (see :mod:`memdir.dreams`).
    withheld: str | None = None
