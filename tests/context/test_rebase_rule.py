"""An answer is never separated from what it answers.

The natural chat-backend handler saves the user's message, calls the model, then saves the
answer. With concurrent requests on one chat, the answer's save finds other turns' messages after
its question. With ``on_conflict="rebase"`` (the default) the engine's own last saved message is
its anchor: a save that finds the head moved past it goes onto a new side branch from it (not
activated), and the engine moves there. An engine that has saved nothing yet rebases onto the
head (a new question after the others is in order). With ``turn("enqueue")`` the turns run one
after the other and the main line alternates question, answer.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from typing import Any

import pytest

import ctxstore
from tests.conftest import backend_url


def test_a_save_after_another_turns_message_goes_to_a_side_branch(make_engine: Any) -> None:
    store = make_engine.store
    engine = make_engine()
    engine.set(ctxstore.user("q1"))
    question = engine.save()
    store.append("c1", "main", [{"role": "user", "content": "q2"}], expected_head=question)
    engine.set(ctxstore.assistant("a1"))
    saved = engine.save()
    assert saved.forked
    assert saved.forked_at == question
    assert saved.branch == engine.branch != "main"
    assert engine.head_message_id == saved
    assert [m["message"]["content"] for m in store.load_branch("c1").messages] == ["q1", "q2"]
    side = store.load_branch("c1", saved.branch).messages
    assert [m["message"]["content"] for m in side] == ["q1", "a1"]
    assert store.get_chat("c1").active_branch == "main"  # the side branch is not activated
    # The engine goes on where its answer is.
    engine.set(ctxstore.user("q3"))
    follow = engine.save()
    assert not follow.forked
    assert follow.branch == saved.branch


def test_a_save_with_nothing_in_between_stays_on_the_branch(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(ctxstore.user("q1"))
    engine.save()
    engine.resolve()
    engine.set(ctxstore.assistant("a1"))
    saved = engine.save()
    assert not saved.forked
    assert saved.branch == "main"


def test_an_engine_that_saved_nothing_rebases_onto_the_head(make_engine: Any) -> None:
    first, second = make_engine(), make_engine()
    second.resolve()  # sees an empty branch
    first.set(ctxstore.user("q1"))
    first.save()
    second.set(ctxstore.user("q2"))
    saved = second.save()
    assert not saved.forked
    assert saved.branch == "main"
    contents = [m["message"]["content"] for m in make_engine.store.load_branch("c1").messages]
    assert contents == ["q1", "q2"]


def test_raise_and_fork_policies_are_unchanged(make_engine: Any) -> None:
    store = make_engine.store
    raising = make_engine(on_conflict="raise")
    raising.set(ctxstore.user("q1"))
    head = raising.save()
    store.append("c1", "main", [{"role": "user", "content": "x"}], expected_head=head)
    raising.set(ctxstore.assistant("a1"))
    with pytest.raises(ctxstore.HeadConflictError):
        raising.save()


def test_rewinding_drops_the_anchor(make_engine: Any) -> None:
    """After a rewind the engine works on the new branch's head like a fresh one."""
    store = make_engine.store
    engine = make_engine()
    engine.set(ctxstore.user("q1"), ctxstore.assistant("a1"))
    engine.save()
    root = store.load_branch("c1").messages[0]["id"]
    engine.rewind(root)
    store.append("c1", engine.branch, [{"role": "user", "content": "x"}], expected_head=root)
    engine.set(ctxstore.user("q2"))
    saved = engine.save()  # rebased: the engine had saved nothing on this branch
    assert not saved.forked
    side = store.load_branch("c1", engine.branch).messages
    assert [m["message"]["content"] for m in side] == ["q1", "x", "q2"]


# --- many requests at once ---------------------------------------------------------------------

CHATS = 5
REQUESTS_PER_CHAT = 10


