"""The leak oracle's operations: every verb, with random arguments, on a random surface.

Each operation picks its targets from the owner's view of the store (every path that ever
existed, fresh paths in every directory, commit ids and prefixes, proposal, run, transcript,
principal and token ids), so callers aim at hidden things as often as at their own. What the
caller *sends* is recorded: a canary the caller sent may come back (an error naming the path it
asked for is no leak), so probes send only the middle of a canary, never its prefix.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from leak_surfaces import SURFACES, Answer, Surfaces, file_url, store_url
from leak_world import STORE, World
from memdir.core.model import Provenance, StrReplace, Write
from memdir.dreams import DreamConfig
from memdir.storage.schema import commits, dream_runs, heads, proposals, tokens, transcripts
from memdir.storage.schema import versions as versions_table
from memdir.transcripts.model import Labels
from memdir.transcripts.reader import Source as TranscriptSource

_HIDDEN_DIRS = ("/secret/", "/private/", "/frozen/", "/shared/")


@dataclass
class Call:
    """One operation as made: its name, surface, what was sent, and the answer."""

    op: str
    surface: str
    actor: str = ""
    sent: list[str] = field(default_factory=list)
    answer: Answer | None = None
    target: str | None = None  # the one path a read-only call asked about
    control: tuple[str, Answer] | None = None  # the same call on a path that never existed
    redacted: set[int] | None = None  # versions already redacted before a redaction


class Ops:
    """Random operations as random principals; ``fresh`` canaries are the caller's own."""

    def __init__(self, world: World, surfaces: Surfaces) -> None:
        self.world = world
        self.s = surfaces
        self.rng = world.rng
        self.fresh: list[str] = []
        self.actor = ""

    # --- the owner's view, to aim at --------------------------------------------------------

    def _rows(self, query: Any) -> list[Any]:
        return self.world.rows(query)

    def paths(self) -> list[str]:
        """Every path of the store's past but the policy's (a changed policy is no leak, and the
        model would not follow it)."""
        rows = self._rows(sa.select(versions_table.c.path).where(versions_table.c.store_id == 1))
        return sorted({r.path for r in rows if not r.path.startswith("/.memdir/")})

    def path(self, *, reading: bool = False) -> str:
        """A path to aim at: often one with a past across scopes, or a hidden directory's;
        when ``reading``, sometimes the policy file."""
        known = self.paths()
        roll = self.rng.random()
        if reading and roll < 0.05:
            return "/.memdir/policy.yaml"
        if roll < 0.2:
            directory = self.rng.choice(known).rsplit("/", 1)[0]
            return f"{directory}/new-{self.new('name')}.md"
        if roll < 0.4:
            moved = self._rows(sa.select(versions_table.c.path, versions_table.c.old_path)
                               .where(versions_table.c.old_path.is_not(None)))  # fmt: skip
            hidden = [p for p in known if any(d in p for d in _HIDDEN_DIRS)]
            pool = [p for row in moved for p in (row.path, row.old_path)] + hidden
            return self.rng.choice(pool or known)
        if roll < 0.7:  # the caller's own kind of trouble: a readable file with a hidden
            tricky = self._tricky(known)  # past, or a path it may write but not read
            if tricky:
                return self.rng.choice(tricky)
        return self.rng.choice(known)

    def _tricky(self, known: list[str]) -> list[str]:
        policy, actor = self.world.policies[STORE], self.world.actors[self.actor]
        rows = self._rows(sa.select(versions_table.c.file_id, versions_table.c.path)
                          .where(versions_table.c.store_id == 1))  # fmt: skip
        by_file: dict[int, set[str]] = {}
        for row in rows:
            by_file.setdefault(row.file_id, set()).add(row.path)
        out = []
        for paths in by_file.values():
            seen = {p for p in paths if policy.may(actor, "read", p)}
            if seen and seen != paths:
                out.extend(sorted(seen))
        blind = [p for p in known if policy.policy_allows(actor, "write", p)
                 and not policy.may(actor, "read", p)]  # fmt: skip
        return out + blind

    def head(self, path: str) -> Any:
        rows = self._rows(sa.select(heads).where(heads.c.store_id == 1, heads.c.path == path))
        return rows[0] if rows else None

    def content(self, path: str) -> str:
        head = self.head(path)
        if head is None:
            return ""
        return self.world.svc.read(self.world.svc.resolve("owner"), STORE, path).content

    def ids(self, table: Any, column: str = "id") -> list[str]:
        """Ids in the order they were made (rowid), so a seed replays the same calls."""
        query = sa.select(getattr(table.c, column)).order_by(sa.text("rowid"))
        return [str(getattr(r, column)) for r in self._rows(query)]

    def new(self, kind: str) -> str:
        canary = self.world.canaries.new(kind)
        self.fresh.append(canary)
        return canary

    def text(self) -> str:
        return f"fresh {self.new('content')}\n"

    def probe(self) -> str:
        """The middle of a random canary: it matches the canary without sending its prefix."""
        canary = self.rng.choice(sorted(self.world.canaries.kind))
        return canary[3:15]

    def pick(self, *surfaces: str) -> str:
        return self.rng.choice(surfaces or SURFACES)

    # --- operations ------------------------------------------------------------------------

    def run(self, actor: str) -> Call:
        self.fresh = []
        self.actor = actor
        names = sorted(OPS)
        name = self.rng.choices(names, [WEIGHTS.get(n, 1.0) for n in names])[0]
        call = OPS[name](self, actor)
        call.sent += self.fresh  # the caller's own new canaries: its provenance, its text
        return call


