"""The options of a dream run, their defaults and their one-line help: written once.

Every surface that starts a run — the CLI (``memdir dream``), REST (``POST …/dreams``), the
SDK (``client.dream``) and the service (``DreamConfig.build``) — takes these flat options and
reads its defaults and help text from here, so a default changed here changes everywhere;
``tests/test_dream_options.py`` checks each surface against :data:`DEFAULTS`.

Pure: no I/O, importable by the SDK without the dream engine.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, fields
from typing import Final, Literal

__all__ = ["BACKTEST_SPLIT", "DEFAULTS", "HELP", "OPTION_NAMES", "DreamOptions"]


@dataclass(frozen=True)
class DreamOptions:
    """The flat options of a run, with their defaults (see :data:`HELP` for each)."""

    since: dt.datetime | None = None
    until: dt.datetime | None = None
    since_last: bool = False
    agent: str | None = None
    project: str | None = None
    outcome: Literal["success", "failure", "unknown"] | None = None
    limit: int | None = None
    model: str = "offline"
    instructions: str | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    batches: bool = False
    min_sessions: int = 5
    min_prevalence: float = 0.02
    miners: tuple[str, ...] | None = None
    dry_run: bool = False


#: The defaults every surface uses.
DEFAULTS: Final = DreamOptions()
#: The option names, in the order the surfaces list them.
OPTION_NAMES: Final = tuple(f.name for f in fields(DreamOptions))
#: A backtest's default split: the earlier half of the selected sessions.
BACKTEST_SPLIT: Final = 0.5

#: One line per option, for ``--help`` and the OpenAPI descriptions.
HELP: Final[dict[str, str]] = {
    "since": "Sessions active at or after this time.",
    "until": "Sessions started before this time.",
    "since_last": "Only what arrived since your last run.",
    "agent": "Only this agent's sessions.",
    "project": "Only this project's sessions.",
    "outcome": "Only sessions with this outcome.",
    "limit": "Read at most this many sessions.",
    "model": "offline | anthropic:<model> | openai:<model>@<base_url> | fake.",
    "instructions": "Steering: what matters here, what does not (reaches every prompt).",
    "budget_tokens": "Stop using the model after this many tokens.",
    "budget_usd": "Stop using the model after this many US dollars.",
    "batches": "Use the provider's batch API (large runs).",
    "min_sessions": "A pattern needs this many sessions.",
    "min_prevalence": "...and this share of the sessions selected (0.02 = 2 %).",
    "miners": "The miners to run (default: all).",
    "dry_run": "Report only; queue no proposals.",
}