def handle(store: ctxstore.Store, chat: str, index: int, turn: str | None) -> None:
    """One request of a chat backend: save the question, read the context, answer, save."""
    engine = ctxstore.ContextEngine(store=store, chat_id=chat, user_id="alice")

    def body() -> None:
        engine.set(ctxstore.user(f"q{index}"))
        engine.save()
        engine.resolve()
        time.sleep(random.uniform(0.0, 0.02))  # the model call
        engine.set(ctxstore.assistant(f"a{index}"))
        engine.save()

    if turn is None:
        body()
    else:
        with engine.turn(turn, wait=60):  # type: ignore[arg-type]
            body()


async def ahandle(store: ctxstore.AsyncStore, chat: str, index: int, turn: str | None) -> None:
    engine = ctxstore.AsyncContextEngine(store=store, chat_id=chat, user_id="alice")

    async def body() -> None:
        engine.set(ctxstore.user(f"q{index}"))
        await engine.save()
        await engine.resolve()
        await asyncio.sleep(random.uniform(0.0, 0.02))
        engine.set(ctxstore.assistant(f"a{index}"))
        await engine.save()

    if turn is None:
        await body()
    else:
        async with engine.turn(turn, wait=60):  # type: ignore[arg-type]
            await body()


def check_answers(store: ctxstore.Store, chat: str, *, serialized: bool) -> None:
    graph = store.get_graph(chat)
    by_id = {node.id: node for node in graph.messages}
    texts = sorted(node.preview for node in graph.messages)
    expected = sorted(f"{kind}{i}" for i in range(REQUESTS_PER_CHAT) for kind in "qa")
    assert texts == expected  # every question and answer stored exactly once
    for node in graph.messages:
        if node.preview.startswith("a"):
            assert node.parent_id is not None
            parent = by_id[node.parent_id]
            assert parent.preview == "q" + node.preview[1:], f"{node.preview} follows {parent}"
    main = [m["message"]["content"] for m in store.load_branch(chat, "main").messages]
    if serialized:
        assert len(main) == 2 * REQUESTS_PER_CHAT
        assert [text[1:] for text in main[::2]] == [text[1:] for text in main[1::2]]
        assert len(graph.branches) == 1


@pytest.mark.parametrize("turn", [None, "enqueue"])
@pytest.mark.parametrize("kind", ["memory", "redis", "cluster"])
def test_concurrent_requests_keep_each_answer_with_its_question(
    request: pytest.FixtureRequest, kind: str, namespace: str, turn: str | None
) -> None:
    url = backend_url(request, kind)
    store = ctxstore.connect(url, namespace=namespace).admin()
    chats = [f"chat{i}" for i in range(CHATS)]
    for chat in chats:
        store.upsert_chat(chat, "alice")
    threads = [
        threading.Thread(target=handle, args=(store, chat, index, turn))
        for index in range(REQUESTS_PER_CHAT)
        for chat in chats
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for chat in chats:
        check_answers(store, chat, serialized=turn is not None)
    store.close()


@pytest.mark.parametrize("turn", [None, "enqueue"])
@pytest.mark.parametrize("kind", ["memory", "redis", "cluster"])
def test_concurrent_async_requests_keep_each_answer_with_its_question(
    request: pytest.FixtureRequest, kind: str, namespace: str, turn: str | None
) -> None:
    url = backend_url(request, kind)
    chats = [f"chat{i}" for i in range(CHATS)]

    async def serve() -> None:
        store = ctxstore.connect_async(url, namespace=namespace).admin()
        for chat in chats:
            await store.upsert_chat(chat, "alice")
        await asyncio.gather(
            *(
                ahandle(store, chat, index, turn)
                for index in range(REQUESTS_PER_CHAT)
                for chat in chats
            )
        )
        await store.close()

    asyncio.run(serve())
    store = ctxstore.connect(url, namespace=namespace).admin()
    for chat in chats:
        check_answers(store, chat, serialized=turn is not None)
    store.close()
