"""Messages: append with head compare-and-set, immutability, reading one and a chain."""

from __future__ import annotations

import gc
from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._core.format.sealed import ResealNeededError
from ctxstore._core.ops import append as append_ops


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@pytest.fixture
def chat(store: Any) -> str:
    store.upsert_chat("c1", "alice")
    return "c1"


def contents(chain: list[ctxstore.StoredMessage]) -> list[str]:
    return [item["message"]["content"] for item in chain]


def test_append_chains_parents_in_order_and_moves_the_head(store: Any, chat: str) -> None:
    first = store.append(chat, "main", [user("a"), bot("b")], expected_head=None)
    assert first.branch == "main"
    assert len(first.message_ids) == 2
    assert first.head_message_id == first.message_ids[-1]
    second = store.append(chat, "main", [user("c")], expected_head=first.head_message_id)
    chain = store.get_chain(chat, second.head_message_id)
    assert contents(chain) == ["a", "b", "c"]
    assert [item["parent_id"] for item in chain] == [None, *first.message_ids]
    assert store.get_branch(chat, "main").head_message_id == second.head_message_id
    assert store.get_branch(chat, "main").message_count == 3


def test_payloads_come_back_unchanged(store: Any, chat: str) -> None:
    payload = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
        "provider_specific": {"n": 1, "f": 1.5, "b": False, "list": [1, "x", None]},
        "name": "helper",
    }
    tool = {"role": "tool", "tool_call_id": "call_1", "content": "42"}
    result = store.append(chat, "main", [payload, tool], expected_head=None)
    chain = store.get_chain(chat, result.head_message_id)
    assert [item["message"] for item in chain] == [payload, tool]


def test_explicit_ids_are_kept(store: Any, chat: str) -> None:
    result = store.append(
        chat,
        "main",
        [NewMessage(user("a"), id="m1"), NewMessage(bot("b"), id="m2")],
        expected_head=None,
    )
    assert result.message_ids == ("m1", "m2")
    assert store.get_message(chat, "m2")["parent_id"] == "m1"


def test_an_existing_message_id_is_refused_and_nothing_is_written(
    store: Any, chat: str, snap: Any
) -> None:
    store.append(chat, "main", [NewMessage(user("a"), id="m1")], expected_head=None)
    before = snap()
    with pytest.raises(ctxstore.errors.MessageExistsError, match="m1"):
        store.append(
            chat,
            "main",
            [NewMessage(user("x"), id="m2"), NewMessage(user("y"), id="m1")],
            expected_head="m1",
        )
    after = snap()
    assert {k: v for k, v in after.items() if b":idx:" not in k} == {
        k: v for k, v in before.items() if b":idx:" not in k
    }
    assert store.get_message(chat, "m1")["message"] == user("a")


def test_a_message_can_never_be_its_own_parent(store: Any, chat: str) -> None:
    store.append(chat, "main", [NewMessage(user("a"), id="m1")], expected_head=None)
    with pytest.raises(ctxstore.errors.MessageExistsError):
        store.append(chat, "main", [NewMessage(user("again"), id="m1")], expected_head="m1")
    with pytest.raises(ctxstore.ValidationError, match="repeats"):
        store.append(
            chat,
            "main",
            [NewMessage(user("a"), id="m9"), NewMessage(user("b"), id="m9")],
            expected_head="m1",
        )
    assert store.get_message(chat, "m1")["parent_id"] is None


def test_conflict_raise_reports_the_current_head(store: Any, chat: str, snap: Any) -> None:
    first = store.append(chat, "main", [user("a")], expected_head=None)
    before = snap()
    with pytest.raises(ctxstore.HeadConflictError) as caught:
        store.append(chat, "main", [user("late")], expected_head=None)
    assert caught.value.current_head == first.head_message_id
    assert caught.value.expected_head is None
    assert caught.value.branch == "main"
    assert isinstance(caught.value, ctxstore.ConflictError)
    data = {k: v for k, v in snap().items() if b":idx:" not in k}
    assert data == {k: v for k, v in before.items() if b":idx:" not in k}


def test_conflict_rebase_chains_onto_the_current_head(store: Any, chat: str) -> None:
    first = store.append(chat, "main", [user("a")], expected_head=None)
    second = store.append(chat, "main", [user("b")], expected_head=None, on_conflict="rebase")
    assert second.rebased is True
    assert second.branch == "main"
    chain = store.get_chain(chat, second.head_message_id)
    assert contents(chain) == ["a", "b"]
    assert chain[1]["parent_id"] == first.head_message_id


