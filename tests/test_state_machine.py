"""A stateful property test: the store against a plain in-memory model.

Hypothesis drives random sequences of creates, overwrites (right and wrong ``if_match``),
edits, renames, deletes, reverts, redactions, multi-operation commits (some of whose
preconditions fail, so the whole commit must change nothing) and idempotent retries. The model
is a dict of live paths plus each file's version list; it predicts every outcome — the result
of each operation or the exact error class — and after every step the store must agree with it:
contents, sha256s, version numbers, file ids, histories, the tree, the search index and the
store revision.

Paths come from a tiny alphabet (``/a``, ``/a/b``, ``/b/a/b`` ...) so that collisions,
file/directory conflicts and renames onto taken paths happen often.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

from helpers import indexed, sha
from memdir import (
    OWNER,
    CommitResult,
    Conflict,
    Delete,
    EditConflict,
    IdempotencyMismatch,
    Insert,
    MemdirError,
    MemoryService,
    NoChange,
    NotFound,
    Operation,
    PathConflict,
    PreconditionFailed,
    PreconditionRequired,
    Provenance,
    Rename,
    StrReplace,
    Write,
)

SEGMENTS = ("a", "b")
PATHS = tuple(
    "/" + "/".join(parts)
    for depth in (1, 2, 3)
    for parts in itertools.product(SEGMENTS, repeat=depth)
)
WORDS = ("alpha", "beta", "gamma", " ", "\n")
contents = st.lists(st.sampled_from(WORDS), max_size=5).map("".join)
needles = st.sampled_from(["alpha", "beta", "gamma", "a", "alpha beta", "\n", ""])

SQLITE_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POSTGRES_SETTINGS = settings(SQLITE_SETTINGS, max_examples=20, stateful_step_count=20)


# --- the model -------------------------------------------------------------------------------


class Expect(Exception):
    """The model's prediction that the store refuses the request with ``error``."""

    def __init__(self, error: type[MemdirError]) -> None:
        super().__init__(error.__name__)
        self.error = error


@dataclass
class MVersion:
    number: int
    operation: str
    path: str
    content: str | None  # None: a deletion, or redacted
    seq: int  # global order of version rows (the store's versions.id)
    old_path: str | None = None
    redacted: bool = False


@dataclass
class MFile:
    versions: list[MVersion] = field(default_factory=list)


@dataclass(frozen=True)
class Expected:
    """What one operation should report (``mid`` is the model's file id)."""

    op: str
    path: str
    mid: int
    version: int
    operation: str
    sha256: str | None
    old_path: str | None = None


