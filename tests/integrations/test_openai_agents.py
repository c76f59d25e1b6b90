"""CtxStoreSession: the OpenAI Agents SDK's session protocol on a ctxstore chat.

The SDK's ``Runner`` drives a real agent loop against a scripted model (tests/integrations/
agents_support.py), so what reaches the store is what the SDK saves; the behaviours the SDK's
own session tests check (ordering, limits, pop, clear, settings, isolation, concurrency) are
checked here again on every backend, through a sync and an async store.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from agents import RunConfig, Runner
from agents.memory import Session, SessionSettings

import ctxstore
from ctxstore.integrations.openai_agents import CtxStoreSession
from tests.integrations.agents_support import (
    ScriptedModel,
    call_weather,
    say,
    text_of,
    think,
    weather_agent,
)
from tests.store.test_concurrency import run_workers
from tests.support import servers
from tests.support.wire import trace_wire

USER = "alice"


def contents(items: list[dict[str, Any]]) -> list[Any]:
    return [text_of(item) for item in items]


def stored(store: ctxstore.Store, chat_id: str = "chat-1") -> list[dict[str, Any]]:
    """The payloads of the chat's active branch, read through a sync store."""
    return [m["message"] for m in store.load_branch(chat_id).messages]


@pytest.fixture
def twin(backend: str, namespace: str) -> Iterator[ctxstore.Store]:
    """A sync store beside ``any_store`` for reading back what the session wrote."""
    store = ctxstore.connect(backend, namespace=namespace).admin()
    yield store
    store.close()


# --- the agent loop -----------------------------------------------------------------------------


