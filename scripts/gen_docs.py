"""Generate docs/cli.md from the click commands themselves.

Run `python scripts/gen_docs.py` after changing a command; tests/test_docs.py fails while the
committed reference differs from what this prints.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from memdir.cli.main import cli  # noqa: E402

HEADER = """# CLI reference

Generated from the code by `scripts/gen_docs.py`; do not edit by hand.

Global options go before the verb (`memdir --db URL --store NAME --as PRINCIPAL VERB ...`);
every verb takes `--json`, which prints one JSON document on stdout (errors as the envelope
`{"error": {"type", "message", ...}}`, with the message also on stderr).

| exit code | meaning |
|---|---|
| 0 | success |
| 1 | other error (conflict, content refused, backend) |
| 2 | usage or invalid input (bad path, bad option) |
| 3 | precondition failed (stale `--if-match`, `--create` on an existing file) or required |
| 4 | forbidden (e.g. archived store) or unauthenticated |
| 5 | not found (or not readable) |
| 6 | accepted as a proposal, not applied |
| 7 | refused by write screening |
"""


def _walk(command: click.Command, path: list[str]) -> list[tuple[list[str], click.Command]]:
    found = [(path, command)]
    if isinstance(command, click.Group):  # the root group imports its verbs' modules lazily
        ctx = click.Context(command, info_name=" ".join(path))
        for name in sorted(command.list_commands(ctx)):
            sub = command.get_command(ctx, name)
            assert sub is not None, name
            found.extend(_walk(sub, [*path, name]))
    return found


def render() -> str:
    parts = [HEADER]
    for path, command in _walk(cli, ["memdir"]):
        ctx = click.Context(
            command,
            info_name=" ".join(path),
            terminal_width=100,
            max_content_width=100,
            help_option_names=["-h", "--help"],  # as the root group's context settings say
        )
        title = " ".join(path)
        parts.append(f"\n## `{title}`\n\n```text\n{command.get_help(ctx)}\n```\n")
    return "".join(parts)


if __name__ == "__main__":
    target = ROOT / "docs" / "cli.md"
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
