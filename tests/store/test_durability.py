"""``connect(..., durability="replica")`` on real redis-server processes: a primary with one
replica started here, the session's standalone server and its 3-master Cluster.

An acknowledged durable write survives losing the primary; a write the replica does not confirm
is a DurabilityError (and exists on the primary); every store write waits, no read does; a
durable write is still one round trip; on a Cluster the wait goes to the chat's node."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

import ctxstore
from ctxstore._core.ops import jobs, leases
from tests.support import servers
from tests.support.counting import user
from tests.support.facade import LoopThread, SyncOverAsync
from tests.support.proxy import PartitionableLink
from tests.support.streams import read_pieces
from tests.support.wire import trace_wire

SHORT = 0.3  # seconds a write waits in these tests


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[servers.ReplicaPair]:
    with servers.replica_pair(tmp_path_factory.mktemp("replicated")) as running:
        yield running


def open_store(shell: str, url: str, loop_thread: LoopThread, **options: Any) -> Any:
    options.setdefault("estimate_tokens", len)
    if shell == "sync":
        return ctxstore.connect(url, **options).admin()
    return SyncOverAsync(ctxstore.connect_async(url, **options).admin(), loop_thread)


def close_store(store: Any, loop_thread: LoopThread) -> None:
    if isinstance(store, SyncOverAsync):
        loop_thread.run(store.wrapped.close())
    else:
        store.close()


@pytest.fixture(params=["sync", "async"])
def durable(
    request: pytest.FixtureRequest,
    pair: servers.ReplicaPair,
    namespace: str,
    loop_thread: LoopThread,
) -> Iterator[Any]:
    """A store on the pair's primary whose writes wait SHORT seconds for the replica."""
    store = open_store(
        request.param,
        pair.primary.url,
        loop_thread,
        namespace=namespace,
        durability="replica",
        durability_timeout=SHORT,
    )
    yield store
    close_store(store, loop_thread)


@pytest.fixture
def plain(pair: servers.ReplicaPair, namespace: str) -> Iterator[ctxstore.Store]:
    """A store on the same primary and namespace that does not wait."""
    store = ctxstore.connect(pair.primary.url, namespace=namespace, estimate_tokens=len).admin()
    yield store
    store.close()


@contextmanager
def replica_stopped(pair: servers.ReplicaPair) -> Iterator[None]:
    """The replica frozen (SIGSTOP): connected, but it neither applies nor acknowledges."""
    pair.replica.process.send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        pair.replica.process.send_signal(signal.SIGCONT)
        servers.wait_for_replication(pair.primary, pair.replica)


# --- a failover ------------------------------------------------------------------------------


