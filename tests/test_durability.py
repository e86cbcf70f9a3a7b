"""SQLite durability levels: ``synchronous=normal`` by default, ``full`` on request.

The level is the SQLite URL's ``synchronous`` query option (``sqlite:///PATH?synchronous=full``)
or the ``sqlite_synchronous`` setting (``MEMDIR_SQLITE_SYNCHRONOUS``, the config file), which is
folded into that URL; every connection memdir opens on the file — pooled and the hot read
path's — runs at it. Anything else is refused as invalid input naming the levels offered.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import memdir
from memdir import OWNER, InvalidInput
from memdir.cli.main import cli
from memdir.settings import Settings

LEVELS = {"normal": 1, "full": 2}  # PRAGMA synchronous answers a number


def _pragma(svc: memdir.MemoryService) -> set[int]:
    """``PRAGMA synchronous`` on two fresh pooled connections and the hot read path's."""
    svc.read(OWNER, "default", "/a.md")  # opens this thread's read connection
    found = set()
    for raw in (svc.db.engine.raw_connection(), svc.db.engine.raw_connection()):
        try:
            driver: Any = raw.driver_connection
            found.add(driver.execute("PRAGMA synchronous").fetchone()[0])
        finally:
            raw.close()
    hot = svc.db._local.connection  # the connection read() just used
    found.add(hot.execute("PRAGMA synchronous").fetchone()[0])
    return found


CASES = [("", "normal"), ("?synchronous=full", "full"), ("?synchronous=NORMAL", "normal")]


@pytest.mark.parametrize(("query", "level"), CASES)
def test_every_connection_runs_at_the_level_of_the_url(
    tmp_path: Path, query: str, level: str
) -> None:
    url = f"sqlite:///{tmp_path / 'memdir.db'}{query}"
    svc = memdir.open(url, create=True)
    try:
        svc.create_store(OWNER, "default")
        svc.write(OWNER, "default", "/a.md", "durable\n", if_absent=True)
        assert _pragma(svc) == {LEVELS[level]}
        assert svc.read(OWNER, "default", "/a.md").content == "durable\n"
        assert (tmp_path / "memdir.db").exists()  # the option is not part of the file name
    finally:
        svc.db.close()
    reopened = memdir.open(url)  # and it opens again, at the same level
    try:
        assert _pragma(reopened) == {LEVELS[level]}
    finally:
        reopened.db.close()


def test_an_unknown_level_is_refused_before_anything_is_created(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'memdir.db'}?synchronous=off"
    with pytest.raises(InvalidInput) as raised:
        memdir.open(url, create=True)
    assert "synchronous='off'" in str(raised.value) and "normal, full" in str(raised.value)
    assert not (tmp_path / "memdir.db").exists()
    result = CliRunner().invoke(cli, ["--db", url, "init", "--json"])
    assert result.exit_code == 2, result.output
    assert json.loads(result.stdout)["error"]["type"] == "invalid_input"
    assert not (tmp_path / "memdir.db").exists()


def test_the_setting_is_folded_into_a_sqlite_url() -> None:
    env = {"MEMDIR_DB": "sqlite:////var/lib/memdir.db", "MEMDIR_SQLITE_SYNCHRONOUS": "FULL"}
    settings = Settings.load(environ=env)
    assert settings.sqlite_synchronous == "full"
    assert settings.db == "sqlite:////var/lib/memdir.db?synchronous=full"
    # a URL that already says the same is left alone; one that says otherwise is refused
    same = Settings.load({"db": "sqlite:///x.db?synchronous=full"}, environ=env)
    assert same.db == "sqlite:///x.db?synchronous=full"
    with pytest.raises(InvalidInput, match="synchronous='normal' but sqlite_synchronous"):
        Settings.load({"db": "sqlite:///x.db?synchronous=normal"}, environ=env)
    with pytest.raises(InvalidInput, match="must be one of normal, full, received 'off'"):
        Settings.load(environ={"MEMDIR_SQLITE_SYNCHRONOUS": "off"})
    # PostgreSQL's durability is the server's synchronous_commit: its URL is not touched
    pg = Settings.load({"db": "postgresql://u@h/db"}, environ=env)
    assert pg.db == "postgresql://u@h/db"
    assert Settings.load(environ={}).db == "sqlite:///./.memdir/memdir.db"


def test_the_cli_honours_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMDIR_CONFIG", raising=False)
    url = f"sqlite:///{tmp_path / 'memdir.db'}"
    env = {"MEMDIR_SQLITE_SYNCHRONOUS": "full"}
    runner = CliRunner()
    assert runner.invoke(cli, ["--db", url, "init"], env=env).exit_code == 0
    result = runner.invoke(cli, ["--db", url, "write", "/a.md", "--create"], input="x", env=env)
    assert result.exit_code == 0, result.output
    bad = runner.invoke(cli, ["--db", url, "read", "/a.md"], env={"MEMDIR_SQLITE_SYNCHRONOUS": "x"})
    assert bad.exit_code == 2 and "sqlite_synchronous" in bad.output