def test_conflict_fork_writes_onto_a_new_branch_from_the_expected_head(
    store: Any, chat: str
) -> None:
    base = store.append(chat, "main", [user("a")], expected_head=None)
    store.append(chat, "main", [user("b")], expected_head=base.head_message_id)
    forked = store.append(
        chat, "main", [user("c")], expected_head=base.head_message_id, on_conflict="fork"
    )
    assert forked.conflict_fork == forked.branch == "main-v2"
    assert contents(store.get_chain(chat, forked.head_message_id)) == ["a", "c"]
    assert contents(store.load_branch(chat, "main").messages) == ["a", "b"]
    assert store.get_chat(chat).active_branch == "main"


def test_fork_from_an_unknown_expected_head_is_not_found(store: Any, chat: str) -> None:
    store.append(chat, "main", [user("a")], expected_head=None)
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        store.append(chat, "main", [user("c")], expected_head="ghost", on_conflict="fork")


def test_append_to_unknown_chat_or_branch(store: Any, chat: str) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.append("ghost", "main", [user("a")], expected_head=None)
    with pytest.raises(ctxstore.errors.BranchNotFoundError, match="nope"):
        store.append(chat, "nope", [user("a")], expected_head=None)


def test_edit_fork_stores_an_existing_id_on_a_new_branch(store: Any, chat: str) -> None:
    store.append(
        chat,
        "main",
        [NewMessage(user("q1"), id="u1"), NewMessage(bot("a1"), id="a1")],
        expected_head=None,
    )
    edited = store.append(
        chat,
        "main",
        [NewMessage(user("q1 edited"), id="u1"), bot("a1 again")],
        expected_head="a1",
        on_existing="fork",
    )
    assert edited.branch == "main-v2"
    assert edited.created_branches == ("main-v2",)
    assert "u1" not in edited.message_ids
    chain = store.get_chain(chat, edited.head_message_id)
    assert contents(chain) == ["q1 edited", "a1 again"]
    assert chain[0]["parent_id"] is None
    assert contents(store.load_branch(chat, "main").messages) == ["q1", "a1"]
    assert store.get_message(chat, "u1")["message"] == user("q1")
    assert store.get_chat(chat).active_branch == "main-v2"


def test_get_message_and_unknown_message(store: Any, chat: str) -> None:
    result = store.append(chat, "main", [user("a")], expected_head=None)
    message = store.get_message(chat, result.head_message_id)
    assert message["message"] == user("a")
    assert message["parent_id"] is None
    assert message["created_at"] > 0
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        store.get_message(chat, "ghost")
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_message("ghost", result.head_message_id)


def test_get_chain_of_nothing_and_of_unknown_head(store: Any, chat: str) -> None:
    assert store.get_chain(chat, None) == []
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        store.get_chain(chat, "ghost")


def test_get_chain_depth_bound(store: Any, chat: str) -> None:
    result = store.append(chat, "main", [user(str(i)) for i in range(5)], expected_head=None)
    assert len(store.get_chain(chat, result.head_message_id, max_depth=5)) == 5
    with pytest.raises(ctxstore.errors.LimitExceededError):
        store.get_chain(chat, result.head_message_id, max_depth=4)
    with pytest.raises(ctxstore.ValidationError):
        store.get_chain(chat, result.head_message_id, max_depth=0)


def two_messages_then(store: Any, chat: str, backend: str, corrupt: Any) -> str:
    """A chain m1 <- m2, then ``corrupt(client, keys)`` on the raw keys; returns the head."""
    from tests.support.keyspace import raw_client

    result = store.append(
        chat,
        "main",
        [NewMessage(user("a"), id="m1"), NewMessage(user("b"), id="m2")],
        expected_head=None,
    )
    client = raw_client(backend)
    corrupt(client, store.state.keyspace.chat(chat))
    client.close()
    return str(result.head_message_id)


def test_a_run_pointing_forward_is_a_clear_error_not_a_hang(
    store: Any, chat: str, backend: str
) -> None:
    def loop(client: Any, keys: Any) -> None:  # the run of m2 claims m2 as its own parent
        client.zadd(keys.key("runs"), {"1:1:2": 1})

    head = two_messages_then(store, chat, backend, loop)
    with pytest.raises(ctxstore.errors.CorruptionError, match="parent is not older"):
        store.get_chain(chat, head)


def test_a_dangling_position_is_a_corruption_error(store: Any, chat: str, backend: str) -> None:
    def dangle(client: Any, keys: Any) -> None:  # m2 said to live past the end of the log
        client.hset(keys.key("alias"), "m2", 7)

    head = two_messages_then(store, chat, backend, dangle)
    with pytest.raises(
        ctxstore.errors.CorruptionError, match=r"past the log|position without tokens"
    ):
        store.get_chain(chat, head)


