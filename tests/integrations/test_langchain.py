"""CtxStoreChatMessageHistory: LangChain's chat message history on a ctxstore chat.

``RunnableWithMessageHistory`` drives a fake chat model (langchain_core's
``FakeMessagesListChatModel``) through turns with tool calls; every test runs on every
backend, through a sync and an async store, with LangChain's sync and async entry points.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory

import ctxstore
from ctxstore.integrations.langchain import CtxStoreChatMessageHistory
from tests.store.test_concurrency import run_workers

USER = "alice"

#: LangChain deprecates its own RunnableWithMessageHistory (1.x); it still drives histories.
pytestmark = pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")


def stored(store: ctxstore.Store, chat_id: str = "chat-1") -> list[dict[str, Any]]:
    return [m["message"] for m in store.load_branch(chat_id).messages]


class Recorder:
    """A model step that keeps the messages each call received."""

    def __init__(self, *responses: BaseMessage) -> None:
        self.model = FakeMessagesListChatModel(responses=list(responses))
        self.seen: list[list[BaseMessage]] = []

    def __call__(self, prompt: Any) -> BaseMessage:
        self.seen.append(list(prompt.to_messages()))
        return self.model.invoke(prompt)


PROMPT = ChatPromptTemplate.from_messages(
    [("system", "Answer briefly."), MessagesPlaceholder("history"), ("human", "{question}")]
)


def chat_chain(recorder: Recorder, store: Any) -> RunnableWithMessageHistory:
    return RunnableWithMessageHistory(
        PROMPT | RunnableLambda(recorder),
        lambda session_id: CtxStoreChatMessageHistory(session_id, user_id=USER, store=store),
        input_messages_key="question",
        history_messages_key="history",
    )


def config(session: str) -> Any:
    return {"configurable": {"session_id": session}}


@pytest.fixture
def twin_store(backend: str, namespace: str) -> Iterator[ctxstore.Store]:
    """A sync store beside ``any_store`` for reading back what the history wrote."""
    store = ctxstore.connect(backend, namespace=namespace).admin()
    yield store
    store.close()


def texts(messages: list[BaseMessage]) -> list[Any]:
    return [(type(m).__name__, m.content) for m in messages]


# --- turns through RunnableWithMessageHistory ---------------------------------------------------


async def test_turns_keep_the_history_sync_and_async(
    any_store: Any, backend: str, namespace: str
) -> None:
    recorder = Recorder(AIMessage("Lisbon."), AIMessage("Portugal."), AIMessage("About 500,000."))
    chain = chat_chain(recorder, any_store)
    if isinstance(any_store, ctxstore.Store):
        first = await asyncio.to_thread(chain.invoke, {"question": "Capital?"}, config("chat-1"))
    else:
        first = await chain.ainvoke({"question": "Capital?"}, config("chat-1"))
    assert first.content == "Lisbon."
    await chain.ainvoke({"question": "Of which country?"}, config("chat-1"))
    await chain.ainvoke({"question": "Population?"}, config("chat-1"))
    assert texts(recorder.seen[-1]) == [
        ("SystemMessage", "Answer briefly."),
        ("HumanMessage", "Capital?"),
        ("AIMessage", "Lisbon."),
        ("HumanMessage", "Of which country?"),
        ("AIMessage", "Portugal."),
        ("HumanMessage", "Population?"),
    ]
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    assert stored(reader) == [
        {"role": "user", "content": "Capital?"},
        {"role": "assistant", "content": "Lisbon."},
        {"role": "user", "content": "Of which country?"},
        {"role": "assistant", "content": "Portugal."},
        {"role": "user", "content": "Population?"},
        {"role": "assistant", "content": "About 500,000."},
    ]
    reader.close()


def weather(city: str) -> str:
    return f"sunny in {city}"


async def test_tool_calls_round_trip_and_work_with_the_engine(
    sync_store: ctxstore.Store,
) -> None:
    """A tool loop's messages (a call, its result, the answer) come back as they went in, and
    the engine resolves the same chat into OpenAI-format messages."""
    model = FakeMessagesListChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[
                    {"name": "weather", "args": {"city": "Paris"}, "id": "call_1"},
                    {"name": "weather", "args": {"city": "Rome"}, "id": "call_2"},
                ],
            ),
            AIMessage("Sunny in both."),
        ]
    )

    def agent(prompt: Any) -> list[BaseMessage]:
        messages = list(prompt.to_messages())
        call = model.invoke(messages)
        assert isinstance(call, AIMessage)
        results = [
            ToolMessage(weather(**tc["args"]), tool_call_id=tc["id"], name=tc["name"])
            for tc in call.tool_calls
        ]
        return [call, *results, model.invoke([*messages, call, *results])]

    chain = RunnableWithMessageHistory(
        PROMPT | RunnableLambda(agent),
        lambda session_id: CtxStoreChatMessageHistory(session_id, user_id=USER, store=sync_store),
        input_messages_key="question",
        history_messages_key="history",
    )
    await asyncio.to_thread(chain.invoke, {"question": "Paris and Rome?"}, config("chat-1"))

    items = stored(sync_store)
    assert items[1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "type": "function",
                "id": "call_1",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Paris"})},
            },
            {
                "type": "function",
                "id": "call_2",
                "function": {"name": "weather", "arguments": json.dumps({"city": "Rome"})},
            },
        ],
    }
    assert items[2] == {
        "role": "tool",
        "name": "weather",
        "tool_call_id": "call_1",
        "content": "sunny in Paris",
    }
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=sync_store)
    back = history.messages
    assert [type(m).__name__ for m in back] == [
        "HumanMessage",
        "AIMessage",
        "ToolMessage",
        "ToolMessage",
        "AIMessage",
    ]
    call = back[1]
    assert isinstance(call, AIMessage)
    assert [(tc["name"], tc["args"], tc["id"]) for tc in call.tool_calls] == [
        ("weather", {"city": "Paris"}, "call_1"),
        ("weather", {"city": "Rome"}, "call_2"),
    ]
    assert [(m.tool_call_id, m.content) for m in back[2:4] if isinstance(m, ToolMessage)] == [
        ("call_1", "sunny in Paris"),
        ("call_2", "sunny in Rome"),
    ]
    engine = ctxstore.ContextEngine(store=sync_store, chat_id="chat-1", user_id=USER)
    assert engine.resolve().messages == items
    # A window never cuts the results from their call.
    window = sync_store.load_branch("chat-1", max_messages=3).messages
    assert [m["message"]["role"] for m in window] == ["assistant"]


async def test_sessions_are_isolated(any_store: Any) -> None:
    recorder = Recorder(AIMessage("cats"), AIMessage("dogs"), AIMessage("you like cats"))
    chain = chat_chain(recorder, any_store)
    await chain.ainvoke({"question": "I like cats"}, config("session-1"))
    await chain.ainvoke({"question": "I like dogs"}, config("session-2"))
    await chain.ainvoke({"question": "What do I like?"}, config("session-1"))
    assert texts(recorder.seen[-1])[1:] == [
        ("HumanMessage", "I like cats"),
        ("AIMessage", "cats"),
        ("HumanMessage", "What do I like?"),
    ]


# --- the history methods ------------------------------------------------------------------------


async def test_add_read_and_clear(any_store: Any, backend: str, namespace: str) -> None:
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
    assert await history.aget_messages() == []
    conversation = [SystemMessage("be brief"), HumanMessage("こんにちは"), AIMessage("😊")]
    await history.aadd_messages(conversation)
    await history.aadd_messages([])
    assert texts(await history.aget_messages()) == texts(conversation)
    await history.aclear()
    assert await history.aget_messages() == []
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    with pytest.raises(ctxstore.ChatNotFoundError):
        reader.get_chat("chat-1")
    reader.close()
    await history.aadd_messages([HumanMessage("again")])
    assert texts(await history.aget_messages()) == [("HumanMessage", "again")]


async def test_messages_read_back_equal_to_what_was_added(
    any_store: Any, twin_store: ctxstore.Store
) -> None:
    """Ids, names, additional_kwargs, response_metadata, usage_metadata and a ChatMessage's
    custom role all round-trip (LangChain's own histories keep them); the payload stays the
    OpenAI-format dict the engine reads."""
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
    conversation: list[BaseMessage] = [
        SystemMessage("be brief", id="s1"),
        HumanMessage("hi", id="h1", name="ann", additional_kwargs={"lang": "en"}),
        AIMessage(
            "hello",
            id="a1",
            response_metadata={"model_name": "m", "finish_reason": "stop"},
            usage_metadata={"input_tokens": 3, "output_tokens": 1, "total_tokens": 4},
        ),
        ChatMessage("too terse", role="critic", id="c1"),
        HumanMessage("plain"),
    ]
    await history.aadd_messages(conversation)
    assert await history.aget_messages() == conversation
    assert [m["role"] for m in stored(twin_store)] == [
        "system",
        "user",
        "assistant",
        "critic",
        "user",
    ]
    again = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
    await again.aadd_messages([AIMessage("after the critic")])
    assert texts(await again.aget_messages())[3:] == [
        ("ChatMessage", "too terse"),
        ("HumanMessage", "plain"),
        ("AIMessage", "after the critic"),
    ]


def test_a_custom_role_stored_without_its_extras_still_reads(sync_store: ctxstore.Store) -> None:
    """A chat written before the extras were kept (a payload role LangChain has no class
    for) reads as ChatMessages of that role instead of failing every read."""
    sync_store.upsert_chat("chat-1", USER)
    sync_store.append(
        "chat-1",
        "main",
        [{"role": "critic", "content": "old"}, {"role": "user", "content": "next"}],
        expected_head=None,
    )
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=sync_store)
    assert history.messages == [ChatMessage("old", role="critic"), HumanMessage("next")]


def test_sync_methods(sync_store: ctxstore.Store) -> None:
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=sync_store)
    history.add_user_message("hi")
    history.add_messages([AIMessage("hello"), HumanMessage("bye")])
    assert texts(history.messages) == [
        ("HumanMessage", "hi"),
        ("AIMessage", "hello"),
        ("HumanMessage", "bye"),
    ]
    history.clear()
    assert history.messages == []
    with pytest.raises(ctxstore.ChatNotFoundError):
        sync_store.get_chat("chat-1")


async def test_sync_methods_on_an_async_store_are_refused(backend: str, namespace: str) -> None:
    store = ctxstore.connect_async(backend, namespace=namespace).admin()
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=store)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="async"):
        history.add_messages([HumanMessage("x")])
    with pytest.raises(ctxstore.errors.ConfigurationError):
        _ = history.messages
    with pytest.raises(ctxstore.errors.ConfigurationError):
        history.clear()
    assert await history.aget_messages() == []  # nothing was written
    await store.close()


async def test_a_rewind_through_the_engine_shows_in_the_history(
    any_store: Any, backend: str, namespace: str
) -> None:
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
    await history.aadd_messages(
        [HumanMessage("one"), AIMessage("1"), HumanMessage("two"), AIMessage("2")]
    )
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    engine = ctxstore.ContextEngine(store=reader, chat_id="chat-1", user_id=USER)
    engine.resolve()
    first_answer = reader.load_branch("chat-1").messages[1]["id"]
    engine.rewind(first_answer)
    assert texts(await history.aget_messages()) == [("HumanMessage", "one"), ("AIMessage", "1")]
    await history.aadd_messages([HumanMessage("three")])
    assert reader.get_branch("chat-1").name == "main-v2"
    assert [m["message"]["content"] for m in reader.load_branch("chat-1").messages] == [
        "one",
        "1",
        "three",
    ]
    reader.close()


async def test_bad_input_and_other_users(any_store: Any) -> None:
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
    await history.aadd_messages([HumanMessage("mine")])
    with pytest.raises(ctxstore.ValidationError):
        await history.aadd_messages([HumanMessage("x"), {"role": "user", "content": "dict"}])  # type: ignore[list-item]
    intruder = CtxStoreChatMessageHistory("chat-1", user_id="mallory", store=any_store)
    assert await intruder.aget_messages() == []  # as a history that does not exist
    await intruder.aclear()
    with pytest.raises(ctxstore.ChatNotFoundError):  # creating it: the id is taken
        await intruder.aadd_messages([HumanMessage("theirs")])
    assert texts(await history.aget_messages()) == [("HumanMessage", "mine")]
    with pytest.raises(ctxstore.errors.ConfigurationError):
        CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store, url="memory://")


def test_url_opens_a_store_of_its_own() -> None:
    history = CtxStoreChatMessageHistory("chat-1", user_id=USER, url="memory://langchain-url")
    history.add_messages([HumanMessage("hi")])
    reader = ctxstore.connect("memory://langchain-url").admin()
    assert stored(reader) == [{"role": "user", "content": "hi"}]
    history.close()
    reader.close()


# --- many writers -------------------------------------------------------------------------------


def check_every_write_landed(store: ctxstore.Store, writers: int, per_writer: int) -> None:
    """Every add landed once, whole (question and answer together), each writer's in order."""
    contents = [m["content"] for m in stored(store)]
    assert len(contents) == 2 * writers * per_writer
    assert contents[1::2] == [text + "!" for text in contents[0::2]]
    for i in range(writers):
        assert [t for t in contents[0::2] if t.startswith(f"w{i}-")] == [
            f"w{i}-{n}" for n in range(per_writer)
        ]


def pair(index: int, n: int) -> list[BaseMessage]:
    return [HumanMessage(f"w{index}-{n}"), AIMessage(f"w{index}-{n}!")]


def test_concurrent_writers_in_threads(sync_store: ctxstore.Store) -> None:
    writers, per_writer = 5, 8
    start = threading.Barrier(writers)

    def write(index: int) -> None:
        history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=sync_store)
        start.wait()
        for n in range(per_writer):
            history.add_messages(pair(index, n))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check_every_write_landed(sync_store, writers, per_writer)


async def test_concurrent_async_writers(any_store: Any, backend: str, namespace: str) -> None:
    async def write(index: int) -> None:
        history = CtxStoreChatMessageHistory("chat-1", user_id=USER, store=any_store)
        for n in range(5):
            await history.aadd_messages(pair(index, n))

    await asyncio.gather(*(write(i) for i in range(4)))
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    check_every_write_landed(reader, 4, 5)
    reader.close()


def _process_writer(index: int, barrier: Any, url: str, namespace: str, per_writer: int) -> int:
    history = CtxStoreChatMessageHistory(
        "chat-1", user_id=USER, url=None, store=ctxstore.connect(url, namespace=namespace).admin()
    )
    _ = history.messages  # warm up: connection, server checks, scripts
    barrier.wait(timeout=60)
    for n in range(per_writer):
        history.add_messages(pair(index, n))
    return per_writer


@pytest.mark.slow
def test_concurrent_writers_in_processes(server_backend: str, namespace: str) -> None:
    run_workers(_process_writer, 3, server_backend, namespace, 15)
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    check_every_write_landed(store, 3, 15)
    store.close()
