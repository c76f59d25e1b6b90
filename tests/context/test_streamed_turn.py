"""``engine.stream_turn``: the chunks handed on, the answer saved with its usage and a title, its
text mirrored into Redis for readers that join late or lose their connection, and a turn that
fails or is stopped saving nothing. Every test runs on the embedded store, a redis-server and a
Cluster, through the sync and the async shell; the model is litellm's ``mock_response``, slowed
or broken on purpose by ``ModelStreams``."""

from __future__ import annotations

import asyncio
import re
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import ctxstore
from ctxstore import role, user
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.protocol import Call, Operation
from ctxstore._core.scripts import script_dir
from ctxstore.errors import StreamFailedError, StreamNotFoundError
from tests.conftest import Clock
from tests.support.facade import SyncOverAsync
from tests.support.keyspace import raw_client
from tests.support.streams import ModelStreams, consume, read_pieces

MODEL = "gpt-4o-mini"
QUESTION = "Plan a weekend in Lisbon."
ANSWER = "Day one: the Alfama and a tram ride. Day two: Belem, pasteis and the river at dusk."
TITLE = "Lisbon Weekend Plan"


@pytest.fixture
def streams(monkeypatch: pytest.MonkeyPatch) -> ModelStreams:
    return ModelStreams().install(monkeypatch)


def start(engine: Any, question: str = QUESTION, **options: Any) -> Any:
    """Set the question and start a streamed turn answering ``ANSWER``, titled ``TITLE``."""
    engine.set(user(question))
    options.setdefault("mock_response", ANSWER)
    options.setdefault("title_options", {"mock_response": TITLE})
    return engine.stream_turn(MODEL, **options)


def saved_messages(store: Any, chat_id: str = "c1") -> list[dict[str, Any]]:
    return [item["message"] for item in store.load_branch(chat_id).messages]


def entry_order(entry_id: str) -> tuple[int, int]:
    milliseconds, sequence = entry_id.split("-")
    return int(milliseconds), int(sequence)


def stream_keys(store: Any, chat_id: str = "c1") -> tuple[str, str]:
    keys = store.state.keyspace.chat(chat_id)
    return keys.key("stream"), keys.key("stream_state")


def failure_of(store: Any, stream_id: str) -> StreamFailedError:
    with pytest.raises(StreamFailedError) as failed:
        read_pieces(store, "c1", stream_id)
    return failed.value


# --- a whole turn ------------------------------------------------------------------------------


def test_the_chunks_come_as_the_model_sends_them_and_the_answer_is_saved_with_usage_and_title(
    make_engine: Any, streams: ModelStreams
) -> None:
    engine = make_engine()
    engine.set(role("You are terse."))
    turn = start(engine)
    assert turn.stream_id  # known before the first chunk
    assert engine.active_stream() == turn.stream_id
    assert turn.message_id is None
    assert consume(turn, engine) == ANSWER
    store = make_engine.store
    assert saved_messages(store) == [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": ANSWER},
    ]
    assert turn.state == "done"
    assert turn.message_id == store.load_branch("c1").messages[-1]["id"]
    assert engine.pending == ()
    assert engine.active_stream() is None
    chat = store.get_chat("c1")
    assert chat.title == TITLE
    usage = chat.metadata["usage"]
    assert usage["input_tokens"] > 0
    assert usage["output_tokens"] > 0
    request = streams.requests[0]
    assert request["stream"] is True
    assert request["stream_options"] == {"include_usage": True}
    assert request["messages"][0]["role"] == "system"
    assert "You are terse." in request["messages"][0]["content"]
    assert request["messages"][-1] == {"role": "user", "content": QUESTION}


def test_a_reader_after_the_end_gets_the_whole_answer_and_resumes_after_any_piece(
    make_engine: Any, streams: ModelStreams
) -> None:
    engine = make_engine()
    turn = start(engine)
    consume(turn, engine)
    store = make_engine.store
    pieces = read_pieces(store, "c1", turn.stream_id)
    assert "".join(piece.text for piece in pieces) == ANSWER
    assert len(pieces) > 1  # the first text goes at once, the rest in batches
    ids = [piece.id for piece in pieces]
    assert ids == sorted(ids, key=entry_order)
    assert len(set(ids)) == len(ids)
    for index, piece in enumerate(pieces):
        assert read_pieces(store, "c1", turn.stream_id, after=piece.id) == pieces[index + 1 :]


