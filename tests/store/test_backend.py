"""Connecting, transport failures, round trips, script cache, server checks."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

import ctxstore
from tests.support import servers
from tests.support.keyspace import raw_client
from tests.support.wire import trace_wire

#: The server's counts of calls of ctxstore's Lua, as functions or as scripts.
LUA_STATS = ("cmdstat_fcall", "cmdstat_fcall_ro", "cmdstat_evalsha")


def closed_port() -> int:
    return servers.free_port()


def test_unreachable_redis_is_backend_unavailable_with_the_cause() -> None:
    store = ctxstore.connect(f"redis://127.0.0.1:{closed_port()}").admin()
    with pytest.raises(ctxstore.BackendUnavailableError) as caught:
        store.get_chat("c1")
    assert isinstance(caught.value.__cause__, redis.ConnectionError)
    assert isinstance(caught.value, ctxstore.errors.BackendError)


def test_unreachable_redis_async() -> None:
    async def attempt() -> None:
        store = ctxstore.connect_async(f"redis://127.0.0.1:{closed_port()}").admin()
        try:
            await store.upsert_chat("c1", "alice")
        finally:
            await store.close()

    with pytest.raises(ctxstore.BackendUnavailableError) as caught:
        asyncio.run(attempt())
    assert isinstance(caught.value.__cause__, redis.ConnectionError)


def test_unreachable_cluster_seed() -> None:
    with pytest.raises(ctxstore.BackendUnavailableError) as caught:
        ctxstore.connect(f"redis+cluster://127.0.0.1:{closed_port()}")
    assert caught.value.__cause__ is not None


def test_a_cluster_node_reached_without_cluster_mode_says_so(
    redis_cluster: servers.Cluster,
) -> None:
    store = ctxstore.connect(redis_cluster.nodes[0].url).admin()
    ids = [f"chat{i}" for i in range(20)]  # some of them hash to another node
    errors = []
    for chat_id in ids:
        try:
            store.get_chat(chat_id)
        except ctxstore.CtxStoreError as error:
            errors.append(error)
    store.close()
    moved = [e for e in errors if isinstance(e, ctxstore.errors.ConfigurationError)]
    assert moved
    assert "redis+cluster://" in str(moved[0])


def test_script_flush_between_calls(store: Any, backend: str) -> None:
    store.upsert_chat("c1", "alice")
    first = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    client = raw_client(backend)
    if isinstance(client, RedisCluster):
        client.execute_command("SCRIPT FLUSH", target_nodes=RedisCluster.PRIMARIES)
    else:
        client.script_flush()
    client.close()
    second = store.append(
        "c1", "main", [{"role": "user", "content": "b"}], expected_head=first.head_message_id
    )
    assert [m["message"]["content"] for m in store.get_chain("c1", second.head_message_id)] == [
        "a",
        "b",
    ]
    assert store.list_branches("c1")[0].message_count == 2


def warm(store: Any) -> str:
    """Load every script this test uses and the owner cache, so counts show the steady state."""
    store.upsert_chat("c1", "alice")
    result = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    store.get_chain("c1", result.head_message_id)
    return result.head_message_id


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_append_and_get_chain_are_one_round_trip(
    backend: str, namespace: str, shell: str, loop_thread: Any
) -> None:
    from tests.support.facade import SyncOverAsync

    if shell == "sync":
        store: Any = ctxstore.connect(backend, namespace=namespace).admin()
    else:
        store = SyncOverAsync(
            ctxstore.connect_async(backend, namespace=namespace).admin(), loop_thread
        )
    head = warm(store)
    with trace_wire() as append_wire:
        result = store.append(
            "c1", "main", [{"role": "user", "content": "b"}] * 3, expected_head=head
        )
    with trace_wire() as chain_wire:
        store.get_chain("c1", result.head_message_id)
    if not backend.startswith("redis+cluster"):
        assert (append_wire.round_trips, append_wire.script_calls) == (1, 1)
        assert append_wire.shapes == ["LUA"]  # the script moves the chat indexes itself
        assert (chain_wire.round_trips, chain_wire.shapes) == (1, ["LUA"])
    if shell == "sync":
        store.close()
    else:
        loop_thread.run(store.wrapped.close())


def command_counts(url: str) -> dict[str, int]:
    """Server-side call counts per command, summed over every node."""
    client = raw_client(url)
    if isinstance(client, RedisCluster):
        per_node = client.info("commandstats", target_nodes=RedisCluster.PRIMARIES)
        stats: dict[str, Any] = {}
        for node_stats in per_node.values():
            for name, values in node_stats.items():
                stats.setdefault(name, {"calls": 0})["calls"] += values["calls"]
    else:
        stats = client.info("commandstats")
    client.close()
    return {name: values["calls"] for name, values in stats.items()}


def test_server_counts_one_script_call_per_append_and_get_chain(
    server_backend: str, namespace: str
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    head = warm(store)
    before = command_counts(server_backend)
    result = store.append("c1", "main", [{"role": "user", "content": "b"}], expected_head=head)
    middle = command_counts(server_backend)
    store.get_chain("c1", result.head_message_id)
    after = command_counts(server_backend)
    store.close()

    def delta(start: dict[str, int], end: dict[str, int], name: str) -> int:
        names = LUA_STATS if name == "lua" else (name,)
        return sum(end.get(one, 0) - start.get(one, 0) for one in names)

    # On a Cluster the two index touches are scripts of their own (in the same round trip):
    # each says what score it replaced, for a write that fails to put it back.
    touches = 2 if "cluster" in server_backend else 0
    assert delta(before, middle, "lua") == 1 + touches
    assert delta(before, middle, "cmdstat_eval") == 0
    assert delta(before, middle, "cmdstat_zadd") == 2
    assert delta(middle, after, "lua") == 1
    assert delta(middle, after, "cmdstat_command|getkeys") == 0


def test_eviction_policy_warning(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with servers.standalone(tmp_path / "lru", "--maxmemory-policy", "allkeys-lru") as server:
        store = ctxstore.connect(server.url).admin()
        with caplog.at_level(logging.WARNING, logger="ctxstore"):
            store.upsert_chat("c1", "alice")
            store.get_chat("c1")
        store.close()
    warnings = [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]
    assert len(warnings) == 1
    assert "allkeys-lru" in warnings[0].getMessage()


def test_no_warning_with_noeviction(
    redis_server: servers.RedisProcess, caplog: pytest.LogCaptureFixture
) -> None:
    store = ctxstore.connect(redis_server.url, namespace=f"t{uuid.uuid4().hex[:8]}").admin()
    with caplog.at_level(logging.WARNING, logger="ctxstore"):
        store.upsert_chat("c1", "alice")
    store.delete_chat("c1")
    store.close()
    assert not [r for r in caplog.records if "maxmemory-policy" in r.getMessage()]


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_the_first_store_of_a_process_checks_the_server(
    server_backend: str, namespace: str, shell: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The start-up check reads the eviction policy with a keyless command: on a Cluster both
    clients, the async one too, must send it to a node of their choosing."""
    from ctxstore._core import state

    # As in a process that just started: no server checked yet.
    monkeypatch.setattr(state.REGISTRY, "_checked", OrderedDict())
    if shell == "sync":
        store = ctxstore.connect(server_backend, namespace=namespace).admin()
        assert store.state.check_server
        store.upsert_chat("c1", "alice")
        assert not store.state.check_server
        store.close()
        return

    async def first() -> None:
        store = ctxstore.connect_async(server_backend, namespace=namespace).admin()
        assert store.state.check_server
        await store.upsert_chat("c1", "alice")
        assert not store.state.check_server
        await store.close()

    asyncio.run(first())


