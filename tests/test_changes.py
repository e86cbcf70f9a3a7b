"""The change feed: every commit once, in revision order, filtered by the reader's rights."""

from __future__ import annotations

from memdir import OWNER, MemoryService

STORE = "default"


def test_feed_follows_every_commit_in_order(svc: MemoryService) -> None:
    for i in range(5):
        svc.write(OWNER, STORE, f"/org/{i}.md", f"v{i}", if_absent=True)
    svc.rename(OWNER, STORE, "/org/0.md", "/org/zero.md")
    seen: list[int] = []
    after = 0
    while True:
        batch = svc.changes(OWNER, STORE, after=after, limit=2)
        if not batch.events:
            break
        seen.extend(e.revision for e in batch.events)
        after = batch.next_after
    assert seen == [1, 2, 3, 4, 5, 6]
    last = svc.changes(OWNER, STORE, after=5).events[0]
    assert last.changes[0].operation == "renamed" and last.changes[0].old_path == "/org/0.md"
    assert svc.changes(OWNER, STORE, after=6).revision == 6


def test_feed_hides_what_the_reader_may_not_read(svc: MemoryService) -> None:
    svc.add_principal(OWNER, "agent:a")
    svc.add_principal(OWNER, "agent:b")
    a, b = svc.resolve("agent:a"), svc.resolve("agent:b")
    svc.write(a, STORE, "/agents/a/private.md", "mine", if_absent=True)
    svc.write(OWNER, STORE, "/org/public.md", "all", if_absent=True)
    svc.rename(OWNER, STORE, "/agents/a/private.md", "/org/moved.md")
    batch = svc.changes(b, STORE)
    assert [e.revision for e in batch.events] == [2, 3]
    assert batch.next_after == 3
    moved = batch.events[1].changes[0]
    assert moved.path == "/org/moved.md" and moved.old_path is None
    assert [e.revision for e in svc.changes(a, STORE).events] == [1, 2, 3]
