"""CLI output: one JSON document with ``--json``, human text otherwise, and the exit codes.

Exit codes (DESIGN.md "Errors"): 0 ok, 1 other errors, 2 usage / invalid input, 3 precondition
failed or required, 4 forbidden or unauthenticated, 5 not found (or not readable), 6 accepted as
a proposal, 7 refused by screening. Errors are mapped by class here, at the edge.

With ``--json`` an error prints the envelope ``{"error": {"type", "message", ...}}`` on stdout
and the one-line message on stderr, so scripts parse stdout and people read stderr.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import sys
from typing import Any

from memdir.core import errors

__all__ = ["emit", "exit_code_for", "fail", "to_jsonable"]


def exit_code_for(error: errors.MemdirError) -> int:
    """The exit code of an error: its class's ``exit_code`` (see :mod:`memdir.core.errors`)."""
    return type(error).exit_code


def to_jsonable(value: Any) -> Any:
    """Dataclasses, tuples and datetimes to plain JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    return value


def emit(as_json: bool, data: Any, human: str | None = None) -> None:
    """Print ``data`` as JSON, or ``human`` text (nothing if None)."""
    if as_json:
        sys.stdout.write(json.dumps(to_jsonable(data), ensure_ascii=False, indent=2) + "\n")
    elif human is not None:
        sys.stdout.write(human if human.endswith("\n") or not human else human + "\n")


def fail(as_json: bool, error: errors.MemdirError) -> int:
    """Report ``error`` (envelope on stdout with --json; message on stderr) and its exit code."""
    if as_json:
        said = error.to_dict(errors.SURFACE_WORDS["cli"])
        sys.stdout.write(json.dumps({"error": to_jsonable(said)}, indent=2) + "\n")
    elif isinstance(error, errors.Proposed):
        sys.stdout.write(f"{error.details['proposal']}\n")  # the proposal id, for scripts
    sys.stderr.write(f"memdir: {error.say(errors.SURFACE_WORDS['cli'])}\n")
    return exit_code_for(error)