def test_every_acknowledged_durable_write_survives_a_failover_that_loses_the_others(
    tmp_path: Path, namespace: str
) -> None:
    """The replica reaches its primary through a link that is then cut, as in a partition: a
    write acknowledged without durability is lost with the primary (so the check below can see
    a loss), a durable one is either acknowledged and on the promoted replica, or refused."""
    primary = servers.start_primary(tmp_path / "primary")
    link = PartitionableLink(servers.HOST, primary.port)
    replica = servers.start_replica(tmp_path / "replica", link.port)
    options: dict[str, Any] = {"namespace": namespace, "estimate_tokens": len}
    try:
        servers.wait_for_replication(primary, replica)
        durable = ctxstore.connect(
            primary.url, durability="replica", durability_timeout=SHORT, **options
        ).admin()
        plain = ctxstore.connect(primary.url, **options).admin()

        durable.upsert_chat("c1", "alice", {"plan": "pro"})
        acknowledged: list[str] = []
        head = None
        for turn in range(20):
            saved = durable.append(
                "c1", "main", [user(f"question {turn}"), user(f"more {turn}")], expected_head=head
            )
            acknowledged += saved.message_ids
            head = saved.head_message_id
        durable.upsert_checkpoint("c1", "before", acknowledged[9])
        side = durable.create_branch("c1", acknowledged[3], activate=False)
        durable.update_chat("c1", title="Lisbon")
        durable.add_usage("c1", {"input_tokens": 7, "output_tokens": 3})

        link.partition()
        lost = plain.append(
            "c1", "main", [user("acknowledged, never replicated")], expected_head=head
        )
        with pytest.raises(ctxstore.errors.DurabilityError) as refused:
            durable.append(
                "c1", "main", [user("not acknowledged")], expected_head=lost.head_message_id
            )
        unconfirmed = refused.value.result.head_message_id
        assert plain.get_branch("c1", "main").head_message_id == unconfirmed  # on the primary
        durable.close()
        plain.close()

        primary.process.kill()
        primary.process.wait()
        link.close()
        promoted = replica.client()
        promoted.execute_command("REPLICAOF", "NO", "ONE")
        promoted.close()

        survivor = ctxstore.connect(replica.url, **options).admin()
        chain = survivor.load_branch("c1")
        assert [item["id"] for item in chain.messages] == acknowledged
        assert chain.branch.head_message_id == head
        assert survivor.get_checkpoint("c1", "before").message_id == acknowledged[9]
        assert survivor.get_branch("c1", side.name).head_message_id == acknowledged[3]
        meta = survivor.get_chat("c1")
        assert meta.title == "Lisbon"
        assert meta.metadata["plan"] == "pro"
        assert meta.metadata["usage"]["input_tokens"] == 7
        graph_ids = {node.id for node in survivor.get_graph("c1").messages}
        assert lost.head_message_id not in graph_ids  # without durability, acknowledged and gone
        assert unconfirmed not in graph_ids
        survivor.close()
    finally:
        link.close()
        replica.stop()
        primary.stop()


# --- a write the replica does not confirm ----------------------------------------------------


def test_a_write_the_replica_does_not_confirm_is_a_durability_error_and_exists_on_the_primary(
    durable: Any, plain: ctxstore.Store, pair: servers.ReplicaPair
) -> None:
    first = durable.upsert_chat("c1", "alice")
    assert first.user_id == "alice"
    head = durable.append("c1", "main", [user("confirmed")], expected_head=None)
    with replica_stopped(pair):
        started = time.monotonic()
        with pytest.raises(ctxstore.errors.DurabilityError) as raised:
            durable.append("c1", "main", [user("unconfirmed")], expected_head=head.head_message_id)
        waited = time.monotonic() - started
    error = raised.value
    assert SHORT <= waited < 5.0  # the wait ran out, the socket did not
    message = str(error)
    assert "applied on the primary" in message
    assert "may or may not survive a failover" in message
    assert "may exist" in message
    assert error.details["chat_id"] == "c1"
    assert isinstance(error, ctxstore.errors.BackendError)
    exists = plain.load_branch("c1")
    assert [item["message"]["content"] for item in exists.messages] == ["confirmed", "unconfirmed"]
    assert exists.branch.head_message_id == error.result.head_message_id


def test_opening_an_existing_chat_is_not_a_write_but_creating_one_is(
    durable: Any, plain: ctxstore.Store, pair: servers.ReplicaPair
) -> None:
    durable.upsert_chat("c1", "alice")
    with replica_stopped(pair):
        assert durable.open_chat("c1", "alice").created is False  # nothing written, no error
        with pytest.raises(ctxstore.errors.DurabilityError):
            durable.open_chat("c1", "alice", {"plan": "pro"})  # merging metadata writes
        with pytest.raises(ctxstore.errors.DurabilityError) as raised:
            durable.upsert_chat("c2", "alice")
    assert raised.value.result.user_id == "alice"
    assert plain.get_chat("c1").metadata == {"plan": "pro"}
    # The call ran to its end on the primary: the new chat is in the listings too.
    assert sorted(chat.id for chat in plain.list_chats(user_id="alice")) == ["c1", "c2"]


