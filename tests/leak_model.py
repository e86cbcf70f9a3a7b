"""The leak oracle's independent model: who may read and write what, from the generated world.

Nothing here calls memdir's policy engine: globs, rule selection, templates, deny-wins and
token narrowing are re-implemented from docs/permissions.md in plain Python, so a disagreement
between this model and the product is a finding, not a tautology.

Rights the model grants (the rules the product promises after issue 11):

- ``read``: the policy allows ``read`` and the token allows ``read`` on the path;
- ``write`` (and ``propose``): the policy and the token allow it *and* the principal may read the
  path (read-before-write: a principal without read gets "not found" from every verb);
- database-wide administration (principals, tokens, every dream run): the ``admins`` group with
  a token that is not narrowed (or keeps ``admin`` on ``/**``);
- a transcript: ``read`` on ``<dir>/*`` for every directory its scope labels name; an
  unlabelled one for administrators whose token allows `read` on `/.memdir/db/transcripts`.

Canaries are 16 lowercase ASCII letters: they survive the product's case folding and its
masking of digits, hex runs, quoted values and paths (``dream.miners.signature.mask``), and
the check looks for their first :data:`PREFIX` characters so truncated copies count too.
"""

from __future__ import annotations

import fnmatch
import random
import string
from collections.abc import Iterable
from dataclasses import dataclass, field

PREFIX = 12  # a canary counts as leaked when this many of its first characters appear
CANARY_LEN = 16
ACTIONS = ("read", "propose", "write", "admin")
IMPLIED = {
    "read": {"read"},
    "propose": {"propose"},
    "write": {"write", "propose"},
    "admin": set(ACTIONS),
}
RESERVED = "/.memdir"