def test_url_from_environment_and_no_silent_fallback(
    monkeypatch: pytest.MonkeyPatch, redis_server: servers.RedisProcess
) -> None:
    monkeypatch.delenv("CTXSTORE_URL", raising=False)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="CTXSTORE_URL"):
        ctxstore.connect()
    assert type(ctxstore.connect("memory://").client).__module__.startswith("fakeredis")
    monkeypatch.setenv("CTXSTORE_URL", redis_server.url)
    store = ctxstore.connect().admin()
    assert isinstance(store.client, redis.Redis)
    assert store.client.connection_pool.connection_kwargs["port"] == redis_server.port
    store.close()


def test_unsupported_scheme() -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="scheme"):
        ctxstore.connect("mongodb://localhost")
    with pytest.raises(ctxstore.errors.ConfigurationError):
        ctxstore.connect("redis://localhost", redis_options={"decode_responses": True})


def test_memory_stores_are_private_unless_named() -> None:
    one, two = ctxstore.connect("memory://").admin(), ctxstore.connect("memory://").admin()
    one.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ChatNotFoundError):
        two.get_chat("c1")
    name = f"memory://{uuid.uuid4().hex}"
    sync_store = ctxstore.connect(name).admin()
    sync_store.upsert_chat("c1", "alice")

    async def read() -> str:
        async_store = ctxstore.connect_async(name).admin()
        meta = await async_store.get_chat("c1")
        await async_store.close()
        return meta.user_id

    assert asyncio.run(read()) == "alice"


