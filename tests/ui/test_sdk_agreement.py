"""ctxstore.ui agrees with the AI SDK itself (the ``ai`` package, run by Node): the same UI
messages become the same chat-completions messages (after the mapping tests/node/sdk.mjs
documents), and the same messages are valid or not."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from ctxstore.errors import ValidationError
from ctxstore.ui import NO_RESULT, to_model_messages, validate_ui_messages
from tests.support.node import run_sdk
from tests.ui.corpus import CASES, STEP, assistant, random_chat, text, tool, user


def test_the_hand_written_cases_convert_as_the_sdk_converts_them() -> None:
    names = list(CASES)
    answers = run_sdk("convert", [CASES[name] for name in names])
    for name, answer in zip(names, answers, strict=True):
        assert "messages" in answer, (name, answer)
        assert to_model_messages(CASES[name]) == answer["messages"], name


def test_random_chats_convert_as_the_sdk_converts_them() -> None:
    rng = random.Random(20261127)
    chats = [random_chat(rng, rng.randint(1, 6)) for _ in range(150)]
    answers = run_sdk("convert", chats)
    for index, (chat, answer) in enumerate(zip(chats, answers, strict=True)):
        assert to_model_messages(chat) == answer["messages"], index


def test_a_call_without_a_result_is_closed_where_the_sdk_leaves_it_dangling() -> None:
    chat = [user("u1"), assistant("a1", STEP, tool("weather", "c1", "input-available"))]
    (answer,) = run_sdk("convert", [chat])
    ours = to_model_messages(chat)
    assert answer["messages"] == ours[:-1]  # the SDK: the call, and no tool message
    assert ours[-1] == {"role": "tool", "tool_call_id": "c1", "content": NO_RESULT}


VALID: list[list[dict[str, Any]]] = [*CASES.values()]

INVALID: list[Any] = [
    [],
    [{"role": "user", "parts": [text("no id")]}],
    [{"id": "m", "role": "bot", "parts": [text("x")]}],
    [{"id": "m", "role": "user", "parts": []}],
    [{"id": "m", "role": "user", "parts": "text"}],
    [user("m", {"type": "text"})],
    [user("m", {"type": "texte", "text": "x"})],
    [user("m", {"text": "no type"})],
    [user("m", {"type": "file", "url": "x"})],
    [user("m", {"type": "text", "text": "x", "state": "half"})],
    [assistant("m", tool("weather", "c1", "output-available", errorText="both"))],
    [assistant("m", tool("weather", "c1", "output-error", errorText=None))],
    [assistant("m", tool("weather", "c1", "input-available", output=1))],
    [assistant("m", tool("weather", "c1", "thinking"))],
    [assistant("m", {"type": "tool-weather", "state": "input-available", "input": {}})],
    [assistant("m", tool("weather", "c1", "approval-requested"))],
    [
        assistant(
            "m", tool("weather", "c1", "output-denied", approval={"id": "a", "approved": True})
        )
    ],
    [assistant("m", {"type": "dynamic-tool", "toolCallId": "d", "state": "input-available"})],
    [assistant("m", {"type": "source-url", "url": "https://example.com"})],
]


def test_valid_and_invalid_messages_agree_with_the_sdk() -> None:
    answers = run_sdk("validate", VALID + INVALID)
    for index, answer in enumerate(answers[: len(VALID)]):
        assert answer.get("ok") is True, (index, answer)
        validate_ui_messages(copy.deepcopy(VALID[index]))
    for index, answer in enumerate(answers[len(VALID) :]):
        assert answer.get("ok") is False, (INVALID[index], answer)
        with pytest.raises(ValidationError):
            validate_ui_messages(copy.deepcopy(INVALID[index]))
