"""Request builders for dream runs, shared by both clients (see :mod:`memdir.sdk._base`).

``POST /v1/stores/{store}/dreams`` runs a dream to its end before answering, so the clients
give it a long read timeout (:data:`DREAM_TIMEOUT`) rather than their default; a run is not
retried by the client (it is not idempotent: a second run would queue its own proposals), but
an interrupted one can be continued with :func:`_resume_dream`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import httpx2

from memdir.core.dream_options import DEFAULTS as D
from memdir.core.model import CommitResult
from memdir.core.results import DreamRun
from memdir.sdk._base import _BaseClient
from memdir.sdk._wire import Call, Plan, from_json, single
from memdir.sdk._wire import json_body as _json
from memdir.sdk._wire import parser as _parser

__all__ = ["DREAM_TIMEOUT"]

#: Seconds a dream request may take (a run over many thousands of sessions, or with a model).
DREAM_TIMEOUT = 3600.0

_run = _parser(DreamRun)


def _url(client: _BaseClient, store: str | None, tail: str = "") -> str:
    return client._store_url(store, "/dreams" + tail)


def _dream(
    self: _BaseClient,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    since_last: bool = False,
    agent: str | None = None,
    project: str | None = None,
    outcome: str | None = None,
    limit: int | None = None,
    model: str = D.model,
    instructions: str | None = None,
    budget_tokens: int | None = None,
    budget_usd: float | None = None,
    batches: bool = D.batches,
    min_sessions: int = D.min_sessions,
    min_prevalence: float = D.min_prevalence,
    miners: Sequence[str] | None = None,
    dry_run: bool = D.dry_run,
    backtest: bool = False,
    split: float | dt.datetime | None = None,
    keep: str | None = None,
    store: str | None = None,
) -> Plan[DreamRun]:
    """Run a dream over the transcripts the caller may read and return the finished run (its
    ``report``; ``proposals`` lists what it queued for review).

    The defaults are :data:`memdir.core.dream_options.DEFAULTS`, the same as every surface's.
    ``backtest=True`` dreams over the earlier sessions (``split``: a fraction, default 0.5, or
    a time) into a scratch copy, measures on the later ones and queues nothing; the figures
    are in ``report["backtest"]``; ``keep`` keeps the scratch copy as a new store."""
    body: dict[str, Any] = {
        "since": since.isoformat() if since else None,
        "until": until.isoformat() if until else None,
        "since_last": since_last, "agent": agent, "project": project, "outcome": outcome,
        "limit": limit, "model": model, "instructions": instructions,
        "budget_tokens": budget_tokens, "budget_usd": budget_usd, "batches": batches,
        "min_sessions": min_sessions, "min_prevalence": min_prevalence,
        "miners": list(miners) if miners is not None else None, "dry_run": dry_run,
    }  # fmt: skip
    if backtest:
        body["backtest"] = True
        body["split"] = split.isoformat() if isinstance(split, dt.datetime) else split
        body["keep"] = keep
    request = self._request("POST", _url(self, store), json=body, timeout=DREAM_TIMEOUT)
    return single(Call(request, _run, retry_safe=False))


def _dream_runs(self: _BaseClient, *, limit: int | None = 50, store: str | None = None) -> Plan[
    list[DreamRun]
]:  # fmt: skip
    """Your dream runs (every run, for administrators), newest first."""
    return self._pages(_url(self, store), DreamRun, {}, limit)


def _dream_run(self: _BaseClient, run: str, *, store: str | None = None) -> Plan[DreamRun]:
    """One run with its report (``run.report``, the JSON form; see docs/dreaming.md)."""
    request = self._request("GET", _url(self, store, f"/{quote(run, safe='')}"))
    return single(Call(request, _run))


def _dream_report(self: _BaseClient, run: str, *, store: str | None = None) -> Plan[str]:
    """A run's report as markdown, for people."""
    url = _url(self, store, f"/{quote(run, safe='')}")
    request = self._request("GET", url, params={"format": "markdown"})
    return single(Call(request, lambda response: response.text))


def _dream_quality(
    self: _BaseClient, run: str | None = None, *, limit: int = 50, store: str | None = None
) -> Plan[dict[str, Any]]:
    """The quality page's data: one run's summary, or (no ``run``) your last runs, oldest
    first, under ``runs`` — coverage, bound, acceptance rate, score, checks, cost."""
    if run is None:
        request = self._request("GET", _url(self, store, "/quality"), params={"limit": limit})
    else:
        request = self._request("GET", _url(self, store, f"/{quote(run, safe='')}/quality"))
    return single(Call(request, _json))


def _resume_dream(self: _BaseClient, run: str, *, store: str | None = None) -> Plan[DreamRun]:
    """Continue an interrupted or failed run from its last checkpoint."""
    url = _url(self, store, f"/{quote(run, safe='')}/resume")
    request = self._request("POST", url, timeout=DREAM_TIMEOUT)
    return single(Call(request, _run, retry_safe=False))


def _revert_dream_run(
    self: _BaseClient, run: str, *, store: str | None = None
) -> Plan[list[CommitResult]]:
    """Revert every commit that came from the run's accepted proposals, newest first."""
    request = self._request("POST", _url(self, store, f"/{quote(run, safe='')}/revert"))
    return single(Call(request, _commits))


def _commits(response: httpx2.Response) -> list[CommitResult]:
    return [from_json(CommitResult, c) for c in _json(response)["commits"]]
