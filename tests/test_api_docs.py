"""docs/rest.md is generated from the OpenAPI document and must be current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _render() -> str:
    path = ROOT / "scripts" / "gen_rest_docs.py"
    spec = importlib.util.spec_from_file_location("gen_rest_docs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text: str = module.render()
    return text


def test_rest_reference_is_current() -> None:
    committed = (ROOT / "docs" / "rest.md").read_text(encoding="utf-8")
    assert committed == _render(), "docs/rest.md is stale: run `python scripts/gen_rest_docs.py`"


def test_every_route_and_server_setting_is_documented() -> None:
    from memdir.api.app import create_app  # noqa: F401  (the document's source)
    from memdir.api.settings import API_ENV_VARS

    text = (ROOT / "docs" / "rest.md").read_text(encoding="utf-8")
    for var in API_ENV_VARS:
        assert f"`{var}" in text, var
    needles = (
        "`GET /v1/stores/{store}/files/{path}`",
        "`PUT /v1/stores/{store}/files/{path}`",
        "`GET /v1/stores/{store}/changes/stream`",
        "`POST /v1/stores/{store}/commits`",
    )
    for needle in needles:
        assert needle in text, needle
