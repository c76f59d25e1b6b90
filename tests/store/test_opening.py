"""open_chat (upsert + owner check + read, in one script) and restoring checkpoints."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from tests.support.wire import trace_wire


def test_open_creates_and_reports_it(store: Any) -> None:
    opened = store.open_chat("c1", "alice", {"a": 1}, load=True)
    assert opened.created is True
    assert opened.chat.metadata == {"a": 1}
    assert (opened.branch.name, opened.branch.head_message_id, opened.messages) == (
        "main",
        None,
        [],
    )
    again = store.open_chat("c1", "alice")
    assert again.created is False


def test_open_reads_the_active_branch_and_its_chain(store: Any, chat: str) -> None:
    store.create_branch("c1", "m1", activate=True)
    opened = store.open_chat("c1", "alice", load=True)
    assert opened.branch.name == "main-v2"
    assert opened.branch.is_active
    assert [m["id"] for m in opened.messages] == ["m1"]
    assert store.open_chat("c1", "alice").messages == []


def test_open_of_another_users_chat_reads_and_writes_nothing(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [{"role": "user", "content": "secret"}], expected_head=None)
    before = snap()
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.open_chat("c1", "mallory", {"x": 1}, load=True)
    assert snap() == before


def test_opening_an_existing_chat_is_one_round_trip(
    sync_store: ctxstore.Store, backend: str
) -> None:
    sync_store.open_chat("c1", "alice", load=True)
    with trace_wire() as wire:
        sync_store.open_chat("c1", "alice", load=True)
    if not backend.startswith("redis+cluster"):
        assert (wire.round_trips, wire.shapes) == (1, ["LUA"])


def test_branch_from_checkpoint(store: Any, chat: str) -> None:
    store.upsert_checkpoint("c1", "start", "m1")
    info = store.branch_from_checkpoint("c1", "start")
    assert (info.name, info.head_message_id, info.is_active, info.message_count) == (
        "main-v2",
        "m1",
        True,
        1,
    )
    named = store.branch_from_checkpoint("c1", "start", name="retry", activate=False)
    assert (named.name, named.is_active) == ("retry", False)
    with pytest.raises(ctxstore.errors.CheckpointNotFoundError, match="nope"):
        store.branch_from_checkpoint("c1", "nope")


def test_a_fresh_connection_sends_no_handshake_of_its_own(
    server_backend: str, namespace: str
) -> None:
    """A new store's first call is its own script and nothing before it: no HELLO (RESP2), no
    CLIENT SETINFO, no maintenance-notification opt-in; each would be a round trip on every
    cold start of a serverless function."""
    warm = ctxstore.connect(server_backend, namespace=namespace).admin()
    warm.upsert_chat("c1", "alice")
    warm.load_branch("c1")  # the scripts are known to the server now
    warm.close()
    fresh = ctxstore.connect(server_backend, namespace=namespace).admin()
    with trace_wire() as wire:
        fresh.load_branch("c1")
    handshake = [name for name in wire.commands if name in ("HELLO", "CLIENT", "AUTH")]
    assert handshake == []
    if not server_backend.startswith("redis+cluster"):
        assert wire.shapes == ["LUA"]
    fresh.close()
