"""Retention that cleans up: the sweep of index and owner-record entries whose chats are gone,
and the purge of a whole namespace. On the embedded store, a redis-server and a Cluster, sync
and async."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore.errors import ConfigurationError, ScopeError, ValidationError
from tests.store.test_erasure import plain_dump
from tests.support.keyspace import raw_client
from tests.support.wire import trace_wire


@pytest.fixture
def url_store(store: Any, backend: str) -> Any:
    store.url = backend
    return store


def expire_by_hand(store: Any, chat_id: str) -> None:
    """What a chat's retention does when it runs out: its keys go, its entries stay."""
    raw = raw_client(store.url)
    keys = store.state.keyspace.chat(chat_id)
    for name in ("chat", "log", "branch", "runs", "tok", "reqs", "alias", "checkpoint", "summary"):
        raw.delete(keys.key(name))
    raw.close()


def entries(store: Any, user: str) -> tuple[set[str], set[str], set[str]]:
    raw = raw_client(store.url)
    keyspace = store.state.keyspace
    found = (
        {m.decode() for m in raw.zrange(keyspace.all_chats_index, 0, -1)},
        {m.decode() for m in raw.zrange(keyspace.user_index(user), 0, -1)},
        {m.decode() for m in raw.hkeys(keyspace.owner_record(user))},
    )
    raw.close()
    return found


def test_the_sweep_removes_the_entries_of_chats_that_are_gone(url_store: Any) -> None:
    store = url_store
    for chat_id in ("a1", "a2", "a3"):
        store.upsert_chat(chat_id, "alice")
    store.upsert_chat("b1", "bob")
    expire_by_hand(store, "a1")
    expire_by_hand(store, "b1")
    assert entries(store, "alice") == (
        {"a1", "a2", "a3", "b1"},
        {"a1", "a2", "a3"},
        {"a1", "a2", "a3"},
    )
    young = store.sweep()  # the owner-record entries are younger than the grace period
    assert young.index_entries_removed == 4  # a1, b1 in the namespace's; a1, b1 in their owners'
    assert young.record_entries_removed == 0
    report = store.sweep(grace_ms=0)
    assert report.record_entries_removed == 2  # a1 in alice's record, b1 in bob's
    assert report.skipped == ""
    assert entries(store, "alice") == ({"a2", "a3"}, {"a2", "a3"}, {"a2", "a3"})
    assert entries(store, "bob") == ({"a2", "a3"}, set(), set())
    again = store.sweep(grace_ms=0)
    assert again.index_entries_removed == again.record_entries_removed == 0
    assert {chat.id for chat in store.for_user("alice").list_chats()} == {"a2", "a3"}


def test_the_sweep_reads_no_payload_and_each_call_stays_small(url_store: Any) -> None:
    store = url_store
    store.upsert_chat("c1", "alice")
    store.append("c1", None, [{"role": "user", "content": "x" * 1000}], expected_head=None)
    with trace_wire() as wire:
        store.sweep(grace_ms=0)
    assert not {"LRANGE", "LINDEX", "GET", "HGETALL", "XRANGE"} & set(wire.commands)
    assert set(wire.commands) <= {
        "ZSCAN", "HSCAN", "EXISTS", "SCAN", "EVALSHA", "EVAL", "FCALL", "FCALL_RO", "CLUSTER SLOTS"
    }  # fmt: skip


def test_a_chat_written_again_while_the_sweep_runs_keeps_its_entry(url_store: Any) -> None:
    """The removal is guarded by what the sweep read: an entry that moved is a newer write."""
    store = url_store
    store.upsert_chat("c1", "alice")
    expire_by_hand(store, "c1")
    store.upsert_chat("c1", "alice")  # created again before the sweep's removal
    store.sweep(grace_ms=0)
    assert entries(store, "alice")[0] == {"c1"}
    assert [chat.id for chat in store.for_user("alice").list_chats()] == ["c1"]


def test_the_sweep_is_an_operators_call_with_checked_options(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace)
    with pytest.raises(ScopeError):
        store.sweep()
    with pytest.raises(ValidationError):
        store.admin().sweep(grace_ms=-1)
    with pytest.raises(ValidationError):
        store.admin().sweep(pause=float("nan"))
    store.close()


def test_purge_namespace_removes_every_key_of_the_namespace_and_nothing_else(
    url_store: Any, namespace: str, backend: str
) -> None:
    store = url_store
    for index in range(30):
        store.upsert_chat(f"c{index}", f"u{index % 3}")
        store.append(f"c{index}", None, [{"role": "user", "content": "hi"}], expected_head=None)
    other = ctxstore.connect(backend, namespace=f"{namespace}x").admin()
    other.upsert_chat("kept", "alice")
    assert len(plain_dump(backend, f"ctx:{namespace}")) > 30
    with pytest.raises(ConfigurationError):
        store.purge_namespace(confirm="wrong")
    with pytest.raises(ConfigurationError):
        store.purge_namespace(confirm=f"{namespace}x")
    assert len(plain_dump(backend, f"ctx:{namespace}")) > 30  # refused: nothing removed
    removed = store.purge_namespace(confirm=namespace)
    assert removed > 30
    assert plain_dump(backend, f"ctx:{namespace}") == {}
    assert other.get_chat("kept").user_id == "alice"
    assert store.list_chats() == []
    other.close()


def test_purge_refuses_a_store_without_a_namespace(backend: str) -> None:
    store = ctxstore.connect(backend).admin()
    with pytest.raises(ConfigurationError, match="none"):
        store.purge_namespace(confirm="ctx")
    with pytest.raises(ScopeError):
        ctxstore.connect(backend).purge_namespace(confirm="x")
    store.close()
