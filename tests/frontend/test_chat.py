"""``chat()`` / ``achat()``: a useChat turn answered with the AI SDK's UI message stream, on
every backend through both shells; the model is scripted through litellm's own entry points,
and what the client builds is checked with the SDK itself (tests/node/read_stream.mjs)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

import ctxstore
from ctxstore.frontend import DEFAULT_ERROR_TEXT
from tests.frontend.support import collect, resume_events, sse, start_chat
from tests.support.node import sdk_read
from tests.support.scripted_model import Call, Reasoning, ScriptedModel


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def stored(store: Any, branch: str | None = None) -> list[dict[str, Any]]:
    return [{"id": m["id"], **m["message"]} for m in store.load_branch("c1", branch).messages]


def types(chunks: list[dict[str, Any]]) -> list[str]:
    return [chunk["type"] for chunk in chunks]


def weather(city: str) -> dict[str, Any]:
    """The weather of a city.

    Args:
        city: the city's name
    """
    return {"city": city, "sky": "sunny"}


def clock() -> str:
    """The time."""
    raise RuntimeError("the clock is broken")


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> ScriptedModel:
    return ScriptedModel().install(monkeypatch)


# --- a whole answer ------------------------------------------------------------------------------


def test_a_plain_answer_streams_the_protocol_and_saves_what_the_client_builds(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["Hello there, friend."]]
    stream = start_chat(make_engine(), [ui_user("u1", "Hi!")])
    assert stream.headers["x-vercel-ai-ui-message-stream"] == "v1"
    events = sse(stream)
    assert events[-1] == "data: [DONE]\n\n"
    chunks = [json.loads(event[len("data: ") :]) for event in events[:-1]]
    assert types(chunks) == [
        "start",
        "data-chat-title",
        "start-step",
        "text-start",
        *["text-delta"] * 5,
        "text-end",
        "finish-step",
        "message-metadata",
        "finish",
    ]
    assert chunks[0] == {"type": "start", "messageId": stream.message_id}
    assert chunks[1] == {"type": "data-chat-title", "data": {"title": "Hi!"}, "transient": True}
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}
    store = make_engine.store
    saved = stored(store)
    assert [m["id"] for m in saved] == ["u1", stream.message_id]
    assert saved[0] == ui_user("u1", "Hi!")
    assert saved[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": "Hello there, friend.", "state": "done"},
    ]
    assert saved[1]["metadata"]["ctxstore"]["usage"] == {
        "input_tokens": 10,
        "output_tokens": 4,
        "total_tokens": 14,
    }
    client = sdk_read("".join(events))
    assert client["errors"] == []
    assert client["message"] == saved[1]
    assert store.get_chat("c1").title == "Hi!"
    assert store.get_chat("c1").metadata["usage"]["total_tokens"] == 14
    assert stream.state == "done"
    assert model.requests[0]["messages"] == [{"role": "user", "content": "Hi!"}]


@pytest.mark.parametrize(
    ("model_name", "manager", "window", "source"),
    [
        ("gpt-4o-mini", None, 128_000, "model"),
        ("no-such-model", None, 128_000, "default"),
        ("gpt-4o-mini", 20_000, 20_000, "max_tokens"),
    ],
)
def test_the_usage_ratio_is_streamed_and_stored_with_the_tokens(
    make_engine: Any,
    model: ScriptedModel,
    model_name: str,
    manager: int | None,
    window: int,
    source: str,
) -> None:
    """As the seed's getMessageMetadata: the cumulative tokens and how full the window is (its
    ContextManager's max_tokens, else the model's window, else the default), 0 to 1."""
    model.answers = [["Hello there, friend."]]
    options = (
        {} if manager is None else {"context_manager": ctxstore.ContextManager(max_tokens=manager)}
    )
    stream = start_chat(make_engine(**options), [ui_user("u1", "Hi!")], model=model_name)
    chunks = collect(stream)
    [metadata] = [c["messageMetadata"] for c in chunks if c["type"] == "message-metadata"]
    context = metadata["ctxstore"]["context"]
    assert context["max_tokens"] == window
    assert context["max_tokens_source"] == source
    assert context["estimated_context_size"] == 14  # the call's input and output
    reserve = (
        ctxstore.ContextManager(max_tokens=manager) if manager else ctxstore.ContextManager()
    ).response_reserve
    assert context["usage_ratio"] == pytest.approx(min(1.0, (14 + reserve) / window))
    assert 0 <= context["usage_ratio"] <= 1
    saved = stored(make_engine.store)[-1]
    assert saved["metadata"]["ctxstore"]["context"] == context


def test_tools_run_in_a_loop_in_parallel_and_a_failing_tool_is_an_output_error(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [
        [
            Reasoning("two calls"),
            "Checking.",
            Call("c1", "weather", {"city": "Lisbon"}),
            Call("c2", "clock", {}),
        ],
        ["Sunny in Lisbon; the clock is broken."],
    ]
    stream = start_chat(make_engine(), [ui_user("u1", "Weather?")], tools=[weather, clock])
    events = sse(stream)
    saved = stored(make_engine.store)[-1]
    assert [part["type"] for part in saved["parts"]] == [
        "step-start",
        "reasoning",
        "text",
        "tool-weather",
        "tool-clock",
        "step-start",
        "text",
    ]
    assert saved["parts"][3] == {
        "type": "tool-weather",
        "toolCallId": "c1",
        "state": "output-available",
        "input": {"city": "Lisbon"},
        "output": {"city": "Lisbon", "sky": "sunny"},
    }
    assert saved["parts"][4]["state"] == "output-error"
    assert saved["parts"][4]["errorText"] == "the clock is broken"
    second = model.requests[1]["messages"]
    assert second[-3]["tool_calls"][0]["function"] == {
        "name": "weather",
        "arguments": '{"city":"Lisbon"}',
    }
    assert second[-2:] == [
        {"role": "tool", "tool_call_id": "c1", "content": '{"city":"Lisbon","sky":"sunny"}'},
        {"role": "tool", "tool_call_id": "c2", "content": "the clock is broken"},
    ]
    tools = model.requests[0]["tools"]
    assert tools[0]["function"]["name"] == "weather"
    assert tools[0]["function"]["description"] == "The weather of a city."
    assert tools[0]["function"]["parameters"]["properties"]["city"] == {
        "type": "string",
        "description": "the city's name",
    }
    client = sdk_read("".join(events))
    assert client["errors"] == []
    assert client["message"] == saved


def test_max_steps_ends_the_loop_after_that_many_model_calls(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [[Call("c1", "weather", {"city": "Rome"})]]
    stream = start_chat(make_engine(), [ui_user("u1", "Rome?")], tools=[weather], max_steps=1)
    chunks = collect(stream)
    assert len(model.requests) == 1
    assert chunks[-1] == {"type": "finish", "finishReason": "tool-calls"}
    assert stored(make_engine.store)[-1]["parts"][1]["state"] == "output-available"


def test_tool_dicts_unknown_tools_bad_arguments_and_results_that_are_not_json(
    make_engine: Any, model: ScriptedModel
) -> None:
    seen: list[Any] = []

    def lookup(arguments: dict[str, Any], context: Any) -> Any:
        seen.append((arguments, context))
        return {"found": arguments["q"]}

    tools = [
        {
            "name": "lookup",
            "description": "Look up.",
            "execute": lookup,
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
        },
        {
            "name": "odd",
            "description": "A set.",
            "execute": lambda _arguments: {1, 2},
            "parameters": {"type": "object", "properties": {}},
        },
        weather,
    ]
    model.answers = [
        [
            Call("a", "lookup", {"q": "x"}),
            Call("b", "nope", {}),
            Call("c", "odd", {}),
            Call("d", "weather", {"town": "Paris"}),
            Call("e", "weather", "{not json"),
        ],
        ["done"],
    ]
    chunks = collect(
        start_chat(make_engine(), [ui_user("u1", "go")], tools=tools, context_variables={"k": 1})
    )
    assert seen == [({"q": "x"}, {"k": 1})]
    parts = {
        p["toolCallId"]: p for p in stored(make_engine.store)[-1]["parts"] if "toolCallId" in p
    }
    assert parts["a"]["output"] == {"found": "x"}
    assert parts["b"]["errorText"] == "there is no tool named 'nope'"
    assert "not JSON" in parts["c"]["errorText"]
    assert parts["d"]["state"] == "output-error"
    assert "invalid arguments for weather" in parts["d"]["errorText"]
    assert parts["e"] == {
        "type": "tool-weather",
        "toolCallId": "e",
        "state": "output-error",
        "input": "{not json",
        "errorText": "the model sent arguments that are not JSON",
    }
    assert "tool-input-error" in types(chunks)


# --- where the messages go --------------------------------------------------------------------


def test_only_the_new_message_is_taken_from_the_client(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["one"], ["two"]]
    engine = make_engine()
    first = start_chat(engine, [ui_user("u1", "first")])
    collect(first)
    forged = {
        "id": first.message_id,
        "role": "assistant",
        "parts": [{"type": "text", "text": "I said something else"}],
    }
    collect(start_chat(make_engine(), [ui_user("u1", "first"), forged, ui_user("u2", "second")]))
    assert [m["id"] for m in stored(make_engine.store)] == [
        "u1",
        first.message_id,
        "u2",
        stored(make_engine.store)[-1]["id"],
    ]
    assert model.requests[1]["messages"][1] == {"role": "assistant", "content": "one"}


def test_a_resent_submit_of_the_head_is_not_saved_twice(
    make_engine: Any, model: ScriptedModel
) -> None:
    store = make_engine.store
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [ui_user("u1", "hello")], expected_head=None)
    model.answers = [["answer"]]
    stream = start_chat(make_engine(), [ui_user("u1", "hello")])
    collect(stream)
    assert [m["id"] for m in stored(store)] == ["u1", stream.message_id]


def test_an_edited_user_message_forks_from_its_parent(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["a1"], ["a2"], ["a2 again"]]
    engine = make_engine()
    collect(start_chat(engine, [ui_user("u1", "one")]))
    collect(start_chat(engine, [ui_user("u2", "two")]))
    edit = start_chat(make_engine(), [ui_user("u2", "two, edited")])
    collect(edit)
    store = make_engine.store
    active = store.get_chat("c1").active_branch
    assert active != "main"
    texts = [m["parts"][-1]["text"] for m in stored(store, active)]
    assert texts == ["one", "a1", "two, edited", "a2 again"]
    assert [m["parts"][-1]["text"] for m in stored(store, "main")] == ["one", "a1", "two", "a2"]
    assert model.requests[2]["messages"][-1] == {"role": "user", "content": "two, edited"}


def test_regenerate_answers_again_on_a_new_branch_from_the_parent(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["first answer"], ["second answer"]]
    first = start_chat(make_engine(), [ui_user("u1", "q")])
    collect(first)
    again = start_chat(
        make_engine(),
        [ui_user("u1", "q")],
        trigger="regenerate-message",
        message_id=first.message_id,
    )
    collect(again)
    store = make_engine.store
    versions = store.message_versions("c1", first.message_id)
    assert [v.id for v in versions] == [first.message_id, again.message_id]
    assert versions[0].branches == ("main",)
    assert store.get_chat("c1").active_branch == versions[1].branches[-1]
    assert model.requests[1]["messages"] == [{"role": "user", "content": "q"}]


# --- titles and metadata ------------------------------------------------------------------------


def test_a_generated_title_replaces_the_static_one(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["sure"]]
    model.title = "Weekend In Lisbon"
    chunks = collect(
        start_chat(
            make_engine(),
            [ui_user("u1", "plan my weekend in lisbon")],
            generate_title=True,
            title_model="gpt-4o",
        )
    )
    titles = [c["data"]["title"] for c in chunks if c["type"] == "data-chat-title"]
    assert titles == ["plan my weekend in lisbon", "Weekend In Lisbon"]
    assert make_engine.store.get_chat("c1").title == "Weekend In Lisbon"
    assert model.title_requests[0]["model"] == "gpt-4o"


def test_a_failed_title_keeps_the_static_one(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["sure"]]
    model.title = RuntimeError("no titles today")
    chunks = collect(start_chat(make_engine(), [ui_user("u1", "hello there")], generate_title=True))
    assert [c for c in chunks if c["type"] == "data-chat-title"] == [
        {"type": "data-chat-title", "data": {"title": "hello there"}, "transient": True}
    ]
    assert make_engine.store.get_chat("c1").title == "hello there"


def test_message_metadata_is_streamed_and_saved_as_the_client_merges_it(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["ok"]]
    events: list[str] = []

    def metadata(event: dict[str, Any]) -> dict[str, Any]:
        events.append(event["type"])
        return {"phase": event["type"], "nested": {event["type"]: True}}

    stream = start_chat(
        make_engine(),
        [ui_user("u1", "hi")],
        message_metadata=metadata,
        final_assistant_metadata={"model": "m", "nested": {"final": 1}},
    )
    chunks = collect(stream)
    assert events == ["start", "finish"]
    assert chunks[0]["messageMetadata"] == {"phase": "start", "nested": {"start": True}}
    saved = stored(make_engine.store)[-1]["metadata"]
    assert saved["phase"] == "finish"
    assert saved["nested"] == {"start": True, "finish": True, "final": 1}
    assert saved["model"] == "m"
    assert "usage" in saved["ctxstore"]


def test_transform_changes_drops_and_splits_chunks(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["abcdefgh"]]

    def shout(chunk: dict[str, Any]) -> Any:
        if chunk["type"] == "data-chat-title":
            return None
        if chunk["type"] == "text-delta":
            upper = chunk["delta"].upper()
            return [{**chunk, "delta": upper[:2]}, {**chunk, "delta": upper[2:]}]
        return chunk

    chunks = collect(start_chat(make_engine(), [ui_user("u1", "x")], transform=shout))
    assert "data-chat-title" not in types(chunks)
    assert [c["delta"] for c in chunks if c["type"] == "text-delta"] == ["AB", "CD", "EF", "GH"]
    assert stored(make_engine.store)[-1]["parts"][1]["text"] == "ABCDEFGH"


# --- stops and errors -----------------------------------------------------------------------------


def test_a_reader_that_stops_saves_what_was_streamed_as_aborted(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["The long answer that the user stops midway."]]
    stream = start_chat(make_engine(), [ui_user("u1", "tell me")])
    chunks = collect(stream, limit=6)
    shown = "".join(c["delta"] for c in chunks if c["type"] == "text-delta")
    saved = stored(make_engine.store)
    assert [m["id"] for m in saved] == ["u1", stream.message_id]
    assert saved[1]["parts"] == [
        {"type": "step-start"},
        {"type": "text", "text": shown, "state": "done"},
    ]
    assert saved[1]["metadata"] == {"ctxstore": {"aborted": True}}
    assert stream.state == "stopped"
    events = resume_events(make_engine.store, stream.stream_id)
    assert (
        events[-2]
        == 'data: {"type":"abort","reason":"cancelled: the caller stopped reading the answer"}\n\n'
    )
    assert events[-1] == "data: [DONE]\n\n"


def test_stop_ends_the_answer_at_its_next_chunk(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["one two three four five six seven"]]
    stream = start_chat(make_engine(), [ui_user("u1", "count")])
    model.on_chunk = lambda index: stream.stop() if index == 3 else None
    chunks = collect(stream)
    assert chunks[-1] == {"type": "abort", "reason": "stopped by the caller"}
    saved = stored(make_engine.store)[-1]
    assert saved["metadata"]["ctxstore"]["aborted"] is True
    assert saved["parts"][1]["text"] == "".join(
        c["delta"] for c in chunks if c["type"] == "text-delta"
    )


def test_an_error_saves_the_question_and_tells_the_client_only_a_generic_text(
    make_engine: Any, model: ScriptedModel
) -> None:
    model.answers = [["never finished"]]
    model.fail_at = 2
    stream = start_chat(make_engine(), [ui_user("u1", "q")])
    chunks = collect(stream)
    assert chunks[-1] == {"type": "error", "errorText": DEFAULT_ERROR_TEXT}
    assert "the model failed" not in json.dumps(chunks)
    assert [m["id"] for m in stored(make_engine.store)] == ["u1"]
    assert stream.state == "failed"
    assert isinstance(stream.error, RuntimeError)


def test_on_error_gives_the_error_text(make_engine: Any, model: ScriptedModel) -> None:
    model.answers = [["never finished"]]
    model.fail_at = 0
    chunks = collect(
        start_chat(
            make_engine(),
            [ui_user("u1", "q")],
            on_error=lambda error: f"sorry: {type(error).__name__}",
        )
    )
    assert chunks[-1] == {"type": "error", "errorText": "sorry: RuntimeError"}


# --- bad input ------------------------------------------------------------------------------------


def untyped(city):  # type: ignore[no-untyped-def]
    """No hint."""
    return city


BAD: list[tuple[dict[str, Any], str]] = [
    (
        {"messages": [{"id": "u1", "role": "user", "parts": [{"type": "bogus"}]}]},
        "unknown part type",
    ),
    ({"messages": [{"id": "u1", "role": "user", "parts": []}]}, "at least one part"),
    (
        {
            "messages": [
                {
                    "id": "a",
                    "role": "assistant",
                    "parts": [{"type": "tool-x", "toolCallId": "c", "state": "done"}],
                }
            ]
        },
        "state must be one of",
    ),
    (
        {"messages": [{"id": "a", "role": "assistant", "parts": [{"type": "text", "text": "x"}]}]},
        "new user message last",
    ),
    ({"tools": [42]}, "neither a callable nor a tool dict"),
    ({"tools": [untyped]}, "needs a type hint"),
    ({"tools": [{"name": "t", "execute": print}]}, "JSON schema of type object"),
    (
        {"tools": [{"name": "t", "execute": 3, "parameters": {"type": "object"}}]},
        "'execute' must be callable",
    ),
    ({"tools": [weather, weather]}, "two tools are named"),
    ({"max_steps": 0}, "max_steps"),
    ({"trigger": "resubmit"}, "trigger must be one of"),
    (
        {"tools": [{"name": "bad name!", "execute": print, "parameters": {"type": "object"}}]},
        "a tool name",
    ),
]


@pytest.mark.parametrize(("options", "error"), BAD)
def test_bad_input_writes_nothing_and_calls_no_model(
    make_engine: Any, model: ScriptedModel, snap: Any, options: dict[str, Any], error: str
) -> None:
    make_engine.store.upsert_chat("c1", "alice")
    before = snap()
    options = dict(options)  # the parameters are shared by every backend's run
    messages = options.pop("messages", [ui_user("u1", "hi")])
    with pytest.raises(ctxstore.ValidationError, match=error):
        start_chat(make_engine(), messages, **options)
    assert snap() == before
    assert model.requests == []


def test_chat_takes_the_engine_of_its_shell() -> None:
    store = ctxstore.connect("memory://frontend-shells")
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    achat = ctxstore.achat(engine, [ui_user("u1", "x")], model="m")  # type: ignore[arg-type]
    with pytest.raises(ctxstore.errors.ConfigurationError, match="AsyncContextEngine"):
        asyncio.run(achat)
    async_engine = ctxstore.AsyncContextEngine(
        store=ctxstore.connect_async("memory://frontend-shells"), chat_id="c1", user_id="alice"
    )
    with pytest.raises(ctxstore.errors.ConfigurationError, match="ContextEngine"):
        ctxstore.chat(async_engine, [ui_user("u1", "x")], model="m")  # type: ignore[arg-type]
