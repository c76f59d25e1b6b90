"""An AsyncStore serves the event loop of its first call: another running loop gets a
ConfigurationError at once (not a hang until the socket times out), and a loop that follows a
closed one takes the store over."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.errors import ConfigurationError


@pytest.fixture
def other_loop() -> Iterator[asyncio.AbstractEventLoop]:
    """An event loop running in a thread of its own, as a thread pool's worker keeps one."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_a_second_running_loop_is_refused_at_once(
    backend: str, namespace: str, snap: Any, other_loop: asyncio.AbstractEventLoop
) -> None:
    store = ctxstore.connect_async(backend, namespace=namespace).admin()
    asyncio.run_coroutine_threadsafe(store.upsert_chat("c1", "alice"), other_loop).result(30)
    before = snap()

    async def from_here() -> None:
        await store.upsert_chat("c2", "alice")

    started = time.monotonic()
    with pytest.raises(ConfigurationError, match="serves the event loop of its first call"):
        asyncio.run(from_here())
    assert time.monotonic() - started < 2  # at once, not after a socket timeout
    assert snap() == before
    chat = asyncio.run_coroutine_threadsafe(store.get_chat("c1"), other_loop).result(30)
    assert chat.user_id == "alice"  # the first loop is still served
    asyncio.run_coroutine_threadsafe(store.close(), other_loop).result(30)


def test_a_loop_after_a_closed_one_takes_the_store_over(backend: str, namespace: str) -> None:
    """On a single server and the embedded store; a Cluster client keeps its connections in
    its nodes, so a new loop there is refused like a second running one."""
    store = ctxstore.connect_async(backend, namespace=namespace).admin()

    async def write(chat: str) -> None:
        await store.upsert_chat(chat, "alice")

    asyncio.run(write("c1"))  # asyncio.run closes its loop when it returns
    if backend.startswith("redis+cluster"):
        with pytest.raises(ConfigurationError, match="one AsyncStore per event loop"):
            asyncio.run(write("c2"))
        return
    asyncio.run(write("c2"))
    reader = ctxstore.connect(backend, namespace=namespace).admin()
    assert [reader.get_chat(chat).user_id for chat in ("c1", "c2")] == ["alice", "alice"]
    reader.close()
    asyncio.run(store.close())
