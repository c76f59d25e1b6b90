"""A chat answer for a client that reconnects (``resume_sse``), followed live by another worker,
stopped from another worker (``stop_stream``), and cancelled with its task."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

import ctxstore
from ctxstore.frontend import aresume_sse, astop_stream, stop_stream
from tests.frontend.support import cancel_reading, collect, resume_events, sse, start_chat
from tests.support.facade import SyncOverAsync
from tests.support.node import sdk_read
from tests.support.scripted_model import ScriptedModel


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def without_ids(events: list[str]) -> list[str]:
    return [event.split("\n", 1)[1] if event.startswith("id: ") else event for event in events]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    return ScriptedModel().install(monkeypatch)


def test_a_finished_answer_replays_as_it_was_sent(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["a replayed answer"]]
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    sent = sse(stream)
    replay = resume_events(make_engine.store, stream.stream_id)
    assert without_ids(replay) == sent
    ids = [event.split("\n", 1)[0][4:] for event in replay if event.startswith("id: ")]
    assert ids, "each piece's last event carries the piece's id"
    rest = resume_events(make_engine.store, stream.stream_id, after=ids[0])
    assert without_ids(rest) == sent[len(without_ids(replay)) - len(without_ids(rest)) :]
    assert len(rest) < len(replay)


def test_resuming_after_any_event_replays_exactly_the_events_that_followed(
    make_engine: Any, model: ScriptedModel
) -> None:
    """Every event carries its own id, the events inside a piece too: a client whose
    connection dropped after any of them resumes with its ``Last-Event-ID`` and sees each
    event once."""
    model.answers = [["a longer answer, streamed in many small chunks, " * 3]]
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    collect(stream)
    replay = resume_events(make_engine.store, stream.stream_id)
    assert replay[-1] == "data: [DONE]\n\n"
    ids = [event.split("\n", 1)[0].removeprefix("id: ") for event in replay[:-1]]
    assert all(event.startswith("id: ") for event in replay[:-1])
    assert len(set(ids)) == len(ids)
    assert any(":" in event_id for event_id in ids)  # pieces of several events: ids inside
    assert any(":" not in event_id for event_id in ids)
    for index, event_id in enumerate(ids):
        assert (
            resume_events(make_engine.store, stream.stream_id, after=event_id)
            == replay[index + 1 :]
        ), event_id


def test_a_malformed_event_id_is_refused(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["ok"]]
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    collect(stream)
    for bad in ("nope", "1-0:x", "1-0:", "x-0:1"):
        with pytest.raises(ctxstore.ValidationError):
            resume_events(make_engine.store, stream.stream_id, after=bad)


def test_nothing_to_resume_when_nothing_is_streaming(make_engine: Any) -> None:
    make_engine.store.upsert_chat("c1", "alice")
    store = make_engine.store
    if isinstance(store, SyncOverAsync):
        assert store._loop.run(aresume_sse(store.wrapped, "c1")) is None
    else:
        assert ctxstore.resume_sse(store, "c1") is None


def test_a_reader_follows_the_answer_live_and_the_client_builds_the_saved_message(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["an answer that takes its time to come"]]
    model.delay = 0.01
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    follower: list[str] = []
    reader = threading.Thread(
        target=lambda: follower.extend(resume_events(make_engine.store, None)), daemon=True
    )
    reader.start()  # the answer is being streamed on the active branch: found without its id
    collect(stream)
    reader.join(timeout=30)
    client = sdk_read("".join(follower))
    assert client["errors"] == []
    saved = make_engine.store.load_branch("c1").messages[-1]
    assert client["message"] == {"id": saved["id"], **saved["message"]}


def test_stop_stream_from_another_worker_saves_what_was_streamed(
    make_engine: Any, model: ScriptedModel, backend: str, namespace: str, clock: Any
) -> None:
    model.answers = [["one two three four five six seven eight nine ten eleven"]]
    model.delay = 0.02
    stream = start_chat(make_engine(), [ui_user("u1", "count")])
    # another worker: it knows the chat (and shares the test's clock)
    other = ctxstore.connect(backend, namespace=namespace, clock=clock).admin()

    def stop_at(index: int) -> None:
        if index == 4:
            assert stop_stream(other, "c1")

    model.on_chunk = stop_at
    chunks = collect(stream)
    assert chunks[-1] == {"type": "abort", "reason": "stopped: the answer's stream was closed"}
    saved = make_engine.store.load_branch("c1").messages
    assert [m["id"] for m in saved] == ["u1", stream.message_id]
    assert saved[1]["message"]["metadata"] == {"ctxstore": {"aborted": True}}
    replay = resume_events(make_engine.store, stream.stream_id)
    assert replay[-2] == 'data: {"type":"abort","reason":"stopped by the user"}\n\n'
    assert not stop_stream(other, "c1")  # nothing live any more
    other.close()


def test_astop_stream_stops_the_active_answer(
    make_engine: Any, model: ScriptedModel, backend: str, namespace: str, clock: Any
) -> None:
    model.answers = [["a b c d e f g h i j"]]
    model.delay = 0.02
    stream = start_chat(make_engine(), [ui_user("u1", "go")])
    stopped: list[bool] = []

    def stop_in_another_worker() -> None:
        async def stop() -> bool:
            other = ctxstore.connect_async(backend, namespace=namespace, clock=clock).admin()
            try:
                return await astop_stream(other, "c1")
            finally:
                await other.close()

        stopped.append(asyncio.run(stop()))

    def stop_at(index: int) -> None:
        if index == 3:
            worker = threading.Thread(target=stop_in_another_worker)
            worker.start()
            worker.join(timeout=30)

    model.on_chunk = stop_at
    chunks = collect(stream)
    assert stopped == [True]
    assert chunks[-1]["type"] == "abort"


def test_a_cancelled_task_saves_what_was_streamed(
    make_engine: Any, model: ScriptedModel, loop_thread: Any
) -> None:
    engine = make_engine()
    if not isinstance(engine, SyncOverAsync):
        pytest.skip("a task is the async shell's")
    model.answers = [["a b c d e f g h i j k l m n o p"]]
    model.delay = 0.01
    stream = loop_thread.run(ctxstore.achat(engine.wrapped, [ui_user("u1", "go")], model="m"))
    cancel_reading(stream, loop_thread, after=6, repeat=False)
    saved = make_engine.store.load_branch("c1").messages
    assert saved[-1]["id"] == stream.message_id
    assert saved[-1]["message"]["metadata"] == {"ctxstore": {"aborted": True}}
    assert stream.state == "stopped"
