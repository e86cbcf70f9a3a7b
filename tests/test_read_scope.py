"""Read rights decided once per request (key ranges in SQL) agree with the per-path policy.

Three claims, each checked against the per-path decision (``Access.can_read`` / the
transcripts' ``allowed``), never against a fixture:

- :meth:`Access.read_scope`: a path under its whole prefixes is readable, a path outside its
  bound is not — over random policies (allow and deny rules, templates, single-segment and
  deep globs, admin rules), principals and narrowed tokens, on every path of a small universe.
- context, streamed from SQL, is byte-identical to the assembly over every row the per-path
  policy lets through (a policy with a deny inside a readable project, a partial glob, and a
  narrowed token), on SQLite and PostgreSQL;
- a project-limited viewer's transcript list, paged, equals the per-row-policy list over all
  transcripts, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa

from memdir import OWNER, MemoryService
from memdir.access import Access, scope_decides_bound
from memdir.core.context import Item, assemble, scope_of
from memdir.core.model import Principal, TokenScope, Write
from memdir.core.policy import CompiledPolicy, parse_policy
from memdir.core.ranges import label_names
from memdir.rows import utcnow
from memdir.storage.meta import context_rows
from memdir.storage.schema import transcripts
from memdir.transcripts.model import SCOPE_LABELS
from memdir.transcripts.service import allowed

STORE = "default"
ROOTS = ["/org", "/projects/acme", "/projects/beta", "/projects/acme/secret", "/users/ana",
         "/agents/bot", "/tasks/t1", "/tasks/t2", "/misc", "/.memdir"]  # fmt: skip
UNIVERSE = sorted(
    {r for r in ROOTS}
    | {f"{r}/{leaf}" for r in ROOTS for leaf in ("a.md", "d/b.md", "public/c.md", "x.txt")}
    | {"/projects", "/projects/x.md", "/org.md", "/orgs/a.md", "/tasks/t1.md"}
)
GLOBS = ["/org/**", "/projects/{project}/**", "/projects/*/public/**", "/users/{user}/**",
         "/agents/{principal}/**", "/tasks/{task}/**", "/**", "/misc/*.md", "/projects/**",
         "/projects/acme/secret/**", "/tasks/t1/d/**", "/org", "/misc/**"]  # fmt: skip
TOKEN_GLOBS = ["/**", "/org/**", "/projects/acme/**", "/projects/*/public/**", "/misc/a.md",
               "/tasks/**"]  # fmt: skip


def _random_policy(rng: random.Random) -> str:
    rules = []
    for i in range(rng.randint(1, 6)):
        who = rng.choice(['"*"', "group:admins", "kind:agent", "agent:bot", "user:ana"])
        paths = rng.sample(GLOBS, rng.randint(1, 3))
        actions = rng.sample(["read", "write", "admin", "propose"], rng.randint(1, 2))
        effect = "deny" if rng.random() < 0.25 else "allow"
        rules.append(f"  - id: r{i}\n    who: {who}\n    paths: {paths}\n"
                     f"    actions: {actions}\n    effect: {effect}\n")  # fmt: skip
    return "version: 1\nrules:\n" + "".join(rules)


def _principals(rng: random.Random) -> Iterator[Principal]:
    base = [
        Principal.parse("agent:bot"),
        Principal.parse("user:ana"),
        Principal.parse("agent:helper"),
    ]
    for p in base:
        p = dataclasses.replace(
            p,
            projects=tuple(rng.sample(["acme", "beta"], rng.randint(0, 2))),
            tasks=tuple(rng.sample(["t1", "t2"], rng.randint(0, 1))),
            acts_for="ana" if p.kind == "agent" and rng.random() < 0.5 else None,
            groups=("admins",) if rng.random() < 0.15 else (),
        )
        yield p
        actions = frozenset(rng.sample(["read", "write", "propose"], rng.randint(1, 2)))
        paths = tuple(rng.sample(TOKEN_GLOBS, rng.randint(1, 2)))
        yield dataclasses.replace(p, scope=TokenScope(paths=paths, actions=actions))


def test_read_scope_agrees_with_every_per_path_decision() -> None:
    rng = random.Random(16)
    decided = checked = 0
    for _ in range(300):
        policy = CompiledPolicy(parse_policy(_random_policy(rng)))
        for principal in _principals(rng):
            access = Access(principal, policy)
            scope = access.read_scope()
            for path in UNIVERSE:
                verdict = scope.decided(path)
                truth = access.can_read(path)
                checked += 1
                if verdict is not None:
                    decided += 1
                    assert verdict == truth, (policy.policy.source, principal, path, scope)
            if scope_decides_bound(scope):
                memdir_own = [p for p in UNIVERSE if p == "/.memdir" or p.startswith("/.memdir/")]
                others = [p for p in UNIVERSE if p not in memdir_own]
                assert all(scope.decided(p) is not None for p in others), (scope, principal)
            for kind, root in SCOPE_LABELS.items():
                names = label_names(scope, root)
                for name in ("acme", "beta", "ana", "bot", "t1", "t2", "other"):
                    if names is not None and name not in names:
                        assert not allowed(access, {kind: name}, "read"), (kind, name, scope)
    assert decided > checked // 2  # the ranges decide most paths: the speed-up is real


# --- context: SQL stream vs the per-path policy over every row --------------------------

POLICY = """\
version: 1
rules:
  - id: shared
    who: "*"
    paths: ["/org/**", "/misc/**", "/projects/*/public/**"]
    actions: [read]
  - id: scopes
    who: "*"
    paths: ["/projects/{project}/**", "/tasks/{task}/**", "/agents/{principal}/**",
            "/users/{user}/**"]
    actions: [read, write]
  - id: no-secrets
    who: kind:agent
    paths: ["/projects/acme/secret/**"]
    actions: [read]
    effect: deny
