"""The leak oracle: random stores, random principals, every verb on every surface — no canary,
path or label the caller may not read ever shows, and no call changes what it may not write.

Each example builds a world (:mod:`leak_world`: principals in groups, projects, tasks and
acting for users; narrowed tokens, administrators' too; a policy with ``deny`` rules; files,
versions, moves and commit reasons each carrying a unique canary; transcripts with canaries in
session ids, tags, texts and recurring tool errors; a dream run by an administrator), then
drives random operations (:mod:`leak_ops`) as random principals through the service, REST (the
ASGI app through httpx) and MCP (the MCP SDK in memory), and judges each (:mod:`leak_check`)
against an independent model of the rights (:mod:`leak_model`; memdir's policy engine is never
asked). Findings are collected, one per (operation, surface, kind of leak), and reported
together.

Profiles (``MEMDIR_LEAK_PROFILE``): ``leak-ci`` (the default: a few small examples, well under
a minute) and ``leak-long`` (many examples with more operations each);
``benchmarks/leak_oracle.py`` runs the long profile and reports cases run and findings.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from leak_check import run_case

settings.register_profile(
    "leak-ci", max_examples=2, deadline=None, database=None, derandomize=True,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
settings.register_profile(
    "leak-long", max_examples=40, deadline=None, database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)  # fmt: skip
PROFILE = os.environ.get("MEMDIR_LEAK_PROFILE", "leak-ci")
OPERATIONS = {"leak-ci": 25, "leak-long": 80}.get(PROFILE, 30)


def test_no_operation_leaks_or_writes_beyond_rights(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """Every example runs (no shrinking, no replay: a case is a whole world and its calls);
    the findings of all of them are reported together, one line per distinct leak."""
    findings: dict[tuple[str, str, str, str], tuple[int, object]] = {}
    cases = []

    @settings(settings.get_profile(PROFILE))
    @given(seed=st.integers(min_value=0, max_value=2**32 - 1))
    def case(seed: int) -> None:
        oracle = run_case(tmp_path_factory.mktemp("leak"), random.Random(seed), OPERATIONS)
        cases.append(oracle.cases)
        for key, finding in oracle.findings.items():
            findings.setdefault(key, (seed, finding))

    case()
    assert cases and all(n > 0 for n in cases)
    lines = [f"[seed {seed}] {finding}" for _, (seed, finding) in sorted(findings.items())]
    assert not lines, (
        f"{len(lines)} distinct leaks in {len(cases)} cases, {sum(cases)} operations:\n"
        + "\n".join(lines)
    )


@pytest.mark.parametrize("seed", [1])
def test_model_agrees_with_direct_reads(tmp_path: Path, seed: int) -> None:
    """The independent model and the product agree on plain reads (which hold on main), so
    the oracle's ground truth is not off by a rule: every caller, every live file."""
    from leak_world import STORE, build
    from memdir.core.errors import NotFound

    world = build(tmp_path, random.Random(seed))
    try:
        owner = world.svc.resolve("owner")
        live = [f.path for f in world.svc.iter_files(owner, STORE)]
        disagree = []
        for actor in world.actors.values():
            principal = world.svc.authenticate(world.tokens[actor.id])
            for path in live:
                try:
                    world.svc.read(principal, STORE, path)
                    product = True
                except NotFound:
                    product = False
                if product != world.policies[STORE].may(actor, "read", path):
                    disagree.append((actor.id, path, product))
        assert not disagree, disagree[:10]
        hidden = [(a, p) for a in world.actors.values() for p in live
                  if not world.policies[STORE].may(a, "read", p)]  # fmt: skip
        assert len(hidden) > len(live), "the world hides too little to test anything"
    finally:
        world.svc.db.close()
        world.engine.dispose()
