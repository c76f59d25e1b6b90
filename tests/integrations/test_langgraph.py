"""The LangGraph savers: LangGraph's conformance suite (``langgraph-checkpoint-conformance``)
against ``AsyncCtxStoreSaver`` and, through async methods that call the sync ones, against
``CtxStoreSaver``, on every backend; each operation's round trips counted; a late write after
``delete_thread`` refused; a thread id that could leave its hash tag refused."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

import ctxstore
from ctxstore.errors import ConflictError, ValidationError
from ctxstore.integrations.langgraph import AsyncCtxStoreSaver, CtxStoreSaver
from tests.support.wire import trace_wire


class SyncSaverOverAsync(CtxStoreSaver):
    """The sync saver, behind the async methods the conformance suite calls."""

    async def aput(self, *args: Any, **kwargs: Any) -> Any:
        return self.put(*args, **kwargs)

    async def aput_writes(self, *args: Any, **kwargs: Any) -> Any:
        return self.put_writes(*args, **kwargs)

    async def aget_tuple(self, *args: Any, **kwargs: Any) -> Any:
        return self.get_tuple(*args, **kwargs)

    async def alist(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        for item in self.list(*args, **kwargs):
            yield item

    async def adelete_thread(self, *args: Any, **kwargs: Any) -> Any:
        return self.delete_thread(*args, **kwargs)

    async def adelete_for_runs(self, *args: Any, **kwargs: Any) -> Any:
        return self.delete_for_runs(*args, **kwargs)

    async def acopy_thread(self, *args: Any, **kwargs: Any) -> Any:
        return self.copy_thread(*args, **kwargs)

    async def aprune(self, *args: Any, **kwargs: Any) -> Any:
        return self.prune(*args, **kwargs)


def conformance(backend: str, kind: str) -> Any:
    """The conformance report of the ``kind`` saver ("async" or "sync") on ``backend``."""

    async def make() -> AsyncIterator[Any]:
        namespace = f"lg{uuid.uuid4().hex[:10]}"
        if kind == "async":
            store = ctxstore.connect_async(backend, namespace=namespace)
            yield AsyncCtxStoreSaver(store)
            await store.close()
        else:
            with ctxstore.connect(backend, namespace=namespace) as sync_store:
                yield SyncSaverOverAsync(sync_store)

    registered = checkpointer_test(name=f"ctxstore-{kind}")(make)
    return asyncio.run(validate(registered))


@pytest.mark.parametrize("kind", ["async", "sync"])
def test_the_conformance_suite_passes(backend: str, kind: str) -> None:
    report = conformance(backend, kind)
    failed = {
        name: list(result.failures)
        for name, result in report.results.items()
        if result.detected and not result.passed
    }
    assert not failed, failed
    detected = {name for name, result in report.results.items() if result.detected}
    assert detected == {capability.value for capability in ALL_CAPABILITIES}


def checkpoint(values: dict[str, Any], versions: dict[str, str]) -> Any:
    made = empty_checkpoint()
    made["channel_values"], made["channel_versions"] = values, versions
    return made


def config(thread_id: str, checkpoint_id: str | None = None) -> Any:
    configurable: dict[str, Any] = {"thread_id": thread_id, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


@pytest.fixture
def saver(backend: str, namespace: str) -> Any:
    with ctxstore.connect(backend, namespace=namespace) as store:
        yield CtxStoreSaver(store)


def test_each_operation_is_one_round_trip(saver: Any, backend: str) -> None:
    thread = config("t1")
    stored = saver.put(thread, checkpoint({"a": 1}, {"a": "1"}), {"step": 0}, {"a": "1"})
    for step in range(1, 12):  # a delta channel: a new version each step, no value stored
        saver.put_writes(stored, [("a", step)], f"task{step}")
        version = {"a": str(step + 1)}
        stored = saver.put(stored, checkpoint({}, version), {"step": step}, version)
    calls: dict[str, Any] = {
        "put": lambda: saver.put(stored, checkpoint({}, {"a": "12"}), {"step": 12}, {}),
        "put_writes": lambda: saver.put_writes(stored, [("a", 12)], "task12"),
        "get_tuple": lambda: saver.get_tuple(thread),
        "get_tuple by id": lambda: saver.get_tuple(stored),
        "history": lambda: saver.get_delta_channel_history(config=thread, channels=["a"]),
        "list(limit=10)": lambda: list(saver.list(thread, limit=10)),
    }
    most = 2 if "cluster" in backend else 1  # the thread's node, and the index's beside it
    for name, call in calls.items():
        call()  # the scripts are loaded once per server
        with trace_wire() as wire:
            call()
        assert wire.round_trips <= (most if name == "put" else 1), name
    history = saver.get_delta_channel_history(config=stored, channels=["a"])["a"]
    assert history["seed"] == 1  # the first checkpoint's value, its writes and all later ones
    assert [write[2] for write in history["writes"]] == list(range(1, 12))


def test_a_late_write_never_brings_a_deleted_thread_back(saver: Any) -> None:
    first = saver.put(config("t1"), checkpoint({"a": 1}, {"a": "1"}), {"step": 0}, {"a": "1"})
    saver.delete_thread("t1")
    with pytest.raises(ConflictError, match="parent"):
        saver.put(first, checkpoint({}, {"a": "1"}), {"step": 1}, {})
    assert saver.get_tuple(config("t1")) is None
    again = saver.put(config("t1"), checkpoint({"b": 2}, {"b": "1"}), {"step": 0}, {"b": "1"})
    found = saver.get_tuple(again)
    assert found.checkpoint["channel_values"] == {"b": 2}
    assert found.parent_config is None


@pytest.mark.parametrize("thread_id", ["a}b", "a{b", "", "x" * 1000])
def test_a_thread_id_that_could_leave_its_hash_tag_is_refused(saver: Any, thread_id: str) -> None:
    with pytest.raises(ValidationError):
        saver.put(config(thread_id), checkpoint({}, {}), {}, {})


def test_a_separator_in_a_channel_or_namespace_is_refused(saver: Any) -> None:
    bad: Sequence[Any] = [
        ({"configurable": {"thread_id": "t1", "checkpoint_ns": "a\x1fb"}}, {}),
        (config("t1"), {"a\x1fb": "1"}),
    ]
    for where, versions in bad:
        with pytest.raises(ValidationError, match="x1d-"):
            saver.put(where, checkpoint({}, versions), {}, versions)
    assert saver.get_tuple(config("t1")) is None


def test_prune_keeps_the_ancestors_a_delta_channel_needs(saver: Any) -> None:
    """keep_latest on a thread whose channel is a delta one (no value stored after the first
    checkpoint): the latest is kept with every ancestor back to the value, so its history
    still rebuilds; a channel with a value at the latest needs nothing more."""
    stored = saver.put(config("t1"), checkpoint({"a": 1}, {"a": "1"}), {"step": 0}, {"a": "1"})
    first = stored
    for step in range(1, 4):
        saver.put_writes(stored, [("a", step)], f"task{step}")
        version = {"a": str(step + 1)}
        stored = saver.put(stored, checkpoint({}, version), {"step": step}, version)
    before = saver.get_delta_channel_history(config=stored, channels=["a"])
    saver.prune(["t1"])
    assert saver.get_delta_channel_history(config=stored, channels=["a"]) == before
    assert saver.get_tuple(first) is not None
    saver.put(stored, checkpoint({"a": 9}, {"a": "9"}), {"step": 4}, {"a": "9"})
    saver.prune(["t1"])
    assert len(list(saver.list(config("t1")))) == 1  # its value is there: nothing else needed
    with pytest.raises(ValidationError, match="strategy"):
        saver.prune(["t1"], strategy="everything")


def test_an_active_thread_keeps_every_message_under_its_ttl(
    server_backend: str, namespace: str
) -> None:
    """A thread of a store with a 2-second retention, written every second for 6 seconds: no
    ancestor expires while the thread is active (every write re-arms every key of it); after
    it stops, the whole thread goes."""
    import time

    from langgraph.graph import START, MessagesState, StateGraph

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [("ai", f"re: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    with ctxstore.connect(server_backend, namespace=namespace, ttl=2) as store:
        graph = builder.compile(checkpointer=CtxStoreSaver(store))
        thread = {"configurable": {"thread_id": "t1"}}
        for turn in range(6):
            graph.invoke({"messages": [("user", f"turn {turn}")]}, thread)
            time.sleep(1)
        messages = graph.get_state(thread).values["messages"]
        assert len(messages) == 12
        assert len(list(graph.get_state_history(thread))) == 6 * 3  # input, start, reply
        time.sleep(2.5)
        assert graph.get_state(thread).values == {}


def delta_thread(saver: Any, channels: tuple[str, ...] = ("a",), steps: int = 3) -> Any:
    """A thread whose channels hold a value at its first checkpoint only, with one write of
    each channel at every later one; its head's config."""
    values = {channel: f"{channel}0" for channel in channels}
    versions = dict.fromkeys(channels, "1")
    stored = saver.put(config("t1"), checkpoint(values, versions), {"step": 0}, versions)
    for step in range(1, steps + 1):
        saver.put_writes(
            stored, [(channel, f"{channel}{step}") for channel in channels], f"s{step}"
        )
        versions = {channel: str(step + 1) for channel in channels}
        stored = saver.put(stored, checkpoint({}, versions), {"step": step}, versions)
    return stored


