"""The real-world shapes of the synthetic fleet: what real harnesses put in transcripts.

The classic catalogue (:data:`memdir.dream.fleet.CATALOGUE`'s first part) plants patterns in
clean noise; real fleets have shapes that noise lacks, and a dream that is right on the classic
catalogue can still be wrong on them. Each shape here is planted like any pattern — in exactly
``round(prevalence * sessions)`` sessions of its format, its sessions listed in the manifest,
recounted from the raw files by ``tests/test_dream_fleet.py`` — and scored apart (``shape``):

- **wrapped outputs without exit codes** (``pytest-not-found``, mini-swe-agent): the exit code
  exists only inside ``<returncode>127</returncode><output>…</output>``; ``pytest`` is not
  installed as a command and ``python -m pytest`` with the same arguments works.
- **heredocs, redirections and a long traceback** (``no-such-table``, mini-swe-agent): a
  script written with ``cat <<'EOF' > reproduce_x.py`` dies 30-40 frames deep; the cause is
  the traceback's last line, ``sqlite3.OperationalError: no such table: users``, far past the
  first 60 lines; ``python manage.py migrate`` fixes it.
- **harness feedback** (``format-error``, mini-swe-agent): a turn without an action gets the
  harness's ``Please always provide EXACTLY ONE action in triple backticks`` message; the next
  compliant turn is the fix.
- **program families** (``python-no-pytest``, Claude Code): ``python``, ``python3`` and
  ``/usr/bin/python3 -m pytest`` fail with ``No module named pytest`` — one cause, one pattern;
  ``pip install pytest`` fixes it.
- **silent policy failures with outcomes** (``refund-over-limit``, OpenAI chat): ``issue_refund``
  above the 500 limit succeeds as a call, and the session's reward is 0; small refunds happen in
  successful sessions too.
- **junk that must not be proposed** (``junk: True``): the user simulator's closing turn
  (``No, that's all I needed. Thanks! ###STOP###``) is no correction; a session opening with a
  heredoc write (``cat <<'EOF' > notes_x.md``) is no lookup of ``<<'EOF'``.
"""

from __future__ import annotations

import json
from typing import Final

from memdir.dream.fleet_formats import CLAUDE, FORMAT_ERROR, MINI, OPENAI, Act, Noise, Spec, call
from memdir.dream.fleet_formats import say as _say

__all__ = ["CLOSINGS", "FIXES", "REFUND_LIMIT", "SHAPES"]

#: Refunds above this are against the (silent) policy: the call succeeds, the task fails.
REFUND_LIMIT: Final = 500
CLOSINGS: Final = (
    "No, that’s all I needed. Thanks for your help! ###STOP###",
    "No, that’s all I needed. Thank you for your help! ###STOP###",
    "No, that’s everything I needed. Thanks for your help! ###STOP###",
    "No, that covers everything I needed. Thank you for your help! ###STOP###",
    "That's everything I needed. Thank you so much for your help!\n\n###STOP###",
    "###STOP###",
)  # fmt: skip (the closings of a real user simulator)


def _passed(n: Noise) -> str:
    return f"{n.rng.randint(3, 90)} passed in {n.rng.uniform(0.3, 20):.2f}s"


def _pytest_not_found(n: Noise) -> list[Act]:
    tests = f"tests/test_{n.word()}.py"
    return [n.bash(f"pytest -q {tests}", "bash: line 1: pytest: command not found", 127),
            n.bash(f"python -m pytest -q {tests}", _passed(n))]  # fmt: skip


def _no_such_table(n: Noise) -> list[Act]:
    script = f"reproduce_{n.word()}.py"
    body = ("import sqlite3\n\nconn = sqlite3.connect('app.db')\n"
            "print(conn.execute('SELECT * FROM users').fetchall())")  # fmt: skip
    frames = [
        f'  File "/usr/lib/python3.11/site-packages/{n.word()}/{n.word()}.py", line '
        f"{n.rng.randint(10, 900)}, in {n.word()}\n    return {n.word()}({n.word()})"
        for _ in range(n.rng.randint(30, 40))
    ]
    trace = ("Traceback (most recent call last):\n"
             f'  File "/testbed/{script}", line 4, in <module>\n' + "\n".join(frames)
             + "\nsqlite3.OperationalError: no such table: users")  # fmt: skip
    migrated = ("Operations to perform:\n  Apply all migrations: app\nRunning migrations:\n"
                "  Applying app.0001_initial... OK")  # fmt: skip
    return [call("Bash", {"command": f"cat <<'EOF' > {script}\n{body}\nEOF"}, ""),
            n.bash(f"python {script}", trace, 1),
            n.bash("python manage.py migrate", migrated),
            n.bash(f"python {script}", "[]")]  # fmt: skip


