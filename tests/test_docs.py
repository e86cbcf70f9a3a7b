"""Docs are tested: the CLI reference is current, every verb is documented, README code runs."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _gen_docs() -> object:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_is_current() -> None:
    rendered = _gen_docs().render()  # type: ignore[attr-defined]
    committed = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    assert committed == rendered, "docs/cli.md is stale: run `python scripts/gen_docs.py`"


def test_every_verb_is_in_the_reference() -> None:
    from memdir.cli.main import cli

    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for name in cli.load_all():
        assert f"## `memdir {name}`" in text


def test_every_setting_is_documented() -> None:
    from memdir.settings import ENV_VARS

    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    for var in ENV_VARS:
        assert f"`{var}`" in text, var


def test_architecture_doc_names_every_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    src = ROOT / "src" / "memdir"
    for entry in sorted(src.iterdir()):
        if entry.name.startswith("_") or entry.name == "py.typed":
            continue
        assert entry.name in text, f"docs/architecture.md does not mention {entry.name}"


def test_readme_python_snippet_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert blocks
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})
    assert (tmp_path / ".memdir" / "memdir.db").exists()


def test_readme_first_screen_has_the_two_commands() -> None:
    first_screen = "\n".join((ROOT / "README.md").read_text(encoding="utf-8").splitlines()[:25])
    assert "scripts/run" in first_screen and "scripts/test" in first_screen
    for script in ("scripts/run", "scripts/test", ".ci/run"):
        assert os.access(ROOT / script, os.X_OK), script
