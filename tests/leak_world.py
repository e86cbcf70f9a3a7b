"""The leak oracle's world: a random store built for real, with canaries everywhere.

:func:`build` makes a fresh SQLite database and fills it as the database owner: principals in
groups, on projects and tasks, agents acting for users; one token each (some narrowed, some of
them administrators'); a policy of the default rules plus random ``deny`` and ``allow`` rules;
files whose names, contents, versions and commit reasons each carry their own canary, with
histories that cross scopes (a file written in one project and moved to another, a file moved
out of a hidden directory, a deleted file); a second store; transcripts (generic JSONL) whose
session ids, tags, texts and recurring tool errors carry canaries; and a dream run by an
administrator (the offline engine), so proposals derived from transcripts are in the queue.

Everything is recorded in :class:`World` for the independent model (:mod:`leak_model`); the
canaries' sources are found afterwards by scanning the tables (:mod:`leak_check`).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import sqlalchemy as sa

import memdir
from leak_model import DEFAULT_RULES, Actor, Canaries, ModelRule, PolicyModel
from memdir import OWNER, MemoryService
from memdir.core.model import Provenance, Write
from memdir.dreams import DreamConfig
from memdir.storage.schema import proposals
from memdir.transcripts.reader import Source as TranscriptSource

STORE = "default"


@dataclass
class World:
    rng: random.Random
    canaries: Canaries
    svc: MemoryService
    second_store: str
    projects: list[str]
    tasks: list[str]
    actors: dict[str, Actor]  # by principal id, with the scope of its token
    tokens: dict[str, str]  # principal id -> bearer token
    policies: dict[str, PolicyModel]
    transcripts: dict[str, dict[str, str]] = field(default_factory=dict)  # session -> labels
    session_ids: list[str] = field(default_factory=list)
    dream_runs: list[str] = field(default_factory=list)
    commit_ids: list[str] = field(default_factory=list)
    engine: Any = None  # the oracle's own read connection pool on the same file

    def rows(self, query: Any) -> list[Any]:
        """The owner's view: rows straight from the tables."""
        with self.engine.connect() as conn:
            return list(conn.execute(query).all())


def _principals(rng: random.Random, projects: list[str], tasks: list[str]) -> list[Actor]:
    def some(values: list[str], most: int) -> tuple[str, ...]:
        return tuple(sorted(rng.sample(values, rng.randint(0, min(most, len(values))))))

    def groups() -> frozenset[str]:
        return frozenset(g for g in ("ops", "reviewers") if rng.random() < 0.3)

    users = ["ana", "bob"]
    out = [Actor("user:root", frozenset({"admins"}), some(projects, 1))]
    out.append(Actor("user:boss", frozenset({"admins"}), some(projects, 2)))
    out += [Actor(f"user:{u}", groups(), some(projects, 2), some(tasks, 1)) for u in users]
    for i in range(3):
        acts_for = rng.choice([None, *users])
        out.append(Actor(f"agent:a{i}", groups(), some(projects, 2), some(tasks, 1), acts_for))
    out.append(Actor("service:s0", groups() | {"ops"}, some(projects, 1)))
    return out


def _narrow(rng: random.Random, actor: Actor, projects: list[str]) -> Actor:
    """Maybe narrow the actor's token: to reading, to a project, or to /org/ (admins too)."""
    roll = rng.random()
    if actor.id == "user:boss":  # mostly narrowed: a narrowed administrator is no admin
        roll = 0.55 + roll * 0.45
    if roll < 0.55 or actor.id == "user:root":  # root stays a full administrator
        return actor
    if roll < 0.7:
        paths, actions = ("/**",), ("read",)
    elif roll < 0.85:
        paths, actions = ("/org/**",), ("read", "propose", "write", "admin")
    else:
        project = rng.choice(list(actor.projects) or projects)
        paths, actions = (f"/projects/{project}/**", "/org/**"), ("read", "write")
    return Actor(actor.id, actor.groups, actor.projects, actor.tasks, actor.acts_for,
                 paths, actions)  # fmt: skip


