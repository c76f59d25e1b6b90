"""Branches: auto-naming, explicit names, reading, listing, the one active branch."""

from __future__ import annotations

import re
from typing import Any

import pytest

import ctxstore
from ctxstore.errors import HeadConflictError
from tests.store.conftest import seed_chat


def test_auto_names_follow_the_base(store: Any, chat: str) -> None:
    assert store.create_branch(chat, "m1").name == "main-v2"
    assert store.create_branch(chat, "m1").name == "main-v3"
    assert store.create_branch(chat, "m1", base="main-v2").name == "main-v2-v2"
    # main, main-v2, main-v3 and main-v2-v2 all start with "main-v" or are "main": k = 4
    assert store.create_branch(chat, "m2", base="main").name == "main-v5"


def test_nested_forks_keep_their_names_within_256_bytes(store: Any, chat: str) -> None:
    """Forks of forks nest (main-v2-v2-...); a name that would pass 256 bytes, the most any
    name the API takes may have, drops the base's own trailing -v<n> parts until it fits, so
    every auto-named branch can be named again (read, activated, forked)."""
    base = "main"
    names = []
    for _ in range(150):
        base = store.create_branch(chat, "m1", base=base, activate=False).name
        names.append(base)
    assert all(len(name.encode()) <= 256 for name in names)
    assert len(set(names)) == 150
    assert names[1] == "main-v2-v2"  # lineage kept while it fits
    assert store.get_branch(chat, names[-1]).head_message_id == "m1"
    assert store.create_branch(chat, "m2", base=names[-1]).name.startswith("main-v2-v2")


def test_a_base_too_long_to_number_is_refused_before_any_write(store: Any, chat: str) -> None:
    long_name = "b" * 254
    store.create_branch(chat, "m1", name=long_name, activate=False)
    before = store.list_branches(chat)
    with pytest.raises(ctxstore.ValidationError, match="more than 256 bytes"):
        store.create_branch(chat, "m1", base=long_name)
    assert store.list_branches(chat) == before
    assert store.create_branch(chat, "m1", base=long_name, name="short").name == "short"


def test_a_taken_auto_name_moves_the_counter_on(store: Any, chat: str) -> None:
    store.create_branch(chat, "m1", name="other-v2")
    store.create_branch(chat, "m1", base="other", name="other")
    assert store.create_branch(chat, "m1", base="other").name == "other-v3"


def test_new_branch_starts_at_the_message(store: Any, chat: str) -> None:
    info = store.create_branch(chat, "m1", activate=False)
    assert info.head_message_id == "m1"
    assert info.message_count == 1
    assert info.is_active is False
    assert info.created_at > 0
    assert store.get_chat(chat).active_branch == "main"


def test_activate_makes_exactly_one_branch_active(store: Any, chat: str) -> None:
    store.create_branch(chat, "m1", activate=True)
    store.create_branch(chat, "m2", activate=False)
    active = [b.name for b in store.list_branches(chat) if b.is_active]
    assert active == ["main-v2"]
    store.set_active_branch(chat, "main-v3")
    active = [b.name for b in store.list_branches(chat) if b.is_active]
    assert active == ["main-v3"]
    assert store.get_branch(chat).name == "main-v3"


def test_empty_branch_without_a_start_message(store: Any, chat: str) -> None:
    info = store.create_branch(chat, None, name="fresh")
    assert (info.head_message_id, info.message_count) == (None, 0)
    result = store.append(chat, "fresh", [{"role": "user", "content": "new"}], expected_head=None)
    assert store.get_message(chat, result.head_message_id)["parent_id"] is None


def test_explicit_name_that_exists_is_a_conflict(store: Any, chat: str, snap: Any) -> None:
    before = snap()
    with pytest.raises(ctxstore.errors.BranchExistsError, match="main"):
        store.create_branch(chat, "m1", name="main")
    assert snap() == before


def test_branch_at_unknown_message_is_not_found(store: Any, chat: str, snap: Any) -> None:
    before = snap()
    with pytest.raises(ctxstore.errors.MessageNotFoundError, match="ghost"):
        store.create_branch(chat, "ghost")
    assert snap() == before
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.create_branch("ghost", "m1")


def test_list_branches_in_creation_order_with_chain_lengths(store: Any, chat: str) -> None:
    store.create_branch(chat, "m1", activate=False)
    store.create_branch(chat, None, name="empty", activate=False)
    store.create_branch(chat, "m2", activate=False)
    listed = store.list_branches(chat)
    assert [(b.name, b.message_count) for b in listed] == [
        ("main", 2),
        ("main-v2", 1),
        ("empty", 0),
        ("main-v3", 2),
    ]
    assert listed[0].created_at <= listed[1].created_at <= listed[3].created_at


def test_get_and_activate_unknown_branch(store: Any, chat: str) -> None:
    with pytest.raises(ctxstore.errors.BranchNotFoundError):
        store.get_branch(chat, "ghost")
    with pytest.raises(ctxstore.errors.BranchNotFoundError):
        store.set_active_branch(chat, "ghost")
    assert store.get_chat(chat).active_branch == "main"


def test_auto_name_shape(store: Any, chat: str) -> None:
    names = {store.create_branch(chat, "m1").name for _ in range(5)}
    assert len(names) == 5
    assert all(re.fullmatch(r"main-v\d+", name) for name in names)


@pytest.mark.parametrize(
    ("expected", "current"),
    [(("main", "m1"), "m2"), (("side", "m2"), "m2"), (("main", None), "m2")],
)
def test_a_branch_guarded_by_the_active_head_is_refused_once_it_moved(
    sync_store: ctxstore.Store, snap: Any, expected: tuple[str, str | None], current: str
) -> None:
    """create_branch with ``expected`` (the adapters' pop): only while that branch is active
    with that head; otherwise a HeadConflictError naming the active head, and nothing written."""
    from ctxstore._core.ops.branches import create_branch

    seed_chat(sync_store)
    before = snap()
    with pytest.raises(HeadConflictError) as raised:
        sync_store.run(create_branch(sync_store.state, "c1", "m1", expected=expected))
    assert raised.value.current_head == current
    assert snap() == before
    made = sync_store.run(create_branch(sync_store.state, "c1", "m1", expected=("main", "m2")))
    assert (made.name, made.head_message_id) == ("main-v2", "m1")
    assert sync_store.get_branch("c1").name == "main-v2"