def test_an_engine_whose_save_was_not_confirmed_has_saved(
    durable: Any, plain: ctxstore.Store, pair: servers.ReplicaPair, loop_thread: LoopThread
) -> None:
    if isinstance(durable, SyncOverAsync):
        engine: Any = SyncOverAsync(
            ctxstore.AsyncContextEngine(store=durable.wrapped, chat_id="c1", user_id="alice"),
            loop_thread,
        )
    else:
        engine = ctxstore.ContextEngine(store=durable, chat_id="c1", user_id="alice")
    engine.set(ctxstore.user("first"))
    engine.save()
    engine.set(ctxstore.user("second"))
    with replica_stopped(pair), pytest.raises(ctxstore.errors.DurabilityError):
        engine.save()
    engine.save()  # nothing pending: saving again does not write the message twice
    contents = [item["message"]["content"] for item in plain.load_branch("c1").messages]
    assert contents == ["first", "second"]


# --- every write waits, no read does ---------------------------------------------------------


@dataclass
class Chat:
    """Chat c1 of alice: two messages on main, checkpoint cp, inactive branch side."""

    first: str
    head: str
    raw: redis.Redis

    def break_runs(self, store: Any) -> None:
        """Lose a derived key, so that verify_chat(repair=True) has something to write."""
        self.raw.delete(store.state.keyspace.chat("c1").key("runs"))


def _setup(store: Any, pair: servers.ReplicaPair) -> Chat:
    store.upsert_chat("c1", "alice")
    saved = store.append("c1", "main", [user("a"), user("b")], expected_head=None)
    store.upsert_checkpoint("c1", "cp", saved.message_ids[0])
    store.create_branch("c1", saved.message_ids[0], name="side", activate=False)
    return Chat(saved.message_ids[0], saved.head_message_id, pair.primary.client())


Action = Callable[[Any, Chat], Any]


def _sweep_a_gone_chat(store: Any, chat: Chat) -> None:
    chat.raw.zadd(store.state.keyspace.all_chats_index, {"gone": 1})
    assert store.sweep().index_entries_removed == 1


WRITES: dict[str, Action] = {
    "upsert_chat": lambda s, _c: s.upsert_chat("c2", "alice"),
    "open_chat": lambda s, _c: s.open_chat("c2", "alice", load=True),
    "update_chat": lambda s, _c: s.update_chat("c1", title="t", metadata={"k": 1}),
    "add_usage": lambda s, _c: s.add_usage("c1", {"input_tokens": 1}),
    "delete_chat": lambda s, _c: s.delete_chat("c1"),
    "append": lambda s, c: s.append("c1", "main", [user("c")], expected_head=c.head),
    "write_summary": lambda s, c: s.write_summary("c1", c.first, "they said a"),
    "create_branch": lambda s, c: s.create_branch("c1", c.first),
    "branch_from_checkpoint": lambda s, _c: s.branch_from_checkpoint("c1", "cp"),
    "set_active_branch": lambda s, _c: s.set_active_branch("c1", "side"),
    "upsert_checkpoint": lambda s, c: s.upsert_checkpoint("c1", "cp2", c.head),
    "delete_checkpoint": lambda s, _c: s.delete_checkpoint("c1", "cp"),
    "verify_chat(repair)": lambda s, _c: s.verify_chat("c1", repair=True),
    "expire_chat": lambda s, _c: s.expire_chat("c1", 3600),
    "import_chat": lambda s, _c: s.import_chat(list(s.export_chat("c1")), chat_id="c3"),
    "redact_message": lambda s, c: s.redact_message("c1", c.first),
    "erase_user": lambda s, _c: s.erase_user("alice"),
    "sweep": _sweep_a_gone_chat,
    "migrate": lambda s, _c: s.migrate(),
    "purge_namespace": lambda s, _c: s.purge_namespace(confirm=s.state.keyspace.namespace),
}
#: Writes of a store with encryption only (tested below on one).
SEALED_WRITES = {"rotate_keys"}