def _rules(rng: random.Random, projects: list[str], actors: list[Actor]) -> list[ModelRule]:
    """The default rules plus a random handful of the documented kinds of extra rule."""
    agents = [a.id for a in actors if a.kind == "agent"]
    p = rng.choice(projects)
    extras = [
        ModelRule("kind:agent", ("/projects/{project}/secret/**",), ("read",), "deny",
                  reason="agents write but never read project secrets"),
        ModelRule("*", ("/projects/{project}/frozen/**",), ("write",), "deny",
                  reason="frozen memory changes nowhere"),
        ModelRule("group:reviewers", (f"/projects/{p}/shared/**",), ("read",),
                  reason="reviewers read shared project notes"),
        ModelRule(rng.choice(agents), ("/projects/**",), ("read", "write", "propose"), "deny",
                  reason="this agent is off every project"),
        ModelRule("*", ("/org/private/**",), ("read",), "deny",
                  reason="private organisation notes are written blind"),
        ModelRule("group:ops", ("/org/**",), ("write",), reason="ops maintain org memory"),
        ModelRule("kind:service", ("/org/**",), ("propose",), "deny",
                  reason="services do not propose"),
        ModelRule("group:reviewers", ("/users/**",), ("read",), reason="reviewers read users"),
        ModelRule("kind:agent", ("/tasks/**",), ("write",), "deny",
                  reason="agents only read task state"),
    ]  # fmt: skip
    chosen = [r for r in extras if rng.random() < 0.45]
    named = [ModelRule(r.who, r.paths, r.actions, r.effect, f"extra-{i}", r.reason)
             for i, r in enumerate(chosen)]  # fmt: skip
    return [*DEFAULT_RULES, *named]


def _lines(canaries: Canaries, kind: str, count: int) -> str:
    return "".join(f"line {i} holds {canaries.new(kind)}\n" for i in range(count))


class _Writer:
    """Owner writes with canary-bearing reasons and sessions; remembers commit ids."""

    def __init__(self, world: World) -> None:
        self.world = world
        self.sha: dict[tuple[str, str], str] = {}

    def prov(self) -> Provenance:
        c = self.world.canaries
        return Provenance(reason=f"because {c.new('reason')}", session=f"s-{c.new('session')}")

    def content(self, title: str) -> str:
        c = self.world.canaries
        return f"# {title} {c.new('content')}\n" + _lines(c, "content", 3)

    def write(self, path: str, store: str = STORE) -> str:
        result = self.world.svc.write(
            OWNER, store, path, self.content("note"), if_match=self.sha.get((store, path)),
            provenance=self.prov(),
        )  # fmt: skip
        self.world.commit_ids.append(result.commit)
        self.sha[store, path] = result.results[0].sha256
        return path

    def name(self, directory: str, stem: str) -> str:
        return f"{directory}/{stem}-{self.world.canaries.new('name')}.md"

    def rename(self, path: str, new_path: str) -> str:
        result = self.world.svc.rename(OWNER, STORE, path, new_path, provenance=self.prov())
        self.world.commit_ids.append(result.commit)
        self.sha[STORE, new_path] = self.sha.pop((STORE, path))
        return new_path

    def delete(self, path: str) -> None:
        result = self.world.svc.delete(OWNER, STORE, path, provenance=self.prov())
        self.world.commit_ids.append(result.commit)

    def together(self, paths: list[str]) -> None:
        """One commit writing every path (new or not): a commit whose changes only some
        callers may read — as a sync, an accepted proposal or a dream's draft makes."""
        ops = [Write(p, self.content("batch"), if_match=self.sha.get((STORE, p)),
                     if_absent=(STORE, p) not in self.sha) for p in paths]  # fmt: skip
        result = self.world.svc.commit(OWNER, STORE, ops, provenance=self.prov())
        self.world.commit_ids.append(result.commit)
        for path, done in zip(paths, result.results, strict=True):
            self.sha[STORE, path] = done.sha256