async def test_runner_turns_with_tool_calls_store_every_item_in_order(
    any_store: Any, twin: ctxstore.Store
) -> None:
    model = ScriptedModel(
        [think("two cities"), call_weather("c1", "Paris"), call_weather("c2", "Rome")],
        [say("Sunny in both.")],
        [call_weather("c3", "Oslo")],
        [say("Sunny in Oslo too.")],
    )
    agent = weather_agent(model)
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    assert isinstance(session, Session)

    first = await Runner.run(agent, "Weather in Paris and Rome?", session=session)
    assert first.final_output == "Sunny in both."
    second = await Runner.run(agent, "And Oslo?", session=session)
    assert second.final_output == "Sunny in Oslo too."

    items = stored(twin)
    assert [item.get("type", item.get("role")) for item in items] == [
        "user",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "message",
        "user",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert contents(items) == [
        "Weather in Paris and Rome?",
        None,
        '{"city": "Paris"}',
        '{"city": "Rome"}',
        "sunny in Paris",
        "sunny in Rome",
        "Sunny in both.",
        "And Oslo?",
        '{"city": "Oslo"}',
        "sunny in Oslo",
        "Sunny in Oslo too.",
    ]
    # Stored exactly as the SDK gave them, their own ids included; ctxstore's ids are its own.
    assert items[2] == {
        "arguments": '{"city": "Paris"}',
        "call_id": "c1",
        "name": "weather",
        "type": "function_call",
        "id": "__fake_id__",
    }
    assert items[1]["summary"] == [{"text": "two cities", "type": "summary_text"}]
    ids = [m["id"] for m in twin.load_branch("chat-1").messages]
    assert len(set(ids)) == len(ids)
    assert "__fake_id__" not in ids
    # The second run's model calls saw the first run whole, in order, then the new question.
    assert model.inputs[2][:8] == items[:8]
    assert model.inputs[3] == items[:10]
    assert await session.get_items() == items
    assert twin.get_chat("chat-1").user_id == USER


@pytest.mark.parametrize("runner", ["run_sync", "run_streamed"])
async def test_run_sync_and_run_streamed_use_the_session(
    sync_store: ctxstore.Store, runner: str
) -> None:
    model = ScriptedModel(
        [call_weather("c1", "Paris")], [say("Sunny.")], [say("You asked about Paris.")]
    )
    agent = weather_agent(model)
    session = CtxStoreSession("chat-1", user_id=USER, store=sync_store)

    async def run(text: str) -> Any:
        if runner == "run_sync":  # its own event loop, in a thread of its own
            return await asyncio.to_thread(Runner.run_sync, agent, text, session=session)
        result = Runner.run_streamed(agent, text, session=session)
        async for _event in result.stream_events():
            pass
        return result

    assert (await run("Weather in Paris?")).final_output == "Sunny."
    assert (await run("What did I ask?")).final_output == "You asked about Paris."
    assert contents(model.last_input) == [
        "Weather in Paris?",
        '{"city": "Paris"}',
        "sunny in Paris",
        "Sunny.",
        "What did I ask?",
    ]
    assert len(await session.get_items()) == 6


async def test_sessions_are_isolated(any_store: Any) -> None:
    model = ScriptedModel([say("cats")], [say("dogs")], [say("you like cats")])
    agent = weather_agent(model)
    one = CtxStoreSession("session-1", user_id=USER, store=any_store)
    two = CtxStoreSession("session-2", user_id=USER, store=any_store)
    await Runner.run(agent, "I like cats", session=one)
    await Runner.run(agent, "I like dogs", session=two)
    await Runner.run(agent, "What do I like?", session=one)
    assert contents(model.last_input) == ["I like cats", "cats", "What do I like?"]
    await two.pop_item()
    assert contents(await one.get_items()) == [
        "I like cats",
        "cats",
        "What do I like?",
        "you like cats",
    ]
    assert contents(await two.get_items()) == ["I like dogs"]


# --- the session protocol -----------------------------------------------------------------------


async def test_add_get_and_clear(any_store: Any, twin: ctxstore.Store) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    assert await session.get_items() == []
    assert not twin.list_chats(user_id=USER)  # a read creates nothing
    items: list[Any] = [
        {"role": "user", "content": "こんにちは"},
        {"role": "assistant", "content": "😊👍"},
        {"role": "user", "content": "Robert'); DROP TABLE students;--"},
    ]
    await session.add_items(items)
    await session.add_items([])
    assert await session.get_items() == items
    await session.clear_session()
    assert await session.get_items() == []
    with pytest.raises(ctxstore.ChatNotFoundError):
        twin.get_chat("chat-1")
    await session.clear_session()  # clearing an empty session is fine
    await session.add_items(items[:1])  # the chat is created anew
    assert await session.get_items() == items[:1]


async def test_limits(any_store: Any) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items(
        [{"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i}"} for i in range(6)]
    )
    assert contents(await session.get_items()) == [f"m{i}" for i in range(6)]
    assert contents(await session.get_items(limit=2)) == ["m4", "m5"]
    assert contents(await session.get_items(limit=4)) == ["m2", "m3", "m4", "m5"]
    assert len(await session.get_items(limit=10)) == 6
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == []


async def test_limit_counts_items_exactly_even_inside_a_tool_group(any_store: Any) -> None:
    """The SDK compares the newest items it wrote with get_items(limit=len(...)): the limit
    returns exactly that many, wherever it falls."""
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    calls: list[Any] = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "r"},
    ]
    await session.add_items(calls)
    assert await session.get_items(limit=1) == calls[-1:]
    assert await session.get_items(limit=2) == calls[-2:]


