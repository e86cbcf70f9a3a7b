"""Path permissions as data: parse, validate and evaluate a policy.

A policy is a YAML document::

    version: 1
    rules:
      - id: org-read                      # optional; defaults to "rule-N"
        who: "*"                          # "*", a principal id, "group:NAME" or "kind:agent"
        paths: ["/org/**"]                # globs; templates {principal} {user} {project} {task}
        actions: [read]                   # read | propose | write | admin
        effect: allow                     # allow (default) | deny
        reason: everyone reads org memory # shown with every decision

Actions imply others: ``admin`` implies every action, ``write`` implies ``propose``. Deny wins
over allow; no matching allow means deny. Templates expand over the principal: ``{principal}``
is its name (``agent:ci-bot`` → ``ci-bot``), ``{user}`` its own name for users and the user an
agent acts for, ``{project}`` and ``{task}`` each of its projects and tasks (a rule with a
template the principal has no value for does not apply to it).

Everything under :data:`RESERVED_PREFIX` (the policy file itself, screening configuration)
needs ``admin``, whatever the rules say, so no rule can lock administrators out or let anyone
else rewrite the rules.

Evaluation is pure and fast: :class:`CompiledPolicy` keeps, per principal, the rules that
apply to it indexed by their literal directory prefix, so a decision looks at a handful of
candidate rules even when the policy has thousands.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memdir.core.errors import InvalidContent
from memdir.core.globs import Glob, compile_glob, literal_prefix
from memdir.core.model import Principal
from memdir.core.paths import is_under
from memdir.core.ranges import minimal_prefixes

__all__ = [
    "ACTIONS",
    "DEFAULT_POLICY_YAML",
    "POLICY_PATH",
    "RESERVED_PREFIX",
    "SCREENING_ACTIONS",
    "CompiledPolicy",
    "Decision",
    "Policy",
    "Rule",
    "parse_policy",
]

ACTIONS = ("read", "propose", "write", "admin")
IMPLIED = {
    "read": {"read"},
    "propose": {"propose"},
    "write": {"write", "propose"},
    "admin": {"read", "propose", "write", "admin"},
}
RESERVED_PREFIX = "/.memdir"
POLICY_PATH = "/.memdir/policy.yaml"
_TEMPLATE = re.compile(r"\{(principal|user|project|task)\}")
_WHO = re.compile(r"^(\*|owner|(agent|user|service):.+|group:.+|kind:(agent|user|service))$")

DEFAULT_POLICY_YAML = """\
# memdir default policy: DESIGN.md's layout. Deny wins; no allow means deny.
version: 1
screening:        # what write screening does with findings: reject | quarantine | allow
  secret: reject
  injection: quarantine
  provenance: quarantine
rules:
  - id: admins
    who: group:admins
    paths: ["/**"]
    actions: [admin]
    reason: administrators may do anything
  - id: org-read
    who: "*"
    paths: ["/org/**"]
    actions: [read]
    reason: everyone reads organisation memory
  - id: org-propose
    who: "*"
    paths: ["/org/**"]
    actions: [propose]
    reason: organisation memory changes through review
  - id: projects
    who: "*"
    paths: ["/projects/{project}/**"]
    actions: [read, write]
    reason: principals on a project read and write its memory
  - id: users
    who: "*"
    paths: ["/users/{user}/**"]
    actions: [read, write]
    reason: a user's preferences belong to that user and the agents acting for them
  - id: agents
    who: kind:agent
    paths: ["/agents/{principal}/**"]
    actions: [read, write]
    reason: an agent's scratchpad is private to it
  - id: tasks
    who: "*"
    paths: ["/tasks/{task}/**"]
    actions: [read, write]
    reason: principals on a task share its state