def _format_error(n: Noise) -> list[Act]:
    return [_say("assistant", f"THOUGHT: {n.sentence()} The change looks complete now."),
            _say("user", FORMAT_ERROR.format(found=0)),
            n.bash("git status --short", f" M src/{n.word()}.py")]  # fmt: skip


def _python_no_pytest(n: Noise) -> list[Act]:
    python = n.rng.choice(("python", "python3", "/usr/bin/python3"))
    version = f"8.3.{n.rng.randint(1, 5)}"
    installed = f"Successfully installed iniconfig-2.0.0 pluggy-1.5.0 pytest-{version}"
    return [n.bash(f"{python} -m pytest -q", f"{python}: No module named pytest", 1),
            n.bash("pip install pytest", installed),
            n.bash(f"{python} -m pytest -q", _passed(n))]  # fmt: skip


def _refund(n: Noise) -> list[Act]:
    amount = n.rng.randint(REFUND_LIMIT + 100, 5000)
    order = n.ident("ord_")
    result = {"refund_id": n.ident("re_"), "order_id": order, "status": "issued", "amount": amount}
    return [call("issue_refund", {"order_id": order, "amount": amount, "reason": n.word()},
                 json.dumps(result), fails_task=True)]  # fmt: skip


def _closing(n: Noise) -> list[Act]:
    return [_say("user", n.rng.choice(CLOSINGS))]


def _heredoc_opening(n: Noise) -> list[Act]:
    note = f"notes_{n.word()}.md"
    return [call("Bash", {"command": f"cat <<'EOF' > {note}\n# {n.sentence(3, 6)}\nEOF"}, "")]


#: What names the fix each planting's sessions show, as a regex a draft's text matches
#: (case-insensitive): the working command, the rule, the file to start from. A planted
#: pattern left out shows no fix (its failing call is never fixed), so a queued draft for it
#: names none; consolidation patterns are their own fix.
FIXES: Final[dict[str, str]] = {
    "npm-frozen-lockfile": r"`npm ci`", "make-test-renamed": r"make check",
    "pnpm-preference": r"pnpm", "no-push-main": r"open a (pr|pull request)",
    "nav-architecture": r"docs/ARCHITECTURE\.md", "nav-ls-src": r"\bsrc\b",
    "loop-kubectl": r"kubectl wait|--watch|\s-w\b", "ticket-priority": r"priority=high",
    "cargo-offline": r"`cargo build`", "pip-user": r"`pip install -r requirements\.txt`",
    "emoji-commits": r"emoji", "nav-makefile": r"Makefile",
    "loop-healthz": r"--retry|\bsleep\b|\bwait\b",
    "pytest-not-found": r"python -m pytest", "no-such-table": r"manage\.py migrate",
    "format-error": r"exactly one (action|bash block|```bash)",
    "python-no-pytest": r"pip install pytest", "refund-over-limit": r"\b500\b|limit",
}  # fmt: skip

SHAPES: Final[tuple[Spec, ...]] = (
    Spec("pytest-not-found", "recovery", "bash", "python -m pytest", 0.03,
         "pytest is not a command here; python -m pytest with the same arguments works",
         format=MINI, build=_pytest_not_found, shape=True,
         accept=(("tool_errors", "bash", "pytest: command not found"),)),
    Spec("no-such-table", "tool_errors", "bash", ("no such table: users", "no such table: 'users'"),
         0.025,
         "a heredoc-written script dies deep in a long traceback: no such table: users",
         format=MINI, build=_no_such_table, shape=True,
         accept=(("recovery", "bash", "migrate"),)),
    Spec("format-error", None, None, "exactly one action", 0.03,
         "the harness answers a turn without an action with its format error",
         format=MINI, build=_format_error, shape=True),
    Spec("python-no-pytest", "tool_errors", "Bash",
         ("no module named pytest", "no module named 'pytest'"), 0.03,
         "python, python3 and /usr/bin/python3 -m pytest: No module named pytest (one cause)",
         format=CLAUDE, build=_python_no_pytest, shape=True,
         accept=(("recovery", "Bash", "pip install pytest"),)),
    Spec("refund-over-limit", None, "issue_refund", "issue_refund", 0.03,
         f"refunds above {REFUND_LIMIT} succeed as calls and fail the task (reward 0)",
         format=OPENAI, build=_refund, shape=True),
    Spec("junk-stop-closing", "corrections", None, "###stop###", 0.08,
         "the user simulator's closing turn is not a correction", format=OPENAI,
         place="closing", build=_closing, shape=True, junk=True),
    Spec("junk-heredoc-lookup", None, None, "<<", 0.04,
         "a session opening with a heredoc write is not a lookup of <<'EOF'", format=MINI,
         place="opening", build=_heredoc_opening, shape=True, junk=True),
)  # fmt: skip
