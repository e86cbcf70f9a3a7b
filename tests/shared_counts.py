"""Independent recounts of the shared transcript sets, read straight from the raw files.

Standard library only and no memdir import: these are the ground truth the importers are
checked against. Where the data set's own ``count_sets.py`` gives a figure it is used as is;
where the importers' documented rules differ from its heuristics (an aider session needs a
non-blank line; τ² tool errors fall back to an ``Error: `` prefix when ``error`` is absent;
an OpenHands ``error`` observation that answers no action is a refused call of its own), the
rule is recounted here from the files.
"""

from __future__ import annotations

import glob
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

_AIDER_START = re.compile(r"^# aider chat started at ")


def count_sets(root: Path) -> dict[str, dict[str, Any]]:
    """``count_sets.py``'s totals per set, by running the script the data ships with."""
    out = subprocess.run(
        [sys.executable, str(root / "count_sets.py"), str(root)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    sets = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {s["set"]: s["totals"] for s in sets}


def aider_sessions(root: Path) -> int:
    """Header-delimited sessions (and a headerless start) holding at least one non-blank line."""
    total = 0
    for name in glob.glob(str(root / "aider-chat-history" / "**" / "*.md"), recursive=True):
        if name.endswith("SOURCE.md"):
            continue
        blank = True
        for line in Path(name).read_text(encoding="utf-8").splitlines():
            if _AIDER_START.match(line):
                total += 0 if blank else 1
                blank = True
            elif line.strip():
                blank = False
        total += 0 if blank else 1
    return total


def tau2_tool_errors(root: Path) -> int:
    """Tool messages with ``error: true``, or without a boolean ``error`` and ``Error: ``."""
    errors = 0
    for name in glob.glob(str(root / "tau2-leaderboard" / "**" / "*.json"), recursive=True):
        data = json.loads(Path(name).read_text(encoding="utf-8"))
        sims = data if isinstance(data, list) else data.get("simulations", [])
        for sim in sims:
            for m in sim.get("messages") or []:
                if m.get("role") != "tool":
                    continue
                flag = m.get("error")
                text = m.get("content") if isinstance(m.get("content"), str) else ""
                errors += flag if isinstance(flag, bool) else text.startswith("Error: ")
    return errors


def openhands_refused_calls(root: Path) -> int:
    """``error`` observations with no ``cause``: the harness refused the call itself."""
    refused = 0
    for name in glob.glob(str(root / "openhands-samples" / "**" / "*.json*"), recursive=True):
        text = Path(name).read_text(encoding="utf-8")
        rows = (
            [json.loads(x) for x in text.splitlines() if x.strip()]
            if name.endswith(".jsonl")
            else [{"history": json.loads(text)}]
        )
        for row in rows:
            for event in row.get("history") or []:
                if isinstance(event, dict) and event.get("observation") == "error":
                    refused += event.get("cause") is None
    return refused