OpFn = Callable[[Ops, str], Call]
#: How often each operation is drawn (1 by default): the verbs that take content from a
#: version or write more, listings that answer the same every time less.
WEIGHTS = {"revert-file": 3.0, "read": 3.0, "diff": 2.0, "history": 2.0, "str_replace": 3.0,
           "write": 2.0, "rename": 2.0, "insert": 2.0, "stores": 0.5, "me": 0.5,
           "proposals": 0.5}  # fmt: skip
OPS: dict[str, OpFn] = {}


def op(name: str) -> Callable[[OpFn], OpFn]:
    def register(fn: OpFn) -> OpFn:
        OPS[name] = fn
        return fn

    return register


def _do(o: Ops, actor: str, name: str, surface: str, sent: list[str],
        service: Callable[[Any], Any] | None = None, rest: Callable[[], Answer] | None = None,
        mcp: Callable[[], Answer] | None = None) -> Call:  # fmt: skip
    call = Call(name, surface, actor, [s for s in sent if s])
    if surface == "service" and service is not None:
        call.answer = o.s.service(actor, service)
    elif surface == "rest" and rest is not None:
        call.answer = rest()
    elif mcp is not None:
        call.answer = mcp()
    else:
        raise AssertionError(f"{name} has no {surface} form")
    return call


def _prov(o: Ops) -> Provenance:
    return Provenance(reason=f"op {o.new('reason')}", session=f"s-{o.new('session')}")


def _prov_headers(p: Provenance) -> dict[str, str]:
    return {"X-Memdir-Reason": p.reason or "", "X-Memdir-Session": p.session or ""}


def _with_control(o: Ops, actor: str, path: str, attempt: Callable[[str], Call]) -> Call:
    """``attempt(path)``; when the caller may not read ``path``, also the same call on a
    sibling that never existed: the two answers must be the same but for the path."""
    call = attempt(path)
    call.target = path
    if not o.world.policies[STORE].may(o.world.actors[actor], "read", path):
        absent = f"{path.rsplit('/', 1)[0]}/absent-{o.new('name')}.md"
        control = attempt(absent).answer
        assert control is not None
        call.control = (absent, control)
    return call


@op("read")
def _read(o: Ops, actor: str) -> Call:
    path, surface = o.path(reading=True), o.pick()
    version = o.rng.choice([None, 1, 2, 3, 9])
    name = "read" + ("--version" if version and surface != "mcp" else "")

    def attempt(at: str) -> Call:
        return _do(o, actor, name, surface, [at],
                   service=lambda p: o.world.svc.read(p, STORE, at, version=version),
                   rest=lambda: o.s.rest(actor, "GET", file_url(at),
                                         params={"version": version, "format": "json"}),
                   mcp=lambda: o.s.tool(actor, "view", path=at))  # fmt: skip

    return _with_control(o, actor, path, attempt)


