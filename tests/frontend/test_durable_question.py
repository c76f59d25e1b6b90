"""``chat()`` saves the user's message before the first model call, in the round trip that
begins the answer's stream: a worker that fails or dies while it answers leaves the question
in the chat, and the next ``chat()`` carries on from it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

import ctxstore
from ctxstore._core.protocol import Exchange
from ctxstore.frontend.plan import ChatPlan
from tests.frontend.support import collect, start_chat
from tests.support.scripted_model import ScriptedModel

ROOT = Path(__file__).resolve().parents[2]


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    return ScriptedModel().install(monkeypatch)


def texts(store: Any) -> list[tuple[str, str]]:
    """The chat's messages (id, text) through an admin handle or alice's."""
    return [
        (m["id"], m["message"]["parts"][-1].get("text", ""))
        for m in store.load_branch("c1").messages
    ]


def test_the_question_is_stored_before_the_first_model_call(
    make_engine: Any, model: ScriptedModel, backend: str, namespace: str
) -> None:
    seen: list[list[tuple[str, str]]] = []
    other_worker = ctxstore.connect(backend, namespace=namespace).for_user("alice")
    model.on_chunk = lambda index: index == 0 and seen.append(texts(other_worker))
    model.answers = [["Alfama and the castle."]]
    stream = start_chat(make_engine(), [ui_user("u1", "Plan a weekend in Lisbon.")])
    collect(stream)
    assert seen == [[("u1", "Plan a weekend in Lisbon.")]]  # durable while the model ran
    assert texts(other_worker) == [
        ("u1", "Plan a weekend in Lisbon."),
        (stream.message_id, "Alfama and the castle."),
    ]


@pytest.mark.parametrize("kind", ["memory", "redis", "cluster"])
def test_the_question_and_the_stream_begin_in_one_round_trip(
    request: pytest.FixtureRequest,
    kind: str,
    namespace: str,
    model: ScriptedModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.conftest import backend_url

    store = ctxstore.connect(backend_url(request, kind), namespace=namespace)
    engine = ctxstore.ContextEngine(store=store.for_user("alice"), chat_id="c1")
    model.answers = [["ok"], ["ok again"]]
    # A first answer loads the scripts (a server that has not seen one answers NOSCRIPT).
    collect(ctxstore.chat(engine, [ui_user("u1", "hi")], model="gpt-4o-mini"))
    started: list[int] = []
    original = ChatPlan.start

    def start(self: ChatPlan, context: Any) -> Any:
        # Round trips as the driver counts them: each request it sends is one (a Cluster
        # pipeline goes to the nodes of its keys at once).
        requests = [0]
        send = Exchange.request

        def counted(exchange: Exchange[Any]) -> Any:
            requests[0] += 1
            return send(exchange)

        with mock.patch.object(Exchange, "request", counted):
            yield from original(self, context)
        started.append(requests[0])

    monkeypatch.setattr(ChatPlan, "start", start)
    collect(ctxstore.chat(engine, [ui_user("u2", "and again")], model="gpt-4o-mini"))
    assert started == [1]
    assert [m["id"] for m in store.load_branch("c1", user_id="alice").messages][2] == "u2"


def test_a_failed_answer_leaves_the_question_and_the_next_chat_answers_it(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["this answer never ends"]]
    model.fail_at = 1
    failed = start_chat(make_engine(), [ui_user("u1", "Plan a weekend in Lisbon.")])
    chunks = collect(failed)
    assert chunks[-1]["type"] == "error"
    assert failed.state == "failed"
    store = make_engine.store
    assert texts(store) == [("u1", "Plan a weekend in Lisbon.")]
    model.fail_at = None
    model.answers = [["Alfama."]]
    again = start_chat(
        make_engine(), [ui_user("u1", "Plan a weekend in Lisbon.")], trigger="regenerate-message"
    )
    collect(again)
    assert texts(store) == [("u1", "Plan a weekend in Lisbon."), (again.message_id, "Alfama.")]


WORKER = """
import tests  # in the encrypted pass, its key provider (tests/support/encrypted_pass.py)
import sys, time
import litellm
import ctxstore

url, namespace = sys.argv[1:3]


def completion(**request):
    if not request.get("stream"):
        return {"choices": [{"message": {"role": "assistant", "content": "A title"}}]}

    def chunks():
        yield {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Day one"}}]}
        print("answering", flush=True)
        time.sleep(600)  # the worker is killed here, mid-answer

    return chunks()


litellm.completion = completion
store = ctxstore.connect(url, namespace=namespace)
engine = ctxstore.ContextEngine(store=store.for_user("alice"), chat_id="c1")
message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Plan a weekend."}]}
stream = ctxstore.chat(engine, [message], model="gpt-4o-mini", writer_ttl=3.0)
for chunk in stream:
    pass
"""


def test_a_worker_killed_while_it_answers_leaves_the_question_and_the_chat_carries_on(
    server_backend: str, namespace: str, model: ScriptedModel
) -> None:
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, server_backend, namespace],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
    )
    try:
        line = worker.stdout.readline().strip()  # type: ignore[union-attr]
        assert line == "answering", worker.stderr.read()  # type: ignore[union-attr]
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=30)
    finally:
        worker.kill()
    store = ctxstore.connect(server_backend, namespace=namespace).for_user("alice")
    assert texts(store) == [("u1", "Plan a weekend.")]
    stream_id = store.active_stream("c1")
    assert stream_id is not None
    started = time.monotonic()
    # A reader that follows the answer sees it fail once the writer's deadline (3 s after its
    # last write) has passed; then the stream is gone, and a reload finds no live answer.
    with pytest.raises(ctxstore.errors.StreamFailedError, match="writer"):
        list(store.read_stream("c1", stream_id))
    assert time.monotonic() - started < 30
    time.sleep(0.1)
    assert store.active_stream("c1") is None
    engine = ctxstore.ContextEngine(store=store, chat_id="c1")
    model.answers = [["Alfama."]]
    again = ctxstore.chat(
        engine,
        [ui_user("u1", "Plan a weekend.")],
        model="gpt-4o-mini",
        trigger="regenerate-message",
    )
    collect(again)
    assert texts(store) == [("u1", "Plan a weekend."), (again.message_id, "Alfama.")]
    model.answers = [["Ribeira."]]
    follow_up = ctxstore.chat(
        ctxstore.ContextEngine(store=store, chat_id="c1"),
        [ui_user("u2", "And Porto?")],
        model="gpt-4o-mini",
    )
    collect(follow_up)
    assert [text for _id, text in texts(store)] == [
        "Plan a weekend.",
        "Alfama.",
        "And Porto?",
        "Ribeira.",
    ]
