"""The replay harness through the real model SDKs against the local fake servers: a failed
session's opening, without and with the accepted memory, and whether the failing call recurs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import memdir
from fake_models import FakeAnthropic, FakeOpenAI
from memdir import OWNER, MemoryService
from memdir.cli.main import cli
from memdir.core.errors import InvalidInput
from memdir.dream.replay import REPLAY_TOOL
from memdir.transcripts.reader import Source
from test_dreams import STORE, fleet


def brain(tool: str, text: str) -> dict[str, Any]:
    """A model that repeats the session's mistake unless a dream note is in its context."""
    assert tool == REPLAY_TOOL
    if "known-failures/" in text:  # the accepted note's path, shown with its text
        return {"tool": "bash", "input": "npm ci"}
    return {"tool": "bash", "input": "npm ci --frozen-lockfile"}


@pytest.fixture
def lite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MemoryService, str]]:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    db = f"sqlite:///{tmp_path / 'memdir.db'}"
    service = memdir.open(db, create=True)
    service.create_store(OWNER, STORE)
    source = Source.from_bytes("web.jsonl", fleet("web", 20))
    assert service.import_transcripts(OWNER, STORE, [source], format="generic").new == 20
    try:
        yield service, db
    finally:
        service.db.close()


def _failed(svc: MemoryService) -> list[str]:
    return [t.id for t in svc.list_transcripts(OWNER, STORE, limit=100).items
            if t.tool_errors][:3]  # fmt: skip


def test_replay_with_the_accepted_note_avoids_the_failing_call(
    lite: tuple[MemoryService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _ = lite
    run = svc.dream(OWNER, STORE)
    (note,) = [p for p in svc.list_proposals(OWNER, STORE) if "frozen-lockfile" in str(p.paths)]
    svc.accept_proposal(OWNER, STORE, note.id)
    chosen = _failed(svc)
    assert len(chosen) == 3
    with FakeAnthropic(brain=brain) as api:
        monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
        report = svc.replay_sessions(OWNER, STORE, chosen, "anthropic:claude-sonnet-4-6",
                                     run=run.id)  # fmt: skip
    assert report["memory_files"] == 1
    assert [c["transcript_id"] for c in report["cases"]] == chosen
    for case in report["cases"]:
        assert case["failing_call"] == "npm ci --frozen-lockfile"
        assert case["without_memory"]["recurs"] is True
        assert case["with_memory"]["recurs"] is False
    assert report["recurs_without_memory"] == 1.0 and report["recurs_with_memory"] == 0.0
    calls = api.served("/v1/messages")
    assert len(calls) == 6
    for call in calls:
        assert call.body["tool_choice"] == {"type": "tool", "name": REPLAY_TOOL}
        data = json.dumps(call.body["messages"])
        # the opening ends before the failing call: the model never sees it
        assert "<transcript_data id=" in data and "frozen-lockfile" not in data
    with_memory = [c for c in calls if "known-failures/" in json.dumps(c.body)]
    assert len(with_memory) == 3


def test_cli_replay_over_an_openai_compatible_server(
    lite: tuple[MemoryService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, db = lite
    svc.dream(OWNER, STORE)
    for proposal in svc.list_proposals(OWNER, STORE):
        svc.accept_proposal(OWNER, STORE, proposal.id)
    chosen = _failed(svc)[:2]
    with FakeOpenAI(brain=brain) as api:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        result = CliRunner().invoke(cli, ["--db", db, "dream", "replay", *chosen, "--model",
                                          f"openai:local@{api.base_url}", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["recurs_without_memory"] == 1.0 and report["recurs_with_memory"] == 0.0
    with pytest.raises(InvalidInput, match="needs a model"):
        svc.replay_sessions(OWNER, STORE, chosen, "offline")
