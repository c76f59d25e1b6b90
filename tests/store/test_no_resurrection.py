"""No resurrection: after ``delete_chat`` or ``erase_user``, a holder of the old chat's state (its
head, its incarnation, a turn's fencing token, a live answer stream, a compaction job, an
adapter's session, a context engine) cannot bring any of it back. Each late write fails with a
:class:`~ctxstore.errors.ChatNotFoundError` and no key, field, member or entry of the keyspace
names the chat afterwards. A chat created again under the same id on purpose works, and shows
none of the old one's data. On the embedded store, a redis-server and a Cluster, sync and async.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import append as append_ops
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops import turns
from ctxstore.errors import ChatNotFoundError
from ctxstore.integrations._branch_log import BranchLog
from ctxstore.models import CompactionTrigger
from tests.store.test_erasure import plain_dump
from tests.support.facade import SyncOverAsync
from tests.support.keyspace import raw_client

CHAT = "doomed-chat-7f3a"
USER = "doomed-user-91c2"


def seeded(store: Any) -> tuple[str, str]:
    """The chat with two messages; returns (head id, incarnation)."""
    meta = store.upsert_chat(CHAT, USER)
    result = store.append(
        CHAT,
        None,
        [{"role": "user", "content": "old secret one"}, {"role": "user", "content": "old two"}],
        expected_head=None,
    )
    return result.head_message_id, meta.incarnation


def remove(store: Any, how: str) -> None:
    if how == "delete":
        assert store.delete_chat(CHAT)
    else:
        assert store.erase_user(USER).chat_ids == (CHAT,)


def assert_no_trace(store: Any, namespace: str) -> None:
    """No key, field, member or stream entry of the namespace names the chat (or holds its
    text)."""
    for key, values in plain_dump(store.url, f"ctx:{namespace}").items():
        for needle in (CHAT.encode(), b"old secret"):
            assert needle not in key, key
            assert not any(needle in value for value in values), (key, values)


@pytest.fixture
def url_store(store: Any, backend: str) -> Any:
    store.url = backend
    return store


HOW = pytest.mark.parametrize("how", ["delete", "erase"])


@HOW
def test_an_append_onto_the_old_head_fails_and_writes_nothing(
    url_store: Any, namespace: str, how: str
) -> None:
    store = url_store
    head, incarnation = seeded(store)
    store.get_chat(CHAT)  # the owner is cached: on a Cluster the index touch rides along
    remove(store, how)
    for known in (None, incarnation):
        with pytest.raises(ChatNotFoundError):
            store.run(
                append_ops.append(
                    store.state,
                    CHAT,
                    None,
                    [{"role": "user", "content": "late"}],
                    expected_head=head,
                    user_id=USER,
                    incarnation=known,
                )
            )
    with pytest.raises(ChatNotFoundError):
        store.update_chat(CHAT, title="late")
    with pytest.raises(ChatNotFoundError):
        store.add_usage(CHAT, {"input_tokens": 1})
    assert_no_trace(store, namespace)


@HOW
def test_a_write_with_the_old_turns_fencing_token_fails(
    url_store: Any, namespace: str, how: str
) -> None:
    store = url_store
    head, incarnation = seeded(store)
    grant = store.run(turns.take_turn(store.state, CHAT, "turn-token", 60_000))
    assert grant.granted
    remove(store, how)
    with pytest.raises(ChatNotFoundError):
        store.run(
            append_ops.append(
                store.state,
                CHAT,
                None,
                [{"role": "assistant", "content": "late answer"}],
                expected_head=head,
                incarnation=turns.fenced(incarnation, grant.fence),
            )
        )
    with pytest.raises(ChatNotFoundError):
        store.run(
            turns.extend_turn(store.state, CHAT, "turn-token", 60_000, incarnation=incarnation)
        )
    assert_no_trace(store, namespace)


@HOW
def test_a_live_answer_streams_late_pieces_fail(url_store: Any, namespace: str, how: str) -> None:
    store = url_store
    _head, incarnation = seeded(store)
    state = store.state
    stream_id = store.run(
        answer_stream.begin_stream(
            state, CHAT, "main", writer_ttl_ms=60_000, incarnation=incarnation
        )
    )
    store.run(
        answer_stream.write_stream(
            state, CHAT, stream_id, 1, "old secret piece", writer_ttl_ms=60_000
        )
    )
    remove(store, how)
    for known in (None, incarnation):
        with pytest.raises(ChatNotFoundError):
            store.run(
                answer_stream.write_stream(
                    state, CHAT, stream_id, 2, "late", writer_ttl_ms=60_000, incarnation=known
                )
            )
    with pytest.raises(ChatNotFoundError):
        store.run(
            answer_stream.end_stream(state, CHAT, stream_id, done=False, detail="late", keep_ms=1)
        )
    assert_no_trace(store, namespace)


@HOW
def test_a_summary_finished_after_the_deletion_fails(
    url_store: Any, namespace: str, how: str
) -> None:
    store = url_store
    head, _incarnation = seeded(store)
    remove(store, how)
    with pytest.raises(ChatNotFoundError):
        store.write_summary(CHAT, head, "old secret summarized")
    assert_no_trace(store, namespace)


@HOW
def test_a_workers_job_on_a_gone_chat_leaves_no_record_naming_it(
    backend: str, namespace: str, how: str
) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    store.url = backend  # type: ignore[attr-defined]
    store.upsert_chat(CHAT, USER)
    trigger = CompactionTrigger(soft_tokens=1, min_recent_messages=1)
    head = None
    for text in ("old secret a", "old secret b", "old secret c"):
        head = store.append(
            CHAT, None, [{"role": "user", "content": text}], expected_head=head,
            compaction=trigger,
        ).head_message_id  # fmt: skip
    raw = raw_client(backend)
    jobs = sum(raw.xlen(stream) for stream in store.state.keyspace.job_streams())
    raw.close()
    assert jobs >= 1
    if how == "delete":
        store.delete_chat(CHAT)  # the job stays in its stream: the worker finds the chat gone
    else:
        store.erase_user(USER)
    worker = ctxstore.Worker(backend, namespaces=[namespace], compactify=lambda _m: "summary")
    stats = worker.run(burst=True)
    assert stats.summarized == 0
    raw = raw_client(backend)
    records = raw.hgetall(store.state.keyspace.worker_last_jobs)
    raw.close()
    assert all(not value.endswith(CHAT.encode()) for value in records.values())
    assert_no_trace(store, namespace)
    store.close()


@HOW
def test_an_adapters_session_opened_before_cannot_write_the_chat_back(
    url_store: Any, namespace: str, how: str
) -> None:
    store = url_store
    seeded(store)
    shell = store.wrapped if isinstance(store, SyncOverAsync) else store
    log = BranchLog(shell, CHAT, USER)
    run: Callable[[Any], Any] = store.run  # the operation, through either shell
    assert [item["content"] for item in run(log.read())] == ["old secret one", "old two"]
    remove(store, how)
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        run(log.extend([{"role": "user", "content": "late"}]))
    assert_no_trace(store, namespace)
    fresh = BranchLog(shell, CHAT, USER)  # a new session: creating the chat is its first add
    run(fresh.extend([{"role": "user", "content": "new"}]))
    assert [item["content"] for item in run(fresh.read())] == ["new"]


@HOW
def test_an_engine_that_read_the_chat_cannot_save_into_it_again(
    make_engine: Any, namespace: str, how: str, backend: str
) -> None:
    store = make_engine.store
    store.url = backend
    engine = make_engine(chat_id=CHAT, user_id=USER)
    engine.set(ctxstore.user("old secret question"))
    engine.save()
    engine.resolve()
    remove(store, how)
    engine.set(ctxstore.user("late"))
    with pytest.raises(ChatNotFoundError):
        engine.save()
    assert_no_trace(store, namespace)
    again = make_engine(chat_id=CHAT, user_id=USER)  # a new engine's first save creates it
    again.set(ctxstore.user("a new start"))
    again.save()
    assert [m["content"] for m in again.resolve().messages] == ["a new start"]


@HOW
def test_a_chat_created_again_on_purpose_shows_nothing_of_the_old_one(
    url_store: Any, how: str
) -> None:
    store = url_store
    seeded(store)
    store.upsert_checkpoint(CHAT, "old-checkpoint", store.load_branch(CHAT).messages[0]["id"])
    remove(store, how)
    user = store.for_user(USER)
    user.upsert_chat(CHAT)
    assert user.load_branch(CHAT).messages == []
    assert user.list_checkpoints(CHAT) == []
    user.append(CHAT, None, [{"role": "user", "content": "fresh"}], expected_head=None)
    assert [m["message"]["content"] for m in user.load_branch(CHAT).messages] == ["fresh"]
    assert [chat.id for chat in user.list_chats()] == [CHAT]


def test_the_async_adapter_path_refuses_too(backend: str, namespace: str) -> None:
    async def scenario() -> None:
        store = ctxstore.connect_async(backend, namespace=namespace).admin()
        log = BranchLog(store, CHAT, USER)
        await log.arun(log.extend([{"role": "user", "content": "old secret"}]))
        await store.delete_chat(CHAT)
        with pytest.raises(ctxstore.errors.ChatReplacedError):
            await log.arun(log.extend([{"role": "user", "content": "late"}]))
        await store.close()

    asyncio.run(scenario())