def test_a_reader_following_the_answer_live_gets_every_piece_once_in_order(
    make_engine: Any, streams: ModelStreams, loop_thread: Any
) -> None:
    streams.delay = 0.01
    engine = make_engine()
    turn = start(engine)
    store = make_engine.store
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(read_pieces, store, "c1", turn.stream_id)
        text = consume(turn, engine)
        pieces = following.result(timeout=60)
    assert "".join(piece.text for piece in pieces) == text == ANSWER
    assert [piece.id for piece in pieces] == sorted((p.id for p in pieces), key=entry_order)
    assert read_pieces(store, "c1", turn.stream_id) == pieces


def test_only_the_chats_first_turn_gets_a_title(make_engine: Any, streams: ModelStreams) -> None:
    engine = make_engine()
    consume(start(engine), engine)
    consume(start(engine, "And in winter?", title_options={"mock_response": "Other"}), engine)
    store = make_engine.store
    assert store.get_chat("c1").title == TITLE
    assert len(saved_messages(store)) == 4
    assert len(streams.requests) == 3  # two answers, one title


def test_a_title_call_that_fails_falls_back_to_the_question(
    make_engine: Any, streams: ModelStreams
) -> None:
    engine = make_engine()
    turn = start(engine, title_options={"mock_response": Exception("the title model is down")})
    consume(turn, engine)
    assert make_engine.store.get_chat("c1").title == QUESTION
    assert turn.state == "done"