@op("ls")
def _ls(o: Ops, actor: str) -> Call:
    prefix = o.rng.choice(["/", "/projects", "/org", o.path().rsplit("/", 1)[0]])
    return _do(o, actor, "ls", o.pick(), [prefix],
               service=lambda p: o.world.svc.ls(p, STORE, prefix, depth=None),
               rest=lambda: o.s.rest(actor, "GET", store_url("/tree"),
                                     params={"prefix": prefix, "recursive": True}),
               mcp=lambda: o.s.tool(actor, "view", path=prefix))  # fmt: skip


@op("glob")
def _glob(o: Ops, actor: str) -> Call:
    pattern = o.rng.choice(["/**", "/projects/*/**", "/**/secret/*", "/org/**/*.md"])
    return _do(o, actor, "glob", o.pick("service", "rest"), [pattern],
               service=lambda p: o.world.svc.glob(p, STORE, pattern),
               rest=lambda: o.s.rest(actor, "GET", store_url("/glob"),
                                     params={"pattern": pattern}))  # fmt: skip


@op("grep")
def _grep(o: Ops, actor: str) -> Call:
    pattern = o.rng.choice(["holds", ".", o.probe(), "s-"])
    return _do(o, actor, "grep", o.pick(), [pattern],
               service=lambda p: o.world.svc.grep(p, STORE, pattern),
               rest=lambda: o.s.rest(actor, "GET", store_url("/grep"),
                                     params={"pattern": pattern}),
               mcp=lambda: o.s.tool(actor, "grep", pattern=pattern))  # fmt: skip


@op("search")
def _search(o: Ops, actor: str) -> Call:
    query = o.rng.choice(["line holds", "note", "fresh", "npm pnpm"])
    return _do(o, actor, "search", o.pick(), [query],
               service=lambda p: o.world.svc.search(p, STORE, query),
               rest=lambda: o.s.rest(actor, "GET", store_url("/search"), params={"q": query}),
               mcp=lambda: o.s.tool(actor, "search", query=query))  # fmt: skip


@op("history")
def _history(o: Ops, actor: str) -> Call:
    path, surface = o.path(reading=True), o.pick()

    def attempt(at: str) -> Call:
        return _do(o, actor, "history", surface, [at],
                   service=lambda p: o.world.svc.file_history(p, STORE, at),
                   rest=lambda: o.s.rest(actor, "GET", file_url(at, kind="versions")),
                   mcp=lambda: o.s.tool(actor, "history", path=at))  # fmt: skip

    return _with_control(o, actor, path, attempt)


@op("log")
def _log(o: Ops, actor: str) -> Call:
    return _do(o, actor, "log", o.pick(), [],
               service=lambda p: o.world.svc.history(p, STORE, limit=500),
               rest=lambda: o.s.rest(actor, "GET", store_url("/commits"), params={"limit": 500}),
               mcp=lambda: o.s.tool(actor, "history", limit=200))  # fmt: skip


@op("diff")
def _diff(o: Ops, actor: str) -> Call:
    path, b, surface = o.path(reading=True), o.rng.choice([None, 2, 3]), o.pick("service", "rest")

    def attempt(at: str) -> Call:
        return _do(o, actor, "diff", surface, [at],
                   service=lambda p: o.world.svc.diff(p, STORE, at, 1, b),
                   rest=lambda: o.s.rest(actor, "GET", file_url(at, kind="diff"),
                                         params={"a": 1, "b": b}))  # fmt: skip

    return _with_control(o, actor, path, attempt)


@op("revert-file")
def _revert_file(o: Ops, actor: str) -> Call:
    path, to = o.path(), o.rng.choice([1, 2, 3, 99])
    prov = _prov(o)
    return _do(o, actor, "revert-file", o.pick("service", "rest"), [path],
               service=lambda p: o.world.svc.revert_file(p, STORE, path, to, prov),
               rest=lambda: o.s.rest(actor, "POST", file_url(path, ":revert"),
                                     json_body={"to_version": to},
                                     headers=_prov_headers(prov)))  # fmt: skip


@op("revert-commit")
def _revert_commit(o: Ops, actor: str) -> Call:
    policy = o._rows(sa.select(versions_table.c.commit_id)
                     .where(versions_table.c.path.like("/.memdir/%")))  # fmt: skip
    ids = [c for c in o.ids(commits) if c not in {r.commit_id for r in policy}]
    commit = o.rng.choice(ids)
    name = "revert-commit"
    if o.rng.random() < 0.5:
        commit, name = commit[:8], "revert-commit-prefix"
    return _do(o, actor, name, o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.revert_commit(p, STORE, commit),
               rest=lambda: o.s.rest(actor, "POST",
                                     store_url(f"/commits/{commit}/revert")))  # fmt: skip