def test_a_long_chain_reads_in_one_call(store: Any, chat: str) -> None:
    head = None
    for start in range(0, 3000, 1000):
        result = store.append(
            chat, "main", [user(str(i)) for i in range(start, start + 1000)], expected_head=head
        )
        head = result.head_message_id
    chain = store.get_chain(chat, head)
    assert contents(chain) == [str(i) for i in range(3000)]
    assert gc.isenabled()  # paused while decoding, restored after


def test_the_collector_comes_back_after_a_failed_decode(
    store: Any, chat: str, backend: str
) -> None:
    from tests.support.keyspace import raw_client

    result = store.append(chat, "main", [user(str(i)) for i in range(300)], expected_head=None)
    client = raw_client(backend)
    client.lset(store.state.keyspace.chat(chat).key("log"), 200, b"\xc1")
    client.close()
    with pytest.raises(ctxstore.errors.CorruptionError):
        store.get_chain(chat, result.head_message_id)
    assert gc.isenabled()


def test_load_branch_reads_the_active_branch_and_its_chain(store: Any, chat: str) -> None:
    result = store.append(chat, "main", [user("a"), bot("b")], expected_head=None)
    store.create_branch(chat, result.message_ids[0], activate=True)
    loaded = store.load_branch(chat)
    assert loaded.branch.name == "main-v2"
    assert loaded.branch.is_active
    assert loaded.branch.message_count == 1
    assert contents(loaded.messages) == ["a"]
    main = store.load_branch(chat, "main")
    assert not main.branch.is_active
    assert contents(main.messages) == ["a", "b"]
    with pytest.raises(ctxstore.errors.BranchNotFoundError):
        store.load_branch(chat, "ghost")


def send_twice(store: Any, operation: Any) -> tuple[Any, Any]:
    """The first call of ``operation`` sent twice, as redis-py resends a command whose reply
    was lost: the same bytes, request id included. Returns both parsed results."""
    step, first = applied_step(store, operation)
    return first[0], store.run(_replay(step))[0]


def applied_step(store: Any, operation: Any) -> tuple[Any, Any]:
    """The first call of ``operation`` that the server applied, and its outcome: with
    encryption, a call refused for records sealed for another place is followed by the one
    sealed for the right place."""
    step = next(operation)
    first = store.run(_replay(step))
    while isinstance(first, ResealNeededError):
        step = operation.throw(first)
        first = store.run(_replay(step))
    return step, first


def test_a_resent_append_is_answered_like_the_first_time(backend: str, namespace: str) -> None:
    """A client that resends an append after losing its reply must not get an error, nor a copy."""
    store = ctxstore.connect(backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    batch = [NewMessage(user("a"), id="m1"), bot("b")]
    first, again = send_twice(
        store, append_ops.append(store.state, "c1", "main", batch, expected_head=None)
    )
    assert (again.branch, again.head_message_id, again.message_ids) == (
        first.branch,
        first.head_message_id,
        first.message_ids,
    )
    assert first.message_ids[0] == "m1"
    assert (first.resent, again.resent) == (False, True)  # the second was answered, not written
    assert store.get_branch("c1", "main").message_count == 2
    assert store.list_chats()[0].message_count == 2
    with pytest.raises(
        ctxstore.errors.MessageExistsError
    ):  # a new call with the same id is no resend
        store.append(
            "c1", "main", [NewMessage(user("other"), id="m1")], expected_head=again.head_message_id
        )
    store.close()


def test_a_resent_append_after_another_writer_is_still_recognized(
    backend: str, namespace: str
) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    operation = append_ops.append(
        store.state, "c1", "main", [user("mine")], expected_head=None, on_conflict="rebase"
    )
    step, applied = applied_step(store, operation)
    first = applied[0]
    store.append("c1", "main", [user("theirs")], expected_head=first.head_message_id)
    again = store.run(_replay(step))[0]
    assert again.message_ids == first.message_ids
    assert contents(store.load_branch("c1").messages) == ["mine", "theirs"]
    store.close()


def test_a_resent_edit_is_answered_like_the_first_time(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [NewMessage(user("a"), id="m1")], expected_head=None)
    first, second = send_twice(
        store,
        append_ops.append(
            store.state,
            "c1",
            "main",
            [NewMessage(user("a, edited"), id="m1")],
            expected_head="m1",
            on_existing="fork",
        ),
    )
    assert (second.branch, second.head_message_id, second.message_ids) == (
        first.branch,
        first.head_message_id,
        first.message_ids,
    )
    assert first.created_branches == ("main-v2",)
    assert len(store.list_branches("c1")) == 2
    store.close()


def _replay(step: Any) -> Any:
    """An operation that sends one prepared step and returns its parsed reply."""
    calls = step if isinstance(step, tuple) else (step,)
    outcomes = yield calls
    return outcomes[0]
