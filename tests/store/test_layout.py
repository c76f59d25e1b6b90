"""Storage layout 2: the process cache, incarnations, chunked long reads, generated ids."""

from __future__ import annotations

import re
from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._core.format import records as chain_module
from ctxstore._core.ops import reads
from ctxstore._core.protocol import Exchange
from ctxstore.errors import ConfigurationError, LimitExceededError
from ctxstore.settings import METADATA_KEYS_CEILING
from tests.support.wire import trace_wire


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def contents(messages: list[Any]) -> list[str]:
    return [item["message"]["content"] for item in messages]


@pytest.fixture
def decoded(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many records each read decoded (the cache must spare the ones it holds)."""
    counts: list[int] = []
    original = chain_module.decode_records

    def counting(parts: Any, key: str, *sealed: Any) -> list[Any]:
        records = original(parts, key, *sealed)
        counts.append(len(records))
        return records

    monkeypatch.setattr(chain_module, "decode_records", counting)
    return counts


def fill(store: Any, chat: str, count: int, head: str | None = None) -> str | None:
    for start in range(0, count, 500):
        batch = [user(str(i)) for i in range(start, min(start + 500, count))]
        head = store.append(chat, "main", batch, expected_head=head).head_message_id
    return head


def test_a_warm_read_transfers_only_what_is_new(
    backend: str, namespace: str, decoded: list[int]
) -> None:
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    writer = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    writer.upsert_chat("c1", "alice")
    head = fill(writer, "c1", 300)
    assert len(reader.load_branch("c1").messages) == 300
    assert decoded[-1] == 300
    writer.append("c1", "main", [user("new")], expected_head=head)
    with trace_wire() as wire:
        again = reader.load_branch("c1")
    assert decoded[-1] == 1  # only the new record crossed the wire
    assert wire.round_trips == 1
    assert contents(again.messages) == [*(str(i) for i in range(300)), "new"]
    assert again.messages[-1]["parent_id"] == again.messages[-2]["id"]
    fresh = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    assert fresh.load_branch("c1").messages == again.messages
    for store in (reader, writer, fresh):
        store.close()


def test_the_cache_never_serves_a_chat_deleted_and_created_again(
    backend: str, namespace: str
) -> None:
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    writer = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    writer.upsert_chat("c1", "alice")
    writer.append("c1", "main", [user("alice's secret"), user("a2")], expected_head=None)
    old = reader.load_branch("c1").messages
    assert writer.delete_chat("c1")
    writer.upsert_chat("c1", "bob")
    writer.append("c1", "main", [user("bob's"), user("b2"), user("b3")], expected_head=None)
    new = reader.load_branch("c1").messages
    assert contents(new) == ["bob's", "b2", "b3"]
    assert not {item["id"] for item in old} & {item["id"] for item in new}
    assert reader.get_chain("c1", new[-1]["id"]) == new
    with pytest.raises(
        ctxstore.errors.MessageNotFoundError
    ):  # an id of the old chat means nothing now
        reader.get_chain("c1", old[-1]["id"])
    reader.close()
    writer.close()


def test_an_engine_that_knew_a_deleted_chat_touches_nothing_of_the_new_one(
    backend: str, namespace: str
) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    alice = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    alice.set(ctxstore.user("mine"))
    alice.save()
    other = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    other.delete_chat("c1")
    other.upsert_chat("c1", "bob")
    other.append("c1", "main", [user("bob's private message")], expected_head=None)
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        alice.resolve()
    alice.set(ctxstore.user("more"))
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        alice.save()
    assert contents(other.load_branch("c1").messages) == ["bob's private message"]
    store.close()
    other.close()


def test_long_reads_come_in_bounded_chunks(backend: str, namespace: str) -> None:
    limits = ctxstore.Limits(read_inline_messages=4, read_chunk_messages=7)
    store = ctxstore.connect(backend, namespace=namespace, limits=limits, cache_bytes=0).admin()
    store.upsert_chat("c1", "alice")
    head = fill(store, "c1", 30)
    tenth = store.get_chain("c1", head)[9]["id"]  # scripts loaded: NOSCRIPT is not counted
    side = store.create_branch("c1", tenth, name="side")
    store.append("c1", "side", [user("s1"), user("s2")], expected_head=side.head_message_id)
    with trace_wire() as wire:
        chain = store.get_chain("c1", head)
    assert contents(chain) == [str(i) for i in range(30)]
    assert wire.round_trips == 2  # the walk, then the LRANGEs pipelined
    assert wire.count("LRANGE") == 5  # 30 records, at most 7 per command
    assert contents(store.load_branch("c1", "side").messages) == [
        *(str(i) for i in range(10)),
        "s1",
        "s2",
    ]
    graph = store.get_graph("c1")
    assert len(graph.messages) == 32
    assert store.load_branch("c1", "side").branch.message_count == 12
    store.close()


def test_a_short_read_is_one_round_trip_and_one_script(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    store.upsert_chat("c1", "alice")
    head = fill(store, "c1", 20)
    store.get_chain("c1", head)  # scripts loaded
    with trace_wire() as wire:
        store.get_chain("c1", head)
    assert (wire.round_trips, wire.shapes) == (1, ["LUA"])
    store.close()


def test_a_chat_replaced_between_the_chunks_of_a_read_is_an_error(namespace: str) -> None:
    limits = ctxstore.Limits(read_inline_messages=2)
    store = ctxstore.connect("memory://", namespace=namespace, limits=limits, cache_bytes=0).admin()
    store.upsert_chat("c1", "alice")
    head = fill(store, "c1", 10)
    store.get_chain("c1", head)  # scripts loaded: the walk is one request
    exchange = Exchange(reads.get_chain(store.state, "c1", head), lua=store.state.lua)
    exchange.respond(store._send(exchange.request()))  # the walk
    store.delete_chat("c1")
    store.upsert_chat("c1", "bob")
    fill(store, "c1", 10)
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        exchange.respond(store._send(exchange.request()))  # the chunks
    store.close()


def test_generated_ids_name_position_and_incarnation(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    incarnation = store.get_chat("c1").incarnation
    assert re.fullmatch(r"[a-z2-7]{13}", incarnation)
    result = store.append("c1", "main", [user("a"), user("b")], expected_head=None)
    first, second = result.message_ids
    assert re.fullmatch(rf"0\.{incarnation}\.[a-z2-7]{{6}}", first)
    assert re.fullmatch(rf"1\.{incarnation}\.[a-z2-7]{{6}}", second)
    assert [item["id"] for item in store.get_chain("c1", second)] == [first, second]


def test_a_generated_id_of_this_chat_cannot_be_chosen(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    incarnation = store.get_chat("c1").incarnation

    def chat_keys() -> dict[bytes, Any]:
        # On a Cluster the listing index still moves with a refused write (issue 8): the
        # chat's own keys are what must not change.
        return {key: value for key, value in snap().items() if b"{c1}" in key}

    before = chat_keys()
    reserved = NewMessage(user("x"), id=f"5.{incarnation}.abcdef")
    with pytest.raises(ctxstore.ValidationError, match="generated id"):
        store.append("c1", "main", [reserved], expected_head=None)
    assert chat_keys() == before
    # The same form with another chat's incarnation is just a chosen id.
    result = store.append(
        "c1", "main", [NewMessage(user("x"), id="5.aaaaaaaaaaaaa.abcdef")], expected_head=None
    )
    assert result.message_ids == ("5.aaaaaaaaaaaaa.abcdef",)
    assert store.get_message("c1", "5.aaaaaaaaaaaaa.abcdef")["message"] == user("x")


def test_a_message_costs_one_list_entry_and_chosen_ids_one_alias_entry(
    backend: str, namespace: str
) -> None:
    from tests.support.keyspace import raw_client

    store = ctxstore.connect(backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    head = fill(store, "c1", 50)
    store.append("c1", "main", [NewMessage(user("x"), id="chosen")], expected_head=head)
    keys = store.state.keyspace.chat("c1")
    client = raw_client(backend)
    assert client.llen(keys.key("log")) == 51
    assert client.hgetall(keys.key("alias")) == {b"chosen": b"50"}
    assert client.zcard(keys.key("runs")) == 1  # one linear run
    client.close()
    store.close()


def test_a_cache_bound_of_zero_keeps_nothing_and_a_small_one_evicts(namespace: str) -> None:
    url = f"memory://{namespace}"
    off = ctxstore.connect(url, namespace=namespace, cache_bytes=0).admin()
    off.upsert_chat("c1", "alice")
    fill(off, "c1", 10)
    off.load_branch("c1")
    assert off.state.cache.size == 0
    small = ctxstore.connect(url, namespace=namespace, cache_bytes=12_000).admin()
    for chat in ("c2", "c3", "c4"):
        small.upsert_chat(chat, "alice")
        fill(small, chat, 10)
        small.load_branch(chat)
    assert 0 < small.state.cache.size <= 12_000
    assert small.state.cache.lookup("c2", "branch:") is None  # the oldest went first
    with pytest.raises(ctxstore.errors.ConfigurationError):
        ctxstore.connect(url, cache_bytes=-1)


def test_ids_are_never_reused_when_redis_loses_acknowledged_writes(
    backend: str, namespace: str
) -> None:
    """A crash without an fsynced AOF, or a failover to a lagging replica, loses the newest
    writes and hands their positions out again: never their ids, and no cache serves them."""
    from tests.support.keyspace import raw_client

    reader = ctxstore.connect(backend, namespace=namespace).admin()
    writer = ctxstore.connect(backend, namespace=namespace, cache_bytes=0).admin()
    writer.upsert_chat("c1", "alice")
    kept = writer.append("c1", "main", [user("hello"), user("hi")], expected_head=None)
    keys = reader.state.keyspace.chat("c1")
    client = raw_client(backend)
    saved = {name: client.dump(keys.key(name)) for name in ("chat", "log", "runs", "branch", "tok")}
    lost = writer.append("c1", "main", [user("LOST")], expected_head=kept.head_message_id)
    assert contents(reader.load_branch("c1").messages) == ["hello", "hi", "LOST"]
    for name, value in saved.items():  # Redis comes back without the last write
        client.restore(keys.key(name), 0, value, replace=True)
    client.close()
    new = writer.append("c1", "main", [user("new")], expected_head=kept.head_message_id)
    assert new.head_message_id != lost.head_message_id  # same position, another id
    assert new.head_message_id.split(".")[0] == lost.head_message_id.split(".")[0]
    assert contents(reader.load_branch("c1").messages) == ["hello", "hi", "new"]
    with pytest.raises(ctxstore.HeadConflictError):  # a writer that saw the lost message
        writer.append("c1", "main", [user("x")], expected_head=lost.head_message_id)
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        writer.get_message("c1", lost.head_message_id)
    reader.close()
    writer.close()


def test_a_chain_of_many_short_runs_is_walked_over_several_calls(
    server_backend: str, namespace: str
) -> None:
    """Two branches written in turns make every message a run of its own: the walk is split
    (1,000 runs a call) so no call holds Redis for long, and the chain is still exact."""
    store = ctxstore.connect(server_backend, namespace=namespace, cache_bytes=0).admin()
    store.upsert_chat("c1", "alice")
    root = store.append("c1", "main", [user("root")], expected_head=None).head_message_id
    store.create_branch("c1", root, name="side", activate=False)
    heads = {"main": root, "side": root}
    for i in range(1100):
        for branch in ("main", "side"):
            result = store.append("c1", branch, [user(f"{branch}{i}")], expected_head=heads[branch])
            heads[branch] = result.head_message_id
    with trace_wire() as wire:
        chain = store.load_branch("c1", "main").messages
    assert contents(chain) == ["root", *(f"main{i}" for i in range(1100))]
    assert wire.script_calls == 2  # the walk took two calls
    assert [item["parent_id"] for item in chain[1:]] == [item["id"] for item in chain[:-1]]
    store.close()


def test_a_conflict_fork_whose_first_message_is_an_edit_starts_at_the_expected_head(
    store: Any,
) -> None:
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1",
        "main",
        [NewMessage(user("a"), id="m1"), NewMessage(user("b"), id="m2")],
        expected_head=None,
    )
    result = store.append(
        "c1",
        "main",
        [NewMessage(user("b2"), id="m2")],
        expected_head="m1",  # stale: the head is m2
        on_conflict="fork",
        on_existing="fork",
    )
    fork = store.get_branch("c1", result.conflict_fork)
    assert (fork.head_message_id, fork.message_count) == ("m1", 1)
    assert contents(store.load_branch("c1", result.branch).messages) == ["a", "b2"]
    assert store.get_branch("c1", "main").head_message_id == first.head_message_id


def test_an_open_refused_for_its_chain_length_writes_nothing(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [user("a"), user("b")], expected_head=None)
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError):
        store.open_chat("c1", "alice", {"k": 1}, load=True, max_depth=1)
    assert snap() == before


def test_the_most_metadata_keys_a_chat_may_hold_are_merged(store: Any) -> None:
    """Under the bound raised to its ceiling (1,900 keys: two arguments a key keep a write
    within the 3,999 arguments of a managed service), the scripts take and check every key."""
    store.state.limits = ctxstore.Limits(
        max_metadata_keys=METADATA_KEYS_CEILING, max_metadata_bytes=1 << 20
    )
    half = METADATA_KEYS_CEILING // 2
    store.upsert_chat("c1", "alice", {f"k{i}": i for i in range(half)})
    store.update_chat("c1", metadata={f"j{i}": i for i in range(half)})
    metadata = store.get_chat("c1").metadata
    assert (metadata[f"k{half - 1}"], len(metadata)) == (half - 1, METADATA_KEYS_CEILING)
    with pytest.raises(LimitExceededError):
        store.update_chat("c1", metadata={"one": "too many"})


def test_a_metadata_bound_past_the_ceiling_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="at most 1,900"):
        ctxstore.Limits(max_metadata_keys=METADATA_KEYS_CEILING + 1)
