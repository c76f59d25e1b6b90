"""ctxstore.ui without a store: conversion both ways, counting, reading parts, and the errors
a bad UI message gets."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.messages import count_tokens, message_text, preview, safe_cut_point
from ctxstore.messages.text import called_tools
from ctxstore.ui import is_ui_message, to_model_messages, to_ui_messages, validate_ui_messages
from ctxstore.window.summarizer import transcript_lines
from tests.ui.corpus import CASES, STEP, assistant, text, tool, user

WORDS = " ".join(["word"] * 500)


@pytest.mark.parametrize("name", list(CASES))
def test_chat_completions_round_trip_through_ui_messages(name: str) -> None:
    """to_ui_messages is the inverse on what to_model_messages makes: the model messages of
    the UI form of model messages are those model messages."""
    model = to_model_messages(CASES[name])
    assert to_model_messages(to_ui_messages(model)) == model


def test_to_ui_messages_merges_an_answer_into_one_message_with_a_step_each() -> None:
    model = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": '{"temp":21}'},
        {"role": "assistant", "content": "21 C"},
    ]
    ui = to_ui_messages(model, ids=["s", "u", "a", "t", "a2"])
    assert ui == [
        {"id": "s", "role": "system", "parts": [text("be brief")]},
        {"id": "u", "role": "user", "parts": [text("weather?")]},
        {
            "id": "a",
            "role": "assistant",
            "parts": [
                STEP,
                {
                    "type": "tool-weather",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {"city": "Paris"},
                    "output": {"temp": 21},
                },
                STEP,
                text("21 C"),
            ],
        },
    ]
    validate_ui_messages(ui)


def test_to_ui_messages_of_responses_items() -> None:
    items = [
        {"role": "user", "content": "hi"},
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "function_call", "call_id": "f1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "f1", "output": "found"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "here"}],
        },
    ]
    ui = to_ui_messages(items)
    assert [message["role"] for message in ui] == ["user", "assistant"]
    kinds = [part["type"] for part in ui[1]["parts"]]
    assert kinds == ["step-start", "reasoning", "step-start", "tool-lookup", "step-start", "text"]
    assert ui[1]["parts"][3]["output"] == "found"
    validate_ui_messages(ui)


@pytest.mark.parametrize(
    ("content", "output"),
    [
        ('{"a":[1,2]}', {"a": [1, 2]}),
        ("[1,2]", [1, 2]),
        ('{"a": 1}', '{"a": 1}'),  # spaced: kept as the text, so it goes back unchanged
        ("42", "42"),
        ("plain text", "plain text"),
        ("{not json", "{not json"),
    ],
)
def test_a_tool_result_is_data_when_it_goes_back_as_the_same_text(
    content: str, output: object
) -> None:
    model = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": content},
    ]
    (answer,) = to_ui_messages(model)
    assert answer["parts"][1]["output"] == output
    assert to_model_messages([answer]) == model


def test_an_unanswered_call_is_input_available() -> None:
    model = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "oops"}}
            ],
        },
    ]
    (answer,) = to_ui_messages(model)
    assert answer["parts"][1] == {
        "type": "tool-f",
        "toolCallId": "c1",
        "state": "input-available",
        "input": "oops",
    }


def test_ids_must_match_the_messages() -> None:
    with pytest.raises(ValidationError, match="one per message"):
        to_ui_messages([{"role": "user", "content": "x"}], ids=["a", "b"])


def test_a_ui_message_counts_as_the_model_messages_it_becomes() -> None:
    chat = [user(f"u{n}", text(WORDS)) for n in range(10)]
    assert count_tokens(chat) == count_tokens(to_model_messages(chat))
    assert count_tokens(chat) > 5000  # the parts are counted, not skipped
    for name, case in CASES.items():
        assert count_tokens(case) == count_tokens(to_model_messages(case)), name
        for message in case:
            expected = sum(count_tokens(sent) for sent in to_model_messages([message]))
            assert count_tokens(message) == expected, name


def test_reasoning_and_data_parts_are_not_counted() -> None:
    bare = assistant("a", STEP, text("answer"))
    rich = assistant(
        "a",
        STEP,
        {"type": "reasoning", "text": WORDS},
        text("answer"),
        {"type": "data-x", "data": WORDS},
    )
    assert count_tokens(rich) == count_tokens(bare)


def test_text_previews_and_tool_calls_read_parts() -> None:
    message = assistant(
        "a", STEP, text("Looking"), tool("weather", "c1", input={"city": "P"}), STEP, text("up.")
    )
    assert message_text(message) == "Looking up."
    assert called_tools(message) == [("weather", '{"city":"P"}')]
    calls_only = assistant("a", STEP, tool("weather", "c1"))
    assert preview(calls_only) == "calls weather"
    assert preview(user("u", text("  hello\n world "))) == "hello world"


def test_the_summarizer_reads_steps_calls_and_results() -> None:
    lines = transcript_lines(CASES["one tool call, two steps"])
    assert lines == [
        "user: weather in Paris?",
        'assistant: [calls weather({"city":"Paris"})]',
        'tool: {"temp":21,"unit":"C"}',
        "assistant: It is 21 C.",
    ]


def test_a_tool_part_is_one_group_with_its_result() -> None:
    """A UI answer holds its calls and their results: a cut never falls inside it, and a
    window of UI messages may start at any message."""
    chat = CASES["multi-turn"]
    for keep in range(len(chat) + 1):
        assert safe_cut_point(chat, keep) == len(chat) - keep


def test_what_is_and_is_not_a_ui_message() -> None:
    assert is_ui_message(user("u"))
    assert not is_ui_message({"role": "user", "content": "x"})
    assert not is_ui_message({"type": "message", "role": "user", "parts": []})
    assert not is_ui_message({"role": "user", "parts": [], "content": "x"})


BAD: list[tuple[Any, str]] = [
    ("nope", "must be a list"),
    ([], "must not be empty"),
    ([user("u1"), 5], r"messages\[1\] is not a UI message"),
    ([user("u1"), user("")], r"messages\[1\] needs a non-empty string 'id'"),
    ([{"id": "x", "role": "user", "parts": [text("a")], "content": "a"}], "not 'content'"),
    (
        [user("u1"), user("u2", text("ok"), {"type": "mystery"})],
        r"messages\[1\] \(id 'u2'\) parts\[1\]: unknown part type 'mystery'",
    ),
    (
        [assistant("a1", STEP, tool("w", "c", "output-error", errorText=3))],
        r"parts\[1\]: a tool-w part needs a string 'errorText'",
    ),
    (
        [assistant("a1", tool("w", "c", "input-available", output={}))],
        r"parts\[0\]: a tool part in state 'input-available' cannot have an 'output'",
    ),
    (
        [assistant("a1", {"type": "tool-", "toolCallId": "c", "state": "input-available"})],
        "must name its tool",
    ),
    (
        [assistant("a1", tool("w", "c", "approval-responded", approval={"id": "p"}))],
        "approved=None",
    ),
]


@pytest.mark.parametrize(("messages", "error"), BAD)
def test_a_bad_ui_message_is_named_with_its_part(messages: Any, error: str) -> None:
    before = copy.deepcopy(messages)
    with pytest.raises(ValidationError, match=error):
        validate_ui_messages(messages)
    assert messages == before


def test_the_error_carries_the_message_and_part() -> None:
    with pytest.raises(ValidationError) as caught:
        to_model_messages([user("u1"), user("u2", {"type": "text"})])
    assert caught.value.details == {"message_index": 1, "message_id": "u2", "part_index": 0}