def test_a_title_that_cannot_be_written_never_loses_the_answer(
    make_engine: Any, streams: ModelStreams, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ctxstore.engine.core import EngineCore

    def refused(self: Any, title: Any, metadata: Any) -> Operation[Any]:
        raise ctxstore.BackendUnavailableError("Redis went away")
        yield  # a generator, like the operation it replaces

    monkeypatch.setattr(EngineCore, "update_chat_op", refused)
    engine = make_engine()
    turn = start(engine)
    assert consume(turn, engine) == ANSWER
    store = make_engine.store
    assert turn.state == "done"
    assert saved_messages(store)[-1] == {"role": "assistant", "content": ANSWER}
    assert store.get_chat("c1").title == QUESTION  # the static title, set by the save


def test_without_a_title_no_title_is_asked_for(make_engine: Any, streams: ModelStreams) -> None:
    engine = make_engine()
    consume(start(engine, title=False), engine)
    assert make_engine.store.get_chat("c1").title is None
    assert len(streams.requests) == 1


# --- failures and stops --------------------------------------------------------------------------


def test_a_model_error_midway_saves_nothing_and_readers_see_the_failure(
    make_engine: Any, streams: ModelStreams
) -> None:
    streams.fail_after = 5
    engine = make_engine()
    turn = start(engine)
    with pytest.raises(RuntimeError, match="failed after 5 chunks"):
        consume(turn, engine)
    store = make_engine.store
    assert saved_messages(store) == []
    assert [item.data for item in engine.pending] == [{"role": "user", "content": QUESTION}]
    assert turn.state == "failed"
    assert turn.message_id is None
    assert engine.active_stream() is None
    assert read_pieces(store, "c1", turn.stream_id, limit=1)[0].text == ANSWER[:3]
    failure = failure_of(store, turn.stream_id)
    assert "RuntimeError: the model failed after 5 chunks" in failure.reason
    assert store.get_chat("c1").metadata.get("usage") is None


def test_a_model_call_that_fails_at_once_fails_the_stream_it_began(
    make_engine: Any, backend: str, streams: ModelStreams
) -> None:
    engine = make_engine()
    with pytest.raises(Exception, match="the model is down"):
        start(engine, mock_response=Exception("the model is down"))
    assert engine.active_stream() is None
    assert [item.data for item in engine.pending] == [{"role": "user", "content": QUESTION}]
    assert saved_messages(make_engine.store) == []
    _stream_key, state_key = stream_keys(make_engine.store)
    records = list(raw_client(backend).hgetall(state_key).values())
    assert len(records) == 1
    assert b"\tfailed\t" in records[0]
    assert b"the model is down" in records[0]


def test_a_caller_that_stops_reading_saves_nothing(make_engine: Any, streams: ModelStreams) -> None:
    engine = make_engine()
    turn = start(engine)
    text = consume(turn, engine, stop_after=3)
    assert text == ANSWER[:9]
    store = make_engine.store
    assert turn.state == "failed"
    assert saved_messages(store) == []
    assert len(engine.pending) == 1
    assert engine.active_stream() is None
    assert failure_of(store, turn.stream_id).reason == (
        "cancelled: the caller stopped reading the answer"
    )


def test_a_turn_closed_before_it_is_read_saves_nothing(
    make_engine: Any, streams: ModelStreams, loop_thread: Any
) -> None:
    engine = make_engine()
    turn = start(engine)
    if isinstance(engine, SyncOverAsync):
        loop_thread.run(turn.aclose())
    else:
        turn.close()
    assert turn.state == "failed"
    assert engine.active_stream() is None
    assert saved_messages(make_engine.store) == []
    with pytest.raises(RuntimeError, match="read once"):
        consume(turn, engine)


def test_a_writer_that_stops_writing_is_seen_as_stopped_once_its_deadline_passes(
    make_engine: Any, streams: ModelStreams, clock: Clock
) -> None:
    engine = make_engine()
    turn = start(engine, writer_ttl=5)
    assert engine.active_stream() == turn.stream_id
    clock.now += 5_001  # the writer (a worker that died) wrote nothing for writer_ttl
    assert engine.active_stream() is None
    store = make_engine.store
    assert failure_of(store, turn.stream_id).reason == "stopped"
    with pytest.raises(StreamFailedError, match="no longer live"):
        consume(turn, engine)  # its next write is refused: nothing is saved
    assert saved_messages(store) == []


def stopped_kept_ms() -> int:
    """How long a live stream's keys outlive its deadline (lua/lib/streams.lua)."""
    source = (script_dir() / "lib" / "streams.lua").read_text()
    found = re.search(r"^local STOPPED_KEPT_MS = (\d+)$", source, re.MULTILINE)
    assert found is not None
    return int(found.group(1))


def test_a_dropped_turn_fails_at_its_writers_deadline_and_its_keys_go_later(
    make_engine: Any, backend: str, streams: ModelStreams, clock: Clock
) -> None:
    """Its readers (a page reloaded after the worker died) learn that the answer failed, for
    STOPPED_KEPT_MS past the deadline; then the keys are gone."""
    engine = make_engine()
    turn = start(engine, writer_ttl=0.3, title=False)  # never read: as if its worker died
    store = make_engine.store
    client = raw_client(backend)
    for key in stream_keys(store):
        assert 300 < client.pttl(key) <= 300 + stopped_kept_ms(), key
    clock.now += 301
    with pytest.raises(StreamFailedError, match="stopped writing"):
        read_pieces(store, "c1", turn.stream_id)
    assert store.active_stream("c1") is None  # nothing is being streamed there any more


def test_a_finished_stream_is_refused_at_its_deadline_exactly(
    make_engine: Any, backend: str, streams: ModelStreams, clock: Clock
) -> None:
    engine = make_engine()
    turn = start(engine, stream_ttl=60)
    consume(turn, engine)
    store = make_engine.store
    clock.now += 59_000
    assert read_pieces(store, "c1", turn.stream_id)
    clock.now += 1_001
    with pytest.raises(StreamNotFoundError):
        read_pieces(store, "c1", turn.stream_id)
    client = raw_client(backend)
    assert all(client.pttl(key) > 0 for key in stream_keys(store))  # refused before its keys go


def test_a_finished_streams_keys_expire_stream_ttl_after_its_end(
    make_engine: Any, backend: str, streams: ModelStreams
) -> None:
    """The keys drop the writer's longer deadline (120 s) at the end: they expire with the
    finished stream."""
    engine = make_engine()
    turn = start(engine, stream_ttl=0.3, title=False)
    consume(turn, engine)
    assert_expire_within(raw_client(backend), stream_keys(make_engine.store), 300)
    with pytest.raises(StreamNotFoundError):
        read_pieces(make_engine.store, "c1", turn.stream_id)


def assert_expire_within(client: Any, keys: tuple[str, ...], milliseconds: int) -> None:
    """Each key expires within ``milliseconds`` (or is gone already), and they all go."""
    for key in keys:
        left = client.pttl(key)
        assert left == -2 or 0 <= left <= milliseconds, (key, left)  # 0: expiring this ms
    deadline = time.monotonic() + 5
    while client.exists(*keys) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert client.exists(*keys) == 0


# --- streams and the chat ------------------------------------------------------------------------


def test_another_engine_on_the_chat_sees_the_answer_in_progress_on_its_branch_only(
    make_engine: Any, streams: ModelStreams
) -> None:
    engine = make_engine()
    consume(start(engine), engine)
    turn = start(engine, "And in winter?")
    assert make_engine().active_stream() == turn.stream_id
    store = make_engine.store
    assert store.active_stream("c1") == turn.stream_id
    assert store.active_stream("c1", "main") == turn.stream_id
    side = make_engine()
    side.btw()
    assert store.active_stream("c1", "main-v2") is None
    consume(turn, engine)
    assert store.active_stream("c1") is None


def test_deleting_the_chat_removes_its_answer_streams(
    make_engine: Any, streams: ModelStreams, snap: Any
) -> None:
    engine = make_engine()
    consume(start(engine), engine)
    start(make_engine(chat_id="c2"))  # one live
    assert any(b"{c1}:stream" in key for key in snap())
    store = make_engine.store
    assert store.delete_chat("c1")
    assert store.delete_chat("c2")
    assert snap() == {}


def test_a_reader_of_another_users_chat_is_refused(make_engine: Any, streams: ModelStreams) -> None:
    engine = make_engine()
    turn = start(engine)
    consume(turn, engine)
    with pytest.raises(ctxstore.ChatNotFoundError):
        read_pieces(make_engine.store, "c1", turn.stream_id, user_id="mallory")
    with pytest.raises(ctxstore.ChatNotFoundError):
        make_engine.store.active_stream("c1", user_id="mallory")


@pytest.mark.parametrize(
    ("stream_id", "after", "error"),
    [
        ("1-0", None, ctxstore.errors.InvalidIdError),
        ("1-0.ABCDEF", None, ctxstore.errors.InvalidIdError),
        ("1-0.abcdef", "1-x", ctxstore.ValidationError),
        ("1-0.abcdef", "", ctxstore.ValidationError),
    ],
)
def test_malformed_ids_are_refused_before_anything_is_read(
    store: Any, stream_id: str, after: str | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        read_pieces(store, "c1", stream_id, after=after)


def test_an_unknown_stream_is_not_found(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(StreamNotFoundError):
        read_pieces(store, "c1", "1-0.abcdef")


@pytest.mark.parametrize(
    "options",
    [
        {"messages": []},
        {"stream": False},
        {"stream_options": "usage"},
        {"stream_ttl": 0},
        {"writer_ttl": None},
        {"title": "yes"},
        {"title_options": ["mock_response"]},
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(
    make_engine: Any, streams: ModelStreams, options: dict[str, Any]
) -> None:
    engine = make_engine()
    with pytest.raises(ctxstore.ValidationError):
        start(engine, **options)
    assert streams.requests == []
    with pytest.raises(ctxstore.ChatNotFoundError):
        make_engine.store.get_chat("c1")


# --- the writes ----------------------------------------------------------------------------------


def twice(call: Call[Any]) -> Operation[list[Any]]:
    """An operation sending the same call twice, as redis-py resends one after a lost reply."""
    first = yield call
    second = yield call
    return [first, second]


def only_call(operation: Operation[Any]) -> Call[Any]:
    call = next(operation)
    assert isinstance(call, Call)
    return call


def test_every_stream_write_is_safe_to_resend(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    state = store.state
    begin = only_call(answer_stream.begin_stream(state, "c1", "main", writer_ttl_ms=60_000))
    stream_id, again = store.run(twice(begin))
    assert again == stream_id
    write = only_call(answer_stream.write_stream(state, "c1", stream_id, 1, "a", writer_ttl_ms=9))
    assert store.run(twice(write)) == [True, False]
    end = only_call(
        answer_stream.end_stream(state, "c1", stream_id, done=True, detail="m", keep_ms=60_000)
    )
    assert store.run(twice(end)) == [True, True]
    assert [piece.text for piece in read_pieces(store, "c1", stream_id)] == ["a"]
    failing = answer_stream.end_stream(state, "c1", stream_id, done=False, detail="x", keep_ms=9)
    assert store.run(failing) is False  # closed already: it stays done


def test_writes_out_of_order_past_the_limit_or_after_the_end_are_refused(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(answer_stream, "MAX_WRITES", 2)
    store.upsert_chat("c1", "alice")
    state = store.state
    stream_id = store.run(answer_stream.begin_stream(state, "c1", "main", writer_ttl_ms=60_000))

    def write(number: int) -> Any:
        return store.run(
            answer_stream.write_stream(state, "c1", stream_id, number, "x", writer_ttl_ms=60_000)
        )

    with pytest.raises(ctxstore.ValidationError, match="in order"):
        write(2)
    assert write(1) is True
    assert write(2) is True
    with pytest.raises(ctxstore.errors.LimitExceededError):
        write(3)
    store.run(
        answer_stream.end_stream(state, "c1", stream_id, done=True, detail="m", keep_ms=60_000)
    )
    with pytest.raises(StreamFailedError, match="no longer live"):
        write(3)
    assert len(read_pieces(store, "c1", stream_id)) == 2


def test_a_chat_keeps_a_bounded_number_of_streams_and_trims_what_none_names(
    make_engine: Any, backend: str, streams: ModelStreams, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(answer_stream, "MAX_STREAMS", 2)
    engine = make_engine()
    first = start(engine)
    consume(first, engine)
    second = start(engine, "And in winter?")
    third_engine = make_engine()
    third = start(third_engine, "And by train?")  # two live, the first closed: it goes
    store = make_engine.store
    with pytest.raises(StreamNotFoundError):
        read_pieces(store, "c1", first.stream_id)
    with pytest.raises(ctxstore.errors.LimitExceededError):
        start(make_engine(), "And by boat?")  # two live at once: no room
    client = raw_client(backend)
    stream_key, _ = stream_keys(store)
    oldest = client.xrange(stream_key, count=1)[0][0].decode()
    assert oldest == second.stream_id.split(".")[0]  # the first stream's entries were trimmed
    consume(second, engine)
    consume(third, third_engine)


def test_a_corrupt_stream_record_is_named_and_nothing_is_written(
    make_engine: Any, backend: str, streams: ModelStreams
) -> None:
    engine = make_engine()
    turn = start(engine)
    consume(turn, engine)
    store = make_engine.store
    client = raw_client(backend)
    stream_key, state_key = stream_keys(store)
    client.hset(state_key, turn.stream_id, "not a record")
    entries = client.xlen(stream_key)
    with pytest.raises(ctxstore.errors.CorruptionError) as corrupt:
        read_pieces(store, "c1", turn.stream_id)
    assert corrupt.value.details["key"] == state_key
    assert corrupt.value.details["field"] == turn.stream_id
    with pytest.raises(ctxstore.errors.CorruptionError):
        start(engine, "And in winter?")
    assert client.xlen(stream_key) == entries


# --- async: stops the caller does not announce ---------------------------------------------------


async def test_breaking_out_of_async_for_ends_the_turn_once_asyncio_closes_the_generator(
    backend: str, namespace: str, streams: ModelStreams
) -> None:
    store = ctxstore.connect_async(backend, namespace=namespace).admin()
    engine = ctxstore.AsyncContextEngine(store=store, chat_id="c1", user_id="alice")
    engine.set(user(QUESTION))
    turn = await engine.stream_turn(MODEL, mock_response=ANSWER, title=False)
    async for _chunk in turn:
        break  # no aclose(): the dropped generator is closed by asyncio's finalizer
    for _ in range(200):
        if turn.state == "failed":
            break
        await asyncio.sleep(0.01)
    assert turn.state == "failed"
    assert await engine.active_stream() is None
    assert (await store.load_branch("c1")).messages == []
    with pytest.raises(StreamFailedError, match="stopped reading"):
        async for _piece in store.read_stream("c1", turn.stream_id):
            pass
    await store.close()


async def test_cancelling_the_task_that_reads_the_answer_ends_the_turn(
    backend: str, namespace: str, streams: ModelStreams
) -> None:
    streams.delay = 0.02
    store = ctxstore.connect_async(backend, namespace=namespace).admin()
    engine = ctxstore.AsyncContextEngine(store=store, chat_id="c1", user_id="alice")
    engine.set(user(QUESTION))
    turn = await engine.stream_turn(MODEL, mock_response=ANSWER, title=False)
    started = asyncio.Event()

    async def read() -> None:
        async for _chunk in turn:
            started.set()

    task = asyncio.create_task(read())
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert turn.state == "failed"
    assert await engine.active_stream() is None
    assert (await store.load_branch("c1")).messages == []
    assert [item.data for item in engine.pending] == [{"role": "user", "content": QUESTION}]
    pieces: list[str] = []

    async def read_all() -> None:
        async for piece in store.read_stream("c1", turn.stream_id):
            pieces.append(piece.text)

    with pytest.raises(StreamFailedError, match="task reading the answer was cancelled"):
        await read_all()
    assert ANSWER.startswith("".join(pieces))
    await store.close()


# --- turns ---------------------------------------------------------------------------------------


def test_two_streamed_turns_enqueued_on_one_chat_keep_each_answer_with_its_question(
    backend: str, namespace: str, streams: ModelStreams
) -> None:
    streams.delay = 0.005
    store = ctxstore.connect(backend, namespace=namespace).admin()
    answers = {"Lisbon?": "Trams and custard tarts.", "Porto?": "Port wine and the Douro."}

    def handle(question: str) -> Any:
        engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
        with engine.turn("enqueue", lease=30, wait=30):
            engine.set(user(question))
            turn = engine.stream_turn(MODEL, mock_response=answers[question], title=False)
            assert consume(turn, engine) == answers[question]
        return turn

    with ThreadPoolExecutor(2) as pool:
        turns = list(pool.map(handle, answers))
    assert_serialized(saved_messages(store), answers)
    for turn, answer in zip(turns, answers.values(), strict=True):
        assert turn.state == "done"
        assert "".join(piece.text for piece in read_pieces(store, "c1", turn.stream_id)) == answer
    later = streams.requests[1]["messages"]  # the second turn's model saw the first turn
    assert len(later) == 3
    store.close()


async def test_two_async_streamed_turns_enqueued_on_one_chat_keep_each_answer_with_its_question(
    backend: str, namespace: str, streams: ModelStreams
) -> None:
    streams.delay = 0.005
    store = ctxstore.connect_async(backend, namespace=namespace).admin()
    answers = {"Lisbon?": "Trams and custard tarts.", "Porto?": "Port wine and the Douro."}

    async def handle(question: str) -> Any:
        engine = ctxstore.AsyncContextEngine(store=store, chat_id="c1", user_id="alice")
        async with engine.turn("enqueue", lease=30, wait=30):
            engine.set(user(question))
            turn = await engine.stream_turn(MODEL, mock_response=answers[question], title=False)
            async for _chunk in turn:
                pass
        return turn

    turns = await asyncio.gather(*(handle(question) for question in answers))
    assert_serialized(
        [item["message"] for item in (await store.load_branch("c1")).messages], answers
    )
    assert all(turn.state == "done" for turn in turns)
    await store.close()


def assert_serialized(messages: list[dict[str, Any]], answers: dict[str, str]) -> None:
    """Both questions, each followed at once by its own answer, one turn after the other."""
    assert len(messages) == 4
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert question["role"] == "user"
        assert answer == {"role": "assistant", "content": answers[question["content"]]}


def test_a_turn_interrupted_midway_stops_its_stream_and_saves_nothing(
    backend: str, namespace: str, streams: ModelStreams
) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    other = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    taken: list[Any] = []
    streams.delay = 0.03  # each chunk writes: the write after the interruption is refused
    streams.on_chunk = lambda index: (
        taken.append(other.turn("interrupt").__enter__()) if index == 2 else None
    )
    engine.set(user(QUESTION))
    with engine.turn("reject"):
        turn = engine.stream_turn(MODEL, mock_response=ANSWER, title=False)
        with pytest.raises(ctxstore.errors.LeaseLostError):
            consume(turn, engine)
    assert len(taken) == 1
    assert taken[0].interrupted
    assert turn.state == "failed"
    assert saved_messages(store) == []
    assert "LeaseLostError" in failure_of(store, turn.stream_id).reason
    store.close()


def test_a_chat_deleted_while_its_answer_streams_ends_the_turn_and_leaves_nothing(
    backend: str, namespace: str, streams: ModelStreams, snap: Any
) -> None:
    store = ctxstore.connect(backend, namespace=namespace).admin()
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    streams.delay = 0.06  # past the flush interval: the chunk after the deletion writes
    streams.on_chunk = lambda index: store.delete_chat("c1") if index == 2 else None
    engine.set(user(QUESTION))
    turn = engine.stream_turn(MODEL, mock_response=ANSWER, title=False)
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        consume(turn, engine)
    assert turn.state == "failed"
    assert snap() == {}
    store.close()