"""


@dataclass(frozen=True)
class Rule:
    id: str
    who: str
    paths: tuple[str, ...]
    actions: frozenset[str]
    effect: str
    reason: str

    def applies_to(self, principal: Principal) -> bool:
        who = self.who
        if who == "*":
            return True
        if who.startswith("group:"):
            return who[6:] in principal.groups
        if who.startswith("kind:"):
            return principal.kind == who[5:]
        return who == principal.id


@dataclass(frozen=True)
class Decision:
    """The outcome of one check, with the rule that decided it and why."""

    allowed: bool
    action: str
    path: str
    principal: str
    rule: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "action": self.action,
            "path": self.path,
            "principal": self.principal,
            "rule": self.rule,
            "reason": self.reason,
        }


SCREENING_ACTIONS = ("reject", "quarantine", "allow")
DEFAULT_SCREENING = {"secret": "reject", "injection": "quarantine", "provenance": "quarantine"}


@dataclass(frozen=True)
class Policy:
    """Rules, plus what write screening does with each kind of finding.

    ``screening`` maps a finding's rule id (``secret.aws-access-key``), a dotted prefix of it
    (``secret``, ``unicode``) or its category to ``reject``, ``quarantine`` or ``allow``; the
    most specific key wins, then :data:`DEFAULT_SCREENING`.
    """

    rules: tuple[Rule, ...]
    source: str = ""
    screening: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_SCREENING))

    def screening_action(self, rule: str, category: str) -> str:
        parts = rule.split(".")
        for end in range(len(parts), 0, -1):
            action = self.screening.get(".".join(parts[:end]))
            if action is not None:
                return action
        return self.screening.get(category) or DEFAULT_SCREENING.get(category, "quarantine")


def _fail(message: str, **details: Any) -> InvalidContent:
    return InvalidContent(f"invalid policy: {message}; the current policy stays", **details)


def _strings(value: Any, what: str, index: int) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise _fail(f"rule {index}: '{what}' must be a string or a non-empty list of strings")
    return tuple(value)


def _rule(index: int, raw: Any) -> Rule:
    if not isinstance(raw, Mapping):
        raise _fail(f"rule {index} is not a mapping", rule=index)
    unknown = set(raw) - {"id", "who", "paths", "actions", "effect", "reason"}
    if unknown:
        raise _fail(f"rule {index} has unknown keys {sorted(unknown)}", rule=index)
    who = raw.get("who")
    if not isinstance(who, str) or not _WHO.match(who):
        raise _fail(
            f"rule {index}: 'who' must be '*', a principal id, group:NAME or kind:KIND, "
            f"received {who!r}",
            rule=index,
        )
    paths = _strings(raw.get("paths"), "paths", index)
    for pattern in paths:
        if not pattern.startswith("/"):
            raise _fail(f"rule {index}: path {pattern!r} must start with '/'", rule=index)
        compile_glob(_TEMPLATE.sub("x", pattern))
    actions = _strings(raw.get("actions"), "actions", index)
    bad = [a for a in actions if a not in ACTIONS]
    if bad:
        raise _fail(f"rule {index}: unknown actions {bad}; use {', '.join(ACTIONS)}", rule=index)
    effect = raw.get("effect", "allow")
    if effect not in ("allow", "deny"):
        raise _fail(f"rule {index}: effect must be allow or deny, received {effect!r}")
    rule_id = str(raw.get("id", f"rule-{index}"))
    reason = str(raw.get("reason", f"rule {rule_id}"))
    return Rule(rule_id, who, paths, frozenset(actions), effect, reason)


def parse_policy(text: str) -> Policy:
    """Parse and validate a policy document; any error refuses the whole document."""
    import yaml

    from memdir.core.yamlsafe import load_yaml

    try:
        data = load_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise _fail(f"YAML error{where}: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, Mapping) or data.get("version") != 1:
        raise _fail("expected a mapping with 'version: 1' and 'rules'")
    rules = data.get("rules")
    if not isinstance(rules, list):
        raise _fail("'rules' must be a list")
    unknown = set(data) - {"version", "rules", "screening"}
    if unknown:
        raise _fail(f"unknown top-level keys {sorted(unknown)}")
    parsed = tuple(_rule(i + 1, r) for i, r in enumerate(rules))
    ids = [r.id for r in parsed]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise _fail(f"duplicate rule ids {duplicates}")
    screening = data.get("screening") or {}
    if not isinstance(screening, Mapping) or not all(
        isinstance(k, str) and v in SCREENING_ACTIONS for k, v in screening.items()
    ):
        raise _fail(
            "'screening' must map finding rules or categories to " + " | ".join(SCREENING_ACTIONS)
        )
    return Policy(parsed, text, {**DEFAULT_SCREENING, **screening})


def _values(principal: Principal, name: str) -> tuple[str, ...]:
    if name == "principal":
        return (principal.name,)
    if name == "user":
        if principal.kind == "user":
            return (principal.name,)
        return (principal.acts_for,) if principal.acts_for else ()
    if name == "project":
        return tuple(principal.projects)
    return tuple(principal.tasks)


def _expand(pattern: str, principal: Principal) -> list[str]:
    names = _TEMPLATE.findall(pattern)
    patterns = [pattern]
    for name in dict.fromkeys(names):
        values = [v for v in _values(principal, name) if v and "/" not in v]
        patterns = [p.replace("{" + name + "}", glob_escape(v)) for p in patterns for v in values]
    return patterns


def glob_escape(value: str) -> str:
    """Escape glob metacharacters in a template value (a project called ``a*`` is literal)."""
    return re.sub(r"([*?\[])", r"[\1]", value)


@dataclass
class _Compiled:
    rule: Rule
    regex: Glob
    granted: frozenset[str]
    pattern: str = ""  # the concrete glob (templates filled in)


@dataclass
class _PrincipalRules:
    by_prefix: dict[str, list[_Compiled]] = field(default_factory=dict)
    read_prefixes: tuple[str, ...] | None = None  # computed on first use
    whole_prefixes: tuple[str, ...] | None = None  # computed on first use


class CompiledPolicy:
    """A policy ready to evaluate; per-principal rule indexes are built lazily and cached."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._cache: dict[tuple[Any, ...], _PrincipalRules] = {}

    def _rules_for(self, principal: Principal) -> _PrincipalRules:
        key = principal.cache_key
        found = self._cache.get(key)
        if found is None:
            found = _PrincipalRules()
            for rule in self.policy.rules:
                if not rule.applies_to(principal):
                    continue
                for pattern in rule.paths:
                    for concrete in _expand(pattern, principal):
                        prefix = literal_prefix(concrete)
                        granted = frozenset().union(*(IMPLIED[a] for a in rule.actions))
                        compiled = _Compiled(rule, compile_glob(concrete), granted, concrete)
                        found.by_prefix.setdefault(prefix, []).append(compiled)
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = found
        return found

    def read_prefixes(self, principal: Principal) -> tuple[str, ...] | None:
        """Directory prefixes bounding every path ``principal`` may read (None: anything).

        Each allow rule granting read (``admin`` included) is filed under its glob's literal
        prefix, and a glob matches only that prefix and paths under it; deny rules only
        narrow. Cached with the principal's rule index.
        """
        if principal.is_owner:
            return None
        rules = self._rules_for(principal)
        if rules.read_prefixes is None:
            prefixes = [
                prefix
                for prefix, compiled in rules.by_prefix.items()
                if any(c.rule.effect == "allow" and "read" in c.granted for c in compiled)
            ]
            rules.read_prefixes = minimal_prefixes(prefixes)
        return None if rules.read_prefixes == ("/",) else rules.read_prefixes

    def whole_read_prefixes(self, principal: Principal) -> tuple[str, ...] | None:
        """Prefixes under which ``principal`` may read *every* path outside ``/.memdir/``
        (None: every path, the database owner).

        A prefix is whole when an allow rule granting read is exactly ``PREFIX/**`` (which
        matches the prefix and everything below it) and no deny rule that takes read away
        (a deny on ``read`` or ``admin``) is filed under a prefix comparable with it. Sound by
        the two facts :meth:`allows` rests on: a glob matches only paths under its literal
        prefix, so a deny under a prefix that is neither an ancestor nor a descendant matches
        nothing below it; and the allow is a candidate for every path below, because it is
        filed under an ancestor of each. Listings decide these ranges in SQL once per request
        instead of asking :meth:`allows` per row. Cached with the principal's rule index.
        """
        if principal.is_owner:
            return None
        rules = self._rules_for(principal)
        if rules.whole_prefixes is None:
            every = [c for compiled in rules.by_prefix.values() for c in compiled]
            denies = [literal_prefix(c.pattern) for c in every
                      if c.rule.effect == "deny" and "read" in c.granted]  # fmt: skip
            whole = [
                prefix
                for prefix, compiled in rules.by_prefix.items()
                if any(c.rule.effect == "allow" and "read" in c.granted
                       and c.pattern == prefix.rstrip("/") + "/**" for c in compiled)
                and not any(is_under(d, prefix) or is_under(prefix, d) for d in denies)
            ]  # fmt: skip
            rules.whole_prefixes = minimal_prefixes(whole)
        return rules.whole_prefixes

    def reads_everything(self, principal: Principal) -> bool:
        """May ``principal`` read every path outside ``/.memdir/`` whatever it is called? An
        allow rule on ``/**`` grants it read and no deny rule could refuse it read anywhere
        (a deny on ``admin`` implies read). Token narrowing is the caller's to apply."""
        if principal.is_owner:
            return True
        rules = self._rules_for(principal)
        every = [c for compiled in rules.by_prefix.values() for c in compiled]
        if any(c.rule.effect == "deny" and "read" in c.granted for c in every):
            return False
        return any(
            c.rule.effect == "allow" and "read" in c.granted and c.pattern == "/**"
            for c in rules.by_prefix.get("/", ())
        )

    def _candidates(self, rules: _PrincipalRules, path: str) -> Iterable[_Compiled]:
        """Rules filed under the root, each ancestor of ``path``, and ``path`` itself.

        A rule is filed under its glob's literal directory prefix; ``/a/**`` (prefix ``/a``)
        matches ``/a`` itself, so the path's own entry must be looked at too.
        """
        yield from rules.by_prefix.get("/", ())
        end = path.find("/", 1)
        while end != -1:
            yield from rules.by_prefix.get(path[:end], ())
            end = path.find("/", end + 1)
        if path != "/":
            yield from rules.by_prefix.get(path, ())

    def allows(self, principal: Principal, action: str, path: str) -> bool:
        """``check(principal, action, path).allowed`` without building the decision's reason:
        the per-row test of listings over thousands of paths (same rules, same order)."""
        if principal.is_owner:
            return True
        reserved = path == RESERVED_PREFIX or path.startswith(RESERVED_PREFIX + "/")
        needs = "admin" if reserved else action
        allow = False
        for compiled in self._candidates(self._rules_for(principal), path):
            if needs not in compiled.granted or not compiled.regex.match(path):
                continue
            if compiled.rule.effect == "deny":
                return False
            allow = True
        return allow

    def check(self, principal: Principal, action: str, path: str) -> Decision:
        """May ``principal`` do ``action`` on ``path``? Deny wins; no allow means deny."""

        def decide(allowed: bool, rule: str | None, reason: str) -> Decision:
            return Decision(allowed, action, path, principal.id, rule, reason)

        if principal.is_owner:
            return decide(True, None, "the database owner may do anything")
        needs = (
            "admin" if path == RESERVED_PREFIX or path.startswith(RESERVED_PREFIX + "/") else action
        )
        allow: Rule | None = None
        for compiled in self._candidates(self._rules_for(principal), path):
            rule = compiled.rule
            if needs not in compiled.granted or not compiled.regex.match(path):
                continue
            if rule.effect == "deny":
                return decide(False, rule.id, f"denied by rule {rule.id}: {rule.reason}")
            if allow is None:
                allow = rule
        if allow is not None:
            if needs != action:
                return decide(True, allow.id, f"{RESERVED_PREFIX}/ is admin-only; {allow.reason}")
            return decide(True, allow.id, f"allowed by rule {allow.id}: {allow.reason}")
        if needs != action:
            return decide(False, None, f"{RESERVED_PREFIX}/ holds memdir's own configuration and "
                          "is admin-only")  # fmt: skip
        return decide(False, None, f"no rule grants {action} on {path} to {principal.id}")
