"""A reproducible synthetic fleet with planted patterns, and the score of a dream against it.

:func:`generate` writes ``sessions`` agent sessions as transcript files in three formats the
importers read — Claude Code session JSONL under ``claude/<agent>/<project dir>/<id>.jsonl``,
Codex CLI rollouts under ``codex/<agent>/<project>/rollout-*.jsonl`` and τ-bench-shaped
OpenAI chat result files under ``openai/<agent>/results-NNN.json``, mini-swe-agent trajectories
under ``mini/<agent>/<project>/<id>.traj.json`` — plus ``manifest.json``:
the ground truth (with ``imports``: each directory and the scope labels to import it with,
since Claude Code and Codex files carry none). Invariants:

- **Reproducible**: the same arguments give byte-identical files. Each session draws from its
  own ``random.Random(f"{seed}:{index}")`` (string seeds hash with SHA-512, independent of
  ``PYTHONHASHSEED``), so the order files are written in does not matter.
- **Streamed**: sessions are planned as small headers (labels, start time, length), then each
  is generated and written at once; the events of at most one session are in memory.
- **Planted exactly**: each planted pattern (:data:`CATALOGUE`) goes into exactly
  ``round(prevalence * sessions)`` sessions (fewer only when too few sessions are eligible),
  chosen among the sessions of its format, projects and user; noise never produces a
  planted pattern's text (``tests/test_dream_fleet.py`` recounts it from the files).
- **Truth under the default thresholds**: ``above`` says whether the planted count reaches
  :class:`~memdir.dream.model.Thresholds` (>= 5 sessions and >= 2 %); the catalogue places
  some at 2.5 % (just above) and some at 1.5 % (just below).

Population: 8 projects, 12 users, up to 42 agents (a Claude Code agent ``cc-<user>`` per user, on
the projects of that user's teams, a quarter of whose sessions are mini-swe-agent trajectories
of ``mini-<user>`` instead; ``codex-<user>`` for 6 users; 12 operations bots on the OpenAI chat
format, one home project each; 38 / 12 / 15 / 35 % of the sessions), sessions of 10-80 events
spread over the 6 weeks before ``end`` (default ``FLEET_END``).

Manifest ``planted`` entries: ``id``, ``miner`` (one of ``MINER_NAMES``, or None), ``match``
(``{"tool", "contains"}``: the found pattern's ``subject["tool"]`` — case-insensitive, None for
miners without a tool — and a substring of its title or subject JSON, or a list of substrings
any of which will do, for findings a miner may word differently: ``ls src`` / ``list src``),
``accept`` (other findings the same planting legitimately causes, e.g. the ``tool_errors``
pattern of a failing flag whose recovery is planted), ``sessions``, ``prevalence``, ``above``,
``scope``, ``session_ids``, for memory patterns the ``memory`` files they concern
(``prevalence`` None), and ``shape`` / ``junk`` for the real-world shapes of
:mod:`memdir.dream.fleet_shapes` (``miner`` None: any miner's finding will do; a ``junk``
entry is planted noise that must not be proposed).

:func:`score` compares any list of found :class:`~memdir.dream.model.Pattern` values with the
manifest (see its docstring), so it serves the engine and the service run alike.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from memdir.dream.fleet_formats import (
    CLAUDE,
    CODEX,
    MINI,
    OPENAI,
    Act,
    Builder,
    Noise,
    Spec,
    act_events,
    call,
    claude_lines,
    codex_lines,
    event_count,
    mini_trajectory,
    openai_element,
    say,
    session_uuid,
)
from memdir.dream.fleet_shapes import FIXES, SHAPES
from memdir.dream.model import Draft, Pattern, Thresholds

if TYPE_CHECKING:
    from memdir.core.model import Principal
    from memdir.service import MemoryService
    from memdir.transcripts.model import ImportReport

__all__ = [
    "CATALOGUE",
    "FLEET_END",
    "Fleet",
    "Score",
    "Spec",
    "fix_share",
    "generate",
    "load",
    "matches",
    "memory_files",
    "score",
]

PROJECTS: Final = ("web", "api", "billing", "mobile", "infra", "data", "search", "docs")
_PROJECT_WEIGHTS: Final = (1.6, 1.6, 1.0, 0.8, 1.0, 0.8, 0.6, 0.6)
USERS: Final = ("ana", "ben", "chen", "dana", "eli", "fatima", "gus", "hana", "ivan", "jo",
                "kai", "lena")  # fmt: skip
BOTS: Final = ("support-bot", "billing-bot", "ops-bot", "deploy-bot", "triage-bot",
               "search-bot", "data-bot", "docs-bot", "oncall-bot", "qa-bot", "release-bot",
               "growth-bot")  # fmt: skip
#: The fleet's last moment: pass it as the dream's ``now`` (stale-memory checks look 30 days back).
FLEET_END: Final = dt.datetime(2026, 11, 20, 18, 0, tzinfo=dt.UTC)
SPAN_DAYS: Final = 42
RECENT_DAYS: Final = 28
_OPENAI_SHARE: Final = 0.35
_CODEX_SHARE: Final = 0.15
#: Of the Claude Code sessions, the share written as mini-swe-agent trajectories instead
#: (chosen by a stream of its own, so the other sessions are those of a fleet without them).
_MINI_OF_CLAUDE: Final = 0.24
#: Users who also run Codex CLI (agents ``codex-<user>``).
_CODEX_USERS: Final = 6
_PER_RESULT_FILE: Final = 100
_MIN_EVENTS: Final = 10
_MAX_EVENTS: Final = 80
#: Calls a loop waits for: exploration looks at the first 8 calls, loops come after them.
_LATE_AFTER: Final = 8


@dataclass(frozen=True, slots=True)
class _Header:
    index: int
    format: str
    agent: str
    user: str
    project: str
    start: dt.datetime
    length: int


def _npm(n: Noise) -> list[Act]:
    err = ("npm error code EUSAGE\nnpm error\nnpm error `--frozen-lockfile` is not a valid "
           "option for `npm ci`\nnpm error Did you mean `npm ci` (it always uses the "
           "lockfile)?")  # fmt: skip
    ok = (f"added {n.rng.randint(700, 1600)} packages, and audited {n.rng.randint(1601, 1700)} "
          f"packages in {n.rng.randint(8, 60)}s\n\nfound 0 vulnerabilities")  # fmt: skip
    return [n.bash("npm ci --frozen-lockfile", err, 1),
            say("assistant", "npm ci has no --frozen-lockfile flag; it uses the lockfile."),
            n.bash("npm ci", ok)]  # fmt: skip


def _make_test(n: Noise) -> list[Act]:
    ok = (f"pytest -q\n{n.rng.randint(300, 480)} passed, {n.rng.randint(0, 9)} skipped in "
          f"{n.rng.uniform(20, 90):.1f}s")  # fmt: skip
    return [n.bash("make test", "make: *** No rule to make target 'test'.  Stop.", 2),
            say("assistant", "There is no test target; the Makefile has check instead."),
            n.bash("make check", ok)]  # fmt: skip


def _cargo_offline(n: Noise) -> list[Act]:
    crate = n.rng.choice(("serde", "tokio", "anyhow", "clap", "reqwest"))
    err = (f"error: no matching package named `{crate}` found\nlocation searched: registry "
           "`crates-io`\nrequired by package `app v0.1.0`\nAs a reminder, you're using offline "
           "mode (--offline) which can sometimes cause surprising resolution failures")  # fmt: skip
    ok = f"   Compiling app v0.1.0\n    Finished dev profile in {n.rng.uniform(2, 80):.2f}s"
    return [n.bash("cargo build --offline", err, 101), n.bash("cargo build", ok)]


def _pip_user(n: Noise) -> list[Act]:
    err = ("ERROR: Can not perform a '--user' install. User site-packages are not visible in "
           "this virtualenv.")  # fmt: skip
    ok = f"Successfully installed {n.word()}-1.{n.rng.randint(0, 9)}.0 {n.word()}-2.0.1"
    return [n.bash("pip install --user -r requirements.txt", err, 1),
            n.bash("pip install -r requirements.txt", ok)]  # fmt: skip


def _correction(trigger: Callable[[Noise], Act], wordings: Sequence[str], ack: str) -> Builder:
    def build(n: Noise) -> list[Act]:
        return [trigger(n), say("user", n.rng.choice(wordings)), say("assistant", ack)]

    return build


_PNPM: Final = ("Use pnpm, not npm.", "No, we use pnpm here, not npm.",
                "Please use pnpm instead of npm.", "Don't use npm, use pnpm.",
                "Stop using npm, this repo uses pnpm.",
                "Always use pnpm rather than npm.")  # fmt: skip
_PUSH: Final = ("Don't push directly to main, open a PR instead.",
                "Please never push to main directly; open a PR.",
                "No, don't push to main. Open a PR.",
                "Stop pushing to main directly, always open a PR.")  # fmt: skip
_EMOJI: Final = ("Stop adding emoji to commit messages.", "No emoji in commit messages please.",
                 "Don't put emoji in the commit message.")  # fmt: skip


def _npm_install(n: Noise) -> Act:
    return n.bash(
        "npm install", f"added {n.rng.randint(3, 90)} packages in {n.rng.randint(2, 30)}s"
    )


def _push_main(n: Noise) -> Act:
    return n.bash(
        "git push origin main",
        f"To github.com:acme/repo.git\n   {n.ident('', 7)}..{n.ident('', 7)}  main -> main",
    )


def _emoji_commit(n: Noise) -> Act:
    return n.bash(f'git commit -m "✨ {n.word()} {n.word()}"',
                  f"[dev {n.ident('', 7)}] ✨ {n.word()}\n 2 files changed")  # fmt: skip


def _lookup(command: str, output: Callable[[Noise], str]) -> Builder:
    return lambda n: [n.bash(command, output(n))]


def _loop(command: str, output: Callable[[Noise], str], low: int = 3, high: int = 5) -> Builder:
    return lambda n: [n.bash(command, output(n)) for _ in range(n.rng.randint(low, high))]


def _pods(n: Noise) -> str:
    state = n.rng.choice(("ContainerCreating", "Running", "Pending"))
    return f"NAME                   READY   STATUS\nweb-{n.ident('', 6)}   0/1     {state}"


def _api_error(tool: str, args: Callable[[Noise], dict[str, Any]],
               message: Callable[[Noise], str]) -> Builder:  # fmt: skip
    return lambda n: [
        call(tool, args(n), "Error: " + message(n), error=True),
        say("assistant", "That call failed; let me check the details with you."),
    ]


def _ticket(n: Noise) -> list[Act]:
    title, customer = f"{n.word()} outage", n.ident("cus_")
    ticket = n.ident("T-", 6)
    return [call("create_ticket", {"title": title, "customer_id": customer, "priority": "urgent"},
                 "Error: invalid value 'urgent' for priority; expected one of: low, normal, high",
                 error=True),
            call("create_ticket", {"title": title, "customer_id": customer, "priority": "high"},
                 json.dumps({"id": ticket, "status": "open", "priority": "high"}))]  # fmt: skip


_TESTING_NOTE: Final = ("---\ndescription: How to run the api tests\ntags: [testing]\n---\n"
                        "# Testing the api\n\nRun the tests with `make test` before pushing; "
                        "CI runs the same target.\n")  # fmt: skip
_REVIEW: Final = ("# Code review\n\nEvery change needs one approving review. Keep pull "
                  "requests under 400 lines, describe how you tested them, link the issue, "
                  "and squash-merge once CI is green. Reviewers answer within one working "
                  "day.\n")  # fmt: skip


def memory_files(end: dt.datetime) -> dict[str, str]:
    """The memory seeded before dreaming (dates relative to the fleet's ``end``): a stale
    testing note, an expired note, two near-duplicates and two healthy notes."""
    expired = (end - dt.timedelta(days=36)).date().isoformat()
    review = (end + dt.timedelta(days=100)).date().isoformat()
    return {
        "/org/conventions/code-review.md": "---\ndescription: Code review rules\n---\n" + _REVIEW,
        "/org/conventions/commits.md": "---\ndescription: Commit messages\n---\n# Commits\n\n"
        "Imperative subject under 72 characters, a blank line, then why.\n",
        "/projects/api/notes/code-review.md": "---\ndescription: How we review code\n---\n"
        + _REVIEW.replace("one working day", "a working day"),
        "/projects/api/notes/testing.md": _TESTING_NOTE,
        "/projects/web/notes/deploy.md": f"---\ndescription: Deploying web\nreview_after: "
        f"{review}\n---\n# Deploy\n\n`./scripts/deploy web` from a green main.\n",
        "/projects/web/notes/release-freeze.md": "---\ndescription: Release freeze for the "
        f"launch\nexpires: {expired}\n---\n# Release freeze\n\nNo deploys of web to "
        "production until the launch review.\n",
    }  # fmt: skip


CATALOGUE: Final[tuple[Spec, ...]] = (
    Spec("npm-frozen-lockfile", "recovery", "Bash", "--frozen-lockfile", 0.06,
         "a flag npm ci does not have always fails; dropping it works",
         projects=("web", "mobile", "docs"), build=_npm,
         accept=(("tool_errors", "Bash", "frozen-lockfile"),)),
    Spec("make-test-renamed", "stale_memory", None, "make test", 0.03,
         "make test was renamed make check; a note still says make test",
         projects=("api",), recent=True, build=_make_test,
         accept=(("recovery", "Bash", "make check"),
                 ("tool_errors", "Bash", "No rule to make target")),
         memory=("/projects/api/notes/testing.md",)),
    Spec("pnpm-preference", "corrections", None, "pnpm", 0.025,
         "one user keeps asking for pnpm instead of npm", user="top",
         build=_correction(_npm_install, _PNPM, "Understood, switching to pnpm.")),
    Spec("no-push-main", "corrections", None, "push", 0.025,
         "users across projects ask the agent to open a PR instead of pushing to main",
         build=_correction(_push_main, _PUSH, "Sorry, I will open a pull request.")),
    Spec("nav-architecture", "exploration", "Bash", "ARCHITECTURE.md", 0.05,
         "sessions start by reading the architecture document", projects=("api", "billing"),
         place="opening", build=_lookup("cat docs/ARCHITECTURE.md",
                                        lambda n: "# Architecture\n\n" + n.sentence(20, 40))),
    Spec("nav-ls-src", "exploration", "Bash", ("ls src", "list src"), 0.03,
         "sessions start by listing src/", place="opening",
         build=_lookup("ls src/", lambda n: "\n".join(sorted({n.word() for _ in range(6)})))),
    Spec("loop-kubectl", "loops", "Bash", "kubectl get pods", 0.025,
         "the agent polls the staging pods 3-5 times in a row", place="late",
         build=_loop("kubectl get pods -n staging", _pods)),
    Spec("invoice-not-found", "tool_errors", "get_invoice", "not found", 0.04,
         "get_invoice fails for ids that vary per session", format=OPENAI,
         build=_api_error("get_invoice", lambda n: {"invoice_id": n.ident("in_")},
                          lambda n: f"invoice {n.ident('in_')} not found for account "
                                    f"acct_{n.rng.randint(10000, 99999)}")),
    Spec("orders-rate-limit", "tool_errors", "search_orders", "rate limit", 0.025,
         "search_orders hits the tenant rate limit", format=OPENAI,
         build=_api_error("search_orders", lambda n: {"query": n.word()},
                          lambda n: f"rate limit exceeded (429) for tenant "
                                    f"t-{n.rng.randint(100, 9999)}; retry after "
                                    f"{n.rng.randint(2, 90)}s")),
    Spec("ticket-priority", "recovery", "create_ticket", "priority", 0.03,
         "create_ticket refuses priority 'urgent'; 'high' works", format=OPENAI, build=_ticket,
         accept=(("tool_errors", "create_ticket", "priority"),)),
    Spec("cargo-offline", "recovery", "shell", "--offline", 0.025,
         "cargo build --offline fails on a fresh checkout; cargo build works", format=CODEX,
         build=_cargo_offline, accept=(("tool_errors", "shell", "offline"),)),
    Spec("expired-note", "consolidation", None, "release-freeze", 0.0,
         "a note whose expires date has passed", format=None, place="memory",
         memory=("/projects/web/notes/release-freeze.md",)),
    Spec("duplicate-notes", "consolidation", None, "code-review", 0.0,
         "two near-duplicate code review notes", format=None, place="memory",
         memory=("/org/conventions/code-review.md", "/projects/api/notes/code-review.md")),
    # just below the thresholds (1.5 %): proposing these costs precision
    Spec("deploy-timeout", "tool_errors", "deploy_service", "timed out", 0.015,
         "deploys time out waiting for health checks", format=OPENAI,
         build=_api_error("deploy_service", lambda n: {"service": n.word(), "version": n.word()},
                          lambda n: f"deployment dep-{n.ident('', 8)} timed out after "
                                    f"{n.rng.randint(300, 900)}s waiting for health checks")),
    Spec("pip-user", "recovery", "Bash", "--user", 0.015,
         "pip --user fails inside a virtualenv; without it works", build=_pip_user,
         accept=(("tool_errors", "Bash", "pip install"),)),
    Spec("emoji-commits", "corrections", None, "emoji", 0.015,
         "one user asks for commit messages without emoji", user="second",
         build=_correction(_emoji_commit, _EMOJI, "Got it, plain commit messages from now on.")),
    Spec("nav-makefile", "exploration", "Bash", "Makefile", 0.015,
         "sessions start by reading the Makefile", place="opening",
         build=_lookup("cat Makefile", lambda n: "check:\n\tpytest -q\nlint:\n\truff check .")),
    Spec("loop-healthz", "loops", "Bash", "healthz", 0.015,
         "the agent polls a health endpoint 3-4 times", place="late",
         build=_loop("curl -s http://localhost:8080/healthz",
                     lambda n: n.rng.choice(('{"status":"starting"}', '{"status":"ok"}')), 3, 4)),
    *SHAPES,  # the real-world shapes (memdir.dream.fleet_shapes), scored apart
)  # fmt: skip


@dataclass
class Fleet:
    """What :func:`generate` wrote: the directory, the manifest and how to load it."""

    out_dir: Path
    seed: int
    sessions: int
    manifest: dict[str, Any]

    @property
    def planted(self) -> list[dict[str, Any]]:
        return list(self.manifest["planted"])

    @property
    def now(self) -> dt.datetime:
        return dt.datetime.fromisoformat(self.manifest["end"])

    @property
    def memory(self) -> dict[str, str]:
        return dict(self.manifest["memory"])


# --- planning -----------------------------------------------------------------------------


def _headers(seed: int, sessions: int, end: dt.datetime) -> list[_Header]:
    rng = random.Random(f"{seed}:population")
    teams = {p: rng.sample(USERS, rng.randint(3, 5)) for p in PROJECTS}
    for user in USERS:  # everyone is on some team
        if not any(user in team for team in teams.values()):
            teams[rng.choice(PROJECTS)].append(user)
    homes = {bot: PROJECTS[i % len(PROJECTS)] for i, bot in enumerate(BOTS)}
    coders = sorted(rng.sample(USERS, _CODEX_USERS))
    mini = random.Random(f"{seed}:mini")
    span = SPAN_DAYS * 86400
    starts = sorted(rng.uniform(0, span - 3 * 3600) for _ in range(sessions))
    out = []
    for index, offset in enumerate(starts):
        start = end - dt.timedelta(seconds=span - offset)
        start = start.replace(microsecond=0)
        length = rng.randint(_MIN_EVENTS, _MAX_EVENTS - 6)  # a last block may overshoot by 6
        roll = rng.random()
        if roll < _OPENAI_SHARE:
            bot = rng.choice(BOTS)
            out.append(_Header(index, OPENAI, bot, rng.choice(USERS), homes[bot], start, length))
        elif roll < _OPENAI_SHARE + _CODEX_SHARE:
            user = rng.choice(coders)
            project = rng.choice(sorted(p for p in PROJECTS if user in teams[p]))
            out.append(_Header(index, CODEX, f"codex-{user}", user, project, start, length))
        else:
            project = rng.choices(PROJECTS, _PROJECT_WEIGHTS)[0]
            user = rng.choice(sorted(teams[project]))
            if mini.random() < _MINI_OF_CLAUDE:
                out.append(_Header(index, MINI, f"mini-{user}", user, project, start, length))
            else:
                out.append(_Header(index, CLAUDE, f"cc-{user}", user, project, start, length))
    return out


def _eligible(spec: Spec, headers: list[_Header], users: dict[str, str]) -> list[int]:
    recent = headers[-1].start - dt.timedelta(days=RECENT_DAYS)
    user = users.get(spec.user, spec.user) if spec.user else None
    return [
        h.index for h in headers
        if h.format == spec.format
        and (not spec.projects or h.project in spec.projects)
        and (user is None or h.user == user)
        and (not spec.recent or h.start >= recent)
    ]  # fmt: skip


def _plan(seed: int, headers: list[_Header]) -> tuple[dict[str, list[int]], dict[str, str]]:
    """Sessions per planted pattern (sorted indices), and who the ``top``/``second`` users are."""
    counts: dict[str, int] = {}
    for h in headers:
        if h.format == CLAUDE:
            counts[h.user] = counts.get(h.user, 0) + 1
    ranked = sorted(counts, key=lambda u: (-counts[u], u)) + list(USERS)
    users = {"top": ranked[0], "second": ranked[1]}
    rng = random.Random(f"{seed}:plan")
    plan: dict[str, list[int]] = {}
    for spec in CATALOGUE:
        if spec.place == "memory":
            plan[spec.id] = []
            continue
        pool = _eligible(spec, headers, users)
        want = int(spec.prevalence * len(headers) + 0.5)
        plan[spec.id] = sorted(rng.sample(pool, min(want, len(pool))))
    return plan, users


# --- one session --------------------------------------------------------------------------


def _compose(header: _Header, specs: list[Spec], rng: random.Random) -> list[Act]:
    """The session's script: task, opening lookups, noise with the planted blocks, closing."""
    noise = Noise(rng, header.format, header.project)
    fmt = header.format
    claude = fmt != OPENAI  # Codex works like Claude Code; its rollout writer maps the tools
    acts: list[Act] = [say("user", noise.task() if claude else noise.openai_task())]
    for spec in (s for s in specs if s.place == "opening"):
        acts.extend(spec.build(noise) if spec.build else [])
    if claude:
        acts.extend(noise.lookup() for _ in range(rng.randint(1, 3)))
    body = [spec.build(noise) for spec in specs if spec.place == "body" and spec.build]
    late = [spec.build(noise) for spec in specs if spec.place == "late" and spec.build]
    # aim at the header's length, counting the planted blocks and the closing assistant turn
    size = event_count(acts, fmt) + sum(act_events(b, fmt) for b in body + late)
    size += act_events([say("assistant", "")], fmt)
    blocks: list[list[Act]] = []
    work = noise.claude_work if claude else noise.openai_work
    calls = sum(a.kind == "call" for a in acts)
    while size < header.length or (late and calls < _LATE_AFTER):
        block = work() if rng.random() < 0.85 else [say("assistant", noise.sentence()),
                                                    say("user", noise.mid_user())]  # fmt: skip
        blocks.append(block)
        size += act_events(block, fmt)
        calls += sum(a.kind == "call" for a in block)
    for block in body:
        blocks.insert(rng.randint(0, len(blocks)), block)
    for block in late:
        seen, positions = sum(a.kind == "call" for a in acts), []
        for position, existing in enumerate(blocks):
            if seen >= _LATE_AFTER:
                positions.append(position)
            seen += sum(a.kind == "call" for a in existing)
        positions.append(len(blocks))
        blocks.insert(rng.choice(positions), block)
    for block in blocks:
        acts.extend(block)
    acts.append(say("assistant", noise.sentence(10, 30)))
    if rng.random() < 0.5:
        acts.append(say("user", noise.closing_user()))
    for spec in specs:
        if spec.place == "closing" and spec.build is not None:
            acts.extend(spec.build(noise))  # drawn last: the rest of the session is unchanged
    return acts


def _system_prompt(bot: str, project: str) -> str:
    return (f"You are {bot}, the operations assistant of the {project} team. Use the tools to "
            "look things up before answering; never guess ids. Be brief.")  # fmt: skip


# --- generate -----------------------------------------------------------------------------


def generate(
    seed: int, sessions: int = 2000, *, out_dir: Path, end: dt.datetime = FLEET_END
) -> Fleet:
    """Write a fleet of ``sessions`` sessions under ``out_dir`` and its ``manifest.json``.

    Sessions start within the 6 weeks before ``end`` (an aware time: pass the dream's ``now``,
    or dream with ``now=fleet.now``). ``out_dir`` is created if needed and must not already
    hold a fleet's files. Raises ValueError for fewer than 50 sessions (too few to plant every
    pattern at least once) or a naive ``end``.
    """
    if end.tzinfo is None:
        raise ValueError(f"end must be timezone-aware, received {end.isoformat()}")
    if sessions < 50:
        raise ValueError(
            f"a fleet needs at least 50 sessions to plant its patterns, received {sessions}"
        )
    out_dir = Path(out_dir)
    if (out_dir / "manifest.json").exists():
        raise ValueError(f"{out_dir} already holds a fleet (manifest.json); use an empty directory")
    end = end.astimezone(dt.UTC).replace(microsecond=0)
    headers = _headers(seed, sessions, end)
    plan, users = _plan(seed, headers)
    by_session: dict[int, list[Spec]] = {}
    for spec in CATALOGUE:
        for index in plan[spec.id]:
            by_session.setdefault(index, []).append(spec)
    names: dict[int, str] = {}
    groups: dict[tuple[str, str, str, str], int] = {}  # (format, directory, user, project)
    events = 0
    for h in (h for h in headers if h.format != OPENAI):
        folder, names[h.index], count = _write_session(out_dir, seed, h,
                                                       by_session.get(h.index, []))  # fmt: skip
        group = (h.format, folder, h.user, h.project)
        groups[group] = groups.get(group, 0) + 1
        events += count
    bots = sorted({h.agent for h in headers if h.format == OPENAI})
    for bot in bots:
        mine = [h for h in headers if h.agent == bot]
        for chunk in range(0, len(mine), _PER_RESULT_FILE):
            part = mine[chunk : chunk + _PER_RESULT_FILE]
            file = out_dir / "openai" / bot / f"results-{chunk // _PER_RESULT_FILE:03d}.json"
            events += _write_openai(file, seed, part, by_session, names)
    manifest = _manifest(seed, end, headers, plan, users, names, groups, events)
    text = json.dumps(manifest, indent=1, ensure_ascii=False) + "\n"
    (out_dir / "manifest.json").write_text(text, encoding="utf-8")
    return Fleet(out_dir, seed, sessions, manifest)


def _project_dir(user: str, project: str) -> str:
    return f"-home-{user}-src-{project}"


def _write_session(out_dir: Path, seed: int, h: _Header, specs: list[Spec]) -> tuple[str, str, int]:
    """One Claude Code session file or Codex rollout: (its directory, session id, events)."""
    rng = random.Random(f"{seed}:{h.index}")
    session = session_uuid(rng)
    acts = _compose(h, specs, rng)
    cwd = f"/home/{h.user}/src/{h.project}"
    if h.format == MINI:
        folder = f"mini/{h.agent}/{h.project}"
        (out_dir / folder).mkdir(parents=True, exist_ok=True)
        system = f"You are a helpful assistant that can interact with a shell in {cwd}."
        value = mini_trajectory(acts, rng, system=system)
        text = json.dumps(value, indent=1, ensure_ascii=False) + "\n"
        (out_dir / folder / f"{session}.traj.json").write_text(text, encoding="utf-8")
        return folder, f"{h.project}/{session}", event_count(acts, h.format)
    if h.format == CLAUDE:
        folder = f"claude/{h.agent}/{_project_dir(h.user, h.project)}"
        name, lines = f"{session}.jsonl", claude_lines
    else:
        folder = f"codex/{h.agent}/{h.project}"
        name, lines = f"rollout-{h.start:%Y-%m-%dT%H-%M-%S}-{session}.jsonl", codex_lines
    (out_dir / folder).mkdir(parents=True, exist_ok=True)
    with (out_dir / folder / name).open("w", encoding="utf-8", newline="\n") as out:
        out.writelines(lines(acts, rng, session=session, start=h.start, cwd=cwd))
    return folder, session, event_count(acts, h.format)


def _write_openai(
    file: Path, seed: int, part: list[_Header], by_session: dict[int, list[Spec]],
    names: dict[int, str],
) -> int:  # fmt: skip
    file.parent.mkdir(parents=True, exist_ok=True)
    events = 0
    with file.open("w", encoding="utf-8", newline="\n") as out:
        out.write("[\n")
        for position, h in enumerate(part):
            rng = random.Random(f"{seed}:{h.index}")
            acts = _compose(h, by_session.get(h.index, []), rng)
            element = openai_element(
                acts, rng, task_id=h.index, system=_system_prompt(h.agent, h.project),
                labels={"project": h.project, "user": h.user, "agent": h.agent}, start=h.start,
            )  # fmt: skip
            out.write(("" if position == 0 else ",\n") + json.dumps(element, ensure_ascii=False))
            names[h.index] = f"{file.stem}/task-{h.index}/trial-0"
            events += event_count(acts, OPENAI)
        out.write("\n]\n")
    return events


def _manifest(
    seed: int, end: dt.datetime, headers: list[_Header], plan: dict[str, list[int]],
    users: dict[str, str], names: dict[int, str], groups: dict[tuple[str, str, str, str], int],
    events: int,
) -> dict[str, Any]:  # fmt: skip
    thresholds = Thresholds()
    total = len(headers)
    planted = []
    for spec in CATALOGUE:
        chosen = [headers[i] for i in plan[spec.id]]
        count = len(chosen)
        memory = spec.place == "memory"
        floor = thresholds.prevalence_for(spec.miner or "")
        above = memory or (count >= thresholds.min_sessions and count / total >= floor)
        planted.append({
            "id": spec.id, "miner": spec.miner, "description": spec.description,
            "match": {"tool": spec.tool, "contains": _json_contains(spec.contains)},
            "accept": [{"miner": m, "tool": t, "contains": c} for m, t, c in spec.accept],
            "format": spec.format, "sessions": count,
            "prevalence": None if memory else count / total,
            "intended": "above" if memory or spec.prevalence >= 0.02 else "below",
            "above": above,
            "scope": {"projects": sorted({h.project for h in chosen}),
                      "users": sorted({h.user for h in chosen})},
            "memory": list(spec.memory),
            "session_ids": [names[h.index] for h in chosen],
            "shape": spec.shape, "junk": spec.junk, "fix": FIXES.get(spec.id),
        })  # fmt: skip
    formats = {CLAUDE: 0, CODEX: 0, MINI: 0, OPENAI: 0}
    for h in headers:
        formats[h.format] += 1
    imports = [
        {"path": folder, "format": fmt, "labels": {"project": project, "user": user,
                                                    "agent": folder.split("/")[1]},
         "sessions": count}
        for (fmt, folder, user, project), count in sorted(groups.items())
    ]  # fmt: skip
    imports.append({"path": "openai", "format": OPENAI, "labels": {}, "sessions": formats[OPENAI]})
    return {
        "version": 1, "seed": seed, "sessions": total, "events": events,
        "start": (end - dt.timedelta(days=SPAN_DAYS)).isoformat(), "end": end.isoformat(),
        "thresholds": {"min_sessions": thresholds.min_sessions,
                       "min_prevalence": thresholds.min_prevalence},
        "population": {"projects": sorted({h.project for h in headers}),
                       "users": sorted({h.user for h in headers}),
                       "agents": sorted({h.agent for h in headers}),
                       "top_users": users},
        "formats": formats, "imports": imports, "memory": memory_files(end),
        "planted": planted,
    }  # fmt: skip


# --- loading and scoring ------------------------------------------------------------------


def load(service: MemoryService, principal: Principal, store: str, fleet: Fleet) -> ImportReport:
    """Import the fleet's files with the real importers (each group with its labels) and
    write its memory files; returns the summed import report."""
    from memdir.transcripts.model import ImportReport, Labels
    from memdir.transcripts.reader import sources_from_paths

    total = ImportReport()
    for group in fleet.manifest["imports"]:
        sources, _ = sources_from_paths([str(fleet.out_dir / group["path"])])
        labels = Labels(**group["labels"]) if group["labels"] else None
        report = service.import_transcripts(principal, store, sources, format=group["format"],
                                            labels=labels)  # fmt: skip
        for name in ("files", "sessions", "new", "events", "tool_calls", "tool_errors"):
            setattr(total, name, getattr(total, name) + getattr(report, name))
        total.skipped.extend(report.skipped)
        total.failed.extend(report.failed)
    for path, content in fleet.memory.items():
        service.write(principal, store, path, content, if_absent=True)
    return total


def _json_contains(contains: str | tuple[str, ...]) -> str | list[str]:
    return contains if isinstance(contains, str) else list(contains)


def matches(
    pattern: Pattern, miner: str | None, tool: str | None, contains: str | Sequence[str]
) -> bool:
    """Is ``pattern`` the finding described by ``(miner, tool, contains)``?

    Same miner (any, when ``miner`` is None); the subject's ``tool`` equal to ``tool`` ignoring
    case (when ``tool`` is set); ``contains`` (or one of them, for a list) a case-insensitive
    substring of the title or the subject's JSON.
    """
    if miner is not None and pattern.miner != miner:
        return False
    if tool is not None and str(pattern.subject.get("tool", "")).lower() != tool.lower():
        return False
    text = pattern.title + "\n" + json.dumps(pattern.subject, ensure_ascii=False, sort_keys=True)
    text = text.lower()
    wanted = [contains] if isinstance(contains, str) else list(contains)
    return any(c.lower() in text for c in wanted)


def _matches_entry(pattern: Pattern, entry: dict[str, Any], *, primary_only: bool) -> bool:
    match = entry["match"]
    if matches(pattern, entry["miner"], match["tool"], match["contains"]):
        return True
    if primary_only:
        return False
    return any(matches(pattern, a["miner"], a["tool"], a["contains"]) for a in entry["accept"])


@dataclass
class Score:
    """How a dream's proposed patterns compare with the planted ones.

    ``recall``: planted above-threshold patterns found (by their own finding or an accepted
    one) / planted above-threshold patterns. ``precision``: proposed patterns that match an
    above-threshold planted pattern / proposed patterns — one matching only a below-threshold
    planted pattern, or nothing planted, counts against it. ``prevalence_errors``: per found
    planted pattern with sessions, |reported - true| prevalence in percentage points (of the
    best-matching proposed pattern: the primary finding when there is one). ``junk``:
    proposed patterns matching a planted ``junk`` entry (counted against precision too).
    ``duplicates``: per found planted pattern, its matching proposals beyond the first (one
    cause, one proposal — counted for the real-world shapes, where the accepted findings of a
    planting are that same cause).
    """

    recall: float
    precision: float
    found: list[str] = field(default_factory=list)
    missed: list[str] = field(default_factory=list)
    below_proposed: list[str] = field(default_factory=list)
    unmatched: list[str] = field(default_factory=list)
    prevalence_errors: dict[str, float] = field(default_factory=dict)
    junk: list[str] = field(default_factory=list)
    duplicates: dict[str, int] = field(default_factory=dict)

    @property
    def mean_error_pp(self) -> float:
        errors = list(self.prevalence_errors.values())
        return sum(errors) / len(errors) if errors else 0.0

    @property
    def max_error_pp(self) -> float:
        return max(self.prevalence_errors.values(), default=0.0)


def fix_share(drafts: Iterable[Draft], planted: Sequence[dict[str, Any]]) -> float:
    """The share of session-pattern drafts whose text names the fix the planting shows: the
    matched entry's ``fix`` regex (case-insensitive, from :data:`~memdir.dream.fleet_shapes.
    FIXES`) found in the draft's operations. A draft
    matching no entry, or one whose planting shows no fix (``fix`` None), names none; store
    patterns (consolidation), whose operation is the fix, are left out. 1.0 with no drafts."""
    counted = named = 0
    for draft in drafts:
        if draft.pattern.miner == "consolidation":
            continue
        counted += 1
        text = "\n".join(str(getattr(op, name, "") or "") for op in draft.operations
                         for name in ("content", "new", "text"))  # fmt: skip
        entries = [e for e in planted if _matches_entry(draft.pattern, e, primary_only=False)]
        named += any(e.get("fix") and re.search(e["fix"], text, re.I) for e in entries)
    return named / counted if counted else 1.0


def score(
    proposed: Iterable[Pattern], planted: Sequence[dict[str, Any]], *, shapes: bool = True
) -> Score:
    """Score ``proposed`` patterns against the manifest's ``planted`` list (see :class:`Score`).

    ``shapes=False`` scores the classic catalogue alone: the real-world shapes' entries are
    left out, and so are the proposals matching one of them (found or junk), so the figures
    are those of a fleet without the shapes.
    """
    proposed = list(proposed)
    shaped = [e for e in planted if e.get("shape")]
    if not shapes:
        planted = [e for e in planted if not e.get("shape")]
        proposed = [
            p for p in proposed if not any(_matches_entry(p, e, primary_only=False) for e in shaped)
        ]
    junk = [e for e in planted if e.get("junk")]
    above = [e for e in planted if e["above"] and not e.get("junk")]
    below = [e for e in planted if not e["above"] and not e.get("junk")]
    result = Score(recall=0.0, precision=0.0)
    for entry in above:
        hits = [p for p in proposed if _matches_entry(p, entry, primary_only=False)]
        if not hits:
            result.missed.append(entry["id"])
            continue
        result.found.append(entry["id"])
        if entry.get("shape") and len(hits) > 1:
            result.duplicates[entry["id"]] = len(hits) - 1
        if entry["prevalence"] is not None:
            primary = [p for p in hits if _matches_entry(p, entry, primary_only=True)]
            best = min(primary or hits, key=lambda p: abs(p.prevalence - entry["prevalence"]))
            result.prevalence_errors[entry["id"]] = abs(best.prevalence - entry["prevalence"]) * 100
    good = 0
    for pattern in proposed:
        if any(_matches_entry(pattern, e, primary_only=False) for e in junk):
            result.junk.append(pattern.id)
        elif any(_matches_entry(pattern, e, primary_only=False) for e in above):
            good += 1
        elif any(_matches_entry(pattern, e, primary_only=False) for e in below):
            result.below_proposed.append(pattern.id)
        else:
            result.unmatched.append(pattern.id)
    result.recall = len(result.found) / len(above) if above else 1.0
    result.precision = good / len(proposed) if proposed else 1.0
    return result
