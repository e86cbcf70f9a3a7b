"""The dream options are written once (:mod:`memdir.core.dream_options`): every surface that
starts a run offers the same options with the same defaults — the service's
``DreamConfig.build``, the REST body, the SDK's ``dream`` and the CLI's ``memdir dream``."""

from __future__ import annotations

import inspect
from dataclasses import asdict
from typing import Any

import click

from memdir.api.routes.dreams import DreamBody
from memdir.cli.main import cli
from memdir.core.dream_options import DEFAULTS, HELP, OPTION_NAMES
from memdir.dreams import DreamConfig
from memdir.sdk import Client

BACKTEST = {"backtest", "split", "keep"}
CLI_ONLY = {"resume", "report_file", "progress", "as_json"}
EXPECTED = asdict(DEFAULTS)


def _keyword_defaults(fn: Any, drop: set[str]) -> dict[str, Any]:
    params = inspect.signature(fn).parameters.values()
    return {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY and p.name not in drop}


def test_every_option_has_one_line_of_help() -> None:
    assert set(HELP) == set(OPTION_NAMES)
    assert all(text and "\n" not in text for text in HELP.values())


def test_the_service_builds_from_the_defaults() -> None:
    assert _keyword_defaults(DreamConfig.build, set()) == EXPECTED
    built = DreamConfig.build()
    assert (built.model, built.thresholds.min_sessions, built.thresholds.min_prevalence) == (
        DEFAULTS.model, DEFAULTS.min_sessions, DEFAULTS.min_prevalence,
    )  # fmt: skip


def test_rest_offers_the_same_options_and_defaults() -> None:
    fields = DreamBody.model_fields
    assert set(fields) - BACKTEST == set(OPTION_NAMES)
    assert {name: fields[name].default for name in OPTION_NAMES} == EXPECTED
    assert all(fields[name].description == HELP[name] for name in OPTION_NAMES)


def test_the_sdk_offers_the_same_options_and_defaults() -> None:
    assert _keyword_defaults(Client.dream, BACKTEST | {"store"}) == EXPECTED


def test_the_cli_offers_the_same_options_and_defaults() -> None:
    context = click.Context(cli)
    command = cli.get_command(context, "dream")
    assert command is not None
    run = command.get_command(context, "run") if isinstance(command, click.Group) else command
    assert run is not None
    options = {p.name: p for p in run.params if isinstance(p, click.Option)}
    assert set(options) - BACKTEST - CLI_ONLY == set(OPTION_NAMES)
    parsed = run.make_context("run", [], parent=context).params  # what the verb receives
    assert {name: parsed[name] for name in OPTION_NAMES} == EXPECTED
