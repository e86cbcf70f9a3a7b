"""The package as a user installs it: ``pip install .`` into a fresh virtualenv.

No extras gives the store, the CLI, the server and the SDK on SQLite, with one HTTP client
library (httpx2, the one the MCP and model SDKs use too) and no PostgreSQL driver; a
``postgresql://`` URL then says which extra to install. ``.[postgres]`` adds the driver.
Needs the package registry (CI has it); skipped where pip cannot reach one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _pip(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What an sdist holds, copied, so a build writes nothing into the checkout."""
    into = tmp_path_factory.mktemp("src") / "memdir"
    into.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, into / name)
    shutil.copytree(ROOT / "src", into / "src", ignore=shutil.ignore_patterns("__pycache__"))
    return into


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory, source: Path) -> Path:
    where = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=300)
    installed = _pip(where, "install", "--quiet", str(source))
    if installed.returncode != 0:
        if "Could not find a version" in installed.stderr or "connection" in installed.stderr:
            pytest.skip(f"no package registry here: {installed.stderr[-300:]}")
        raise AssertionError(installed.stderr)
    return where


def _names(venv: Path) -> set[str]:
    listed = _pip(venv, "list", "--format", "json")
    assert listed.returncode == 0, listed.stderr
    return {p["name"].lower() for p in json.loads(listed.stdout)}


def _memdir(venv: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMDIR_")}
    return subprocess.run([str(venv / "bin" / "memdir"), *args], input=input, text=True,
                          capture_output=True, timeout=120, env=env)  # fmt: skip


@pytest.mark.slow
def test_plain_install_runs_the_readme_on_sqlite(venv: Path, tmp_path: Path) -> None:
    names = _names(venv)
    assert "httpx2" in names and "httpx" not in names, sorted(names)
    assert not {"psycopg", "psycopg-binary"} & names
    db = f"sqlite:///{tmp_path / 'm.db'}"
    assert _memdir(venv, "--db", db, "init").returncode == 0
    args = ("write", "/projects/acme/testing.md", "--create", "--reason", "learned in session 42")
    wrote = _memdir(venv, "--db", db, *args, input="Run tests with pytest -q\n")
    assert wrote.returncode == 0, wrote.stderr
    read = _memdir(venv, "--db", db, "read", "/projects/acme/testing.md", "--json")
    assert json.loads(read.stdout)["content"] == "Run tests with pytest -q\n"
    found = _memdir(venv, "--db", db, "search", "how do I run the tests")
    assert "/projects/acme/testing.md" in found.stdout
    pg = _memdir(venv, "--db", "postgresql://nobody@127.0.0.1:1/none", "ls")
    assert pg.returncode != 0 and "memdir[postgres]" in pg.stderr, pg.stderr
    sdk = subprocess.run(
        [str(venv / "bin" / "python"), "-c",
         "import memdir, sys; c = memdir.Client(db=sys.argv[1]); "
         "print(c.read('/projects/acme/testing.md').version)", db],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert sdk.stdout.strip() == "1", sdk.stderr


@pytest.mark.slow
def test_the_postgres_extra_adds_the_driver(venv: Path, source: Path) -> None:
    added = _pip(venv, "install", "--quiet", f"{source}[postgres]")
    assert added.returncode == 0, added.stderr
    assert {"psycopg", "psycopg-binary"} <= _names(venv)
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", "import psycopg"], timeout=60)
    assert probe.returncode == 0
