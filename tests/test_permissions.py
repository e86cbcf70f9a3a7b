"""The permission matrix: every default scope x principal kind x action, through the service,
against expectations written out by hand (not derived from the policy under test)."""

from __future__ import annotations

import pytest

from memdir import (
    OWNER,
    Forbidden,
    MemoryService,
    NotFound,
    Principal,
    Proposed,
    Rename,
    StrReplace,
    Write,
)

STORE = "default"

FILES = {
    "org": "/org/rules.md",
    "project": "/projects/acme/conventions.md",
    "user": "/users/ana/prefs.md",
    "agent": "/agents/bot/notes.md",
    "task": "/tasks/t1/state.md",
    "config": "/.memdir/notes.md",
}

PRINCIPALS = {
    "agent:bot": dict(projects=("acme",), tasks=("t1",), acts_for="ana"),
    "agent:other": {},
    "user:ana": dict(projects=("acme",)),
    "user:bob": {},
    "service:indexer": {},
    "user:root": dict(groups=("admins",)),
}

# Who may read each scope, and who may write it; everyone else who can see /org may propose.
READERS = {
    "org": set(PRINCIPALS),
    "project": {"agent:bot", "user:ana", "user:root"},
    "user": {"agent:bot", "user:ana", "user:root"},
    "agent": {"agent:bot", "user:root"},
    "task": {"agent:bot", "user:root"},
    "config": {"user:root"},
}
WRITERS = {
    "org": {"user:root"},
    "project": {"agent:bot", "user:ana", "user:root"},
    "user": {"agent:bot", "user:ana", "user:root"},
    "agent": {"agent:bot", "user:root"},
    "task": {"agent:bot", "user:root"},
    "config": {"user:root"},
}
RULES = {  # the rule that grants the write, as the default policy names it
    "org": "admins", "project": "projects", "user": "users", "agent": "agents", "task": "tasks",
    "config": "admins",
}  # fmt: skip


@pytest.fixture
def world(svc: MemoryService) -> dict[str, Principal]:
    for pid, attrs in PRINCIPALS.items():
        svc.add_principal(OWNER, pid, **attrs)  # type: ignore[arg-type]
    for path in FILES.values():
        svc.write(OWNER, STORE, path, f"secret word zebra in {path}\nline two\n", if_absent=True)
    return {pid: svc.resolve(pid) for pid in PRINCIPALS}


@pytest.mark.parametrize("scope", list(FILES))
def test_matrix(svc: MemoryService, world: dict[str, Principal], scope: str) -> None:
    path = FILES[scope]
    for pid, who in world.items():
        # read
        if pid in READERS[scope]:
            assert svc.read(who, STORE, path).path == path
        else:
            with pytest.raises(NotFound) as missing:
                svc.read(who, STORE, path)
            assert missing.value.message == (
                f"{path} does not exist; list its directory or search for it"
            )
        # write (an atomic edit)
        before = svc.read(OWNER, STORE, path).sha256
        if pid in WRITERS[scope]:
            svc.str_replace(who, STORE, path, "line two", f"line two by {pid}")
            decision = svc.check_policy(OWNER, STORE, who, "write", path)
            rule = "admins" if pid == "user:root" else RULES[scope]
            assert decision.allowed and decision.rule == rule, decision
            assert decision.reason
        elif scope == "org":
            with pytest.raises(Proposed) as proposed:
                svc.str_replace(who, STORE, path, "line two", "line 2")
            assert proposed.value.details["proposal"].startswith("p_")
            assert svc.read(OWNER, STORE, path).sha256 == before
        else:
            with pytest.raises(NotFound):
                svc.str_replace(who, STORE, path, "line two", "line 2")
            assert svc.read(OWNER, STORE, path).sha256 == before
        # the decision explains itself
        decision = svc.check_policy(OWNER, STORE, who, "read", path)
        assert decision.allowed == (pid in READERS[scope])
        assert decision.reason


def test_read_but_not_write_is_forbidden(svc: MemoryService, world: dict[str, Principal]) -> None:
    policy = (
        "version: 1\nrules:\n"
        "  - {id: all-read, who: '*', paths: ['/**'], actions: [read], reason: read-only}\n"
    )
    svc.set_policy(OWNER, STORE, policy)
    with pytest.raises(Forbidden) as refused:
        svc.str_replace(world["agent:bot"], STORE, FILES["org"], "line two", "x")
    assert "read-only" not in refused.value.message or refused.value.details["action"] == "write"
    assert refused.value.details["path"] == FILES["org"]


def test_malformed_policy_is_refused_whole(svc: MemoryService) -> None:
    from memdir import InvalidContent

    before = svc.policy_text(OWNER, STORE)
    for bad in ["version: 1\nrules: [{who: '*', paths: ['/x/**'], actions: [fly]}]\n",
                "version: 2\nrules: []\n", "rules: [\n", "version: 1\nrules:\n  - who: nobody\n"
                "    paths: ['/**']\n    actions: [read]\n"]:  # fmt: skip
        with pytest.raises(InvalidContent):
            svc.set_policy(OWNER, STORE, bad)
    assert svc.policy_text(OWNER, STORE) == before
    ok = "version: 1\nrules: []\n"
    svc.set_policy(OWNER, STORE, ok)
    assert svc.policy_text(OWNER, STORE) == (ok, False)
    assert [v.version for v in svc.file_history(OWNER, STORE, "/.memdir/policy.yaml")] == [1]


