"""Bring a Claude Code memory hierarchy in as project and user memory (``memdir import
--claude-md DIR``).

What is taken from ``DIR`` (a project checkout), for project ``P`` (default: DIR's name):

- every ``CLAUDE.md`` (the root's and those of subdirectories) → ``/projects/P/<relative
  path>``; ``DIR/.claude/CLAUDE.md`` → ``/projects/P/CLAUDE.md`` (when the root has none);
- ``.claude/rules/**/*.md`` → ``/projects/P/rules/...``;
- ``.claude/skills/<name>/SKILL.md`` (Agent Skills) → ``/projects/P/skills/<name>/SKILL.md``;
- with ``user_dir`` (a ``~/.claude``) and ``user``: its ``CLAUDE.md`` → ``/users/U/CLAUDE.md``,
  its ``rules/`` and ``skills/`` the same way under ``/users/U/``.

Claude Code loads CLAUDE.md files into every session, so one without frontmatter gets
``core: true`` (and ``source: CLAUDE.md``) prepended, which makes it core memory in
``memdir context``; a file with frontmatter is taken verbatim. Personal files are left out
unless ``include_personal``: ``CLAUDE.local.md`` (→ ``/users/U/projects/P/CLAUDE.local.md``)
and ``.claude/settings*.json`` (→ ``/users/U/projects/P/claude/<name>``), both needing ``user``
because they belong in the user's private scope. Directories named ``.git``,
``node_modules`` and other dot-directories (but ``.claude``) are not searched.
"""

from __future__ import annotations

import os
from pathlib import Path

from memdir.core.content import decode_content
from memdir.core.errors import InvalidInput

__all__ = ["collect_claude_md"]

_SKIP_DIRS = {"node_modules", "__pycache__", "venv", ".venv"}
_CORE = "---\ncore: true\nsource: CLAUDE.md\n---\n"


def _text(file: Path) -> str:
    return decode_content(file.read_bytes(), source=str(file))


def _core(content: str) -> str:
    return content if content.startswith("---") else _CORE + content


def _name(value: str, what: str) -> str:
    if not value or "/" in value or value in (".", ".."):
        raise InvalidInput(f"{what} must be a single path segment, received {value!r}")
    return value


def _claude_dir(base: Path, root: str, out: list[tuple[str, str]]) -> None:
    """rules/**/*.md and skills/*/SKILL.md of a ``.claude`` directory, under ``root``."""
    rules = base / "rules"
    if rules.is_dir():
        for file in sorted(rules.rglob("*.md")):
            if file.is_file():
                relative = file.relative_to(rules).as_posix()
                out.append((f"{root}/rules/{relative}", _core(_text(file))))
    skills = base / "skills"
    if skills.is_dir():
        for file in sorted(skills.glob("*/SKILL.md")):
            if file.is_file():
                out.append((f"{root}/skills/{file.parent.name}/SKILL.md", _text(file)))


def collect_claude_md(
    directory: Path,
    *,
    project: str | None = None,
    user: str | None = None,
    user_dir: Path | None = None,
    include_personal: bool = False,
) -> list[tuple[str, str]]:
    """(store path, content) of the memory files found, in path order (see module doc)."""
    if not directory.is_dir():
        raise InvalidInput(f"{directory} is not a directory; give a project checkout")
    name = _name(project or directory.resolve().name, "project")
    root = f"/projects/{name}"
    if (include_personal or user_dir is not None) and user is None:
        raise InvalidInput(
            "personal and user memory go under /users/<user>/: give --user with "
            "--include-personal or --user-dir"
        )
    personal = None if user is None else f"/users/{_name(user, 'user')}"
    out: list[tuple[str, str]] = []
    for current, dirs, names in os.walk(directory):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        here = Path(current)
        relative = here.relative_to(directory).as_posix()
        prefix = root if relative == "." else f"{root}/{relative}"
        if "CLAUDE.md" in names:
            out.append((f"{prefix}/CLAUDE.md", _core(_text(here / "CLAUDE.md"))))
        if include_personal and "CLAUDE.local.md" in names and personal is not None:
            target = f"{personal}/projects/{name}"
            where = target if relative == "." else f"{target}/{relative}"
            out.append((f"{where}/CLAUDE.local.md", _text(here / "CLAUDE.local.md")))
    dot = directory / ".claude"
    if dot.is_dir():
        inner = dot / "CLAUDE.md"
        if inner.is_file():
            taken = any(path == f"{root}/CLAUDE.md" for path, _ in out)
            target = f"{root}/claude/CLAUDE.md" if taken else f"{root}/CLAUDE.md"
            out.append((target, _core(_text(inner))))
        _claude_dir(dot, root, out)
        if include_personal and personal is not None:
            for file in sorted(dot.glob("settings*.json")):
                out.append((f"{personal}/projects/{name}/claude/{file.name}", _text(file)))
    if user_dir is not None and personal is not None:
        if not user_dir.is_dir():
            raise InvalidInput(f"{user_dir} is not a directory; give the user's ~/.claude")
        mine = user_dir / "CLAUDE.md"
        if mine.is_file():
            out.append((f"{personal}/CLAUDE.md", _core(_text(mine))))
        _claude_dir(user_dir, personal, out)
    return sorted(out)
