"""The reducer's per-source-class parts: a restricted pattern counts exactly what a reducer fed
only those classes' sessions counts, though parts share their samples (subjects, excerpts,
task hashes) with the pattern — and restricting leaves the pattern and the state as they were."""

from __future__ import annotations

import dataclasses
import datetime as dt

from memdir.dream.model import Excerpt, Pattern, Signal
from memdir.dream.reduce import Reducer, source_class
from memdir.transcripts.model import TranscriptInfo

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _info(n: int, project: str) -> TranscriptInfo:
    return TranscriptInfo(
        id=f"t{n:05d}", format="jsonl", session_id=f"s{n}", parent_session=None,
        project=project, user=f"u{n % 3}", agent="agent", task=f"task-{n % 7}", labels=(),
        outcome="failure" if n % 4 == 0 else "success", score=None,
        started_at=T0 + dt.timedelta(minutes=n), ended_at=None, events=3, tool_calls=1,
        tool_errors=1, redactions=0, imported_at=T0, updated_at=T0, imported_by="owner",
    )  # fmt: skip


def _signals(n: int, info: TranscriptInfo) -> list[Signal]:
    subject = {"command": f"make build-{n % 3}", "error": "missing target", "n": n % 5}
    return [
        Signal("tool_error", f"build-{k}", dict(subject), f"make fails ({k})",
               Excerpt(info.id, 1, 2, f"Bash: make build-{n % 3}\n-> missing target {n}",
                       info.scopes()), variant=f"v{n % 11}", details=(f"d{n % 4}",))
        for k in range(3)
    ]  # fmt: skip


def _feed(reducer: Reducer, projects: list[str], count: int, only: set[str] | None = None) -> None:
    for n in range(count):
        info = _info(n, projects[n % len(projects)])
        if only is None or source_class(info) in only:
            reducer.add_session(info, _signals(n, info))


def _counts(pattern: Pattern) -> dict[str, object]:
    out = dataclasses.asdict(pattern)
    for name in ("title", "subject", "baseline_known", "baseline_failed", "project_selected"):
        out.pop(name)
    return out


def test_a_restricted_pattern_is_the_pattern_of_those_classes_alone() -> None:
    projects = ["alpha", "beta", "gamma"]
    whole = Reducer()
    _feed(whole, projects, 240)
    classes = sorted(whole.selected_by_class)
    alpha = [c for c in classes if '"project":"alpha"' in c]
    assert 1 < len(alpha) < len(classes)
    for keep in (alpha, [c for c in classes if c not in alpha], classes[:1]):
        alone = Reducer()
        _feed(alone, projects, 240, set(keep))
        for pattern in alone.patterns():
            got = whole.restricted(pattern.id, keep, alone.sessions_selected)
            # by design the outcome baseline is the whole fleet's, and the title and subject
            # the latest class's variant text: every count and sample is those classes' own
            assert _counts(got) == _counts(pattern)
    # restricting left the pattern itself as it was
    again = Reducer()
    _feed(again, projects, 240)
    assert whole.patterns() == again.patterns()
    assert whole.state() == again.state()