def test_renames_cannot_move_content_across_scopes(
    svc: MemoryService, world: dict[str, Principal]
) -> None:
    bot = world["agent:bot"]
    with pytest.raises(NotFound):  # out of its project into one it cannot see
        svc.rename(bot, STORE, FILES["project"], "/projects/other/stolen.md")
    with pytest.raises(Proposed):  # into /org it may only propose
        svc.rename(bot, STORE, FILES["agent"], "/org/leak.md")
    with pytest.raises(NotFound):  # someone else's scratchpad into its own
        svc.rename(world["agent:other"], STORE, FILES["agent"], "/agents/other/x.md")
    assert svc.read(OWNER, STORE, FILES["project"]).path == FILES["project"]
    assert svc.read(OWNER, STORE, FILES["agent"]).path == FILES["agent"]
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/org/leak.md")


def test_multi_operation_commit_cannot_reach_outside(
    svc: MemoryService, world: dict[str, Principal]
) -> None:
    bot = world["agent:bot"]
    revision = svc.store_info(OWNER, STORE).revision
    with pytest.raises(NotFound):
        svc.commit(bot, STORE, [
            Write("/agents/bot/new.md", "mine", if_absent=True),
            StrReplace(FILES["project"], "line two", "ok"),
            Rename("/agents/bot/notes.md", "/agents/other/notes.md"),
        ])  # fmt: skip
    assert svc.store_info(OWNER, STORE).revision == revision
    with pytest.raises(NotFound):
        svc.read(OWNER, STORE, "/agents/bot/new.md")


def test_narrowed_token_cannot_act_outside(svc: MemoryService, world: dict[str, Principal]) -> None:
    info = svc.create_token(
        OWNER, "agent:bot", paths=("/agents/bot/**",), actions=("read", "write")
    )
    assert info.token is not None
    bot = svc.authenticate(info.token)
    svc.write(bot, STORE, "/agents/bot/scratch.md", "ok", if_absent=True)
    with pytest.raises(NotFound):
        svc.read(bot, STORE, FILES["org"])  # the policy allows it; the token does not
    with pytest.raises(NotFound):
        svc.read(bot, STORE, FILES["project"])
    assert [h.path for h in svc.search(bot, STORE, "zebra")] == [FILES["agent"]]
    read_only = svc.authenticate(
        svc.create_token(OWNER, "agent:bot", actions=("read",)).token or ""
    )
    with pytest.raises(Forbidden):
        svc.str_replace(read_only, STORE, FILES["agent"], "line two", "x")


def test_search_grep_ls_history_show_only_readable(
    svc: MemoryService, world: dict[str, Principal]
) -> None:
    other = world["agent:other"]
    svc.write(other, STORE, "/agents/other/mine.md", "zebra zebra zebra", if_absent=True)
    hits = svc.search(other, STORE, "zebra", limit=50)
    assert sorted(h.path for h in hits) == ["/agents/other/mine.md", FILES["org"]]
    assert all("/agents/bot" not in h.snippet for h in hits)
    assert sorted(m.path for m in svc.grep(other, STORE, "zebra")) == [
        "/agents/other/mine.md", FILES["org"],
    ]  # fmt: skip
    entries = svc.ls(other, STORE, "/", depth=1)
    assert [(e.path, e.files) for e in entries] == [("/agents", 1), ("/org", 1)]
    with pytest.raises(NotFound):
        svc.ls(other, STORE, "/projects")
    assert svc.glob(other, STORE, "/**") == ["/agents/other/mine.md", FILES["org"]]
    touched = {v.path for c in svc.history(other, STORE, limit=100) for v in c.changes}
    assert touched == {"/agents/other/mine.md", FILES["org"]}
    with pytest.raises(NotFound):
        svc.file_history(other, STORE, FILES["agent"])
    with pytest.raises(NotFound):
        svc.diff(other, STORE, FILES["agent"], 1)


def test_rename_origin_is_hidden_from_readers_of_the_target(
    svc: MemoryService, world: dict[str, Principal]
) -> None:
    svc.rename(OWNER, STORE, FILES["agent"], "/org/notes-from-bot.md")
    versions = svc.file_history(world["agent:other"], STORE, "/org/notes-from-bot.md")
    assert [v.version for v in versions] == [2]  # version 1 lived where it may not look
    assert versions[0].old_path is None


def test_unknown_principal_and_bad_tokens(svc: MemoryService) -> None:
    from memdir import Unauthenticated

    with pytest.raises(NotFound, match="principal add"):
        svc.resolve("agent:ghost")
    svc.add_principal(OWNER, "agent:short")
    token = svc.create_token(OWNER, "agent:short").token or ""
    assert svc.authenticate(token).id == "agent:short"
    svc.revoke_token(OWNER, svc.list_tokens(OWNER, "agent:short")[0].id)
    for bad in (token, "mdr_nope", "", "Bearer x"):
        with pytest.raises(Unauthenticated):
            svc.authenticate(bad)
    import datetime as dt

    expired = svc.create_token(OWNER, "agent:short", expires_in=dt.timedelta(microseconds=1))
    with pytest.raises(Unauthenticated):
        svc.authenticate(expired.token or "")
    with pytest.raises(Forbidden):
        svc.add_principal(svc.resolve("agent:short"), "agent:sneaky")


def test_a_directory_matches_its_own_glob(svc: MemoryService, world: dict[str, Principal]) -> None:
    bot = world["agent:bot"]
    assert svc.check_policy(OWNER, STORE, bot, "read", "/projects/acme").allowed
    assert not svc.check_policy(OWNER, STORE, bot, "read", "/projects/other").allowed
