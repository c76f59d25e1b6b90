"""A server that forgot the scripts (``SCRIPT FLUSH``, a failover to a node that never saw them,
a managed proxy routing to a fresh backend) answers ``EVALSHA`` with ``NOSCRIPT``: every
operation recovers by itself, once, and applies its write exactly once.

Each operation of the corruption matrix runs twice on twin chats of the same server: once with
its scripts loaded, once right after a ``SCRIPT FLUSH``. The two must end alike: the same
outcome, and the same change to the size of every key of the chat and to its counters.
"""

from __future__ import annotations

from typing import Any

import pytest
from redis.cluster import RedisCluster

import ctxstore
from ctxstore._core.keys import CHAT_KEY_NAMES
from tests.store.test_corruption import CHAT, OPS, build
from tests.support.keyspace import raw_client

#: Counters of the chat hash a write may move (each by a known amount).
COUNTERS = ("message_count", "branch_count", "branch_seq", "checkpoint_seq", "u:input_tokens")
SIZES = {"list": "llen", "hash": "hlen", "zset": "zcard", "string": "strlen", "stream": "xlen"}


def shape(client: Any, store: ctxstore.Store) -> dict[str, Any]:
    """The chat's keys by kind and size, and its counters: what one write changes."""
    keys = store.state.keyspace.chat(CHAT)
    found: dict[str, Any] = {}
    for name in CHAT_KEY_NAMES:
        key = keys.key(name)
        kind = client.type(key).decode()
        found[name] = (kind, getattr(client, SIZES[kind])(key) if kind in SIZES else 0)
    counters = client.hmget(keys.key("chat"), *COUNTERS)
    found.update(zip(COUNTERS, counters, strict=True))
    return found


def outcome(store: ctxstore.Store, name: str, chat: Any) -> str:
    try:
        OPS[name].run(store, chat)
    except ctxstore.CtxStoreError as error:
        return type(error).__name__
    return "ok"


def flush_scripts(client: Any) -> None:
    if isinstance(client, RedisCluster):
        client.execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)
    else:
        client.script_flush()


@pytest.mark.parametrize("name", sorted(OPS))
def test_an_operation_after_a_script_flush_ends_as_without_one(
    backend: str, namespace: str, name: str
) -> None:
    loaded = ctxstore.connect(backend, namespace=f"{namespace}a").admin()
    flushed = ctxstore.connect(backend, namespace=f"{namespace}b").admin()
    client = raw_client(backend)
    try:
        chats = build(loaded), build(flushed)
        before = shape(client, loaded), shape(client, flushed)
        assert before[0] == before[1]
        first = outcome(loaded, name, chats[0])  # every script this operation uses is loaded
        flush_scripts(client)
        second = outcome(flushed, name, chats[1])
        assert second == first
        assert shape(client, flushed) == shape(client, loaded)
    finally:
        loaded.close()
        flushed.close()
        client.close()