def test_the_delta_history_filters_each_channels_writes(saver: Any) -> None:
    head = delta_thread(saver, channels=("a", "b"))
    found = saver.get_delta_channel_history(config=head, channels=["a", "b", "c"])
    assert found["a"] == {
        "seed": "a0",
        "writes": [("s1", "a", "a1"), ("s2", "a", "a2"), ("s3", "a", "a3")],
    }
    assert [write[2] for write in found["b"]["writes"]] == ["b1", "b2", "b3"]
    assert found["c"] == {"writes": []}  # never stored: no seed, nothing written
    assert saver.get_delta_channel_history(config=head, channels=[]) == {}


def test_the_delta_history_of_a_fork_holds_its_own_path_only(saver: Any) -> None:
    """C0 -> C1 -> C2 (the head, with a pending write) and a fork F of C1, then G after F:
    each walk takes the writes of its own ancestors only."""
    head = delta_thread(saver, steps=2)
    saver.put_writes(head, [("a", "a3")], "s3")  # pending at the head: on no other path
    c1 = saver.get_tuple(head).parent_config
    fork = saver.put(c1, checkpoint({}, {"a": "9"}), {"step": 9}, {"a": "9"})
    saver.put_writes(fork, [("a", "fork")], "f1")
    after = saver.put(fork, checkpoint({}, {"a": "10"}), {"step": 10}, {"a": "10"})

    def writes(at: Any) -> list[str]:
        found = saver.get_delta_channel_history(config=at, channels=["a"])["a"]
        assert found["seed"] == "a0"
        return [write[2] for write in found["writes"]]

    assert writes(head) == ["a1", "a2"]
    assert writes(fork) == ["a1", "a2"]
    assert writes(after) == ["a1", "a2", "fork"]