"""


def _seed(svc: MemoryService) -> None:
    svc.add_principal(OWNER, "agent:bot", projects=("acme",), tasks=("t1",), acts_for="ana")
    svc.add_principal(OWNER, "user:bob", projects=("beta",), tasks=("t2",))
    svc.set_policy(OWNER, STORE, POLICY)
    roots = ["/org", "/misc", "/projects/acme", "/projects/acme/secret", "/projects/beta",
             "/projects/beta/public", "/projects/gamma/public", "/users/ana", "/users/bob",
             "/agents/bot", "/agents/other", "/tasks/t1", "/tasks/t2"]  # fmt: skip
    ops = []
    for i, root in enumerate(roots):
        for n in range(12):
            ops.append(Write(f"{root}/n{n:02d}.md", f"# Note {n} in {root}\n\nCANARY{i}x{n}\n",
                             if_absent=True))  # fmt: skip
        ops += [
            Write(f"{root}/core.md", f"---\ncore: true\ndescription: core {i}\n---\nCore {i}.\n",
                  if_absent=True),
            Write(f"{root}/s/SKILL.md", f"---\nname: skill-{i}\ndescription: Do {i}\n---\nGo.\n",
                  if_absent=True),
            Write(f"{root}/old.md", "---\nexpires: 2020-01-01\n---\n# Old\n", if_absent=True),
            Write(f"{root}/due.md", "---\nreview_after: 2020-01-01\nverify: run `x`\n---\n# D\n",
                  if_absent=True),
        ]  # fmt: skip
    ops += [Write("/projects/loose.md", "# loose\n", if_absent=True),
            Write("/org.md", "# not org\n", if_absent=True)]  # fmt: skip
    svc.commit(OWNER, STORE, ops)


def _reference(svc: MemoryService, principal: Principal, **kw: Any) -> str:
    """The context as the per-path policy gives it: every live row, decided one by one."""
    now = utcnow()
    project, task = kw.get("project"), kw.get("task")
    include_expired = kw.get("include_expired", False)
    with svc.db.read() as repo:
        row = svc._store_row(repo, STORE)
        access = svc._access(repo, row.id, principal)
        expired = svc._expired(repo, row.id, access, now)
        items = []
        for r in context_rows(repo, row.id, None):
            path = r.path
            kind, name = scope_of(path)
            if path.startswith("/.memdir/") or not access.can_read(path):
                continue
            if (project is not None and kind == "project" and name != project) or (
                task is not None and kind == "task" and name != task
            ):
                continue
            if path in expired and not include_expired:
                continue
            body = None
            if r.core:
                content = repo.blob(row.id, r.sha256) or ""
                body = content.split("---\n", 2)[2] if content.startswith("---\n") else content
            read = r.read_at
            used = r.updated_at if read is None or read < r.updated_at else read
            review = r.review_after if r.review_after and r.review_after <= now else None
            items.append(Item(path, r.summary, used, r.core,
                              r.name if r.skill and r.name else None, review, r.verify,
                              r.source_kind == "agent-inferred", expired.get(path), None, body,
                              (kind, name)))  # fmt: skip
        hidden = 0
        if not include_expired:
            hidden = sum(1 for p in expired if access.can_read(p) and (
                project is None or scope_of(p)[0] != "project" or scope_of(p)[1] == project) and (
                task is None or scope_of(p)[0] != "task" or scope_of(p)[1] == task))  # fmt: skip
    title = f"Memory for {principal.id} in store {STORE}"
    if project is not None:
        title += f", project {project}"
    if task is not None:
        title += f", task {task}"
    return assemble(items, budget=kw.get("budget", 2000), title=title,
                    hidden_expired=hidden).markdown  # fmt: skip


def test_context_from_sql_equals_the_per_path_policy(svc: MemoryService) -> None:
    _seed(svc)
    bot, bob = svc.resolve("agent:bot"), svc.resolve("user:bob")
    narrowed = dataclasses.replace(
        bot, scope=TokenScope(paths=("/projects/**", "/org/**", "/misc/n0*.md"),
                              actions=frozenset({"read"}))
    )  # fmt: skip
    cases: list[dict[str, Any]] = [
        {}, {"budget": 400}, {"budget": 100_000}, {"include_expired": True, "budget": 100_000},
        {"project": "acme", "budget": 100_000}, {"task": "t1"}, {"project": "gamma"},
    ]  # fmt: skip
    for principal in (OWNER, bot, bob, narrowed):
        for kw in cases:
            # the reference first: context records its reads after its own snapshot
            expected = _reference(svc, principal, **kw)
            assert svc.context(principal, STORE, **kw).markdown == expected, (principal.id, kw)
    whole = svc.context(bot, STORE, budget=100_000).markdown
    assert "/projects/acme/n00.md" in whole and "/projects/gamma/public/n00.md" in whole
    assert "/projects/acme/secret/" not in whole and "CANARY3x" not in whole
    limited = svc.context(narrowed, STORE, budget=100_000).markdown
    assert "/misc/n00.md" in limited and "/misc/n10.md" not in limited
    assert "/users/ana/" not in limited and "/projects/acme/secret/" not in limited


# --- transcripts: SQL label scoping vs the per-row rule ---------------------------------


def test_limited_viewer_transcript_list_equals_the_per_row_policy(svc: MemoryService) -> None:
    svc.add_principal(OWNER, "agent:p3", projects=("p3",), tasks=("t1",), acts_for="ana")
    svc.add_principal(OWNER, "user:ana")
    svc.set_policy(OWNER, STORE, POLICY)
    rng = random.Random(18)
    now = dt.datetime.now(dt.UTC)
    values = {"project": ["p1", "p3", "acme", None], "user": ["ana", "bob", None],
              "agent": ["p3", "other", None], "task": ["t1", "t2", None]}  # fmt: skip
    with svc.db.write() as repo:
        store_id = repo.store(STORE).id  # type: ignore[union-attr]
        rows = []
        for i in range(400):
            labels = {k: rng.choice(v) for k, v in values.items()}
            started = None if i % 17 == 0 else now - dt.timedelta(minutes=i // 3)
            rows.append({
                "id": f"t_{i:04d}", "store_id": store_id, "format": "generic",
                "session_id": f"s{i}", "labels": "[]", "outcome": "success",
                "started_at": started, "events": 1, "tool_calls": 0, "tool_errors": 0,
                "redactions": 0, "meta": "{}", "imported_at": now, "updated_at": now,
                "imported_by": "owner", **labels,
            })  # fmt: skip
        repo.conn.execute(sa.insert(transcripts), rows)
    p3 = svc.resolve("agent:p3")
    narrowed = dataclasses.replace(
        p3, scope=TokenScope(paths=("/projects/**", "/users/**"), actions=frozenset({"read"}))
    )
    for principal in (p3, narrowed, svc.resolve("user:ana"), OWNER):
        listed, cursor = [], None
        while True:
            page = svc.list_transcripts(principal, STORE, limit=7, cursor=cursor)
            listed += [t.id for t in page.items]
            cursor = page.next_cursor
            if cursor is None:
                break
        everything = svc.list_transcripts(OWNER, STORE, limit=1000).items
        assert len(everything) == 400
        with svc.db.read() as repo:
            access = svc._access(repo, store_id, principal)
            expected = [t.id for t in everything if allowed(access, t.scopes(), "read")]
        assert listed == expected, principal.id
        assert len(expected) > 0 or principal is narrowed
