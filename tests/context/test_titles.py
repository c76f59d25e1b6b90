"""Chat titles: the static title, LLM titles with every fallback, and the lazy litellm import."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from ctxstore.engine.titles import (
    DEFAULT_TITLE_MODEL,
    agenerate_chat_title,
    generate_chat_title,
    static_chat_title,
)
from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import fragment
from ctxstore.prompt.messages import assistant, user

QUESTION = "what's the weather in nyc"


class _Recorder:
    """A stand-in for litellm.completion that records its calls and replies with ``reply``."""

    def __init__(self, reply: Any) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        if isinstance(self.reply, Exception):
            raise self.reply
        return {"choices": [{"message": {"role": "assistant", "content": self.reply}}]}


# --- static titles -----------------------------------------------------------------------------


def test_static_title_of_text() -> None:
    assert static_chat_title(user(QUESTION)) == QUESTION
    assert static_chat_title({"role": "user", "content": QUESTION}) == QUESTION


def test_static_title_collapses_whitespace() -> None:
    assert static_chat_title(user("  hello \n\t  world  ")) == "hello world"


def test_static_title_cuts_at_100_characters() -> None:
    assert static_chat_title(user("a" * 100)) == "a" * 100
    assert static_chat_title(user("b" * 101)) == "b" * 100 + "..."
    assert static_chat_title(user("c " * 80)) == ("c " * 50) + "..."


def test_static_title_joins_text_parts() -> None:
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "look at"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        {"type": "text", "text": " this\nchart"},
    ]
    assert static_chat_title(user(parts)) == "look at this chart"


@pytest.mark.parametrize(
    "source",
    [
        user(""),
        user("   \n "),
        user([{"type": "image_url", "image_url": {"url": "u"}}]),
        assistant({"content": None, "tool_calls": []}),
        {"role": "user"},
    ],
    ids=["empty", "blank", "image only", "no content", "dict without content"],
)
def test_static_title_without_text_is_new_chat(source: Any) -> None:
    assert static_chat_title(source) == "New Chat"


@pytest.mark.parametrize("source", [3, "hello", fragment("note", "x")])
def test_static_title_needs_a_message(source: Any) -> None:
    with pytest.raises(ValidationError):
        static_chat_title(source)


# --- generated titles --------------------------------------------------------------------------


def test_generated_title_sends_the_prompt_and_passes_kwargs_through() -> None:
    completion = _Recorder("Weather in NYC")
    title = generate_chat_title(
        user(QUESTION), "some/model", completion=completion, temperature=0, timeout=5
    )
    assert title == "Weather in NYC"
    [call] = completion.calls
    assert call["model"] == "some/model"
    assert call["temperature"] == 0
    assert call["timeout"] == 5
    system, question = call["messages"]
    assert system["role"] == "system"
    assert "2 to 5 words" in system["content"]
    assert question == {"role": "user", "content": QUESTION}


def test_default_model() -> None:
    completion = _Recorder("Weather in NYC")
    generate_chat_title(user(QUESTION), completion=completion)
    assert completion.calls[0]["model"] == DEFAULT_TITLE_MODEL


def test_prompt_holds_at_most_2000_characters_of_the_message() -> None:
    completion = _Recorder("Long Paste Review")
    generate_chat_title(user("x" * 5000), completion=completion)
    assert completion.calls[0]["messages"][1]["content"] == "x" * 2000


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ('"Weather in NYC"', "Weather in NYC"),
        ("'Space Essay Help.'", "Space Essay Help"),
        ("“Python Debugging”!", "Python Debugging"),
        ("Title: Weather in NYC", "Weather in NYC"),
        ("**Weather   in\nNYC**", "Weather in NYC"),
        ("  One Two Three Four Five  ", "One Two Three Four Five"),
    ],
)
def test_generated_title_is_cleaned(reply: str, expected: str) -> None:
    assert generate_chat_title(user(QUESTION), completion=_Recorder(reply)) == expected


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "   ",
        "Weather",
        '"Weather."',
        "One two three four five six",
        "Supercalifragilistic Antidisestablishmentarianism Floccinaucinihilipilification",
        None,
        RuntimeError("rate limited"),
    ],
    ids=[
        "empty",
        "blank",
        "one word",
        "one word quoted",
        "six words",
        "overlong",
        "no text",
        "raises",
    ],
)
def test_generated_title_falls_back_to_the_static_title(reply: Any) -> None:
    assert generate_chat_title(user(QUESTION), completion=_Recorder(reply)) == QUESTION


def test_malformed_response_falls_back() -> None:
    def completion(**kwargs: Any) -> Any:
        return {"choices": []}

    assert generate_chat_title(user(QUESTION), completion=completion) == QUESTION


def test_message_without_text_skips_the_call() -> None:
    completion = _Recorder("Never Asked")
    assert generate_chat_title(user(""), completion=completion) == "New Chat"
    assert completion.calls == []


def test_fallback_is_the_cut_static_title() -> None:
    long = "word " * 40
    assert generate_chat_title(user(long), completion=_Recorder("")) == long[:100] + "..."


def test_bad_message_is_a_validation_error_not_a_fallback() -> None:
    with pytest.raises(ValidationError):
        generate_chat_title("hello", completion=_Recorder("A Title"))  # type: ignore[arg-type]


def test_generated_title_through_litellm_mock_response(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LITELLM_LOCAL_MODEL_COST_MAP", raising=False)
    title = generate_chat_title(user(QUESTION), "gpt-4o-mini", mock_response='"Weather in NYC."')
    assert title == "Weather in NYC"
    assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"


def test_litellm_failure_falls_back() -> None:
    title = generate_chat_title(
        user(QUESTION), "gpt-4o-mini", mock_response=Exception("provider down")
    )
    assert title == QUESTION


async def test_async_title_through_litellm_mock_response() -> None:
    title = await agenerate_chat_title(user(QUESTION), mock_response="Weather in NYC")
    assert title == "Weather in NYC"


async def test_async_title_with_injected_acompletion() -> None:
    recorder = _Recorder("Space Essay Help")

    async def acompletion(**kwargs: Any) -> Any:
        return recorder(**kwargs)

    title = await agenerate_chat_title(
        {"role": "user", "content": "help me write an essay about space"},
        "m",
        acompletion=acompletion,
        temperature=0,
    )
    assert title == "Space Essay Help"
    assert recorder.calls[0]["model"] == "m"
    assert recorder.calls[0]["temperature"] == 0


@pytest.mark.parametrize("reply", ["Six words are far too many here", RuntimeError("down")])
async def test_async_title_falls_back(reply: Any) -> None:
    recorder = _Recorder(reply)

    async def acompletion(**kwargs: Any) -> Any:
        return recorder(**kwargs)

    assert await agenerate_chat_title(user(QUESTION), acompletion=acompletion) == QUESTION


async def test_async_title_without_text_skips_the_call() -> None:
    async def acompletion(**kwargs: Any) -> Any:
        raise AssertionError("must not be called")

    assert await agenerate_chat_title(user(" "), acompletion=acompletion) == "New Chat"


def test_importing_titles_does_not_import_litellm() -> None:
    code = (
        "import sys, ctxstore, ctxstore.engine.titles\n"
        "assert 'litellm' not in sys.modules, 'litellm was imported'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr
