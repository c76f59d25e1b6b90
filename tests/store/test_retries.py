"""Retries that are safe: a write repeated under its request id (after a timeout, a crash, a
function's retry) is applied once and answers with the first write's result; an engine keeps
its own request id for the pending messages until a save of them succeeds; a request id used
again with other messages is a ConflictError; a reply that did not come in time is a
BackendTimeoutError, which says the write may have been applied."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from redis.backoff import NoBackoff
from redis.retry import Retry

import ctxstore
from ctxstore import NewMessage
from ctxstore.errors import BackendTimeoutError, ConflictError
from tests.support import servers
from tests.support.proxy import HangingProxy, ReplyDroppingProxy

QUESTION = [{"role": "user", "content": "Plan a weekend in Lisbon."}]


def contents(store: Any, chat: str = "c1") -> list[Any]:
    return [m["message"]["content"] for m in store.load_branch(chat, user_id="alice").messages]


def test_a_write_repeated_under_its_request_id_answers_with_the_first_result(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1", "main", QUESTION, expected_head=None, request_id="req-1", user_id="alice"
    )
    again = store.append(
        "c1", "main", QUESTION, expected_head=None, request_id="req-1", user_id="alice"
    )
    assert again == first  # every field: ids, branch, updated_at, context size, job
    assert (first.resent, again.resent) == (False, True)  # which one wrote
    assert contents(store) == ["Plan a weekend in Lisbon."]
    later = store.append(
        "c1",
        "main",
        [{"role": "assistant", "content": "Alfama."}],
        expected_head=first.head_message_id,
        request_id="req-2",
        user_id="alice",
    )
    # Still remembered after other writes, whatever the head and the policy the retry names.
    for policy in ("raise", "rebase", "fork"):
        assert (
            store.append(
                "c1",
                "main",
                QUESTION,
                expected_head=None,
                on_conflict=policy,
                request_id="req-1",
                user_id="alice",
            )
            == first
        )
    assert contents(store) == ["Plan a weekend in Lisbon.", "Alfama."]
    assert later.head_message_id != first.head_message_id


def test_the_same_request_id_with_other_messages_is_a_conflict_naming_it(
    store: Any, snap: Any
) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", QUESTION, expected_head=None, request_id="req-1", user_id="alice")
    before = snap()
    for other in (
        [{"role": "user", "content": "Plan a weekend in Porto."}],
        [*QUESTION, {"role": "user", "content": "And one more."}],
        [NewMessage(QUESTION[0], metadata={"source": "web"})],
        [NewMessage(QUESTION[0], id="chosen")],
    ):
        with pytest.raises(ConflictError, match="'req-1'") as caught:
            store.append(
                "c1", "main", other, expected_head=None, request_id="req-1", user_id="alice"
            )
        assert caught.value.details["request_id"] == "req-1"
    assert snap() == before


def test_ids_the_caller_did_not_choose_are_not_compared(store: Any) -> None:
    """The same messages under the same request id are the same write, whatever the
    generated ids a call would have made (they come from the request id and the messages)."""
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1", "main", [NewMessage(QUESTION[0])], expected_head=None, request_id="r", user_id="alice"
    )
    again = store.append(
        "c1", "main", [NewMessage(QUESTION[0])], expected_head=None, request_id="r", user_id="alice"
    )
    assert again.message_ids == first.message_ids


def test_a_request_id_is_checked_before_anything_is_sent(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    for bad in ("", "x" * 65, "with space", "ü", 7):
        with pytest.raises(ctxstore.errors.InvalidIdError, match="request_id"):
            store.append(
                "c1", "main", QUESTION, expected_head=None, request_id=bad, user_id="alice"
            )
    store.append("c1", "main", QUESTION, expected_head=None, request_id="x" * 64, user_id="alice")
    assert snap() != before


def test_an_engine_save_retried_after_a_failure_is_applied_once(make_engine: Any) -> None:
    """The engine's own request id stays with the pending messages until they are saved: a
    save that failed after the store applied it (simulated: the engine forgets the reply)
    saves nothing the second time and lands where the first did."""
    engine = make_engine()
    engine.resolve()  # the engine knows the chat (empty) before its save
    engine.set(ctxstore.user("Plan a weekend in Lisbon."), ctxstore.assistant("Alfama."))
    core = engine.wrapped._core if hasattr(engine, "wrapped") else engine._core
    request, recall = core.prompt.request_for_pending(None)
    assert core.prompt.request_for_pending(None) == (request, recall)  # the same batch, kept
    assert recall is False  # the engine retries onto the head it knew: no lookup on saves
    store = make_engine.store
    applied = store.append(
        "c1",
        "main",
        [
            {"role": "user", "content": "Plan a weekend in Lisbon."},
            {"role": "assistant", "content": "Alfama."},
        ],
        expected_head=None,
        request_id=request,
        user_id="alice",
    )  # what the first save did before its reply was lost
    saved = engine.save()
    assert saved == applied.head_message_id
    assert [m["content"] for m in engine.resolve().messages] == [
        "Plan a weekend in Lisbon.",
        "Alfama.",
    ]
    engine.set(ctxstore.user("And Porto?"))
    assert core.prompt.request_for_pending(None)[0] != request  # another batch, another id


def test_an_engine_save_under_a_callers_request_id_is_applied_once_across_engines(
    make_engine: Any,
) -> None:
    """A function invoked again makes a new engine: the request id is what they share."""
    for _attempt in range(3):
        engine = make_engine()
        engine.set(ctxstore.user("Plan a weekend in Lisbon."))
        saved = engine.save(request_id="invocation-7")
    assert [m["content"] for m in engine.resolve().messages] == ["Plan a weekend in Lisbon."]
    assert saved == engine.head_message_id


# --- against a server whose reply is late or lost -----------------------------------------


@pytest.fixture
def hanging(redis_server: servers.RedisProcess) -> Iterator[HangingProxy]:
    proxy = HangingProxy("127.0.0.1", redis_server.port)
    yield proxy
    proxy.close()


@pytest.fixture
def dropping(redis_server: servers.RedisProcess) -> Iterator[ReplyDroppingProxy]:
    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        yield proxy


def _through(port: int, namespace: str, **options: Any) -> ctxstore.Store:
    return ctxstore.connect(
        f"redis://127.0.0.1:{port}/0",
        namespace=namespace,
        redis_options={"socket_timeout": 0.5, **options},
    )


def test_an_append_that_timed_out_is_retried_once_under_its_request_id(
    hanging: HangingProxy, namespace: str
) -> None:
    alice = _through(hanging.port, namespace).for_user("alice")
    alice.upsert_chat("c1")
    alice.append("c1", "main", [{"role": "user", "content": "warm-up"}], expected_head=None)
    head = alice.get_branch("c1").head_message_id
    hanging.hang()
    with pytest.raises(BackendTimeoutError, match="may have been applied") as caught:
        alice.append("c1", "main", QUESTION, expected_head=head, request_id="req-9")
    assert isinstance(caught.value, ctxstore.BackendUnavailableError)
    # The retry comes from a new process (a function invoked again): its own connections, none
    # of them the frozen one.
    again = _through(hanging.port, namespace).for_user("alice")
    retried = again.append("c1", "main", QUESTION, expected_head=head, request_id="req-9")
    chain = again.load_branch("c1").messages
    assert [m["message"]["content"] for m in chain] == ["warm-up", "Plan a weekend in Lisbon."]
    assert retried.head_message_id == chain[-1]["id"]
    assert retried.message_ids == (chain[-1]["id"],)


def test_a_save_whose_reply_was_lost_is_retried_once(
    dropping: ReplyDroppingProxy, namespace: str
) -> None:
    """redis-py told not to resend (no retries): the lost reply reaches the caller, whose retry
    of ``engine.save()`` is applied once, with the first save's ids."""
    store = _through(dropping.port, namespace, retry=Retry(NoBackoff(), 0))
    engine = ctxstore.ContextEngine(store=store.for_user("alice"), chat_id="c1")
    engine.set(ctxstore.user("warm-up"))
    engine.save()
    engine.set(ctxstore.user("Plan a weekend in Lisbon."), ctxstore.assistant("Alfama."))
    dropping.drop_next_reply(times=2)  # the store's own resend on a new connection loses it too
    with pytest.raises(ctxstore.BackendUnavailableError):
        engine.save()
    assert dropping.dropped == 2
    saved = engine.save()
    reader = ctxstore.ContextEngine(store=store.for_user("alice"), chat_id="c1")
    chain = reader.resolve().messages
    assert [m["content"] for m in chain] == ["warm-up", "Plan a weekend in Lisbon.", "Alfama."]
    assert saved.message_ids == tuple(
        m["id"] for m in store.load_branch("c1", user_id="alice").messages[1:]
    )


def test_an_async_save_that_timed_out_is_retried_once(
    hanging: HangingProxy, namespace: str
) -> None:
    async def scenario() -> list[str]:
        store = ctxstore.connect_async(
            f"redis://127.0.0.1:{hanging.port}/0",
            namespace=namespace,
            redis_options={"socket_timeout": 0.5},
        )
        engine = ctxstore.AsyncContextEngine(store=store.for_user("alice"), chat_id="c1")
        engine.set(ctxstore.user("warm-up"))
        await engine.save()
        engine.set(ctxstore.user("Plan a weekend in Lisbon."))
        hanging.hang()
        with pytest.raises(BackendTimeoutError):
            await engine.save()
        await engine.save()  # on a new connection: the timed-out one was dropped
        texts = [
            m["message"]["content"]
            for m in (await store.load_branch("c1", user_id="alice")).messages
        ]
        await store.close()
        return texts

    assert asyncio.run(scenario()) == ["warm-up", "Plan a weekend in Lisbon."]
