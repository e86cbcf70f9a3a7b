"""Prometheus metrics of one app, served as text at ``/metrics`` (admins only).

Each app has its own registry, so several apps in one process (tests) do not share counts.
Routes are labelled by their template (``/v1/stores/{store}/files/{path}``), never by the
concrete URL, so the number of series stays bounded; unmatched URLs share one label.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

__all__ = ["Metrics"]

_BUCKETS = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
)  # fmt: skip


class Metrics:
    """The counters and histograms of the REST surface."""

    def __init__(self) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # *_created: scrape noise
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "memdir_http_requests",
            "HTTP requests by method, route template and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "memdir_http_request_duration_seconds",
            "Time from request to the end of the response, by method, route and status.",
            ["method", "route", "status"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.cas_conflicts = Counter(
            "memdir_cas_conflicts",
            "Writes refused because a precondition failed (HTTP 412).",
            ["route"],
            registry=self.registry,
        )
        self.proposals = Counter(
            "memdir_proposals_created",
            "Changes queued for review instead of applied (HTTP 202), and explicit proposals.",
            ["origin"],
            registry=self.registry,
        )
        self.screening_refusals = Counter(
            "memdir_screening_refusals",
            "Writes refused by write screening (HTTP 422 screening_refused).",
            registry=self.registry,
        )
        self.screening_findings = Counter(
            "memdir_screening_findings",
            "Write-screening findings in refused or quarantined writes, by action.",
            ["action"],
            registry=self.registry,
        )
        self.rate_limited = Counter(
            "memdir_rate_limited",
            "Requests refused by the per-token rate limit (HTTP 429).",
            registry=self.registry,
        )

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        code = str(status)
        self.requests.labels(method, route, code).inc()
        self.latency.labels(method, route, code).observe(seconds)

    def findings(self, findings: Any) -> None:
        for finding in findings or ():
            action = finding.get("action", "?") if isinstance(finding, dict) else "?"
            self.screening_findings.labels(str(action)).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