def test_an_existing_client_can_be_passed_and_is_not_closed(
    redis_server: servers.RedisProcess,
) -> None:
    client = redis.Redis(port=redis_server.port)
    store = ctxstore.connect(client, namespace=f"t{uuid.uuid4().hex[:8]}").admin()
    store.upsert_chat("c1", "alice")
    store.delete_chat("c1")
    store.close()
    assert client.ping() is True
    client.close()


def test_clients_that_cannot_serve_a_store_are_refused(
    redis_server: servers.RedisProcess,
) -> None:
    decoding = redis.Redis(port=redis_server.port, decode_responses=True)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="decode_responses"):
        ctxstore.connect(decoding)
    async_client = redis.asyncio.Redis(port=redis_server.port)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="sync"):
        ctxstore.connect(async_client)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="async"):
        ctxstore.connect_async(redis.Redis(port=redis_server.port))
    with pytest.raises(ctxstore.errors.ConfigurationError):
        ctxstore.connect(object())
    decoding.close()


def test_stores_of_one_process_share_what_they_learned(
    redis_server: servers.RedisProcess, namespace: str
) -> None:
    """A store per request must not pay the eviction check and owner lookups every time."""
    first = ctxstore.connect(redis_server.url, namespace=namespace).admin()
    first.upsert_chat("c1", "alice")
    head = first.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    first.close()
    second = ctxstore.connect(redis_server.url, namespace=namespace).admin()
    second.client.ping()
    with trace_wire() as wire:
        second.append(
            "c1", "main", [{"role": "user", "content": "b"}], expected_head=head.head_message_id
        )
    second.close()
    assert wire.round_trips == 1
    assert "CONFIG" not in wire.commands
    assert wire.shapes == ["LUA"]


def test_private_memory_stores_share_nothing() -> None:
    one, two = ctxstore.connect("memory://").admin(), ctxstore.connect("memory://").admin()
    one.upsert_chat("c1", "alice")
    assert two.state.owners.get("c1") is None


def test_the_store_recovers_when_redis_drops_its_connections(
    redis_server: servers.RedisProcess, namespace: str
) -> None:
    """A sync store keeps one connection for its single commands: a dropped one is replaced,
    and the call that found it dropped still succeeds (through redis-py's retries)."""
    store = ctxstore.connect(redis_server.url, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    killer = redis_server.client()
    assert killer.client_kill_filter(_type="normal", skipme=True) >= 1
    killer.close()
    result = store.append(
        "c1", "main", [{"role": "user", "content": "b"}], expected_head=head.head_message_id
    )
    assert [m["message"]["content"] for m in store.load_branch("c1").messages] == ["a", "b"]
    assert result.head_message_id == store.get_branch("c1").head_message_id
    store.close()