def _sweep_a_gone_chat(store: Any, chat: Chat) -> None:
    chat.raw.zadd(store.state.keyspace.all_chats_index, {"gone": 1})
    assert store.sweep().index_entries_removed == 1


READS: dict[str, Action] = {
    "get_chat": lambda s, _c: s.get_chat("c1"),
    "list_chats": lambda s, _c: s.list_chats(user_id="alice"),
    "list_chats_page": lambda s, _c: s.list_chats_page(user_id="alice", limit=5),
    "get_message": lambda s, c: s.get_message("c1", c.first),
    "message_versions": lambda s, c: s.message_versions("c1", c.first),
    "get_chain": lambda s, c: s.get_chain("c1", c.head),
    "load_branch": lambda s, _c: s.load_branch("c1", max_tokens=100, after_summary=True),
    "branch_size": lambda s, _c: s.branch_size("c1"),
    "get_branch": lambda s, _c: s.get_branch("c1", "side"),
    "list_branches": lambda s, _c: s.list_branches("c1"),
    "get_checkpoint": lambda s, _c: s.get_checkpoint("c1", "cp"),
    "list_checkpoints": lambda s, _c: s.list_checkpoints("c1"),
    "get_graph": lambda s, _c: s.get_graph("c1"),
    "verify_chat": lambda s, _c: s.verify_chat("c1"),
    "export_chat": lambda s, _c: list(s.export_chat("c1")),
    "export_user": lambda s, _c: list(s.export_user("alice")),
    "active_stream": lambda s, _c: s.active_stream("c1"),
    "read_stream": lambda s, _c: _read_a_missing_stream(s),
    "ping": lambda s, _c: s.ping(),
}


def _read_a_missing_stream(store: Any) -> None:
    with pytest.raises(ctxstore.errors.StreamNotFoundError):
        read_pieces(store, "c1", "1-0.abcdef")


#: Public members that send nothing of their own.
NO_IO = {"client", "state", "run", "clear_cache", "close", "admin", "for_user", "any_owner"}
#: Writes of no chat data (the Functions library, which a store loads by itself where it is
#: missing): nothing to wait for.
NOT_CHAT_DATA = {"load_functions"}


def test_every_store_operation_is_classified_as_a_write_or_a_read() -> None:
    public = {name for name in dir(ctxstore.Store) if not name.startswith("_")}
    classified = (
        {name.split("(")[0] for name in (*WRITES, *READS)} | NO_IO | SEALED_WRITES | NOT_CHAT_DATA
    )
    assert public == classified


def _waits_follow_writes(commands: list[str]) -> int:
    """How many WAITs were sent, each checked to come right after a script or a write."""
    waits = [index for index, name in enumerate(commands) if name == "WAIT"]
    for index in waits:
        assert commands[index - 1] in (
            "EVALSHA", "EVAL", "FCALL", "XADD", "HSETNX", "UNLINK", "XDEL", "HDEL", "ZREM", "HSET",
            "DEL",
        ), commands  # fmt: skip
    return len(waits)


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_rotate_keys_waits_right_after_each_rewrap(
    pair: servers.ReplicaPair, namespace: str, loop_thread: LoopThread, shell: str
) -> None:
    from ctxstore.crypto import LocalKeyProvider

    provider = LocalKeyProvider.from_keys({"kek-1": bytes(32)}, current="kek-1")
    store = open_store(
        shell, pair.primary.url, loop_thread, namespace=namespace, durability="replica",
        durability_timeout=SHORT, encryption=provider,
    )  # fmt: skip
    try:
        store.upsert_chat("c9", "alice")  # a user with a data key
        with trace_wire() as wire:
            assert store.rotate_keys().data_keys == 1
        assert _waits_follow_writes(wire.commands) >= 1  # (a NOSCRIPT resend waits again)
    finally:
        close_store(store, loop_thread)


