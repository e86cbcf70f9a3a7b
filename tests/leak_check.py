"""The leak oracle's judge: what each answer showed, and what each operation changed.

:class:`Oracle` keeps every canary's sources (:class:`leak_model.Knowledge`), found by scanning
the tables as the owner after set-up and after every operation:

- a file version makes each canary in its path and content visible at that path (and the
  commit's reason and session canaries at its path and former path); when the caller that
  made it could not see them before, the operation itself is a finding (it moved text the
  caller may not read into a file) — reported once, not at every later read;
- a proposal makes the canaries its author sent visible to whoever may read all its paths;
- a transcript makes the canaries in its exported form visible to whoever may read it;
- project and task names are visible to administrators (principal listings) and to the
  principals on them; a caller's own canaries (what it sent) are visible to it.

After each operation the oracle checks the answer (every canary whose prefix appears, case
folded, must be allowed to the caller or have been sent by it), every new version (its paths
writable by the caller: read-before-write included), every new proposal (no text the caller may
not read), and the principals and tokens tables (changed by database administrators only).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from leak_model import Actor, Knowledge, Source, is_db_admin
from leak_ops import Call
from leak_surfaces import Answer
from leak_world import STORE, World
from memdir import OWNER
from memdir.storage.schema import blobs, commits, heads, proposals, stores, tokens, transcripts
from memdir.storage.schema import principals as principals_table
from memdir.storage.schema import versions as versions_table


@dataclass(frozen=True)
class Finding:
    op: str
    surface: str
    kind: str  # what went wrong: "answer shows", "wrote", "changed", ...
    what: str  # the kind of canary or object
    example: str

    @property
    def key(self) -> tuple[str, str, str, str]:
        return (self.op, self.surface, self.kind, self.what)

    def __str__(self) -> str:
        return f"{self.op} via {self.surface}: {self.kind} {self.what} — {self.example}"


def _context(text: str, canary: str, width: int = 70) -> str:
    at = text.find(canary[:12])
    at = text.find(canary) if at < 0 else at
    return text[max(0, at - width) : at + width].replace("\n", "\\n")


class Oracle:
    def __init__(self, world: World) -> None:
        self.world = world
        self.k = Knowledge(world.policies, transcripts=dict(world.transcripts))
        self.findings: dict[tuple[str, str, str, str], Finding] = {}
        self.cases = 0
        self._version_seen = 0
        self._proposals_seen: set[str] = set()
        self.shas: dict[str, set[str]] = {}  # a version's sha256 -> the canaries it hashes
        for name in [*world.projects, *world.tasks]:
            self.k.add(name, Source("admin"))
        # A store's name: database readers see every store, others those they read a file in.
        name = world.second_store[1:]  # the canary in the name ("x" + canary)
        self.k.add(name, Source("dbread"))
        second = self._rows(
            sa.select(heads.c.path).join(stores, stores.c.id == heads.c.store_id)
            .where(stores.c.name == world.second_store)
        )  # fmt: skip
        for row in second:
            self.k.add(name, Source("path", store=world.second_store, key=row.path))
        for actor in world.actors.values():
            own = " ".join([*actor.projects, *actor.tasks, *(actor.token_paths or ())])
            self.k.add_all(world.canaries.found_in(own), Source("actor", key=actor.id))
        self._transcripts()
        self.scan(None, None)

    # --- the owner's view --------------------------------------------------------------------

    def _rows(self, query: Any) -> list[Any]:
        return self.world.rows(query)

    def _transcripts(self) -> None:
        for row in self._rows(sa.select(transcripts.c.id, transcripts.c.session_id)):
            text = "\n".join(self.world.svc.export_transcript(OWNER, STORE, row.id)).lower()
            source = Source("transcript", key=row.session_id)
            self.k.add_all(self.world.canaries.found_in(text), source)

    def admin_tables(self) -> Any:
        people = self._rows(sa.select(principals_table).order_by(principals_table.c.id))
        keys = self._rows(sa.select(tokens.c.id, tokens.c.revoked_at).order_by(tokens.c.id))
        return ([tuple(r) for r in people], [tuple(r) for r in keys])

    # --- checks ------------------------------------------------------------------------------

    def note(self, call: Call, kind: str, what: str, example: str) -> None:
        finding = Finding(call.op, call.surface, kind, what, f"[{call.actor}] {example[:300]}")
        self.findings.setdefault(finding.key, finding)

    def allowed(self, actor: Actor, canary: str, sent: str) -> bool:
        return canary[:12] in sent or self.k.allowed(actor, canary)

    def check_answer(self, actor: Actor, call: Call) -> None:
        assert call.answer is not None
        sent = "\n".join(call.sent).lower()
        for text in call.answer.texts:
            folded = text.lower()
            for canary in sorted(self.world.canaries.found_in(folded)):
                if not self.allowed(actor, canary, sent):
                    kind = self.world.canaries.kind[canary]
                    self.note(call, f"answer ({'ok' if call.answer.ok else 'error'}) shows",
                              f"{kind} canary", _context(folded, canary))  # fmt: skip

    def check_hashes(self, actor: Actor, call: Call) -> None:
        """A content's sha256 tells what the content is: shown only to who may read it all."""
        assert call.answer is not None
        sent = "\n".join(call.sent).lower()
        for text in call.answer.texts:
            folded = text.lower()
            for sha, inside in self.shas.items():
                if sha in folded and sha not in sent:
                    hidden = sorted(c for c in inside if not self.allowed(actor, c, sent))
                    if hidden:
                        kind = f"sha256 of a {self.world.canaries.kind[hidden[0]]} canary"
                        self.note(call, "answer shows", kind, _context(folded, sha))

    def check_store_counts(self, actor: Actor, call: Call) -> None:
        """A store's file count counts what the caller may read (REST answers)."""
        assert call.answer is not None
        if call.surface != "rest" or not call.answer.ok or not call.op.startswith("store"):
            return
        body = json.loads(call.answer.texts[0])
        for info in body.get("items", [body]):
            name = info.get("name")
            if name not in self.world.policies:
                continue
            policy = self.world.policies[name]
            rows = self._rows(
                sa.select(heads.c.path).join(stores, stores.c.id == heads.c.store_id)
                .where(stores.c.name == name)
            )  # fmt: skip
            readable = sum(policy.may(actor, "read", r.path) for r in rows)
            if info.get("files") not in (None, readable):
                self.note(
                    call,
                    "answer counts",
                    "unreadable files",
                    f"store {name[:6]}…: files={info.get('files')}, readable={readable}",
                )

    def check_control(self, call: Call) -> None:
        """A path the caller may not read gets the answer a path that never existed gets."""
        if call.control is None or call.target is None or call.answer is None:
            return
        absent, control = call.control

        def shown(answer: Answer, path: str) -> tuple[bool, int | None, str]:
            return (answer.ok, answer.status, answer.texts[0].replace(path, "PATH"))

        hidden, missing = shown(call.answer, call.target), shown(control, absent)
        if hidden != missing:
            self.note(call, "answer differs from a missing path's", "for an unreadable path",
                      f"{hidden[2][:140]!r} vs {missing[2][:140]!r}")  # fmt: skip

    def check_redactions(self, actor: Actor, call: Call) -> None:
        """A redaction removes content only where the caller has ``admin`` (and read)."""
        if call.redacted is None:
            return
        rows = self._rows(sa.select(versions_table.c.id, versions_table.c.path)
                          .where(versions_table.c.redacted_at.is_not(None)))  # fmt: skip
        policy = self.world.policies[STORE]
        for row in rows:
            if row.id not in call.redacted and not policy.may(actor, "admin", row.path):
                self.note(call, "redacted", "a version it may not administer",
                          f"{actor.id} redacted {row.path}")  # fmt: skip

    def check_admin(self, actor: Actor, call: Call, before: Any) -> None:
        if before != self.admin_tables() and not is_db_admin(actor):
            self.note(
                call,
                "changed",
                "principals or tokens",
                f"{actor.id} (token {actor.token_paths}, {actor.token_actions})",
            )

    # --- scanning ----------------------------------------------------------------------------

    def scan(self, actor: Actor | None, call: Call | None) -> None:
        """Register what appeared since the last scan, judging it when an operation made it."""
        sent = "\n".join(call.sent).lower() if call else ""
        rows = self._rows(
            sa.select(versions_table, commits.c.reason, commits.c.session, stores.c.name,
                      blobs.c.content)
            .join(commits, commits.c.id == versions_table.c.commit_id)
            .join(stores, stores.c.id == versions_table.c.store_id)
            .outerjoin(blobs, sa.and_(blobs.c.store_id == versions_table.c.store_id,
                                      blobs.c.sha256 == versions_table.c.sha256))
            .where(versions_table.c.id > self._version_seen)
            .order_by(versions_table.c.id)
        )  # fmt: skip
        additions: list[tuple[set[str], Source]] = []
        for v in rows:
            self._version_seen = max(self._version_seen, v.id)
            text = f"{v.path}\n{v.content or ''}".lower()
            found = self.world.canaries.found_in(text)
            if v.sha256 and v.content:
                self.shas[v.sha256] = self.world.canaries.found_in(v.content.lower())
            meta = self.world.canaries.found_in(f"{v.reason or ''}\n{v.session or ''}".lower())
            for path in {v.path, v.old_path} - {None}:  # the commit shows beside either
                additions.append((meta, Source("path", v.name, path)))
            if actor is not None and call is not None:
                policy = self.world.policies[v.name]
                for path in {v.path, v.old_path} - {None}:
                    if not policy.may(actor, "write", path):
                        self.note(call, f"changed ({v.operation})", "a path it may not write",
                                  f"{actor.id} {v.operation} {path}")  # fmt: skip
                hidden = {c for c in found if not self.allowed(actor, c, sent)}
                for canary in sorted(hidden):
                    self.note(call, "wrote into a file", f"{self.world.canaries.kind[canary]} "
                              "canary it may not read", _context(text, canary))  # fmt: skip
            # registered either way: the leak is the write, reported once, not every later read
            additions.append((found, Source("path", v.name, v.path)))
        for found, source in additions:
            self.k.add_all(found, source)
        self._scan_proposals(actor, call, sent)

    def _scan_proposals(self, actor: Actor | None, call: Call | None, sent: str) -> None:
        for p in self._rows(sa.select(proposals, stores.c.name)
                            .join(stores, stores.c.id == proposals.c.store_id)):  # fmt: skip
            if p.id in self._proposals_seen:
                continue
            self._proposals_seen.add(p.id)
            text = json.dumps([p.operations, p.paths, p.rationale, p.evidence, p.statistics,
                               p.notes], default=str).lower()  # fmt: skip
            found = self.world.canaries.found_in(text)
            if actor is not None and call is not None:
                for canary in sorted(c for c in found if not self.allowed(actor, c, sent)):
                    kind = self.world.canaries.kind[canary]
                    self.note(call, f"queued a proposal ({p.origin}) with", f"{kind} canary "
                              "it may not read", _context(text, canary))  # fmt: skip
            mine = {c for c in found if c[:12] in sent}
            self.k.add_all(mine, Source("proposal", p.name, paths=tuple(p.paths)))

    # --- one operation -----------------------------------------------------------------------

    def judge(self, actor: Actor, call: Call, before: Any, fresh: list[str]) -> None:
        self.cases += 1
        self.check_answer(actor, call)
        self.check_hashes(actor, call)
        self.check_store_counts(actor, call)
        self.check_control(call)
        self.check_redactions(actor, call)
        self.check_admin(actor, call, before)
        self.scan(actor, call)
        sent = "\n".join(call.sent).lower()
        self.k.add_all([*fresh, *self.world.canaries.found_in(sent)], Source("actor", key=actor.id))


def run_case(tmp_path: Any, rng: Any, operations: int) -> Oracle:
    """Build a world, drive ``operations`` random calls as random principals, judge each."""
    from leak_ops import Ops
    from leak_surfaces import Surfaces
    from leak_world import build, reshuffle

    world = build(tmp_path, rng)
    surfaces = Surfaces(world)
    try:
        oracle = Oracle(world)
        ops = Ops(world, surfaces)
        callers = sorted(world.actors)
        for _ in range(operations):
            if rng.random() < 0.05:
                reshuffle(world, surfaces)
                continue
            # narrowed administrators twice as often: their tokens are the sharpest test
            weights = [2.0 if "admins" in world.actors[c].groups else 1.0 for c in callers]
            actor = world.actors[rng.choices(callers, weights)[0]]
            before = oracle.admin_tables()
            call = ops.run(actor.id)
            oracle.judge(actor, call, before, list(ops.fresh))
        return oracle
    finally:
        surfaces.close()
        world.svc.db.close()
        world.engine.dispose()
