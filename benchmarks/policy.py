"""Policy evaluation cost at 1,000 rules.

    python benchmarks/policy.py [--rules 1000] [--checks 20000] [--json OUT]

Builds a policy of N rules shaped like a large deployment (per-project and per-team grants,
group rules, templates, some denies), then times ``CompiledPolicy.check`` for a mix of
principals and paths: warm (the per-principal index cached, the steady state of a server) and
cold (first decision for a principal: its index is built). Beside it, the same number of
``dict`` lookups as a floor measured in the same run. Target: a warm check under 50 µs.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from memdir.core.model import Principal
from memdir.core.policy import DEFAULT_POLICY_YAML, CompiledPolicy, parse_policy

ACTIONS = ("read", "propose", "write", "admin")


def build_policy(rules: int, rng: random.Random) -> str:
    lines = [DEFAULT_POLICY_YAML.rstrip(), ""]
    for i in range(rules - 7):
        kind = i % 5
        if kind == 0:
            who, path = f"group:team{i % 50}", f"/projects/p{i % 400}/**"
        elif kind == 1:
            who, path = f"agent:a{i % 300}", f"/projects/p{i % 400}/docs/**"
        elif kind == 2:
            who, path = "*", f"/org/team{i % 50}/**"
        elif kind == 3:
            who, path = "kind:agent", f"/projects/p{i % 400}/secrets/**"
        else:
            who, path = f"group:team{i % 50}", f"/tasks/t{i % 200}/**"
        effect = "deny" if kind == 3 else "allow"
        action = rng.choice(ACTIONS[:3])
        lines.append(
            f"  - {{id: r{i}, who: '{who}', paths: ['{path}'], actions: [{action}], "
            f"effect: {effect}}}"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--checks", type=int, default=20000)
    parser.add_argument("--json", dest="json_out")
    args = parser.parse_args()
    rng = random.Random(7)
    policy = CompiledPolicy(parse_policy(build_policy(args.rules, rng)))
    principals = [
        Principal(
            f"agent:a{i}",
            groups=frozenset({f"team{i % 50}"}),
            projects=tuple(f"p{(i * 7 + k) % 400}" for k in range(3)),
            tasks=(f"t{i % 200}",),
        )
        for i in range(200)
    ]
    paths = [
        rng.choice(
            [
                f"/projects/p{rng.randrange(400)}/docs/page{rng.randrange(50)}.md",
                f"/projects/p{rng.randrange(400)}/secrets/key.md",
                f"/org/team{rng.randrange(50)}/handbook.md",
                f"/tasks/t{rng.randrange(200)}/state.md",
                f"/agents/a{rng.randrange(200)}/notes/{rng.randrange(99)}.md",
            ]
        )
        for _ in range(2000)
    ]

    cold: list[float] = []
    for principal in principals:
        start = time.perf_counter()
        policy.check(principal, "read", paths[0])
        cold.append(time.perf_counter() - start)

    warm: list[float] = []
    allowed = 0
    for i in range(args.checks):
        principal = principals[i % len(principals)]
        path = paths[i % len(paths)]
        action = ACTIONS[i % 4]
        start = time.perf_counter()
        decision = policy.check(principal, action, path)
        warm.append(time.perf_counter() - start)
        allowed += decision.allowed

    table = {p: i for i, p in enumerate(paths)}
    floor: list[float] = []
    for i in range(args.checks):
        path = paths[i % len(paths)]
        start = time.perf_counter()
        table.get(path)
        floor.append(time.perf_counter() - start)

    def us(values: list[float], q: float) -> float:
        return statistics.quantiles(values, n=100)[int(q) - 1] * 1e6

    figures = {
        "rules": args.rules,
        "checks": args.checks,
        "allowed_fraction": allowed / args.checks,
        "warm_p50_us": us(warm, 50),
        "warm_p95_us": us(warm, 95),
        "warm_mean_us": statistics.fmean(warm) * 1e6,
        "cold_p50_us": us(cold, 50),
        "cold_p95_us": us(cold, 95),
        "dict_lookup_p50_us": us(floor, 50),
    }
    print(f"policy evaluation, {args.rules} rules, {args.checks} checks, 200 principals")
    print(f"{'':28}{'p50 µs':>10}{'p95 µs':>10}")
    print(f"{'warm check':28}{figures['warm_p50_us']:>10.1f}{figures['warm_p95_us']:>10.1f}")
    print(
        f"{'cold (index built)':28}{figures['cold_p50_us']:>10.1f}{figures['cold_p95_us']:>10.1f}"
    )
    print(f"{'dict lookup (floor)':28}{figures['dict_lookup_p50_us']:>10.2f}")
    verdict = "PASS" if figures["warm_p95_us"] < 50 else "FAIL"
    print(f"target: warm check p95 < 50 µs: {verdict}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