@pytest.mark.parametrize("name", sorted(WRITES))
def test_each_store_write_waits_right_after_its_script(
    durable: Any, pair: servers.ReplicaPair, name: str
) -> None:
    chat = _setup(durable, pair)
    if name == "verify_chat(repair)":
        chat.break_runs(durable)
    with trace_wire() as wire:
        WRITES[name](durable, chat)
    chat.raw.close()
    assert _waits_follow_writes(wire.commands) >= 1


@pytest.mark.parametrize("name", sorted(READS))
def test_no_store_read_waits(durable: Any, pair: servers.ReplicaPair, name: str) -> None:
    chat = _setup(durable, pair)
    chat.raw.close()
    durable.write_summary("c1", chat.first, "they said a")
    with trace_wire() as wire:
        READS[name](durable, chat)
    assert "WAIT" not in wire.commands
    assert wire.commands  # it did read


def test_the_compaction_lease_and_a_job_enqueued_after_the_reply_wait_too(
    durable: Any, pair: servers.ReplicaPair
) -> None:
    _setup(durable, pair).raw.close()
    run = durable.run
    run(leases.give_lease(durable.state, "c1", "token"))  # the script is loaded
    with trace_wire() as wire:
        taken, _expires = run(leases.take_lease(durable.state, "c1", "token", 10_000))
        given = run(leases.give_lease(durable.state, "c1", "token"))
    assert taken
    assert given
    assert _waits_follow_writes(wire.commands) == 2
    trigger = ctxstore.models.CompactionTrigger(soft_tokens=1)
    run(jobs.enqueue_compaction(durable.state, "c1", "main", "job-0", trigger))  # script loaded
    with trace_wire() as wire:
        run(jobs.enqueue_compaction(durable.state, "c1", "main", "job-1", trigger))
    assert wire.shapes == ["LUA", "WAIT"]


# --- round trips -----------------------------------------------------------------------------


def test_a_durable_save_is_still_one_round_trip(
    durable: Any, plain: ctxstore.Store, loop_thread: LoopThread
) -> None:
    durable.upsert_chat("c1", "alice")
    head = durable.append("c1", "main", [user("warm")], expected_head=None).head_message_id
    plain.get_chat("c1")  # both stores have run their first-use checks
    plain.append("c1", "main", [user("warm")], expected_head=head)
    head = plain.get_branch("c1", "main").head_message_id
    with trace_wire() as wire:
        head = durable.append("c1", "main", [user("one")], expected_head=head).head_message_id
    assert (wire.round_trips, wire.shapes) == (1, ["LUA", "WAIT"])
    with trace_wire() as wire:
        plain.append("c1", "main", [user("two")], expected_head=head)
    assert (wire.round_trips, wire.shapes) == (1, ["LUA"])


# --- servers that cannot wait ----------------------------------------------------------------


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_aof_on_a_server_without_waitaof_is_a_configuration_error_before_any_write(
    redis_server: servers.RedisProcess, namespace: str, loop_thread: LoopThread, shell: str
) -> None:
    """WAITAOF needs Redis 7.2 and appendonly yes; the test server has neither."""
    store = open_store(shell, redis_server.url, loop_thread, namespace=namespace, durability="aof")
    for _attempt in range(2):  # a refused check is not remembered as passed
        with pytest.raises(ctxstore.errors.ConfigurationError, match="WAITAOF") as raised:
            store.upsert_chat("c1", "alice")
        assert "7.2" in str(raised.value)
    close_store(store, loop_thread)
    check = ctxstore.connect(redis_server.url, namespace=namespace).admin()
    with pytest.raises(ctxstore.ChatNotFoundError):
        check.get_chat("c1")
    check.close()


def test_durability_on_a_replica_is_a_configuration_error(
    pair: servers.ReplicaPair, namespace: str
) -> None:
    store = ctxstore.connect(pair.replica.url, namespace=namespace, durability="replica").admin()
    with pytest.raises(ctxstore.errors.ConfigurationError, match="must be a primary"):
        store.get_chat("c1")
    store.close()