def _sha(o: Ops, path: str) -> str | None:
    head = o.head(path)
    return None if head is None else str(head.sha256)


@op("write")
def _write(o: Ops, actor: str) -> Call:
    path, text = o.path(), o.text()
    sha = o.rng.choice([_sha(o, path), _sha(o, path), None, "0" * 64])
    prov = _prov(o)
    headers = {"Content-Type": "text/markdown", **_prov_headers(prov)}
    if sha:
        headers["If-Match"] = f'"{sha}"'
    return _do(o, actor, "write", o.pick(), [path, text],
               service=lambda p: o.world.svc.write(p, STORE, path, text, if_match=sha,
                                                   provenance=prov),
               rest=lambda: o.s.rest(actor, "PUT", file_url(path), content=text.encode(),
                                     headers=headers),
               mcp=lambda: o.s.tool(actor, "create", path=path, file_text=text,
                                    if_match=sha))  # fmt: skip


@op("str_replace")
def _str_replace(o: Ops, actor: str) -> Call:
    path = o.path()
    lines = o.content(path).splitlines()
    old = o.rng.choice([*(lines[1:2] or ["holds"]), "holds", o.probe()])
    new = f"swapped {o.new('content')}"
    if o.rng.random() < 0.2:
        new = old  # the same text: an edit that changes nothing must say nothing
    return _do(o, actor, "str_replace", o.pick(), [path, old, new],
               service=lambda p: o.world.svc.str_replace(p, STORE, path, old, new),
               rest=lambda: o.s.rest(actor, "POST", file_url(path, ":str_replace"),
                                     json_body={"old": old, "new": new}),
               mcp=lambda: o.s.tool(actor, "str_replace", path=path, old_str=old,
                                    new_str=new))  # fmt: skip


@op("insert")
def _insert(o: Ops, actor: str) -> Call:
    path, line, text = o.path(), o.rng.choice([0, 1, 3, 4, 5, 40]), f"added {o.new('content')}"
    return _do(o, actor, "insert", o.pick(), [path, text],
               service=lambda p: o.world.svc.insert(p, STORE, path, line, text),
               rest=lambda: o.s.rest(actor, "POST", file_url(path, ":insert"),
                                     json_body={"line": line, "text": text}),
               mcp=lambda: o.s.tool(actor, "insert", path=path, insert_line=line,
                                    insert_text=text))  # fmt: skip


@op("rename")
def _rename(o: Ops, actor: str) -> Call:
    path = o.path()
    target = o.rng.choice(o.paths()).rsplit("/", 1)[0] + f"/moved-{o.new('name')}.md"
    return _do(o, actor, "rename", o.pick(), [path, target],
               service=lambda p: o.world.svc.rename(p, STORE, path, target),
               rest=lambda: o.s.rest(actor, "POST", file_url(path, ":move"),
                                     json_body={"new_path": target}),
               mcp=lambda: o.s.tool(actor, "rename", old_path=path,
                                    new_path=target))  # fmt: skip


@op("delete")
def _delete(o: Ops, actor: str) -> Call:
    path = o.path()
    return _do(o, actor, "delete", o.pick(), [path],
               service=lambda p: o.world.svc.delete(p, STORE, path),
               rest=lambda: o.s.rest(actor, "DELETE", file_url(path)),
               mcp=lambda: o.s.tool(actor, "delete", path=path))  # fmt: skip


def redacted(o: Ops) -> set[int]:
    rows = o._rows(sa.select(versions_table.c.id).where(versions_table.c.redacted_at.is_not(None)))
    return {r.id for r in rows}


@op("redact")
def _redact(o: Ops, actor: str) -> Call:
    """Redact (mostly a dry run: the plan lists every version holding the content)."""
    path, version, dry_run = o.path(), o.rng.choice([1, 2]), o.rng.random() < 0.7
    before, body = redacted(o), {"version": version, "dry_run": dry_run}
    call = _do(o, actor, "redact" + ("--dry-run" if dry_run else ""), o.pick("service", "rest"),
               [path], service=lambda p: o.world.svc.redact(p, STORE, path, version,
                                                            dry_run=dry_run),
               rest=lambda: o.s.rest(actor, "POST", file_url(path, ":redact"),
                                     json_body=body))  # fmt: skip
    call.redacted = before
    return call