def _files(world: World) -> None:
    """Every scope gets files; some get several versions, moves across scopes, a deletion."""
    w, rng = _Writer(world), world.rng
    dirs = ["/org", "/org/private"]
    for p in world.projects:
        dirs += [f"/projects/{p}", *(f"/projects/{p}/{d}" for d in ("secret", "shared", "frozen"))]
    dirs += [f"/tasks/{t}" for t in world.tasks]
    for actor in world.actors.values():
        if actor.kind == "agent":
            dirs.append(f"/agents/{actor.name}")
        if actor.kind == "user" and "admins" not in actor.groups:
            dirs.append(f"/users/{actor.name}")
    for directory in dirs:
        path = w.write(w.name(directory, "note"))
        for _ in range(rng.randint(0, 2)):  # later versions: fresh text, the old gone
            w.write(path)
    p0, p1 = world.projects[0], world.projects[1]
    # written (twice) in one project, then moved to another and rewritten
    moved = w.write(w.name(f"/projects/{p1}", "draft"))
    w.write(moved)
    moved = w.rename(moved, w.name(f"/projects/{p0}", "moved"))
    w.write(moved)
    # out of a hidden directory into a visible one
    hidden = w.write(w.name(f"/projects/{p0}/secret", "leak"))
    w.rename(hidden, w.name(f"/projects/{p0}", "unhidden"))
    # from org into a private directory, and a deleted file
    w.rename(w.write(w.name("/org", "hide")), w.name("/org/private", "hidden"))
    w.delete(w.write(w.name(f"/projects/{p1}", "gone")))
    # one commit across scopes, readable in part to most callers
    w.together(
        [
            w.name(f"/projects/{p0}", "batch"),
            w.name(f"/projects/{p0}/secret", "batch"),
            w.name(f"/projects/{p1}", "batch"),
            w.name("/org/private", "batch"),
            moved,
        ]
    )
    # the second store, with files only some may read
    w.write(w.name(f"/projects/{p1}", "other"), world.second_store)
    w.write(w.name("/agents/a0", "other"), world.second_store)


# --- transcripts and the dream -------------------------------------------------------------


def _session(world: World, labels: dict[str, str], error: str, day: int) -> str:
    c = world.canaries
    session = f"s-{c.new('session')}"
    world.transcripts[session] = labels
    world.session_ids.append(session)
    header = {"type": "transcript", "format": "generic", "session_id": session, **labels,
              "labels": [c.new("tag")], "outcome": "failure",
              "started_at": f"2026-10-{day:02d}T10:00:00Z"}  # fmt: skip
    events: list[dict[str, Any]] = [
        {"type": "event", "kind": "message", "role": "user", "text": f"fix {c.new('text')}"},
    ]
    for n in range(2):  # the same error twice per session, with a per-session input
        events += [
            {"type": "event", "kind": "tool_call", "name": "bash", "call_id": f"c{n}",
             "input": {"command": f"npm install {c.new('input')}"}},
            {"type": "event", "kind": "tool_result", "call_id": f"c{n}",
             "output": f"npm ERR! cannot resolve {error} from the registry", "is_error": True,
             "exit_code": 1},
        ]  # fmt: skip
    events.append({"type": "event", "kind": "message", "role": "user",
                   "text": f"No, use pnpm instead of npm for {c.new('text')}."})  # fmt: skip
    events.append({"type": "event", "kind": "message", "role": "assistant",
                   "text": f"Done with {c.new('text')}."})  # fmt: skip
    return "".join(json.dumps(x) + "\n" for x in [header, *events])