# --- a Cluster -------------------------------------------------------------------------------


def _wait_calls(node: servers.RedisProcess) -> int:
    client = node.client()
    try:
        stats = client.info("commandstats").get("cmdstat_wait", {})
    finally:
        client.close()
    return int(stats.get("calls", 0)) if isinstance(stats, dict) else 0


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_on_a_cluster_the_wait_goes_to_the_chats_node(
    redis_cluster: servers.Cluster, namespace: str, loop_thread: LoopThread, shell: str
) -> None:
    """The test Cluster has no replicas: the wait, on the chat's node, falls short."""
    store = open_store(
        shell,
        redis_cluster.url,
        loop_thread,
        namespace=namespace,
        durability="replica",
        durability_timeout=SHORT,
    )
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c1")  # the first operation checked the server
    plain = ctxstore.connect(redis_cluster.url, namespace=namespace)
    plain.upsert_chat("c1", "alice")  # created (and recorded) without waits
    plain.close()
    chat_key = store.state.keyspace.chat("c1").key("chat")
    seed = RedisCluster(host=servers.HOST, port=redis_cluster.nodes[0].port)
    owner = seed.get_node_from_key(chat_key).port
    seed.close()
    before = {node.port: _wait_calls(node) for node in redis_cluster.nodes}
    with pytest.raises(ctxstore.errors.DurabilityError):
        store.update_chat("c1", title="waited for", user_id="alice")
    after = {node.port: _wait_calls(node) for node in redis_cluster.nodes}
    waits = {port: after[port] - before[port] for port in after}
    assert waits.pop(owner) >= 1  # two when the script was sent again after NOSCRIPT
    assert set(waits.values()) == {0}
    assert store.get_chat("c1", user_id="alice").title == "waited for"  # applied on the primary
    close_store(store, loop_thread)


@pytest.mark.parametrize("shell", ["sync", "async"])
def test_on_a_cluster_a_new_chats_owner_record_is_waited_for_as_well(
    redis_cluster: servers.Cluster, namespace: str, loop_thread: LoopThread, shell: str
) -> None:
    """The record must outlive a failover wherever the chat does: its write waits too, on its
    own node (the user's slot), as the chat's does on the chat's."""
    store = open_store(
        shell,
        redis_cluster.url,
        loop_thread,
        namespace=namespace,
        durability="replica",
        durability_timeout=SHORT,
    )
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c1", user_id="alice")  # the first operation checked the server
    record = store.state.keyspace.owner_record("alice")
    chat_key = store.state.keyspace.chat("c1").key("chat")
    seed = RedisCluster(host=servers.HOST, port=redis_cluster.nodes[0].port)
    nodes = {seed.get_node_from_key(record).port, seed.get_node_from_key(chat_key).port}
    before = {node.port: _wait_calls(node) for node in redis_cluster.nodes}
    with pytest.raises(ctxstore.errors.DurabilityError):
        store.upsert_chat("c1", "alice")
    after = {node.port: _wait_calls(node) for node in redis_cluster.nodes}
    waited = {port for port in after if after[port] > before[port]}
    assert waited == nodes
    assert seed.hkeys(record) == [b"c1"]  # applied on the primaries, both
    assert store.get_chat("c1", user_id="alice").user_id == "alice"
    seed.close()
    close_store(store, loop_thread)


def test_the_replica_pair_helper_replicates(pair: servers.ReplicaPair) -> None:
    primary, replica = pair.primary.client(), pair.replica.client()
    key = f"probe-{os.getpid()}"
    primary.set(key, b"v")
    assert primary.execute_command("WAIT", 1, 5000) == 1
    assert replica.get(key) == b"v"
    with pytest.raises(redis.ReadOnlyError):
        replica.set(key, b"w")
    primary.delete(key)
    primary.close()
    replica.close()
