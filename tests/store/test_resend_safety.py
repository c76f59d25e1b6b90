"""Writes whose reply is lost are sent again by redis-py; each must apply once. A proxy runs
the command on the server and drops its reply, so the client resends it."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import pytest

import ctxstore
from ctxstore._core.format.chat import REQUEST_RING
from ctxstore._core.ops.transfer import imports
from ctxstore._core.ops.transfer.imports import ChatImport
from tests.support import servers
from tests.support.proxy import ReplyDroppingProxy
from tests.support.wire import trace_wire


@pytest.fixture
def proxied(
    redis_server: servers.RedisProcess, namespace: str
) -> Iterator[tuple[ctxstore.Store, ReplyDroppingProxy]]:
    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        store = ctxstore.connect(f"redis://127.0.0.1:{proxy.port}/0", namespace=namespace).admin()
        yield store, proxy
        store.close()


def test_a_resent_usage_is_counted_once(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    store.add_usage("c1", {"input_tokens": 5, "output_tokens": 2})  # the script is loaded
    proxy.drop_next_reply()
    totals = store.add_usage("c1", {"input_tokens": 5, "output_tokens": 2})
    assert proxy.dropped == 1
    assert totals["input_tokens"] == 10
    assert store.get_chat("c1").metadata["usage"]["input_tokens"] == 10


def test_a_resent_branch_creation_makes_one_branch(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    store.create_branch("c1", head.head_message_id, activate=False)  # the script is loaded
    proxy.drop_next_reply()
    branch = store.create_branch("c1", head.head_message_id)
    assert proxy.dropped == 1
    assert branch.name == "main-v3"
    assert sorted(b.name for b in store.list_branches("c1")) == ["main", "main-v2", "main-v3"]


def test_a_resent_chat_creation_still_lists_the_chat(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")  # the script is loaded
    proxy.drop_next_reply()
    store.upsert_chat("c2", "alice")
    assert proxy.dropped == 1
    assert sorted(chat.id for chat in store.list_chats()) == ["c1", "c2"]


def test_a_resent_append_writes_once(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    first = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    proxy.drop_next_reply()
    result = store.append(
        "c1", "main", [{"role": "user", "content": "once"}], expected_head=first.head_message_id
    )
    assert proxy.dropped == 1
    messages = store.load_branch("c1").messages
    assert [m["message"]["content"] for m in messages] == ["a", "once"]
    assert messages[-1]["id"] == result.head_message_id


def test_a_resent_checkpoint_upsert_moves_it_once(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    first = store.upsert_checkpoint("c1", "cp", head.head_message_id)  # the script is loaded
    proxy.drop_next_reply()
    again = store.upsert_checkpoint("c1", "cp", head.head_message_id)
    assert proxy.dropped == 1
    stored = store.get_checkpoint("c1", "cp")
    assert stored == again
    # One move, not two: the chat's checkpoint sequence advanced by exactly one.
    chat_key = store.state.keyspace.chat("c1").key("chat")
    assert int(store.client.hget(chat_key, "checkpoint_seq")) == 2
    assert first.created_at <= again.created_at


def test_a_resent_checkpoint_deletion_answers_like_the_first(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    store.upsert_checkpoint("c1", "cp", head.head_message_id)
    store.upsert_checkpoint("c1", "cp2", head.head_message_id)
    assert store.delete_checkpoint("c1", "cp2")  # the script is loaded
    proxy.drop_next_reply()
    assert store.delete_checkpoint("c1", "cp") is True
    assert proxy.dropped == 1
    assert store.list_checkpoints("c1") == []


def test_a_resent_turn_take_keeps_one_fence(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    from ctxstore._core.ops import turns

    store, proxy = proxied
    store.upsert_chat("c1", "alice")
    warm = store.run(turns.take_turn(store.state, "c1", "warm", 60_000))  # the script is loaded
    store.run(turns.give_turn(store.state, "c1", "warm"))
    proxy.drop_next_reply()
    grant = store.run(turns.take_turn(store.state, "c1", "mine", 60_000))
    assert proxy.dropped == 1
    assert grant.granted
    assert grant.fence == warm.fence + 1  # the resent take was recognized, not granted twice
    assert not store.run(turns.take_turn(store.state, "c1", "other", 60_000)).granted


def _import_by_hand(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
    records: list[Any],
    chat_id: str,
    drop: Callable[[int], bool],
) -> Any:
    """Feed ``records`` to an import and run its staging calls (not its finish); ``drop(n)``
    says whether the n-th staging call's reply is lost (n from 1)."""
    store, proxy = proxied
    importer = ChatImport(store.state, chat_id=chat_id)
    staged = 0
    for record in records:
        chunk = importer.feed(record)
        if chunk is not None:
            staged += 1
            if drop(staged):
                proxy.drop_next_reply()
            store.run(chunk)
    return importer


def _seed(store: ctxstore.Store) -> list[Any]:
    store.upsert_chat("c1", "alice")
    head = None
    for text in "abcdef":
        head = store.append(
            "c1", "main", [{"role": "user", "content": text}], expected_head=head
        ).head_message_id
    store.upsert_checkpoint("c1", "cp", head)
    return list(store.export_chat("c1"))