def _transcripts(world: World) -> None:
    """Per project, sessions sharing one error; one error shared by every project (and by
    unlabelled sessions, for administrators only) so a dream proposes across scopes."""
    rng, c = world.rng, world.canaries
    shared = c.new("error")
    users = [a.name for a in world.actors.values() if a.kind == "user"]
    agents = [a.name for a in world.actors.values() if a.kind == "agent"]
    body, day = "", 1
    for project in world.projects:
        own = c.new("error")
        for i in range(3):
            labels = {"project": project}
            if rng.random() < 0.4:
                labels["agent"] = rng.choice(agents)
            if rng.random() < 0.3:
                labels["user"] = rng.choice(users)
            if rng.random() < 0.2 and world.tasks:
                labels["task"] = rng.choice(world.tasks)
            body += _session(world, labels, own if i < 2 else shared, day)
            day += 1
    for _ in range(2):
        body += _session(world, {}, shared, day)
        day += 1
    source = TranscriptSource.from_bytes("fleet.jsonl", body.encode())
    report = world.svc.import_transcripts(OWNER, STORE, [source], format="generic")
    assert report.new == len(world.transcripts), report


def _dream(world: World, principal_id: str) -> None:
    principal = world.svc.authenticate(world.tokens[principal_id])
    config = DreamConfig.build(min_sessions=2, min_prevalence=0.0)
    run = world.svc.dream(principal, STORE, config)
    world.dream_runs.append(run.id)


# --- the whole world -----------------------------------------------------------------------


def build(tmp_path: Path, rng: random.Random) -> World:
    canaries = Canaries(rng)
    projects = [canaries.new("project") for _ in range(rng.randint(2, 3))]
    tasks = [canaries.new("task") for _ in range(rng.randint(1, 2))]
    url = f"sqlite:///{tmp_path / 'leak.db'}"
    svc = memdir.open(url, create=True)
    second = "x" + canaries.new("store")
    svc.create_store(OWNER, STORE)
    svc.create_store(OWNER, second)
    actors = _principals(rng, projects, tasks)
    rules = _rules(rng, projects, actors)
    policy = PolicyModel(tuple(rules))
    svc.set_policy(OWNER, STORE, policy.yaml())
    world = World(rng, canaries, svc, second, projects, tasks, {}, {},
                  {STORE: policy, second: PolicyModel(DEFAULT_RULES)})  # fmt: skip
    world.engine = sa.create_engine(url)
    for actor in actors:
        svc.add_principal(OWNER, actor.id, groups=tuple(actor.groups), projects=actor.projects,
                          tasks=actor.tasks, acts_for=actor.acts_for)  # fmt: skip
        narrowed = _narrow(rng, actor, projects)
        kwargs: dict[str, Any] = {}
        if narrowed.token_paths is not None:
            kwargs = {"paths": narrowed.token_paths, "actions": narrowed.token_actions}
        info = svc.create_token(OWNER, actor.id, **kwargs)
        assert info.token is not None
        world.tokens[actor.id] = info.token
        world.actors[actor.id] = narrowed
    _files(world)
    _transcripts(world)
    _dream(world, "user:root")
    return world


def reshuffle(world: World, surfaces: Any) -> None:
    """The owner re-registers a principal without one of its projects (same token scope):
    what it wrote or proposed there it may no longer see."""
    authors = {r.author for r in world.rows(sa.select(proposals.c.author))}
    registered = {p.id for p in world.svc.list_principals(OWNER)}  # a call may have removed one
    candidates = [a for _, a in sorted(world.actors.items())
                  if a.projects and a.id != "user:root" and a.id in registered]  # fmt: skip
    if not candidates:
        return
    # authors first: what they proposed is what they must stop seeing
    candidates = [a for a in candidates if a.id in authors] or candidates
    actor = world.rng.choice(candidates)
    kept = tuple(p for p in actor.projects if p != world.rng.choice(actor.projects))
    svc = world.svc
    svc.remove_principal(OWNER, actor.id)
    svc.add_principal(OWNER, actor.id, groups=tuple(actor.groups), projects=kept,
                      tasks=actor.tasks, acts_for=actor.acts_for)  # fmt: skip
    kwargs: dict[str, Any] = {}
    if actor.token_paths is not None:
        kwargs = {"paths": actor.token_paths, "actions": actor.token_actions}
    info = svc.create_token(OWNER, actor.id, **kwargs)
    assert info.token is not None
    world.tokens[actor.id] = info.token
    world.actors[actor.id] = replace(actor, projects=kept)
    surfaces.forget(actor.id)
