"""A property of sync: random local edits in N checkouts plus random remote writes, synced in
random order, lose nothing and overwrite nothing silently.

Every edit appends (or creates a file with) a line holding a unique token; checkouts also
rename files. After the random steps, every open conflict is resolved the way a person would
(the lines of both sides, ours first) and every checkout is synced until nothing moves. Then:

* every token any side ever wrote — a local append that a sync sent, a remote write the store
  acknowledged — is in the store's current content (no update was lost);
* every version of every file in history was written with ``If-Match`` on the version before
  it (the store's CAS), and every commit a sync reported is in history with its session;
* every checkout holds exactly the store's files.

Real SQLite files, the SDK's local transport (the REST app in-process).
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memdir
from memdir.checkout import checkout, sync

FILES = ["/a.md", "/b.md", "/d/c.md"]

step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2), st.sampled_from(FILES)),
    st.tuples(st.just("create"), st.integers(0, 2), st.just("")),
    st.tuples(st.just("rename"), st.integers(0, 2), st.sampled_from(FILES)),
    st.tuples(st.just("remote"), st.just(0), st.sampled_from(FILES)),
    st.tuples(st.just("sync"), st.integers(0, 2), st.just("")),
)


def _resolve(directory: Path) -> None:
    """Merge every ``X.theirs`` into ``X`` (ours, then their lines we lack) and remove it."""
    for theirs in list(directory.rglob("*.theirs")):
        ours = theirs.with_name(theirs.name[: -len(".theirs")])
        mine = ours.read_text().splitlines() if ours.exists() else []
        lines = mine + [line for line in theirs.read_text().splitlines() if line not in mine]
        ours.write_text("".join(line + "\n" for line in lines))
        theirs.unlink()


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 3), st.lists(step, min_size=4, max_size=24))
def test_random_edits_and_syncs_lose_nothing(checkouts: int, steps: list[tuple[str, int, str]]):
    root = Path(tempfile.mkdtemp(prefix="memdir-prop-"))
    counter = itertools.count()
    tokens: set[str] = set()  # every line any side wrote and had acknowledged or kept
    reported: list[tuple[str, str]] = []
    try:
        with memdir.Client(db=f"sqlite:///{root / 'm.db'}", create=True) as client:
            client.commit([memdir.Write(p, f"seed {p}\n", if_absent=True) for p in FILES])
            dirs = [root / f"co{i}" for i in range(checkouts)]
            for d in dirs:
                checkout(client, "/", d)
            for kind, who, path in steps:
                d = dirs[who % checkouts]
                token = f"t{next(counter)}"
                if kind == "append":
                    file = d / path[1:]
                    if file.exists():
                        with open(file, "a") as handle:
                            handle.write(token + "\n")
                        tokens.add(token)
                elif kind == "create":
                    (d / f"new-{token}.md").write_text(token + "\n")
                    tokens.add(token)
                elif kind == "rename":
                    file = d / path[1:]
                    if file.exists():
                        os.replace(file, d / f"moved-{token}.md")
                elif kind == "remote":
                    try:
                        client.update(path, lambda text, t=token: text + t + "\n")
                    except memdir.NotFound:
                        continue
                    tokens.add(token)
                else:
                    report = sync(client, d, session=f"s-{token}")
                    reported += [(c, f"s-{token}") for c in report.commits]
            for _ in range(6):  # settle: resolve as a person would, sync everyone
                moved = False
                for d in dirs:
                    _resolve(d)
                    report = sync(client, d, session="settle")
                    reported += [(c, "settle") for c in report.commits]
                    moved |= bool(report.sent or report.pulled or report.conflicts)
                if not moved:
                    break
            assert not moved, "the checkouts did not converge"

            store = {f.path: f.content or "" for f in client.checkout_files(content=True).files}
            lines = {line for text in store.values() for line in text.splitlines()}
            assert tokens <= lines, f"lost: {sorted(tokens - lines)}"
            for d in dirs:
                here = {
                    "/" + p.relative_to(d).as_posix(): p.read_text()
                    for p in d.rglob("*.md")
                }  # fmt: skip
                assert here == store
            history = {c.id: c for c in client.commits(limit=None)}
            for commit, session in reported:
                assert history[commit].session == session
            for path in store:  # each version follows the one before it (the CAS chain)
                versions = client.history(path)
                numbers = [v.version for v in reversed(versions)]
                assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    finally:
        shutil.rmtree(root, ignore_errors=True)