async def test_session_settings(any_store: Any) -> None:
    assert CtxStoreSession("s", user_id=USER, store=any_store).session_settings == SessionSettings()
    session = CtxStoreSession(
        "chat-1", user_id=USER, store=any_store, session_settings=SessionSettings(limit=3)
    )
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
    assert contents(await session.get_items()) == ["m2", "m3", "m4"]
    assert contents(await session.get_items(limit=2)) == ["m3", "m4"]
    as_dict = CtxStoreSession(
        "chat-1", user_id=USER, store=any_store, session_settings={"limit": 1}
    )
    assert contents(await as_dict.get_items()) == ["m4"]
    with pytest.raises(ctxstore.ValidationError):
        CtxStoreSession("chat-1", user_id=USER, store=any_store, session_settings=3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Unknown session settings: limitt"):
        CtxStoreSession("chat-1", user_id=USER, store=any_store, session_settings={"limitt": 1})


async def test_a_closed_session_refuses_every_call(backend: str) -> None:
    """As the SDK's sessions that own their connection (``SQLiteSession``,
    ``RedisSession.from_url``): a session that opened its store from ``url=`` closes it, and
    every later call is a RuntimeError before anything is read or written (add_items([])
    included); closing twice is harmless."""
    chat_id = f"closed-{uuid.uuid4().hex[:12]}"
    session = CtxStoreSession(chat_id, user_id=USER, url=backend)
    await session.add_items([{"role": "user", "content": "kept"}])
    session.close()
    session.close()
    for call in (
        session.get_items(),
        session.add_items([]),
        session.add_items([{"role": "user", "content": "late"}]),
        session.pop_item(),
        session.clear_session(),
    ):
        with pytest.raises(RuntimeError, match="CtxStoreSession is closed"):
            await call
    if not backend.startswith("memory://"):  # a private embedded store is gone with its session
        reader = CtxStoreSession(chat_id, user_id=USER, url=backend)
        assert contents(await reader.get_items()) == ["kept"]
        await reader.clear_session()
        reader.close()


async def test_closing_a_session_on_a_store_passed_in_changes_nothing(
    any_store: Any, twin: ctxstore.Store
) -> None:
    """As ``RedisSession`` with an injected client: the caller owns the store, so ``close()``
    neither closes it nor ends the session."""
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items([{"role": "user", "content": "before close"}])
    session.close()
    await session.add_items([{"role": "user", "content": "after close"}])
    assert contents(await session.get_items()) == ["before close", "after close"]
    assert contents(stored(twin)) == ["before close", "after close"]
    other = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    assert len(await other.get_items()) == 2


async def test_content_that_cannot_be_stored_is_a_type_error(
    any_store: Any, twin: ctxstore.Store
) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    with pytest.raises(TypeError):
        await session.add_items([{"role": "user", "content": object()}])  # type: ignore[list-item]
    assert await session.get_items() == []


async def test_run_config_settings_override_the_sessions(any_store: Any) -> None:
    session = CtxStoreSession(
        "chat-1", user_id=USER, store=any_store, session_settings=SessionSettings(limit=100)
    )
    await session.add_items([{"role": "user", "content": f"turn {i}"} for i in range(10)])
    model = ScriptedModel([say("Got it")])
    await Runner.run(
        weather_agent(model),
        "New question",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=2)),
    )
    assert contents(model.last_input) == ["turn 8", "turn 9", "New question"]


async def test_pop_moves_the_head_back_and_keeps_the_item_in_the_graph(
    any_store: Any, twin: ctxstore.Store
) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    assert await session.pop_item() is None  # no chat yet
    items: list[Any] = [
        {"role": "user", "content": "Hello"},
        {"role": "assistant", "content": "Hi there!"},
        {"role": "user", "content": "How are you?"},
    ]
    await session.add_items(items)
    assert await session.pop_item() == items[2]
    assert await session.get_items() == items[:2]
    assert twin.get_branch("chat-1").name == "main-v2"  # the active branch
    assert contents(stored(twin)) == ["Hello", "Hi there!"]
    assert await session.pop_item() == items[1]
    assert await session.pop_item() == items[0]
    assert await session.pop_item() is None  # an empty branch
    assert await session.get_items() == []
    # Nothing was deleted: the first branch still holds all three.
    assert contents([m["message"] for m in twin.load_branch("chat-1", "main").messages]) == [
        "Hello",
        "Hi there!",
        "How are you?",
    ]
    assert len(twin.get_graph("chat-1").messages) == 3
    await session.add_items([{"role": "user", "content": "Again"}])
    assert contents(await session.get_items()) == ["Again"]


async def test_many_pops_keep_short_branch_names(any_store: Any, twin: ctxstore.Store) -> None:
    """Each pop's branch is numbered from the name without its own -v<k>: sibling names
    (main-v2, main-v3, ...), never one nested -v<k> per pop, which would pass the 256 bytes a
    name may have after some eighty pops and leave the session unusable."""
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(130)])
    for i in reversed(range(120)):
        popped = await session.pop_item()
        assert popped is not None
        assert popped["content"] == f"m{i + 10}"
    assert contents(await session.get_items()) == [f"m{i}" for i in range(10)]
    assert twin.get_branch("chat-1").name == "main-v121"
    assert max(len(branch.name) for branch in twin.list_branches("chat-1")) == len("main-v121")