def test_a_seed_beyond_the_walks_bound_is_not_found(
    saver: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxstore.integrations.langgraph import operations

    head = delta_thread(saver, steps=5)
    monkeypatch.setattr(operations, "HISTORY_BOUND", 3)
    found = saver.get_delta_channel_history(config=head, channels=["a"])["a"]
    assert "seed" not in found  # the value is 6 checkpoints back; the walk stops at 3
    assert [write[2] for write in found["writes"]] == ["a3", "a4", "a5"]


def test_a_corrupt_checkpoint_or_value_is_a_corruption_error_naming_its_key(
    saver: Any, backend: str, namespace: str
) -> None:
    from ctxstore.errors import CorruptionError
    from tests.support.keyspace import raw_client

    stored = saver.put(config("t1"), checkpoint({"a": 1}, {"a": "1"}), {"step": 0}, {"a": "1"})
    client = raw_client(backend)
    blob = f"ctx:{namespace}:lg:{{t1}}:blob"
    field = next(iter(client.hkeys(blob)))
    client.hset(blob, field, b"no separator here")
    with pytest.raises(CorruptionError) as raised:
        saver.get_tuple(stored)
    assert raised.value.details["key"] == blob
    cp = f"ctx:{namespace}:lg:{{t1}}:cp"
    client.hset(cp, next(iter(client.hkeys(cp))), b"not a record")
    with pytest.raises(CorruptionError) as raised:
        saver.get_tuple(stored)
    assert raised.value.details["key"] == cp
    client.close()
