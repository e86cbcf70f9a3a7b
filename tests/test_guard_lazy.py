"""The guard's patterns compile on first use, and only when a text could match them.

Importing :mod:`memdir.guard` compiles none of its rule patterns; a clean ASCII note compiles
none of the secret formats, link or Unicode patterns (their literals are absent); a text that
holds a rule's literal compiles that rule, and the findings are those of the eager pattern.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from memdir.guard import exfil, secret_rules, unicode
from memdir.guard.lazy import LazyRegex
from memdir.guard.secret_rules import HAND_PATTERNS


def _module_patterns() -> list[LazyRegex]:
    found = [v for m in (exfil, secret_rules, unicode) for v in vars(m).values()]
    found += [p.pattern for p in HAND_PATTERNS]
    return [p for p in found if isinstance(p, LazyRegex)]


def test_importing_the_guard_compiles_no_rule_pattern() -> None:
    """In a fresh interpreter, ``import memdir.guard`` runs no ``re.compile`` from the rule
    modules that hold the secret formats, links and Unicode patterns."""
    script = (
        "import re, sys\n"
        "seen = []\n"
        "original = re._compile\n"
        "def counting(pattern, flags):\n"
        "    name = sys._getframe(2).f_code.co_filename.replace(chr(92), '/')\n"
        "    if name.endswith(('guard/secret_rules.py', 'guard/exfil.py', 'guard/unicode.py')):\n"
        "        seen.append(pattern)\n"
        "    return original(pattern, flags)\n"
        "re._compile = counting\n"
        "import memdir.guard\n"
        "print(len(seen))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0"]


def test_a_clean_note_compiles_none_of_the_gated_patterns() -> None:
    """A fresh process screening an ASCII note without ``://`` or any secret prefix compiles
    no secret format, link or Unicode pattern; a link then compiles the link pattern."""
    script = (
        "from memdir.guard import screen, exfil\n"
        "from memdir.guard.lazy import LazyRegex\n"
        "from memdir.guard.secret_rules import HAND_PATTERNS\n"
        "from memdir.guard import secret_rules, unicode\n"
        "pats = [p.pattern for p in HAND_PATTERNS] + [v for m in (exfil, secret_rules, unicode)\n"
        "        for v in vars(m).values() if isinstance(v, LazyRegex)]\n"
        "assert screen('Deploys run on Fridays after the tests pass.', path='/a.md') == []\n"
        "print(sum(p._compiled is not None for p in pats))\n"
        "screen('see https://example.com/docs for the steps', path='/a.md')\n"
        "print(exfil._URL._compiled is not None)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["0", "True"]


@pytest.mark.parametrize("lazy", _module_patterns(), ids=lambda p: p.source[:40])
def test_lazy_pattern_matches_as_the_compiled_one(lazy: LazyRegex) -> None:
    """Each lazy pattern is ``re.compile(source, flags)``: same matches on the same text."""
    eager = re.compile(lazy.source, lazy.flags)
    text = (
        "token sk-ant-" + "a1B2" * 10 + " AIza" + "x" * 35 + " https://evil.test/?q={{secret}}"
        " password: hunter2 <your-key> ghp_" + "Z9" * 18 + " \u202e bad \u200b Раypal"
    )
    assert [m.span() for m in lazy.finditer(text)] == [m.span() for m in eager.finditer(text)]
    assert lazy.groupindex == eager.groupindex
    assert (lazy.search(text, 3) or re.match("", "")).span() == (
        eager.search(text, 3) or re.match("", "")
    ).span()
