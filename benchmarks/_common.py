"""Shared helpers for the benchmarks: timing, statistics, tables and JSON output.

Latencies are wall-clock seconds of one call each (``time.perf_counter``). Throughput is
``calls / sum(latencies)``: the benchmarks run one client, so ops/s is the inverse of the mean
latency, without the harness's own loop overhead.

memdir and its raw baseline run *interleaved* in small chunks (alternating which side goes
first), so noise from a shared machine falls on both alike.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "Stats",
    "fmt",
    "format_table",
    "percentile",
    "run_interleaved",
    "time_calls",
    "write_json",
]

T = TypeVar("T")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100.0
    low = math.floor(rank)
    high = math.ceil(rank)
    if low == high:
        return ordered[low]
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass(frozen=True)
class Stats:
    """Summary of one operation's latencies."""

    n: int
    ops_per_s: float
    p50_ms: float
    p95_ms: float
    mean_ms: float
    max_ms: float

    @classmethod
    def of(cls, seconds: Sequence[float]) -> Stats:
        if not seconds:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        total = sum(seconds)
        return cls(
            n=len(seconds),
            ops_per_s=len(seconds) / total if total > 0 else math.inf,
            p50_ms=percentile(seconds, 50) * 1000,
            p95_ms=percentile(seconds, 95) * 1000,
            mean_ms=total / len(seconds) * 1000,
            max_ms=max(seconds) * 1000,
        )

    def to_dict(self) -> dict[str, float]:
        return {k: float(v) for k, v in asdict(self).items()}


def time_calls(fn: Callable[[T], object], items: Sequence[T]) -> list[float]:
    """Call ``fn`` on each item; return each call's latency in seconds."""
    out: list[float] = []
    clock = time.perf_counter
    for item in items:
        start = clock()
        fn(item)
        out.append(clock() - start)
    return out


def run_interleaved(
    fn_a: Callable[[T], object],
    fn_b: Callable[[T], object],
    items: Sequence[T],
    *,
    chunk: int = 50,
    warmup: int = 0,
) -> tuple[list[float], list[float]]:
    """Run the same ``items`` through ``fn_a`` and ``fn_b`` in alternating chunks.

    The first ``warmup`` items run on both sides untimed. Chunks alternate which side runs
    first. Each side sees the items in the same order, so stateful workloads (a CAS chain on
    one file) stay in step.
    """
    for item in items[:warmup]:
        fn_a(item)
        fn_b(item)
    timed = items[warmup:]
    lat_a: list[float] = []
    lat_b: list[float] = []
    for index, start in enumerate(range(0, len(timed), chunk)):
        part = timed[start : start + chunk]
        if index % 2 == 0:
            lat_a.extend(time_calls(fn_a, part))
            lat_b.extend(time_calls(fn_b, part))
        else:
            lat_b.extend(time_calls(fn_b, part))
            lat_a.extend(time_calls(fn_a, part))
    return lat_a, lat_b


def format_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A plain-text table; the first column is left-aligned, the others right-aligned."""
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells: Sequence[str]) -> str:
        parts = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i])
            for i, cell in enumerate(cells)
        ]
        return " | ".join(parts)

    rule = "-+-".join("-" * w for w in widths)
    return "\n".join([line(headers), rule, *(line(r) for r in rows)])


def fmt(value: float, digits: int = 2) -> str:
    """A number for a table cell ('n/a' for NaN)."""
    if math.isnan(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def write_json(path: str, data: Any) -> None:
    Path(path).write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    print(f"wrote {path}", file=sys.stderr)
