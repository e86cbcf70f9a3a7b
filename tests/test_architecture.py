"""Import direction, enforced: surfaces -> service -> core; storage implements ports; core
imports nothing from the rest; no surface imports another; the SDK loads no service, storage
or dream module."""

from __future__ import annotations

import ast
import subprocess
import sys
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


# --- what a client loads ---------------------------------------------------------------------
# The SDK shows the service's results without its machinery: result and request types live in
# memdir.core (memdir.core.results), and a local client (db=URL) imports the service inside
# the function that opens it. So `import memdir.sdk` costs no SQLAlchemy and no dream engine.
SDK_FORBIDDEN = ("memdir.service", "memdir.storage", "memdir.dream")


def _module_path(name: str) -> Path | None:
    parts = name.split(".")[1:]
    base = SRC.joinpath(*parts)
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _load_time_imports(path: Path) -> set[str]:
    """The memdir modules ``path`` imports when it is imported: module-level statements,
    ``if TYPE_CHECKING:`` blocks and function bodies left out, ``from pkg import mod`` counted
    as ``pkg.mod`` when ``mod`` is a module."""
    found: set[str] = set()

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                for alias in node.names:
                    if _module_path(f"{node.module}.{alias.name}") is not None:
                        found.add(f"{node.module}.{alias.name}")
            elif isinstance(node, ast.If):
                if not (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for handler in node.handlers:
                    visit(handler.body)
                visit(node.orelse)
                visit(node.finalbody)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {name for name in found if name == "memdir" or name.startswith("memdir.")}


def _loaded_by(root: str) -> set[str]:
    """Every memdir module importing ``root`` loads (parent packages included)."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            module = ".".join(parts[:i])
            path = _module_path(module)
            if module in seen or path is None:
                continue
            seen.add(module)
            todo.extend(_load_time_imports(path))
    return seen


def test_the_sdk_imports_no_service_storage_or_dream_module() -> None:
    loaded = _loaded_by("memdir.sdk")
    assert "memdir.sdk._base" in loaded  # the walk follows the package's own imports
    bad = sorted(m for m in loaded if m.startswith(SDK_FORBIDDEN))
    assert not bad, f"import memdir.sdk loads {bad}; move the types it needs to memdir.core"


def test_importing_the_sdk_loads_no_service_storage_or_dream_module() -> None:
    """What the interpreter itself reports (``-X importtime``), in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import memdir.sdk"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    loaded = {line.rsplit("|", 1)[-1].strip() for line in proc.stderr.splitlines() if "|" in line}
    assert "memdir.sdk._base" in loaded
    bad = sorted(m for m in loaded if m.startswith(SDK_FORBIDDEN))
    assert not bad, f"import memdir.sdk loads {bad}"


def test_screening_patterns_load_on_the_first_write_not_at_import(tmp_path: Path) -> None:
    """Reads never compile the guard's patterns; the first write screens with them."""
    script = (
        "import sys, memdir\n"
        f"svc = memdir.open('sqlite:///{tmp_path / 'm.db'}', create=True)\n"
        "svc.create_store(memdir.OWNER, 'default', exist_ok=True)\n"
        "svc.ls(memdir.OWNER, 'default', '/')\n"
        "print(any(m.startswith('memdir.guard') for m in sys.modules))\n"
        "svc.write(memdir.OWNER, 'default', '/a.md', 'hello', if_absent=True)\n"
        "print(any(m.startswith('memdir.guard') for m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert proc.stdout.split() == ["False", "True"], proc.stdout
