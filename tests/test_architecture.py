"""Import direction, enforced: surfaces -> service -> core; storage implements ports; core
imports nothing from the rest; no surface imports another."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "memdir"

SURFACES = {"cli", "api", "mcp", "web"}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return {name for name in found if name == "memdir" or name.startswith("memdir.")}


def _package(path: Path) -> str:
    relative = path.relative_to(SRC)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else relative.stem


def _modules() -> list[tuple[str, Path]]:
    return [(_package(p), p) for p in SRC.rglob("*.py")]


def test_core_imports_only_core() -> None:
    for package, path in _modules():
        if package == "core":
            bad = {m for m in _imports(path) if not m.startswith("memdir.core")}
            assert not bad, f"{path} imports {bad}"


def test_storage_and_search_do_not_reach_up() -> None:
    upward = ("memdir.service", "memdir.base", "memdir.history", "memdir.cli", "memdir.writer")
    for package, path in _modules():
        if package in ("storage", "search"):
            bad = {m for m in _imports(path) if m.startswith(upward)}
            assert not bad, f"{path} imports {bad}"


# CLI verbs that start another surface's server: a composition root, not a call through it.
LAUNCHERS = {"cli/serve.py", "cli/mcp_cmd.py"}


def test_surfaces_never_import_each_other() -> None:
    for package, path in _modules():
        if path.relative_to(SRC).as_posix() in LAUNCHERS:
            continue
        if package in SURFACES:
            others = {f"memdir.{s}" for s in SURFACES - {package}}
            bad = {m for m in _imports(path) if any(m.startswith(o) for o in others)}
            assert not bad, f"{path} imports {bad}"


def test_modules_stay_readable() -> None:
    for _, path in _modules():
        lines = path.read_text(encoding="utf-8").count("\n")
        assert lines <= 800, f"{path} has {lines} lines; split it by responsibility"
