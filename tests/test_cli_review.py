"""`memdir proposals list|show` in text mode over a real dream run (τ-bench airline, project
``airline``): titles, statistics, evidence excerpts and diffs, read rights as elsewhere."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import memdir
from memdir import OWNER
from memdir.cli.main import cli
from memdir.dream.model import Thresholds
from memdir.dream.selection import Selection
from memdir.dreams import DreamConfig
from memdir.transcripts.model import Labels
from memdir.transcripts.reader import Source

TAU = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "transcripts"
    / ("tau-bench-airline/gpt-4o-airline.json")
)

pytestmark = pytest.mark.skipif(  # under CI=true missing shared data is a failure, not a skip
    not TAU.is_file() and os.environ.get("CI") != "true", reason=f"shared data not found at {TAU}"
)


def run(db: str, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", db, *args])
    return result.exit_code, result.stdout + (result.stderr if result.stderr_bytes else "")


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('cli-review') / 'memdir.db'}"
    svc = memdir.open(url, create=True)
    svc.create_store(OWNER, "default")
    svc.add_principal(OWNER, "user:root", groups=("admins",))
    svc.add_principal(OWNER, "agent:swe-bot", projects=("swe",))
    svc.import_transcripts(OWNER, "default", [Source.from_path(TAU)],
                           labels=Labels(project="airline"))  # fmt: skip
    svc.dream(OWNER, "default", DreamConfig(selection=Selection(project="airline"),
                                            thresholds=Thresholds(min_sessions=5)))  # fmt: skip
    svc.db.close()
    return url


def test_list_prints_titles_and_sessions(db: str) -> None:
    code, out = run(db, "--as", "user:root", "proposals", "list")
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) >= 2
    top = lines[0].split("\t")
    assert top[4].startswith("Add /projects/airline/known-failures/")
    assert "`book_reservation` fails: payment amount does not add up" in top[4]
    assert top[5] == "13 sessions"  # recounted from the raw file in tests/test_web_review.py


def test_show_prints_statistics_evidence_excerpts_and_the_diff(db: str) -> None:
    _, listed = run(db, "--as", "user:root", "proposals", "list", "--json")
    first = json.loads(listed)[0]
    code, out = run(db, "--as", "user:root", "proposals", "show", first["id"])
    assert code == 0, out
    assert "statistics:" in out and "  sessions: " in out and "  miner: tool_errors" in out
    excerpt = next(e["excerpt"] for e in first["evidence"] if e.get("excerpt"))
    assert f"    | {excerpt.splitlines()[0]}" in out
    assert "diff against the current content:" in out
    assert f"+++ {first['paths'][0]} (proposed)" in out

    assert run(db, "--as", "user:root", "proposals", "accept", first["id"])[0] == 0
    code, out = run(db, "--as", "user:root", "proposals", "show", first["id"])
    assert "applied by commit " in out and f"+++ {first['paths'][0]}@1" in out
    assert "--- (absent)" in out


def test_read_rights_hide_proposals_as_the_ui_does(db: str) -> None:
    _, listed = run(db, "--as", "user:root", "proposals", "list", "--status", "all", "--json")
    some = json.loads(listed)[0]["id"]
    code, out = run(db, "--as", "agent:swe-bot", "proposals", "list", "--status", "all")
    assert code == 0 and out.strip() == ""
    code, out = run(db, "--as", "agent:swe-bot", "proposals", "show", some)
    assert code != 0 and f"no proposal {some!r}" in out and "airline" not in out