async def test_sessions_popping_at_once_take_distinct_items(any_store: Any) -> None:
    """Two sessions on one chat pop at once: each takes its own item, atomically (the SDK's
    sessions guarantee it); with one item left, one of them gets None."""
    for trial in range(8):
        chat = f"pops-{trial}"
        one = CtxStoreSession(chat, user_id=USER, store=any_store)
        two = CtxStoreSession(chat, user_id=USER, store=any_store)
        await one.add_items(
            [{"role": "user", "content": "first"}, {"role": "user", "content": "second"}]
        )
        popped = await asyncio.gather(one.pop_item(), two.pop_item())
        assert sorted(contents([item for item in popped if item is not None])) == [
            "first",
            "second",
        ]
        assert await one.get_items() == []
        await one.add_items([{"role": "user", "content": "last"}])
        popped = await asyncio.gather(one.pop_item(), two.pop_item())
        assert sorted(popped, key=lambda item: item is None)[1] is None
        assert [contents([item]) for item in popped if item is not None] == [["last"]]


async def test_any_json_item_is_stored_and_given_back_unchanged(
    any_store: Any, twin: ctxstore.Store
) -> None:
    """The SDK's sessions store whatever item they are handed: so does this one (an item with
    neither role nor type is kept as it is, counted as its JSON text, and kept with the item
    before it by windows); the store itself still refuses such an item from anyone else."""
    envelope = {"__enc__": 1, "v": 1, "kid": "k1", "payload": "gAAAAB-opaque"}
    items: list[Any] = [{"role": "user", "content": "hi"}, envelope, {"custom": [1, {"x": None}]}]
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items(items)
    assert await session.get_items() == items
    assert await session.get_items(limit=1) == items[2:]
    assert await session.pop_item() == items[2]
    assert stored(twin) == items[:2]
    with pytest.raises(ctxstore.ValidationError, match="got neither"):
        twin.append("chat-1", None, [envelope], expected_head=None, on_conflict="rebase")
    exported = list(twin.export_chat("chat-1"))
    twin.import_chat(exported, chat_id="copy")
    assert stored(twin, "copy") == items[:2]


def test_an_opaque_item_counts_as_its_json_text_and_continues_its_group() -> None:
    from ctxstore.messages.tokens import MESSAGE_OVERHEAD_TOKENS, count_tokens
    from ctxstore.messages.tool_groups import continues_tool_group, safe_cut_point

    envelope = {"__enc__": 1, "payload": "é"}
    text = '{"__enc__":1,"payload":"é"}'
    assert count_tokens(envelope, estimate_tokens=len) == MESSAGE_OVERHEAD_TOKENS + len(text)
    assert continues_tool_group(envelope)
    history = [{"role": "user", "content": "q"}, envelope, envelope]
    assert safe_cut_point(history, 1) == 0  # no cut lands before an opaque item


async def test_the_sdks_encrypted_session_wraps_this_one(any_store: Any) -> None:
    """The SDK's own EncryptedSession stores envelopes (neither role nor type) in the session
    it wraps: with this one underneath, items go in and come back, and a pop takes the newest."""
    from agents.extensions.memory.encrypt_session import EncryptedSession

    inner = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    session = EncryptedSession(
        session_id="chat-1",
        underlying_session=inner,  # type: ignore[arg-type]
        encryption_key="a high-entropy key for this test only",
    )
    items: list[Any] = [
        {"role": "user", "content": "What is the weather?"},
        {"role": "assistant", "content": "Sunny."},
    ]
    await session.add_items(items)
    assert await session.get_items() == items
    assert all("__enc__" in item for item in await inner.get_items())
    assert await session.pop_item() == items[1]
    assert await session.get_items() == items[:1]


