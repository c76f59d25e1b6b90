"""Every chat-scoped store call takes the caller's ``user_id`` and answers another user's chat
exactly as a chat that does not exist, checked inside the same script: reads return nothing,
writes write nothing, and the error (type, message, details) or the result is the one a missing
chat gives, so a caller cannot tell which chat ids exist."""

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
    "expire_chat": lambda s, u: s.expire_chat("c1", 60, user_id=u),
    "message_versions": lambda s, u: s.message_versions("c1", "m2", user_id=u),
    "export_chat": lambda s, u: list(s.export_chat("c1", user_id=u)),
    "read_stream": lambda s, u: list(s.read_stream("c1", "1-0.abcdef", user_id=u)),
    "active_stream": lambda s, u: s.active_stream("c1", user_id=u),
    "list_chats": lambda s, u: s.list_chats(user_id=u),
    "list_chats_page": lambda s, u: list(s.list_chats_page(user_id=u).chats),
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


def outcome(call: Call, store: Any, user: str) -> tuple[Any, ...]:
    """What a call gives: its result, or its error's type, message, details and arguments."""
    try:
        return ("returned", call(store, user))
    except ctxstore.CtxStoreError as error:
        return (type(error), str(error), error.details, error.args)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_another_users_chat_is_refused_and_untouched(
    owned: Any, snap: Any, backend: str, name: str
) -> None:
    before = chat_keys(snap(), backend)
    refused = outcome(CALLS[name], owned, "mallory")
    assert refused[0] is ctxstore.ChatNotFoundError or refused in (
        ("returned", False),
        ("returned", []),
    )
    assert chat_keys(snap(), backend) == before


@pytest.mark.parametrize("name", sorted(CALLS))
def test_another_users_chat_and_a_missing_one_give_the_same_answer(owned: Any, name: str) -> None:
    refused = outcome(CALLS[name], owned, "mallory")
    owned.delete_chat("c1", user_id="alice")
    missing = outcome(CALLS[name], owned, "mallory")
    assert refused == missing
    assert "alice" not in repr(refused)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_the_owner_passes(owned: Any, name: str) -> None:
    if name == "read_stream":  # past the chat's check, to the stream's: the chat has none
        with pytest.raises(ctxstore.errors.StreamNotFoundError):
            CALLS[name](owned, "alice")
        return
    CALLS[name](owned, "alice")