@dataclass
class Model:
    files: dict[int, MFile] = field(default_factory=dict)
    heads: dict[str, int] = field(default_factory=dict)  # live path -> model file id
    revision: int = 0
    seq: int = 0

    # -- queries --

    def content(self, path: str) -> str:
        content = self.files[self.heads[path]].versions[-1].content
        assert content is not None
        return content

    def current_sha(self, path: str) -> str | None:
        return sha(self.content(path)) if path in self.heads else None

    def live_path(self, mid: int) -> str | None:
        return next((p for p, m in self.heads.items() if m == mid), None)

    def resolve(self, path: str) -> int:
        """The live file at ``path``, else the file whose latest version row names ``path``."""
        if path in self.heads:
            return self.heads[path]
        best: tuple[int, int] | None = None
        for mid, f in self.files.items():
            for v in f.versions:
                if v.path == path and (best is None or v.seq > best[0]):
                    best = (v.seq, mid)
        if best is None:
            raise Expect(NotFound)
        return best[1]

    def version(self, mid: int, number: int) -> MVersion:
        versions = self.files[mid].versions
        if not 1 <= number <= len(versions):
            raise Expect(NotFound)
        return versions[number - 1]

    # -- primitives --

    def _append(
        self,
        mid: int,
        op: str,
        operation: str,
        path: str,
        content: str | None,
        old_path: str | None = None,
    ) -> Expected:
        self.seq += 1
        versions = self.files[mid].versions
        number = len(versions) + 1
        versions.append(MVersion(number, operation, path, content, self.seq, old_path))
        digest = None if content is None else sha(content)
        return Expected(op, path, mid, number, operation, digest, old_path)

    def check_free(self, path: str) -> None:
        if path in self.heads:
            raise Expect(PathConflict)
        parts = path.split("/")
        if any("/".join(parts[:i]) in self.heads for i in range(2, len(parts))):
            raise Expect(PathConflict)
        if any(p.startswith(path + "/") for p in self.heads):
            raise Expect(PathConflict)

    def create(self, path: str, content: str, op: str, mid: int | None = None) -> Expected:
        self.check_free(path)
        if mid is None:
            mid = len(self.files) + 1
            self.files[mid] = MFile()
        self.heads[path] = mid
        return self._append(mid, op, "created", path, content)

    def modify(self, path: str, content: str, op: str) -> Expected:
        if self.content(path) == content:
            raise Expect(NoChange)  # a change must change something
        return self._append(self.heads[path], op, "modified", path, content)

    def existing(self, path: str, if_match: str | None) -> str:
        if path not in self.heads:
            raise Expect(NotFound)
        if if_match is not None and if_match != self.current_sha(path):
            raise Expect(PreconditionFailed)
        return self.content(path)

    # -- operations, as the writer applies them --

    def apply(self, op: Operation) -> Expected:
        if isinstance(op, Write):
            current = self.current_sha(op.path)
            if op.if_absent and current is not None:
                raise Expect(PreconditionFailed)
            if op.if_match is not None and op.if_match != current:
                raise Expect(PreconditionFailed)
            if current is not None and op.if_match is None and not op.if_absent:
                raise Expect(PreconditionRequired)
            if current is None:
                return self.create(op.path, op.content, op.op)
            return self.modify(op.path, op.content, op.op)
        if isinstance(op, StrReplace):
            text = self.existing(op.path, op.if_match)
            hits = [i for i in range(len(text)) if text.startswith(op.old, i)] if op.old else []
            if len(hits) != 1:
                raise Expect(EditConflict)
            start = hits[0]
            new = text[:start] + op.new + text[start + len(op.old) :]
            return self.modify(op.path, new, op.op)
        if isinstance(op, Insert):
            text = self.existing(op.path, op.if_match)
            lines = text.splitlines(keepends=True)  # contents here only break lines on "\n"
            if not 0 <= op.line <= len(lines):
                raise Expect(EditConflict)
            inserted = op.text if op.text.endswith("\n") else op.text + "\n"
            if op.line == len(lines) and lines and not lines[-1].endswith("\n"):
                inserted = "\n" + inserted  # the new text gets a line of its own
            new = "".join(lines[: op.line]) + inserted + "".join(lines[op.line :])
            return self.modify(op.path, new, op.op)
        if isinstance(op, Delete):
            self.existing(op.path, op.if_match)
            mid = self.heads.pop(op.path)
            return self._append(mid, op.op, "deleted", op.path, None)
        assert isinstance(op, Rename)
        text = self.existing(op.path, op.if_match)
        if op.new_path == op.path:
            raise Expect(NoChange)
        if op.new_path in self.heads:
            raise Expect(PathConflict)
        mid = self.heads.pop(op.path)
        self.check_free(op.new_path)
        self.heads[op.new_path] = mid
        return self._append(mid, op.op, "renamed", op.new_path, text, old_path=op.path)

    def revert_file(self, path: str, number: int) -> list[Expected]:
        mid = self.resolve(path)
        target = self.version(mid, number)
        if target.content is None:  # redacted, or a deletion
            raise Expect(NotFound)
        live = self.live_path(mid)
        if live is None:
            where = self.files[mid].versions[-1].path
            self.check_free(where)
            self.heads[where] = mid
            return [self._append(mid, "revert", "created", where, target.content)]
        if self.content(live) == target.content:
            raise Expect(NoChange)  # nothing to commit
        return [self.modify(live, target.content, "revert")]

    def redact(self, path: str, number: int) -> list[tuple[int, int]]:
        mid = self.resolve(path)
        target = self.version(mid, number)
        if target.content is None:
            raise Expect(Conflict)
        secret = target.content
        if any(self.content(p) == secret for p in self.heads):
            raise Expect(Conflict)
        affected = []
        for fid, f in self.files.items():
            for v in f.versions:
                if v.content == secret:
                    v.content, v.redacted = None, True
                    affected.append((v.seq, fid, v.number))
        return [(fid, n) for _, fid, n in sorted(affected)]


def _sha_or_none(content: str | None) -> str | None:
    return None if content is None else sha(content)


# --- the machine -----------------------------------------------------------------------------