async def test_an_add_retried_after_a_lost_reply_is_applied_once(
    redis_server: servers.RedisProcess, namespace: str
) -> None:
    """The first add's write goes through and its reply is lost (the connection drops twice:
    the store's own resend loses its reply too): the session's retry of the same items is
    applied once; the same items added again afterwards, or by another session, are writes of
    their own."""
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    from tests.support.proxy import ReplyDroppingProxy

    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        store = ctxstore.connect(
            f"redis://127.0.0.1:{proxy.port}/0",
            namespace=namespace,
            redis_options={"retry": Retry(NoBackoff(), 0)},
        )
        session = CtxStoreSession("chat-1", store=store.for_user(USER))
        await session.add_items([{"role": "user", "content": "first"}])
        item = [{"role": "user", "content": "once"}]
        proxy.drop_next_reply(times=2)
        with pytest.raises(ctxstore.BackendUnavailableError):
            await session.add_items(item)
        await session.add_items(item)  # the retry
        assert contents(stored(store.admin())) == ["first", "once"]
        await session.add_items(item)  # the same item again: a new write
        await CtxStoreSession("chat-1", store=store.for_user(USER)).add_items(item)
        assert contents(stored(store.admin())) == ["first", "once", "once", "once"]
        store.close()


async def test_another_users_chat_is_refused(any_store: Any, twin: ctxstore.Store) -> None:
    await CtxStoreSession("chat-1", user_id=USER, store=any_store).add_items(
        [{"role": "user", "content": "mine"}]
    )
    intruder = CtxStoreSession("chat-1", user_id="mallory", store=any_store)
    # Another user's session reads as one that does not exist: empty, nothing to pop or clear.
    assert await intruder.get_items() == []
    assert await intruder.pop_item() is None
    await intruder.clear_session()
    # Writing would create it, and its id is taken: refused as a chat this user cannot see.
    with pytest.raises(ctxstore.ChatNotFoundError):
        await intruder.add_items([{"role": "user", "content": "theirs"}])
    assert contents(stored(twin)) == ["mine"]


async def test_bad_items_and_arguments_are_refused_before_any_write(
    any_store: Any, twin: ctxstore.Store
) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items([{"role": "user", "content": "ok"}])
    with pytest.raises(ctxstore.ValidationError):
        await session.add_items([{"role": "user", "content": "x"}, {"role": ""}])  # type: ignore[list-item]
    with pytest.raises(ctxstore.ValidationError):
        await session.add_items([{"role": "user", "content": "x"}, {"type": 3}])  # type: ignore[list-item]
    with pytest.raises(ctxstore.ValidationError):
        await session.add_items(["text"])  # type: ignore[list-item]
    with pytest.raises(ctxstore.ValidationError):
        await session.get_items(limit="2")  # type: ignore[arg-type]
    assert contents(stored(twin)) == ["ok"]
    with pytest.raises(ctxstore.errors.InvalidIdError):
        CtxStoreSession("a{b}", user_id=USER, store=any_store)
    with pytest.raises(ctxstore.errors.InvalidIdError):
        CtxStoreSession("chat-1", user_id="", store=any_store)
    with pytest.raises(ctxstore.errors.ConfigurationError):
        CtxStoreSession("chat-1", user_id=USER, store=any_store, url="memory://")
    with pytest.raises(ctxstore.errors.ConfigurationError):
        CtxStoreSession("chat-1", user_id=USER, store="redis://x")  # type: ignore[arg-type]


async def test_url_opens_a_store_of_its_own() -> None:
    session = CtxStoreSession("chat-1", user_id=USER, url="memory://agents-url")
    await session.add_items([{"role": "user", "content": "hi"}])
    reader = ctxstore.connect("memory://agents-url").admin()
    assert contents(stored(reader)) == ["hi"]
    session.close()
    reader.close()


# Not on a Cluster, where a pipeline is one send per node it reaches (the index touches).
@pytest.mark.parametrize("backend", ["memory", "redis"], indirect=True)
async def test_round_trips(any_store: Any, backend: str) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await session.add_items([{"role": "user", "content": "first"}])  # creates the chat
    await session.get_items()
    with trace_wire() as wire:
        await session.add_items(
            [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
        )
        await session.get_items()
        await session.get_items(limit=1)
    assert wire.round_trips == 3


# --- many writers -------------------------------------------------------------------------------


async def test_concurrent_sessions_in_threads_lose_nothing(sync_store: ctxstore.Store) -> None:
    writers, per_writer = 5, 8
    start = threading.Barrier(writers)

    def write(index: int) -> None:
        session = CtxStoreSession("chat-1", user_id=USER, store=sync_store)
        start.wait()

        async def go() -> None:
            for n in range(per_writer):
                await session.add_items(
                    [
                        {"role": "user", "content": f"w{index}-{n}"},
                        {"role": "assistant", "content": f"w{index}-{n}!"},
                    ]
                )

        asyncio.run(go())  # each thread has its own event loop, as with run_sync

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check_every_write_landed(stored(sync_store), writers, per_writer)


async def test_concurrent_tasks_on_one_session_lose_nothing(
    any_store: Any, twin: ctxstore.Store
) -> None:
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)

    async def write(index: int) -> None:
        for n in range(5):
            await session.add_items(
                [
                    {"role": "user", "content": f"w{index}-{n}"},
                    {"role": "assistant", "content": f"w{index}-{n}!"},
                ]
            )

    await asyncio.gather(*(write(i) for i in range(4)))
    check_every_write_landed(stored(twin), 4, 5)


