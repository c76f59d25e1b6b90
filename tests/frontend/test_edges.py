"""The edges of a chat answer: closing a stream nobody read, an interrupt or a cancel during the
final save (whether or not it was applied), a failure after the save, a consumer that leaves at
the last chunks, answering again a question an error left alone, a cancel that a framework
repeats at every await; and the reader of model chunks and the answer builder on the shapes
providers send."""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import streams as answer_stream
from ctxstore.engine.core import EngineCore
from ctxstore.frontend.protocol import AnswerBuilder
from ctxstore.frontend.reading import ModelCallReader
from tests.frontend.support import cancel_reading, collect, resume_events, start_chat
from tests.support.facade import SyncOverAsync
from tests.support.scripted_model import ScriptedModel


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def stored(store: Any) -> list[dict[str, Any]]:
    return [{"id": m["id"], **m["message"]} for m in store.load_branch("c1").messages]


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    return ScriptedModel().install(monkeypatch)


def test_closing_a_stream_nobody_read_saves_the_question_and_raises_nothing(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["never asked for"]]
    with start_chat(make_engine(), [ui_user("u1", "hi")]) as stream:
        pass
    assert [m["id"] for m in stored(make_engine.store)] == ["u1"]
    assert stream.state == "stopped"
    assert model.requests == []


@pytest.mark.parametrize("applied", [True, False])
def test_an_interrupt_during_the_final_save_saves_once(
    make_engine: Any, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch, applied: bool
) -> None:
    """The final save is interrupted (KeyboardInterrupt in the sync shell, a cancel in the
    async one) after or before it was applied: the cleanup finds out, and the chat holds the
    question and one answer, never two."""
    engine = make_engine()
    asynchronous = isinstance(engine, SyncOverAsync)
    interrupt: BaseException = asyncio.CancelledError() if asynchronous else KeyboardInterrupt()
    original = EngineCore.save_op
    calls: list[int] = []

    def save_op(self: Any, **options: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:  # the first saves the question, when the answer begins
            if applied:
                yield from original(self, **options)
            raise interrupt
        return (yield from original(self, **options))

    monkeypatch.setattr(EngineCore, "save_op", save_op)
    model.answers = [["the whole answer"]]
    stream = start_chat(engine, [ui_user("u1", "hi")])
    # the async shell's cancel reaches this thread as the cancelled future of the coroutine
    with pytest.raises((type(interrupt), concurrent.futures.CancelledError)):
        collect(stream)
    saved = stored(make_engine.store)
    assert [m["id"] for m in saved] == ["u1", stream.message_id]
    if applied:
        assert "aborted" not in str(saved[1].get("metadata"))
    else:
        assert saved[1]["metadata"]["ctxstore"]["aborted"] is True
    assert engine.pending == ()


def test_a_failure_after_the_save_leaves_the_answer_done(
    make_engine: Any, model: ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = answer_stream.end_stream

    def end_stream(*args: Any, done: bool, **kwargs: Any) -> Any:
        if done:
            raise ctxstore.BackendUnavailableError("Redis went away")
        return (yield from original(*args, done=done, **kwargs))

    monkeypatch.setattr(answer_stream, "end_stream", end_stream)
    model.answers = [["saved anyway"]]
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    chunks = collect(stream)
    assert chunks[-1]["type"] == "finish"
    assert "error" not in [chunk["type"] for chunk in chunks]
    assert stream.state == "done"
    assert stored(make_engine.store)[-1]["parts"][-1]["text"] == "saved anyway"


def test_a_consumer_that_leaves_at_the_last_chunks_leaves_them_in_the_stream(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["bye"]]
    stream = start_chat(make_engine(), [ui_user("u1", "hi")])
    chunks = collect(stream, limit=8)  # up to message-metadata: the save happened before it
    assert chunks[-1]["type"] == "message-metadata"
    replay = resume_events(make_engine.store, stream.stream_id)
    assert replay[-2].endswith('data: {"type":"finish","finishReason":"stop"}\n\n')
    assert stream.state == "done"


def test_regenerate_answers_a_question_an_error_left_alone(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["lost"], ["found"]]
    model.fail_at = 1
    failed = start_chat(make_engine(), [ui_user("u1", "q")])
    assert collect(failed)[-1]["type"] == "error"
    model.fail_at = None
    again = start_chat(make_engine(), [ui_user("u1", "q")], trigger="regenerate-message")
    collect(again)
    saved = stored(make_engine.store)
    assert [m["id"] for m in saved] == ["u1", again.message_id]
    assert saved[1]["parts"][-1]["text"] == "found"


def test_a_cancel_repeated_at_every_await_still_saves_what_was_streamed(
    make_engine: Any, model: ScriptedModel, loop_thread: Any
) -> None:
    engine = make_engine()
    if not isinstance(engine, SyncOverAsync):
        pytest.skip("tasks are the async shell's")
    model.answers = [["a b c d e f g h i j k l m n o p q r s t"]]
    model.delay = 0.01
    stream = loop_thread.run(ctxstore.achat(engine.wrapped, [ui_user("u1", "go")], model="m"))
    cancel_reading(stream, loop_thread, after=6, repeat=True)
    saved = stored(make_engine.store)
    assert [m["id"] for m in saved] == ["u1", stream.message_id]
    assert saved[1]["metadata"]["ctxstore"]["aborted"] is True


def delta(**fields: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": fields}]}


def test_parallel_calls_sent_at_one_index_stay_apart() -> None:
    reader = ModelCallReader(1)
    out = []
    for chunk in (
        delta(tool_calls=[{"index": 0, "id": "a", "function": {"name": "f", "arguments": ""}}]),
        delta(tool_calls=[{"index": 0, "function": {"arguments": '{"x":1}'}}]),
        delta(tool_calls=[{"index": 0, "id": "b", "function": {"name": "g", "arguments": "{}"}}]),
        delta(tool_calls=[{"function": {"arguments": ""}}]),
    ):
        out += reader.read(chunk)
    out += reader.close()
    available = [c for c in out if c["type"] == "tool-input-available"]
    assert [(c["toolCallId"], c["toolName"], c["input"]) for c in available] == [
        ("a", "f", {"x": 1}),
        ("b", "g", {}),
    ]


def test_arguments_before_the_name_are_streamed_once_the_call_starts() -> None:
    reader = ModelCallReader(1)
    out = reader.read(delta(tool_calls=[{"index": 0, "id": "a", "function": {"arguments": "{"}}]))
    assert out == []
    out = reader.read(
        delta(tool_calls=[{"index": 0, "function": {"name": "f", "arguments": '"x":2}'}}])
    )
    assert out == [
        {"type": "tool-input-start", "toolCallId": "a", "toolName": "f"},
        {"type": "tool-input-delta", "toolCallId": "a", "inputTextDelta": '{"x":2}'},
    ]


def test_a_data_part_with_the_id_of_one_already_there_replaces_its_data() -> None:
    builder = AnswerBuilder("m")
    builder.apply({"type": "data-progress", "id": "p", "data": 1})
    builder.apply({"type": "data-progress", "id": "p", "data": 2})
    builder.apply({"type": "data-progress", "data": 3})
    builder.apply({"type": "data-other", "id": "p", "data": 4})
    assert builder.parts == [
        {"type": "data-progress", "id": "p", "data": 2},
        {"type": "data-progress", "data": 3},
        {"type": "data-other", "id": "p", "data": 4},
    ]