class StoreMachine(RuleBasedStateMachine):
    def __init__(self, svc: MemoryService, store: str) -> None:
        super().__init__()
        self.svc = svc
        self.store = store
        svc.create_store(OWNER, store)
        self.model = Model()
        self.file_ids: dict[int, int] = {}  # model id -> store file id
        self.keys = itertools.count()

    def teardown(self) -> None:
        self.svc.delete_store(OWNER, self.store)

    # -- drawing requests --

    def _path(self, data: st.DataObject, *, live: bool = False, model: Model | None = None) -> str:
        known = sorted((model or self.model).heads)
        if live and known:
            return data.draw(st.sampled_from(known))
        return data.draw(st.sampled_from(PATHS))

    def _if_match(self, data: st.DataObject, path: str, model: Model | None = None) -> str | None:
        choice = data.draw(st.sampled_from(["right"] * 5 + ["wrong", "none"]))
        if choice == "none":
            return None
        current = (model or self.model).current_sha(path)
        if choice == "right" and current is not None:
            return current
        return sha(data.draw(contents) + "~stale")

    def _op(self, data: st.DataObject, model: Model | None = None) -> Operation:
        """Some operation, mostly on live files of ``model`` and mostly with a right if_match."""
        model = model or self.model
        kind = data.draw(
            st.sampled_from(
                ["create", "create", "overwrite", "blind", "replace", "insert", "delete", "rename"]
            )
        )
        path = self._path(data, live=kind != "create", model=model)
        if kind == "create":
            return Write(path, data.draw(contents), if_absent=True)
        if kind == "blind":
            return Write(path, data.draw(contents))
        if_match = self._if_match(data, path, model)
        if kind == "overwrite":
            return Write(path, data.draw(contents), if_match=if_match)
        if kind == "replace":
            old = data.draw(needles)
            new = data.draw(st.sampled_from(["", "delta", "alpha", "x\n"]))
            return StrReplace(path, old, new, if_match=if_match)
        if kind == "insert":
            line = data.draw(st.integers(-1, 4))
            text = data.draw(st.sampled_from(["ins", "ins\n", "two\nlines"]))
            return Insert(path, line, text, if_match=if_match)
        if kind == "delete":
            return Delete(path, if_match=if_match)
        return Rename(path, self._path(data, model=model), if_match=if_match)

    def _ops(self, data: st.DataObject, count: int) -> list[Operation]:
        """``count`` operations, each drawn against the state the previous ones lead to.

        Each is redrawn a few times to find one that applies, so that many commits succeed;
        when none does, the failing one is kept and the whole commit must be refused.
        """
        scratch = self.model
        ops: list[Operation] = []
        for _ in range(count):
            for _attempt in range(4):
                op = self._op(data, scratch)
                trial = copy.deepcopy(scratch)
                try:
                    trial.apply(op)
                except Expect:
                    continue
                scratch = trial
                break
            ops.append(op)
        return ops

    # -- running requests against both --

    def _commit(self, ops: list[Operation], key: str | None = None) -> CommitResult | None:
        predicted = copy.deepcopy(self.model)
        error: type[MemdirError] | None = None
        expected: list[Expected] = []
        try:
            expected = [predicted.apply(op) for op in ops]
        except Expect as exc:
            error = exc.error
        provenance = Provenance(idempotency_key=key) if key else None
        return self._expect(
            error, predicted, expected, lambda: self.svc.commit(OWNER, self.store, ops, provenance)
        )

    def _expect(
        self, error: type[MemdirError] | None, predicted: Model, expected: list[Expected], call: Any
    ) -> CommitResult | None:
        if error is not None:
            with pytest.raises(MemdirError) as info:
                call()
            assert type(info.value) is error, f"expected {error.__name__}: {info.value!r}"
            return None
        result: CommitResult = call()
        predicted.revision += 1
        assert result.revision == predicted.revision
        assert not result.replayed
        assert len(result.results) == len(expected)
        for got, want in zip(result.results, expected, strict=True):
            assert (got.op, got.path, got.version, got.operation, got.sha256, got.old_path) == (
                want.op,
                want.path,
                want.version,
                want.operation,
                want.sha256,
                want.old_path,
            ), (got, want)
            known = self.file_ids.setdefault(want.mid, got.file_id)
            assert got.file_id == known
        assert len(set(self.file_ids.values())) == len(self.file_ids)
        self.model = predicted
        return result

    # -- rules --

    @rule(data=st.data())
    def create(self, data: st.DataObject) -> None:
        self._commit([Write(self._path(data), data.draw(contents), if_absent=True)])

    @rule(data=st.data())
    def overwrite(self, data: st.DataObject) -> None:
        path = self._path(data, live=True)
        self._commit([Write(path, data.draw(contents), if_match=self._if_match(data, path))])

    @rule(data=st.data())
    def edit(self, data: st.DataObject) -> None:
        op = self._op(data)
        self._commit([op])

    @rule(data=st.data())
    def rename(self, data: st.DataObject) -> None:
        self._commit([Rename(self._path(data, live=True), self._path(data))])

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        self._commit([Delete(self._path(data, live=True))])

    @rule(data=st.data())
    def multi_operation_commit(self, data: st.DataObject) -> None:
        self._commit(self._ops(data, data.draw(st.integers(2, 4))))

    def _ever_paths(self) -> list[str]:
        return sorted({v.path for f in self.model.files.values() for v in f.versions})

    @rule(data=st.data())
    def revert_file(self, data: st.DataObject) -> None:
        paths = self._ever_paths()
        if not paths:
            return
        path = data.draw(st.sampled_from(paths))
        number = data.draw(st.integers(1, 6))
        predicted = copy.deepcopy(self.model)
        try:
            expected, error = predicted.revert_file(path, number), None
        except Expect as exc:
            expected, error = [], exc.error
        self._expect(
            error,
            predicted,
            expected,
            lambda: self.svc.revert_file(OWNER, self.store, path, number),
        )

    @rule(data=st.data())
    def redact(self, data: st.DataObject) -> None:
        candidates = [
            (mid, v.number)
            for mid, f in self.model.files.items()
            for v in f.versions[:-1]
            if v.content is not None
        ]
        paths = self._ever_paths()
        if not paths:
            return
        if candidates and data.draw(st.booleans()):  # an old version: the usual case
            mid, number = data.draw(st.sampled_from(candidates))
            path = self.model.live_path(mid) or self.model.files[mid].versions[-1].path
        else:
            path, number = data.draw(st.sampled_from(paths)), data.draw(st.integers(1, 5))
        predicted = copy.deepcopy(self.model)
        try:
            affected, error = predicted.redact(path, number), None
        except Expect as exc:
            affected, error = [], exc.error
        if error is not None:
            with pytest.raises(MemdirError) as info:
                self.svc.redact(OWNER, self.store, path, number)
            assert type(info.value) is error, f"expected {error.__name__}: {info.value!r}"
            return
        plan = self.svc.redact(OWNER, self.store, path, number)
        assert plan.done
        assert [(v.file_id, v.version) for v in plan.versions] == [
            (self.file_ids[mid], n) for mid, n in affected
        ]
        self.model = predicted

    @rule(data=st.data())
    def idempotent_retry(self, data: st.DataObject) -> None:
        ops = self._ops(data, data.draw(st.integers(1, 2)))
        key = f"key-{next(self.keys)}"
        first = self._commit(ops, key)
        before = self.model.revision
        if first is None:  # refused: the key was not used, a retry is refused the same way
            self._commit(ops, key)
            return
        again = self.svc.commit(OWNER, self.store, ops, Provenance(idempotency_key=key))
        assert again.replayed
        assert replace(again, replayed=False) == first
        other = [*ops, Write("/a", "something else", if_absent=True)]
        with pytest.raises(IdempotencyMismatch):
            self.svc.commit(OWNER, self.store, other, Provenance(idempotency_key=key))
        assert self.svc.store_info(OWNER, self.store).revision == before

    # -- invariants --

    @invariant()
    def files_match_the_model(self) -> None:
        svc, store, model = self.svc, self.store, self.model
        live = {f.path: f for f in svc.iter_files(OWNER, store)}
        assert sorted(live) == sorted(model.heads)
        for path, mid in model.heads.items():
            content = model.content(path)
            view = svc.read(OWNER, store, path)
            assert view == live[path]
            assert (view.content, view.sha256) == (content, sha(content))
            assert view.version == len(model.files[mid].versions)
            assert view.file_id == self.file_ids[mid]
            got = [
                (v.version, v.operation, v.path, v.sha256, v.redacted, v.old_path)
                for v in svc.file_history(OWNER, store, path)
            ]
            want = [
                (v.number, v.operation, v.path, _sha_or_none(v.content), v.redacted, v.old_path)
                for v in reversed(model.files[mid].versions)
            ]
            assert got == want

    @invariant()
    def tree_index_and_revision_match(self) -> None:
        svc, store, model = self.svc, self.store, self.model
        assert [e.path for e in svc.ls(OWNER, store, depth=None)] == sorted(model.heads)
        top = {p.split("/")[1] for p in model.heads}
        assert {e.path for e in svc.ls(OWNER, store)} == {"/" + t for t in top}
        assert indexed(svc, store) == {(self.file_ids[m], p) for p, m in model.heads.items()}
        assert svc.store_info(OWNER, store).revision == model.revision


def test_the_store_behaves_like_the_model(svc: MemoryService) -> None:
    names = (f"machine-{n}" for n in itertools.count())
    chosen = SQLITE_SETTINGS if svc.db.dialect.name == "sqlite" else POSTGRES_SETTINGS
    run_state_machine_as_test(lambda: StoreMachine(svc, next(names)), settings=chosen)
