"""The async paths never hold the event loop: a first ``achat()`` in a fresh process, a first
save of an async engine that counts with another tokenizer, a first write of an async adapter
and a first ``aresume_sse`` run under asyncio's debug mode with ``slow_callback_duration =
0.1`` and log no "Executing ... took" warning (litellm, tiktoken's tables and the like load in
worker threads). ``ctxstore.preload()`` loads them up front. A read of an answer's stream
whose reply is late (the loop was busy) asks again instead of failing the answer."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import streams as answer_stream
from ctxstore.errors import BackendTimeoutError
from tests.support import servers

ROOT = Path(__file__).resolve().parents[2]

FIRST_REQUESTS = r"""
import asyncio, logging, sys
import ctxstore
from ctxstore.frontend import achat, aresume_sse
from ctxstore.integrations.openai_agents import CtxStoreSession

slow = []


class Slow(logging.Handler):
    def emit(self, record):
        if "Executing" in record.getMessage():
            slow.append(record.getMessage()[-300:])


logging.getLogger("asyncio").addHandler(Slow())
# The first saves count with the compact table, and a store then opens tiktoken in a background
# thread. tiktoken builds its encoder holding the GIL (about 0.13 s), which pauses the loop's
# thread whatever it runs and asyncio would charge to that step: the open is held back until
# the requests are done (asked for, checked below), so what is timed is the loop's own thread.
from ctxstore.messages import tokens
asked = []
tokens._open_in_background = lambda: asked.append(True)
# What a server does at import: the store, made once (no I/O yet).
store = ctxstore.connect_async(sys.argv[1], namespace=sys.argv[2])


async def first_requests():
    asyncio.get_running_loop().slow_callback_duration = 0.1
    alice = store.for_user("alice")
    engine = ctxstore.AsyncContextEngine(store=alice, chat_id="c1")
    sent = [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi!"}]}]
    stream = await achat(engine, sent, model="gpt-4o-mini", mock_response="Hello there!")
    async for _chunk in stream:
        pass
    events = await aresume_sse(alice, "c1", stream.stream_id)
    assert events is None or [event async for event in events]
    other = ctxstore.AsyncContextEngine(store=alice, chat_id="c2", model="gpt-4")  # cl100k
    other.set(ctxstore.user("Count me with another tokenizer."))
    await other.save()
    session = CtxStoreSession("c3", store=alice)
    await session.add_items([{"role": "user", "content": "an agent's item"}])
    assert len(await session.get_items()) == 1


asyncio.run(first_requests(), debug=True)
assert asked, "the first saves did not count with the compact table"
print("\n".join(slow) or "none")
"""


def run_first_requests(url: str, namespace: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", FIRST_REQUESTS, url, namespace],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["memory", "redis"])
def test_first_requests_in_a_fresh_process_never_hold_the_loop(
    kind: str, redis_server: servers.RedisProcess, namespace: str
) -> None:
    pytest.importorskip("agents")
    url = "memory://" if kind == "memory" else redis_server.url
    found = run_first_requests(url, namespace)
    if found != "none":  # a busy machine can stall any callback once: a second process tells
        found = run_first_requests(url, namespace + "x")
    assert found == "none"


def test_preload_loads_what_a_first_request_would() -> None:
    loaded = ctxstore.preload("gpt-4o-mini")
    assert "ctxstore.store.async_store" in loaded
    assert "ctxstore.frontend.streams" in loaded
    assert loaded[-1] == "litellm"
    assert "litellm" in sys.modules
    assert ctxstore.preload(llm=False)[-1].startswith("tokenizer")


def test_a_late_stream_read_is_asked_again(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reply of a reader's XREAD (or read script) came after the socket's timeout: the
    reader reads again; three in a row are the server's silence, and fail it."""
    original = answer_stream._read_op
    late = {"left": 2}

    def read_op(*args: Any) -> Any:
        if late["left"]:
            late["left"] -= 1
            raise BackendTimeoutError("Redis did not reply in time")
        return (yield from original(*args))

    store.upsert_chat("c1", "alice")
    stream_id = store.run(
        answer_stream.begin_stream(store.state, "c1", "main", writer_ttl_ms=60_000)
    )
    store.run(
        answer_stream.end_stream(
            store.state, "c1", stream_id, done=True, detail="m9", keep_ms=60_000
        )
    )
    monkeypatch.setattr(answer_stream, "_read_op", read_op)
    assert list(store.read_stream("c1", stream_id)) == []
    late["left"] = 3
    with pytest.raises(BackendTimeoutError):
        list(store.read_stream("c1", stream_id))