@op("propose")
def _propose(o: Ops, actor: str) -> Call:
    """A whole file, or an edit of one line (which conflicts once the file moves on)."""
    path, text, why = o.path(), o.text(), f"because {o.new('rationale')}"
    lines = o.content(path).splitlines()[1:2] if o.rng.random() < 0.5 else []
    if lines:
        edit = {"path": path, "old": lines[0], "new": text.strip()}
        ops: list[Any] = [StrReplace(**edit)]
        rest_op: dict[str, Any] = {"op": "str_replace", **edit}
        mcp_op = {"command": "str_replace", "path": path, "old_str": lines[0],
                  "new_str": text.strip()}  # fmt: skip
    else:
        ops, rest_op = [Write(path, text)], {"op": "write", "path": path, "content": text}
        mcp_op = {"command": "create", "path": path, "file_text": text}
    return _do(o, actor, "propose", o.pick(), [path, text, why, *lines],
               service=lambda p: o.world.svc.propose(p, STORE, ops, rationale=why),
               rest=lambda: o.s.rest(actor, "POST", store_url("/proposals"),
                                     json_body={"operations": [rest_op], "rationale": why}),
               mcp=lambda: o.s.tool(actor, "propose", rationale=why,
                                    operations=[mcp_op]))  # fmt: skip


@op("proposals")
def _proposals(o: Ops, actor: str) -> Call:
    return _do(o, actor, "proposals-list", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.list_proposals(p, STORE, status=None),
               rest=lambda: o.s.rest(actor, "GET", store_url("/proposals"),
                                     params={"status": "all"}))  # fmt: skip


@op("proposal")
def _proposal(o: Ops, actor: str) -> Call:
    ids = o.ids(proposals)
    if not ids:
        return _proposals(o, actor)
    pid = o.rng.choice(ids)
    verb = o.rng.choice(["show", "show", "accept", "reject", "rebase"])
    svc = o.world.svc
    calls: dict[str, Callable[[Any], Any]] = {
        "show": lambda p: svc.get_proposal(p, STORE, pid),
        "accept": lambda p: svc.accept_proposal(p, STORE, pid),
        "reject": lambda p: svc.reject_proposal(p, STORE, pid),
        "rebase": lambda p: svc.rebase_proposal(p, STORE, pid),
    }
    url = store_url(f"/proposals/{pid}" + ("" if verb == "show" else "/" + verb))
    return _do(
        o,
        actor,
        f"proposal-{verb}",
        o.pick("service", "rest"),
        [],
        service=calls[verb],
        rest=lambda: o.s.rest(actor, "GET" if verb == "show" else "POST", url),
    )


@op("dreams")
def _dreams(o: Ops, actor: str) -> Call:
    runs = o.ids(dream_runs)
    run = o.rng.choice(runs)
    verb = o.rng.choice(["list", "show", "report"])
    svc = o.world.svc
    if verb == "list":
        return _do(o, actor, "dreams-list", o.pick("service", "rest"), [],
                   service=lambda p: svc.list_dream_runs(p, STORE),
                   rest=lambda: o.s.rest(actor, "GET", store_url("/dreams")))  # fmt: skip
    params = {"format": "markdown" if verb == "report" else "json"}
    return _do(o, actor, f"dreams-{verb}", o.pick("service", "rest"), [],
               service=lambda p: svc.get_dream_run(p, STORE, run),
               rest=lambda: o.s.rest(actor, "GET", store_url(f"/dreams/{run}"),
                                     params=params))  # fmt: skip


@op("dream")
def _dream(o: Ops, actor: str) -> Call:
    if o.rng.random() < 0.7:  # a run costs a little: most draws look at runs instead
        return _dreams(o, actor)
    body = {"min_sessions": 2, "min_prevalence": 0.0}
    return _do(o, actor, "dream-run", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.dream(p, STORE, DreamConfig.build(**body)),
               rest=lambda: o.s.rest(actor, "POST", store_url("/dreams"),
                                     json_body=body))  # fmt: skip