def check_every_write_landed(items: list[dict[str, Any]], writers: int, per_writer: int) -> None:
    """Every add_items landed once, whole (its two items together), each writer's in order."""
    texts = contents(items)
    assert len(texts) == 2 * writers * per_writer
    assert sorted(texts[0::2]) == sorted(
        f"w{i}-{n}" for i in range(writers) for n in range(per_writer)
    )
    assert texts[1::2] == [text + "!" for text in texts[0::2]]
    for i in range(writers):
        mine = [text for text in texts[0::2] if text.startswith(f"w{i}-")]
        assert mine == [f"w{i}-{n}" for n in range(per_writer)]


def _process_writer(index: int, barrier: Any, url: str, namespace: str, per_writer: int) -> int:
    store = ctxstore.connect(url, namespace=namespace).admin()
    session = CtxStoreSession("chat-1", user_id=USER, store=store)

    async def go() -> None:
        await session.get_items()  # warm up: connection, server checks, scripts
        barrier.wait(timeout=60)
        for n in range(per_writer):
            await session.add_items(
                [
                    {"role": "user", "content": f"w{index}-{n}"},
                    {"role": "assistant", "content": f"w{index}-{n}!"},
                ]
            )

    asyncio.run(go())
    store.close()
    return per_writer


@pytest.mark.slow
def test_concurrent_sessions_in_processes_lose_nothing(server_backend: str, namespace: str) -> None:
    writers, per_writer = 3, 15
    run_workers(_process_writer, writers, server_backend, namespace, per_writer)
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    check_every_write_landed(stored(store), writers, per_writer)
    assert store.verify_chat("chat-1").ok
    store.close()


# --- with the context engine --------------------------------------------------------------------


async def test_a_rewind_through_the_engine_shows_in_the_session(
    any_store: Any, twin: ctxstore.Store
) -> None:
    model = ScriptedModel(
        [call_weather("c1", "Paris")],
        [say("Sunny in Paris.")],
        [say("Rome is sunny too.")],
        [say("Berlin: cloudy.")],
    )
    agent = weather_agent(model)
    session = CtxStoreSession("chat-1", user_id=USER, store=any_store)
    await Runner.run(agent, "Weather in Paris?", session=session)

    engine = ctxstore.ContextEngine(store=twin, chat_id="chat-1", user_id=USER)
    context = engine.resolve()  # the engine reads the SDK's items as they are
    assert [m.get("type", m.get("role")) for m in context.messages] == [
        "user",
        "function_call",
        "function_call_output",
        "message",
    ]
    first_answer = engine.head_message_id
    assert first_answer is not None
    engine.checkpoint("after-paris")

    await Runner.run(agent, "And Rome?", session=session)
    assert len(await session.get_items()) == 6

    engine.rewind(first_answer)  # main-v2 at the first answer, active
    assert contents(await session.get_items()) == [
        "Weather in Paris?",
        '{"city": "Paris"}',
        "sunny in Paris",
        "Sunny in Paris.",
    ]
    await Runner.run(agent, "And Berlin?", session=session)
    assert contents(model.last_input)[-1] == "And Berlin?"
    assert "And Rome?" not in contents(model.last_input)
    assert twin.get_branch("chat-1").name == "main-v2"
    assert contents(stored(twin))[-2:] == ["And Berlin?", "Berlin: cloudy."]

    engine.restore("after-paris")  # another branch at the checkpoint
    assert len(await session.get_items()) == 4
    # The rewound turns are all still in the graph.
    assert len(twin.get_graph("chat-1").messages) == 8