def test_a_resent_import_chunk_is_staged_once(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, proxy = proxied
    monkeypatch.setattr(imports, "CHUNK_RECORDS", 2)
    records = _seed(store)
    store.import_chat(records, chat_id="warm")  # the scripts are loaded
    importer = _import_by_hand(proxied, records, "c2", drop=lambda n: n == 2)
    assert proxy.dropped == 1
    meta = store.run(importer.finish())
    assert meta.id == "c2"
    again = list(store.export_chat("c2"))
    assert again[1:] == records[1:]
    assert store.verify_chat("c2").ok


def test_a_resent_import_publish_answers_like_the_first(
    proxied: tuple[ctxstore.Store, ReplyDroppingProxy],
) -> None:
    store, proxy = proxied
    records = _seed(store)
    store.import_chat(records, chat_id="warm")  # the scripts are loaded
    importer = _import_by_hand(proxied, records, "c2", drop=lambda _n: False)
    finish = importer.finish()
    stage = next(finish)  # the last chunk (everything, here)
    store.run(_one(stage))
    proxy.drop_next_reply()
    meta = store.run(_resume(finish))
    assert proxy.dropped == 1
    assert meta.id == "c2"
    assert sorted(chat.id for chat in store.list_chats()) == ["c1", "c2", "warm"]
    assert list(store.export_chat("c2"))[1:] == records[1:]


def _one(call: Any) -> Any:
    result = yield call
    return result


def _resume(operation: Any) -> Any:
    """The rest of an operation whose first step ran already."""
    value: Any = None
    while True:
        try:
            step = operation.send(value)
        except StopIteration as stop:
            return stop.value
        value = yield step


# --- the request ring: bounded per chat, recognized within it -------------------------------

RING = REQUEST_RING


def _append_as(store: ctxstore.Store, request: str, text: str, head: str | None) -> Any:
    """An append carrying the request id ``request``: the very command a resend of it sends
    again (its tags come from the request id and the messages)."""
    return store.append(
        "c1", "main", [{"role": "user", "content": text}], expected_head=head, request_id=request
    )


@pytest.mark.parametrize("others", [0, 1, RING - 1])
def test_a_resend_is_recognized_while_fewer_than_32_writes_came_between(
    sync_store: ctxstore.Store, others: int
) -> None:
    sync_store.upsert_chat("c1", "alice")
    first = sync_store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    original = _append_as(sync_store, "the-call", "once", first.head_message_id)
    head = original.head_message_id
    for i in range(others):
        head = sync_store.append(
            "c1", "main", [{"role": "user", "content": str(i)}], expected_head=head
        ).head_message_id
    again = _append_as(sync_store, "the-call", "once", first.head_message_id)
    assert again.message_ids == original.message_ids
    assert again.branch == original.branch
    assert len(sync_store.load_branch("c1").messages) == 2 + others  # nothing written twice


def test_a_resend_after_32_other_writes_is_a_conflict_not_a_second_write(
    sync_store: ctxstore.Store,
) -> None:
    """Past the ring, a resend is an ordinary call again: its expected head has moved on, so
    the default ``on_conflict="raise"`` refuses it (a caller who asked for rebase would get
    its messages twice: the documented bound)."""
    sync_store.upsert_chat("c1", "alice")
    first = sync_store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    head = _append_as(sync_store, "the-call", "once", first.head_message_id).head_message_id
    for i in range(RING):
        head = sync_store.append(
            "c1", "main", [{"role": "user", "content": str(i)}], expected_head=head
        ).head_message_id
    with pytest.raises(ctxstore.ConflictError):
        _append_as(sync_store, "the-call", "once", first.head_message_id)
    assert len(sync_store.load_branch("c1").messages) == 2 + RING


def test_the_ring_holds_32_writes_whatever_the_chat_receives(sync_store: ctxstore.Store) -> None:
    sync_store.upsert_chat("c1", "alice")
    head = None
    for i in range(3 * RING + 5):
        head = sync_store.append(
            "c1", "main", [{"role": "user", "content": str(i)}], expected_head=head
        ).head_message_id
    sync_store.add_usage("c1", {"input_tokens": 1})
    keys = sync_store.state.keyspace.chat("c1")
    ring = sync_store.client.hgetall(keys.key("reqs"))
    assert len(ring) == RING
    assert {int(slot) for slot in ring} == set(range(RING))
    # the next write takes the slot after the usage call's: 3 * 32 + 5 appends, then one more
    assert int(sync_store.client.hget(keys.key("chat"), "req_slot")) == (3 * RING + 6) % RING


@pytest.mark.parametrize("request_id", ["with\ttab", "x" * 65, "ünïcode"])
def test_a_malformed_request_id_is_refused_and_nothing_is_written(
    sync_store: ctxstore.Store, request_id: str
) -> None:
    sync_store.upsert_chat("c1", "alice")
    keys = sync_store.state.keyspace.chat("c1")
    before = sync_store.client.hgetall(keys.key("chat"))
    with trace_wire() as wire, pytest.raises(ctxstore.errors.InvalidIdError):
        _append_as(sync_store, request_id, "a", None)  # refused by the client: nothing sent
    assert wire.round_trips == 0
    with (
        mock.patch("ctxstore._core.ops.append.new_request_id", return_value=request_id),
        pytest.raises(ctxstore.ValidationError),
    ):  # and by the script, were a client to send it
        sync_store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    assert sync_store.client.hgetall(keys.key("chat")) == before
    assert sync_store.client.exists(keys.key("log"), keys.key("reqs")) == 0
