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

__all__ = ["EXIT_CODES", "emit", "exit_code_for", "fail", "to_jsonable"]

EXIT_CODES: tuple[tuple[type[errors.MemdirError], int], ...] = (
    (errors.InvalidContent, 1),
    (errors.LimitExceeded, 2),
    (errors.ContentTooLarge, 1),
    (errors.InvalidInput, 2),
    (errors.PreconditionFailed, 3),
    (errors.PreconditionRequired, 3),
    (errors.RevisionChanged, 3),
    (errors.Forbidden, 4),
    (errors.Unauthenticated, 4),
    (errors.NotFound, 5),
    (errors.Proposed, 6),
    (errors.ScreeningRefused, 7),
    (errors.MemdirError, 1),
)


def exit_code_for(error: errors.MemdirError) -> int:
    """The exit code of an error: the first class in :data:`EXIT_CODES` it is an instance of."""
    for cls, code in EXIT_CODES:
        if isinstance(error, cls):
            return code
    return 1


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
        sys.stdout.write(json.dumps({"error": to_jsonable(error.to_dict())}, indent=2) + "\n")
    elif isinstance(error, errors.Proposed):
        sys.stdout.write(f"{error.details['proposal']}\n")  # the proposal id, for scripts
    sys.stderr.write(f"memdir: {error.message}\n")
    return exit_code_for(error)
