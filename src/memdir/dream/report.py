"""The report a dream run ends with: JSON for machines, markdown for people.

The JSON form is what the run row keeps and what ``memdir dream show --json``, REST and the SDK
return; :func:`markdown` renders it. Every pattern the run found appears once, as ``proposed``
(with the proposal id) or ``left out`` (with the reason); below-threshold noise is summarised
after the first :data:`MAX_LEFT_OUT` by prevalence, so a large fleet's report stays readable.
The report carries statistics and titles, not transcript excerpts: excerpts live on the
proposals, where each viewer sees only those from transcripts it may read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from memdir.core.dream_options import DEFAULTS
from memdir.dream.model import Pattern

__all__ = ["MAX_LEFT_OUT", "Outcome", "build", "markdown"]

#: Left-out patterns listed one by one (most prevalent first); the rest are counted.
MAX_LEFT_OUT: Final = 50


@dataclass(frozen=True)
class Outcome:
    """What became of one pattern: proposed as ``proposal``, or left out for ``reason``."""

    pattern: Pattern
    proposal: str | None
    reason: str | None
    paths: tuple[str, ...] = ()
    rationale: str | None = None
    confidence: float | None = None
    flags: tuple[str, ...] = ()


def _pattern_entry(outcome: Outcome) -> dict[str, Any]:
    entry = {"title": outcome.pattern.title, **outcome.pattern.statistics()}
    entry["subject"] = outcome.pattern.subject
    if outcome.proposal is not None or outcome.reason is None:  # None: a dry run's draft
        entry["decision"] = "proposed"
        entry["proposal"] = outcome.proposal
        entry["paths"] = list(outcome.paths)
        entry["rationale"] = outcome.rationale
        entry["confidence"] = outcome.confidence
        if outcome.flags:
            entry["flags"] = list(outcome.flags)
    else:
        entry["decision"] = "left out"
        entry["reason"] = outcome.reason
        if outcome.paths:
            entry["paths"] = list(outcome.paths)
    return entry


def build(
    header: dict[str, Any],
    outcomes: Sequence[Outcome],
    *,
    dry_run: bool = False,
    checks: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report: ``header`` (run, selection, counts, usage, timings) plus the patterns.

    ``checks`` (:func:`memdir.dream.quality.check_all`, by pattern id) go beside each
    proposal, and their :func:`~memdir.dream.quality.score` under ``quality``.
    """
    from memdir.dream.quality import check_all, score

    proposed = [o for o in outcomes if o.proposal is not None or (dry_run and o.reason is None)]
    left = [o for o in outcomes if o not in proposed]
    left.sort(key=lambda o: (-o.pattern.sessions, o.pattern.id))
    if checks is None:
        from memdir.dream.quality import Evidence

        min_sessions = int(
            (header.get("thresholds") or {}).get("min_sessions") or DEFAULTS.min_sessions
        )
        checks = check_all([o.pattern for o in proposed], Evidence(min_sessions=min_sessions))
    report = dict(header)
    report["proposed"] = [_pattern_entry(o) for o in proposed]
    for entry in report["proposed"]:
        found = checks.get(entry["pattern"])
        if found is not None:
            entry["checks"] = dict(found)
    report["quality"] = score(
        {k: v for k, v in checks.items() if any(e["pattern"] == k for e in report["proposed"])}
    )
    report["left_out"] = [_pattern_entry(o) for o in left[:MAX_LEFT_OUT]]
    report["left_out_more"] = max(0, len(left) - MAX_LEFT_OUT)
    report["patterns_found"] = len(outcomes)
    return report


def _pct(value: Any) -> str:
    return f"{100 * float(value):.1f} %" if isinstance(value, int | float) else "-"


