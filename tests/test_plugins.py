"""Plug-ins through package entry points: one registry (:mod:`memdir.plugins`) for transcript
formats, miners and model backends, with the same loading and error rules.

The example plug-in (``tests/plugin_example``) is made installed by writing its
``.dist-info`` (metadata and ``entry_points.txt``) beside it on ``sys.path``, which is what
``pip install`` leaves behind; nothing registers it in code.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import STORE
from memdir import OWNER
from memdir.core.errors import InvalidInput
from memdir.dream.llm.port import BACKENDS, model_from_spec
from memdir.dream.miners.base import MINERS
from memdir.dreams import DreamConfig
from memdir.plugins import PluginError
from memdir.service import MemoryService
from memdir.transcripts.reader import Source
from memdir.transcripts.registry import IMPORTERS

EXAMPLE = Path(__file__).resolve().parent / "plugin_example" / "memdir_example_plugin"
ENTRY_POINTS = """\
[memdir.importers]
example-log = memdir_example_plugin:ExampleLogImporter

[memdir.miners]
example-todo = memdir_example_plugin:TodoMiner

[memdir.model_backends]
example = memdir_example_plugin:example_backend
"""
REGISTRIES = (IMPORTERS, MINERS, BACKENDS)


def _install(site: Path, name: str, entry_points: str, package: bool = True) -> None:
    if package:
        shutil.copytree(EXAMPLE, site / EXAMPLE.name, dirs_exist_ok=True)
    info = site / f"{name.replace('-', '_')}-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(entry_points)


@pytest.fixture
def site(tmp_path: Path) -> Iterator[Path]:
    """A directory on ``sys.path`` where distributions can be 'installed'; the registries are
    read again before and after, so nothing leaks into other tests."""
    where = tmp_path / "site"
    where.mkdir()
    sys.path.insert(0, str(where))
    try:
        yield where
    finally:
        sys.path.remove(str(where))
        sys.modules.pop("memdir_example_plugin", None)
        for registry in REGISTRIES:
            registry.reload()


def test_an_installed_distribution_adds_a_format_a_miner_and_a_backend(
    site: Path, svc: MemoryService
) -> None:
    _install(site, "memdir-example-plugin", ENTRY_POINTS)
    for registry in REGISTRIES:
        registry.reload()
    assert IMPORTERS.names()[-1] == "example-log" and IMPORTERS.names()[0] == "generic"
    assert "example-todo" in MINERS.names() and MINERS.names()[0] == "tool_errors"
    assert model_from_spec("example:m1", {}).__class__.__name__ == "FakeModel"

    sources = [
        Source.from_bytes(
            f"s{i}.exlog",
            b"user: please fix the build\nassistant: on it\nuser: TODO rotate the keys\n",
        )
        for i in range(6)
    ]
    imported = svc.import_transcripts(OWNER, STORE, sources)
    assert (imported.new, imported.events) == (6, 18), imported
    run = svc.dream(OWNER, STORE, DreamConfig.build(miners=["example-todo"], min_sessions=3))
    assert run.status == "finished", run.error
    assert run.report is not None
    (proposed,) = run.report["proposed"]
    assert proposed["pattern"] == "example-todo:rotate the keys"
    assert (proposed["sessions"], proposed["decision"]) == (6, "proposed")
    queued = svc.get_proposal(OWNER, STORE, proposed["proposal"])
    assert [op["path"] for op in queued.operations] == ["/org/findings/todo-rotate-the-keys.md"]


def test_a_broken_entry_point_is_an_error_naming_it_and_its_distribution(site: Path) -> None:
    _install(site, "broken-plugin", "[memdir.miners]\nbroken = no_such_module:Miner\n", False)
    with pytest.raises(PluginError) as caught:
        MINERS.reload()
    message = str(caught.value)
    assert "'broken'" in message and "broken-plugin" in message
    assert "failed to import (ModuleNotFoundError" in message and "fix or uninstall" in message


def test_an_entry_point_may_not_take_a_built_in_name(site: Path) -> None:
    _install(site, "shadow-plugin", "[memdir.importers]\ngeneric = memdir_example_plugin:X\n")
    with pytest.raises(PluginError, match="taken by the built-in transcript format"):
        IMPORTERS.reload()


def test_an_entry_point_must_be_a_plug_in_of_its_kind(site: Path) -> None:
    _install(site, "odd-plugin", "[memdir.importers]\nodd = memdir_example_plugin:__doc__\n")
    with pytest.raises(PluginError, match="is not an importer"):
        IMPORTERS.reload()


@pytest.mark.parametrize("registry", REGISTRIES, ids=lambda r: r.kind)
def test_the_same_rules_for_every_kind(registry: object) -> None:
    from memdir.plugins import Registry

    assert isinstance(registry, Registry)
    with pytest.raises(InvalidInput, match=f"unknown {registry.kind} 'nope'; use one of"):
        registry.get("nope")
    with pytest.raises(PluginError, match="a name is 1-64 lower-case"):
        registry.register("Bad Name", registry.items()[registry.names()[0]])
    first = registry.names()[0]
    with pytest.raises(PluginError, match="already registered; pass replace=True"):
        registry.register(first, registry.items()[first])


def test_offline_is_not_a_model_backend() -> None:
    with pytest.raises(PluginError, match="'offline': the name is reserved"):
        BACKENDS.register("offline", BACKENDS.items()["fake"])