@op("transcripts")
def _transcripts(o: Ops, actor: str) -> Call:
    tid = o.rng.choice(o.ids(transcripts))
    verb = o.rng.choice(["list", "show", "export"])
    svc = o.world.svc
    calls: dict[str, Callable[[Any], Any]] = {
        "list": lambda p: svc.list_transcripts(p, STORE),
        "show": lambda p: svc.get_transcript(p, STORE, tid),
        "export": lambda p: list(svc.export_transcript(p, STORE, tid)),
    }
    tail = {"list": "", "show": f"/{tid}", "export": f"/{tid}/export"}[verb]
    return _do(
        o,
        actor,
        f"transcripts-{verb}",
        o.pick("service", "rest"),
        [],
        service=calls[verb],
        rest=lambda: o.s.rest(actor, "GET", store_url("/transcripts" + tail)),
    )


@op("transcript-import")
def _transcript_import(o: Ops, actor: str) -> Call:
    """Re-post an existing session (its id sent), maybe with labels of the caller's choice."""
    session = o.rng.choice(o.world.session_ids)
    project = o.rng.choice([None, *o.world.projects])
    header = {"type": "transcript", "format": "generic", "session_id": session}
    event = {"type": "event", "kind": "message", "role": "user", "text": o.text()}
    body = (json.dumps(header) + "\n" + json.dumps(event) + "\n").encode()
    sent = [session, project or "", body.decode()]

    def service(p: Any) -> Any:
        source = TranscriptSource.from_bytes("push.jsonl", body)
        return o.world.svc.import_transcripts(p, STORE, [source], labels=Labels(project=project))

    return _do(o, actor, "transcript-import", o.pick("service", "rest"), sent, service=service,
               rest=lambda: o.s.rest(actor, "POST", store_url("/transcripts"), content=body,
                                     params={"project": project}))  # fmt: skip


@op("stores")
def _stores(o: Ops, actor: str) -> Call:
    if o.rng.random() < 0.5:
        return _do(o, actor, "stores-list", o.pick("service", "rest"), [],
                   service=lambda p: o.world.svc.list_stores(p),
                   rest=lambda: o.s.rest(actor, "GET", "/v1/stores"))  # fmt: skip
    name = o.world.second_store
    return _do(o, actor, "store-info", o.pick("service", "rest"), [name],
               service=lambda p: o.world.svc.store_info(p, name),
               rest=lambda: o.s.rest(actor, "GET", store_url("", name)))  # fmt: skip


@op("admin")
def _admin(o: Ops, actor: str) -> Call:
    svc, rng = o.world.svc, o.rng
    other = rng.choice(sorted(o.world.actors))
    verb = rng.choice(["principals", "principal", "add", "remove", "token", "tokens", "revoke"])
    new_id = f"agent:n{o.new('name')}"
    token_id = rng.choice(o.ids(tokens))
    forms: dict[str, tuple[Callable[[Any], Any], str, str, Any]] = {
        "principals": (lambda p: svc.list_principals(p), "GET", "/v1/principals", None),
        "principal": (lambda p: svc.principal_info(p, other), "GET", f"/v1/principals/{other}",
                      None),
        "add": (lambda p: svc.add_principal(p, new_id, groups=("admins",)), "POST",
                "/v1/principals", {"id": new_id, "groups": ["admins"]}),
        "remove": (lambda p: svc.remove_principal(p, other), "DELETE",
                   f"/v1/principals/{other}", None),
        "token": (lambda p: svc.create_token(p, actor), "POST", "/v1/tokens",
                  {"principal": actor}),
        "tokens": (lambda p: svc.list_tokens(p), "GET", "/v1/tokens", None),
        "revoke": (lambda p: svc.revoke_token(p, token_id), "POST",
                   f"/v1/tokens/{token_id}/revoke", None),
    }  # fmt: skip
    service, method, url, body = forms[verb]
    if verb == "remove" and other == actor:
        verb, (service, method, url, body) = "principals", forms["principals"]
    return _do(
        o,
        actor,
        f"admin-{verb}",
        o.pick("service", "rest"),
        [new_id],
        service=service,
        rest=lambda: o.s.rest(actor, method, url, json_body=body),
    )