def markdown(report: dict[str, Any]) -> str:
    """The report for people (what ``memdir dream show`` prints)."""
    sessions = report.get("sessions", {})
    lines = [
        f"# Dream run {report.get('run')}",
        "",
        f"- store `{report.get('store')}` at revision {report.get('revision')}, run by "
        f"`{report.get('principal')}`; status **{report.get('status')}**",
        f"- sessions: {sessions.get('processed', 0)} read of {sessions.get('selected', 0)} "
        f"selected; {sessions.get('agents', 0)} agents, {sessions.get('projects', 0)} projects",
        f"- patterns found: {report.get('patterns_found', 0)}; proposed: "
        f"{len(report.get('proposed', []))}; model: {report.get('model', 'offline')}",
    ]
    usage = report.get("usage")
    if usage:
        lines.append(
            f"- model usage: {usage.get('requests', 0)} requests, "
            f"{usage.get('input_tokens', 0)} input / {usage.get('output_tokens', 0)} output "
            f"tokens, ${float(usage.get('cost_usd') or 0):.4f}"
            + (" — **budget reached**, the rest ran offline" if report.get("budget_stopped")
               else "")
        )  # fmt: skip
    lines += [f"- {line}" for line in report.get("model_summary") or []]
    if report.get("dry_run"):
        lines.append("- dry run: nothing was queued for review")
    quality = report.get("quality") or {}
    if quality.get("score") is not None:
        lines.append(
            f"- quality score {quality['score']} / 100 over {quality.get('proposals', 0)} "
            f"proposals; parse failures {quality.get('parse_failures', 0)}, feedback loops "
            f"{quality.get('feedback_loops', 0)}"
        )
    if report.get("backtest"):
        lines += _backtest_lines(report["backtest"])
    lines += ["", "## Proposed", ""]
    if not report.get("proposed"):
        lines.append("Nothing met the thresholds.")
    for entry in report.get("proposed", []):
        lines += [
            f"### {entry['title']}",
            "",
            f"- {entry['miner']} · {entry['sessions']}/{entry['sessions_selected']} sessions "
            f"({_pct(entry.get('prevalence'))}) · "
            + (f"{entry['agents']} agents · " if entry.get("agents") else "")
            + f"coverage: {entry.get('coverage')} · confidence {entry.get('confidence')}",
            f"- proposal `{entry.get('proposal') or '(dry run)'}` on "
            + ", ".join(f"`{p}`" for p in entry.get("paths", [])),
        ]
        if entry.get("flags"):
            lines.append(f"- flags: {', '.join(entry['flags'])}")
        if entry.get("checks"):
            lines.append("- checks: " + _checks_line(entry["checks"]))
        if entry.get("rationale"):
            lines += ["", str(entry["rationale"])]
        lines.append("")
    lines += ["## Left out", ""]
    if not report.get("left_out"):
        lines.append("Nothing.")
    else:
        lines += ["| pattern | sessions | prevalence | why |", "|---|---|---|---|"]
        for entry in report["left_out"]:
            title = str(entry["title"]).replace("|", "\\|")[:90]
            why = str(entry.get("reason") or "").replace("|", "\\|")
            lines.append(
                f"| {title} | {entry['sessions']} | {_pct(entry.get('prevalence'))} | {why} |"
            )
        if report.get("left_out_more"):
            lines.append(f"\n…and {report['left_out_more']} less prevalent patterns.")
    return "\n".join(lines) + "\n"


def _checks_line(checks: Mapping[str, Any]) -> str:
    marks = {True: "ok", False: "FAILED", None: "n/a"}
    parts = []
    for name, value in checks.items():
        if not isinstance(value, dict):
            continue
        mark = marks.get(value.get("pass"), "n/a")
        parts.append(f"{name} {mark}" + (f" ({value.get('detail')})" if mark == "FAILED" else ""))
    quality = checks.get("quality")
    return "; ".join(parts) + (f" — quality {quality}" if quality is not None else "")


def _backtest_lines(bt: Mapping[str, Any]) -> list[str]:
    split = bt.get("split") or {}
    lines = [
        "",
        "## Backtest",
        "",
        f"- order: {bt.get('order')}; split by {split.get('by')} {split.get('value')} at "
        f"{split.get('at')}: {split.get('earlier')} earlier, {split.get('later')} later sessions",
        f"- costly events after the split: {bt.get('events')} costing {bt.get('cost')} turns "
        f"(capped at {bt.get('cost_cap')} each)",
        f"- **coverage {_pct(bt.get('coverage'))}** ({bt.get('covered_cost')} turns) of an "
        f"oracle bound of **{_pct(bt.get('bound'))}** ({bt.get('bound_cost')} turns: every "
        f"pattern in >= {bt.get('min_sessions')} earlier sessions proposed)"
        + (f"; {_pct(bt.get('of_bound'))} of the bound" if bt.get("of_bound") is not None
           else ""),
        f"- feedback loops: {bt.get('feedback_loops', 0)}"
        + (f"; scratch copy kept as store `{bt['kept']}`" if bt.get("kept") else
           "; scratch copy discarded"),
    ]  # fmt: skip
    rows = bt.get("patterns") or []
    if rows:
        lines += ["", "| pattern | events | turns | covered | not covered | by |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for row in rows[:20]:
            name = str(row.get("title") or row["pattern"]).replace("|", "\\|")[:80]
            by = ", ".join(row.get("covered_by") or []).replace("|", "\\|")[:80] or "-"
            lines.append(f"| {name} | {row['events']} | {row['cost']} | {row['covered']} | "
                         f"{row['not_covered']} | {by} |")  # fmt: skip
    props = [p for p in bt.get("proposals") or [] if p.get("lift")]
    if props:
        lines += ["", "Outcome lift (failure rate with the pattern minus the baseline):", ""]
        for p in props:
            lift = p["lift"]
            lines.append(f"- {p['title']}: {lift['failure_rate']:.2f} vs {lift['baseline']:.2f}"
                         f" ({lift['lift']:+.2f}) over {lift['sessions']} sessions")  # fmt: skip
    return lines