class Canaries:
    """Unique random lowercase words, each remembered with what it marks."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.kind: dict[str, str] = {}
        self._prefixes: set[str] = set()

    def new(self, kind: str) -> str:
        while True:
            word = "".join(self.rng.choice(string.ascii_lowercase) for _ in range(CANARY_LEN))
            if word[:PREFIX] not in self._prefixes:
                self._prefixes.add(word[:PREFIX])
                self.kind[word] = kind
                return word

    def found_in(self, text: str) -> set[str]:
        """The canaries whose prefix occurs in ``text`` (already case-folded)."""
        return {c for c in self.kind if c[:PREFIX] in text}


# --- globs and rules --------------------------------------------------------------------------


def _segments(path: str) -> list[str]:
    return [s for s in path.split("/") if s != ""]


def glob_match(pattern: str, path: str) -> bool:
    """``*``/``?``/``[..]`` within a segment, ``**`` as a whole segment: any number of them."""
    pat = _segments(pattern if pattern.startswith("/") else "/" + pattern)
    segs = _segments(path)

    def match(i: int, j: int) -> bool:
        if i == len(pat):
            return j == len(segs)
        if pat[i] == "**":
            return any(match(i + 1, k) for k in range(j, len(segs) + 1))
        return j < len(segs) and fnmatch.fnmatchcase(segs[j], pat[i]) and match(i + 1, j + 1)

    return match(0, 0)


@dataclass(frozen=True)
class Actor:
    """A principal as the world generated it, with the scope of the token it acts with."""

    id: str
    groups: frozenset[str] = frozenset()
    projects: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    acts_for: str | None = None
    token_paths: tuple[str, ...] | None = None  # None: the token is not narrowed
    token_actions: tuple[str, ...] | None = None

    @property
    def kind(self) -> str:
        return self.id.split(":", 1)[0]

    @property
    def name(self) -> str:
        return self.id.split(":", 1)[1]

    @property
    def narrowed(self) -> bool:
        return self.token_paths is not None

    def token_allows(self, action: str, path: str) -> bool:
        if self.token_paths is None or self.token_actions is None:
            return True
        acts = set(self.token_actions)
        if action not in acts and not (action == "propose" and "write" in acts):
            return False
        return any(glob_match(p, path) for p in self.token_paths)


@dataclass(frozen=True)
class ModelRule:
    who: str
    paths: tuple[str, ...]
    actions: tuple[str, ...]
    effect: str = "allow"
    id: str = ""
    reason: str = ""

    def applies(self, actor: Actor) -> bool:
        if self.who == "*":
            return True
        if self.who.startswith("group:"):
            return self.who[6:] in actor.groups
        if self.who.startswith("kind:"):
            return actor.kind == self.who[5:]
        return self.who == actor.id

    def patterns(self, actor: Actor) -> list[str]:
        values = {
            "{principal}": [actor.name],
            "{user}": [actor.name] if actor.kind == "user" else [actor.acts_for or ""],
            "{project}": list(actor.projects),
            "{task}": list(actor.tasks),
        }
        out: list[str] = []
        for pattern in self.paths:
            expanded = [pattern]
            for key, vals in values.items():
                if key in pattern:
                    expanded = [p.replace(key, v) for p in expanded for v in vals if v]
            out.extend(expanded)
        return out

    def yaml(self) -> str:
        paths = ", ".join(f'"{p}"' for p in self.paths)
        return (
            f'  - id: {self.id}\n    who: "{self.who}"\n    paths: [{paths}]\n'
            f"    actions: [{', '.join(self.actions)}]\n    effect: {self.effect}\n"
            f"    reason: {self.reason or 'generated rule'}\n"
        )


DEFAULT_RULES = (
    ModelRule("group:admins", ("/**",), ("admin",), id="admins"),
    ModelRule("*", ("/org/**",), ("read",), id="org-read"),
    ModelRule("*", ("/org/**",), ("propose",), id="org-propose"),
    ModelRule("*", ("/projects/{project}/**",), ("read", "write"), id="projects"),
    ModelRule("*", ("/users/{user}/**",), ("read", "write"), id="users"),
    ModelRule("kind:agent", ("/agents/{principal}/**",), ("read", "write"), id="agents"),
    ModelRule("*", ("/tasks/{task}/**",), ("read", "write"), id="tasks"),
)


@dataclass
class PolicyModel:
    rules: tuple[ModelRule, ...]

    def policy_allows(self, actor: Actor, action: str, path: str) -> bool:
        reserved = path == RESERVED or path.startswith(RESERVED + "/")
        needs = "admin" if reserved else action
        allowed = False
        for rule in self.rules:
            if not rule.applies(actor):
                continue
            granted = set().union(*(IMPLIED[a] for a in rule.actions))
            if needs not in granted:
                continue
            if any(glob_match(p, path) for p in rule.patterns(actor)):
                if rule.effect == "deny":
                    return False
                allowed = True
        return allowed

    def may(self, actor: Actor, action: str, path: str) -> bool:
        """The right the product must enforce (see the module docstring)."""
        ok = self.policy_allows(actor, action, path) and actor.token_allows(action, path)
        if ok and action != "read":
            ok = self.may(actor, "read", path)
        return ok

    def yaml(self) -> str:
        body = "".join(r.yaml() for r in self.rules)
        return "version: 1\nrules:\n" + body


def is_db_admin(actor: Actor) -> bool:
    """Database-wide administration: ``admins`` with a token that keeps admin on ``/**``."""
    if "admins" not in actor.groups:
        return False
    if actor.token_paths is None:
        return True
    return "/**" in actor.token_paths and "admin" in (actor.token_actions or ())


SCOPE_DIRS = {"project": "/projects/", "user": "/users/", "agent": "/agents/", "task": "/tasks/"}


def is_db_reader(actor: Actor) -> bool:
    """Reading database-wide resources (every store's name, unlabelled transcripts): an
    administrator whose token allows ``read`` there — a read-only ``/**`` token does, as it
    reads every file; an ``/org/**`` one does not (its globs do not reach ``/.memdir/db/``)."""
    if "admins" not in actor.groups:
        return False
    if actor.token_paths is None:
        return True
    return "/**" in actor.token_paths and "read" in (actor.token_actions or ())


def transcript_readable(policy: PolicyModel, actor: Actor, labels: dict[str, str]) -> bool:
    if not labels:
        return is_db_reader(actor)
    return all(policy.may(actor, "read", SCOPE_DIRS[k] + v + "/*") for k, v in labels.items())


# --- where each canary may legitimately be seen -----------------------------------------------


@dataclass(frozen=True)
class Source:
    """One place a canary lives; a caller may see the canary if it may see any of its sources.

    kind: ``path`` (store, path) readable; ``transcript`` (index) readable; ``proposal`` (its
    paths) all readable; ``admin``: database administrators; ``dbread``: administrators whose
    token reads database-wide resources; ``actor`` (id): that principal.
    """

    kind: str
    store: str = ""
    key: str = ""
    paths: tuple[str, ...] = ()


@dataclass
class Knowledge:
    """Every canary's sources, and the labels of every transcript (by key)."""

    policies: dict[str, PolicyModel]
    sources: dict[str, set[Source]] = field(default_factory=dict)
    transcripts: dict[str, dict[str, str]] = field(default_factory=dict)

    def add(self, canary: str, source: Source) -> None:
        self.sources.setdefault(canary, set()).add(source)

    def add_all(self, canaries: Iterable[str], source: Source) -> None:
        for canary in canaries:
            self.add(canary, source)

    def visible(self, actor: Actor, source: Source) -> bool:
        if source.kind == "path":
            return self.policies[source.store].may(actor, "read", source.key)
        if source.kind == "transcript":
            labels = self.transcripts[source.key]
            return transcript_readable(self.policies["default"], actor, labels)
        if source.kind == "proposal":
            policy = self.policies[source.store]
            return all(policy.may(actor, "read", p) for p in source.paths)
        if source.kind == "admin":
            return is_db_admin(actor)
        if source.kind == "dbread":
            return is_db_reader(actor)
        return source.kind == "actor" and source.key == actor.id

    def allowed(self, actor: Actor, canary: str) -> bool:
        return any(self.visible(actor, s) for s in self.sources.get(canary, ()))
