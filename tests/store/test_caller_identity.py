"""Every chat-scoped store call takes the caller's ``user_id`` and refuses another user's chat
with PermissionDeniedError, checked inside the same script: reads return nothing, writes write
nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import ctxstore

Call = Callable[[Any, str], Any]

CALLS: dict[str, Call] = {
    "get_chat": lambda s, u: s.get_chat("c1", user_id=u),
    "update_chat": lambda s, u: s.update_chat("c1", title="mine", user_id=u),
    "add_usage": lambda s, u: s.add_usage("c1", {"input_tokens": 1}, user_id=u),
    "append": lambda s, u: s.append(
        "c1", "main", [{"role": "user", "content": "x"}], expected_head="m2", user_id=u
    ),
    "get_message": lambda s, u: s.get_message("c1", "m1", user_id=u),
    "get_chain": lambda s, u: s.get_chain("c1", "m2", user_id=u),
    "load_branch": lambda s, u: s.load_branch("c1", user_id=u),
    "branch_size": lambda s, u: s.branch_size("c1", user_id=u),
    "write_summary": lambda s, u: s.write_summary("c1", "m1", "summary", user_id=u),
    "create_branch": lambda s, u: s.create_branch("c1", "m1", user_id=u),
    "branch_from_checkpoint": lambda s, u: s.branch_from_checkpoint("c1", "cp", user_id=u),
    "get_branch": lambda s, u: s.get_branch("c1", user_id=u),
    "list_branches": lambda s, u: s.list_branches("c1", user_id=u),
    "set_active_branch": lambda s, u: s.set_active_branch("c1", "main", user_id=u),
    "upsert_checkpoint": lambda s, u: s.upsert_checkpoint("c1", "cp2", "m1", user_id=u),
    "get_checkpoint": lambda s, u: s.get_checkpoint("c1", "cp", user_id=u),
    "list_checkpoints": lambda s, u: s.list_checkpoints("c1", user_id=u),
    "delete_checkpoint": lambda s, u: s.delete_checkpoint("c1", "cp", user_id=u),
    "get_graph": lambda s, u: s.get_graph("c1", user_id=u),
    "delete_chat": lambda s, u: s.delete_chat("c1", user_id=u),
}


@pytest.fixture
def owned(store: Any, chat: str) -> Any:
    """The ``chat`` fixture's chat (alice's c1: m1 <- m2) with a checkpoint at m1."""
    store.upsert_checkpoint(chat, "cp", "m1")
    return store


def chat_keys(snapshot: dict[bytes, Any], backend: str) -> dict[bytes, Any]:
    """The snapshot; on a Cluster without the listing indexes, which live in other slots and
    take their update in the same pipeline as the write (a refused write may move the chat up
    in a listing there; listings repair the order, and the chat's own keys stay untouched)."""
    if "cluster" not in backend:
        return snapshot
    return {key: value for key, value in snapshot.items() if b":idx:" not in key}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_another_users_chat_is_refused_and_untouched(
    owned: Any, snap: Any, backend: str, name: str
) -> None:
    before = chat_keys(snap(), backend)
    with pytest.raises(ctxstore.PermissionDeniedError):
        CALLS[name](owned, "mallory")
    assert chat_keys(snap(), backend) == before


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_owner_passes(owned: Any, name: str) -> None:
    CALLS[name](owned, "alice")