@op("changes")
def _changes(o: Ops, actor: str) -> Call:
    return _do(o, actor, "changes", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.changes(p, STORE, after=0, limit=1000),
               rest=lambda: o.s.rest(actor, "GET", store_url("/changes"),
                                     params={"after": 0, "limit": 1000}))  # fmt: skip


@op("policy")
def _policy(o: Ops, actor: str) -> Call:
    svc, path = o.world.svc, o.path()
    action = o.rng.choice(["read", "write", "propose", "admin"])
    subject = o.rng.choice([actor, actor, *sorted(o.world.actors)])
    if o.rng.random() < 0.2:
        return _do(o, actor, "policy-show", o.pick("service", "rest"), [],
                   service=lambda p: svc.policy_text(p, STORE),
                   rest=lambda: o.s.rest(actor, "GET", store_url("/policy")))  # fmt: skip
    return _do(o, actor, "policy-check", o.pick("service", "rest"), [path],
               service=lambda p: svc.check_policy(p, STORE, svc.resolve(subject), action, path),
               rest=lambda: o.s.rest(actor, "GET", store_url("/policy/check"), params={
                   "action": action, "path": path,
                   "principal": None if subject == actor else subject}))  # fmt: skip


@op("me")
def _me(o: Ops, actor: str) -> Call:
    return _do(o, actor, "me", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.principal_info(p, p.id),
               rest=lambda: o.s.rest(actor, "GET", "/v1/me"))  # fmt: skip


@op("context")
def _context(o: Ops, actor: str) -> Call:
    """The caller's context (core files, skills, the index), maybe for one project or task,
    ordered by a query: only readable files may show, by path, heading or count."""
    project = o.rng.choice([None, None, *o.world.projects])
    task = o.rng.choice([None, None, *o.world.tasks])
    query = o.rng.choice([None, "line holds", "note"])
    budget = o.rng.choice([40, 400, 4000])
    expired = o.rng.random() < 0.3
    params = {
        "project": project,
        "task": task,
        "query": query,
        "budget": budget,
        "include_expired": expired or None,
        "format": o.rng.choice(["json", "markdown"]),
    }
    return _do(o, actor, "context", o.pick("service", "rest"), [project or "", task or ""],
               service=lambda p: o.world.svc.context(p, STORE, project=project, task=task,
                                                     query=query, budget=budget,
                                                     include_expired=expired),
               rest=lambda: o.s.rest(actor, "GET", store_url("/context"),
                                     params=params))  # fmt: skip


@op("stale")
def _stale(o: Ops, actor: str) -> Call:
    prefix = o.rng.choice(["/", "/projects", o.path().rsplit("/", 1)[0]])
    days = o.rng.choice([1, 30])
    return _do(o, actor, "stale", o.pick("service", "rest"), [prefix],
               service=lambda p: o.world.svc.stale(p, STORE, days=days, prefix=prefix),
               rest=lambda: o.s.rest(actor, "GET", store_url("/stale"),
                                     params={"prefix": prefix, "days": days}))  # fmt: skip


@op("dream-quality")
def _quality(o: Ops, actor: str) -> Call:
    """A run's quality summary, or the caller's runs over time."""
    run = o.rng.choice([None, *o.ids(dream_runs)])
    tail = "/dreams/quality" if run is None else f"/dreams/{run}/quality"
    return _do(o, actor, "dream-quality", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.dream_quality(p, STORE, run),
               rest=lambda: o.s.rest(actor, "GET", store_url(tail)))  # fmt: skip


@op("commit")
def _commit(o: Ops, actor: str) -> Call:
    """One commit with its readable changes (their text before and after): a commit that
    touched only unreadable paths is the not-found of an id that never existed."""
    many = (
        sa.select(versions_table.c.commit_id)
        .group_by(versions_table.c.commit_id)
        .having(sa.func.count() > 1)
    )
    wide = sorted(str(r.commit_id) for r in o._rows(many))  # commits readable only in part
    draw = o.rng.random()
    if wide and draw < 0.5:
        commit = o.rng.choice(wide)
    else:
        commit = o.rng.choice(o.ids(commits)) if draw < 0.9 else o.new("commit")
    return _do(o, actor, "commit", o.pick("service", "rest"), [],
               service=lambda p: o.world.svc.commit_detail(p, STORE, commit),
               rest=lambda: o.s.rest(actor, "GET", store_url(f"/commits/{commit}")))  # fmt: skip
