"""together(): several operations in the same round trips, each failure its own."""

from __future__ import annotations

from typing import Any

from ctxstore._core.ops import reads
from ctxstore._core.protocol import together
from ctxstore.errors import ChatNotFoundError
from ctxstore.models import NewMessage
from tests.support.wire import trace_wire


def _chat(store: Any, chat_id: str, length: int) -> str:
    store.upsert_chat(chat_id, "alice")
    store.append(
        chat_id,
        "main",
        [NewMessage({"role": "user", "content": f"{chat_id} {i}"}) for i in range(length)],
        expected_head=None,
    )
    return chat_id


def test_one_step_reads_share_one_round_trip(store: Any) -> None:
    chats = [_chat(store, f"t{i}", i + 1) for i in range(5)]
    state = store.state
    store.run(together([reads.branch_size(state, chat) for chat in chats]))  # scripts loaded
    with trace_wire() as wire:
        sizes = store.run(together([reads.branch_size(state, chat) for chat in chats]))
    assert [size.messages for size in sizes] == [1, 2, 3, 4, 5]
    # One pipeline: on a Cluster, one per node that holds some of the chats.
    assert wire.round_trips <= (3 if state.cluster else 1)
    assert wire.script_calls == 5


def test_a_failing_operation_keeps_its_place_and_the_rest_run(store: Any) -> None:
    good = _chat(store, "good", 2)
    state = store.state
    results = store.run(
        together([reads.branch_size(state, "nope"), reads.branch_size(state, good)])
    )
    assert isinstance(results[0], ChatNotFoundError)
    assert results[1].messages == 2


def test_nothing_to_run_is_an_empty_list(store: Any) -> None:
    assert store.run(together([])) == []


def test_multi_step_operations_run_in_lockstep(store: Any) -> None:
    chats = [_chat(store, f"m{i}", 3 * i + 1) for i in range(3)]
    expected = [store.load_branch(chat).messages for chat in chats]
    state = store.state
    got = store.run(together([reads.load_branch(state, chat) for chat in chats]))
    assert [chain.messages for chain in got] == expected
