"""The summarizer's input is bounded: whole requests (overhead included) never exceed the
summary model's window minus the reply's allowance, whatever the history; long messages are
split without losing text; merges recurse; the sync and async drivers make the same requests."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore.messages.tokens import count_tokens
from ctxstore.window.summarizer import (
    DEFAULT_SUMMARY_PROMPT,
    MERGE_PROMPT,
    LiteLLMSummarizer,
    SummarizerError,
    summary_plan,
)


def letters(text: str) -> int:
    return len(text)


def history(count: int, words: int = 30) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * words}
        for i in range(count)
    ]


class Recorder:
    """A completion function (sync and async) that records every request and its full size."""

    def __init__(self, model: str, reply: str = "short") -> None:
        self.model = model
        self.reply = reply
        self.requests: list[list[dict[str, str]]] = []
        self.sizes: list[int] = []
        self.max_tokens: list[int] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        self.requests.append(kwargs["messages"])
        self.sizes.append(count_tokens(kwargs["messages"], self.model))
        self.max_tokens.append(kwargs["max_tokens"])
        return {"choices": [{"message": {"content": f"{self.reply} {len(self.requests)}"}}]}

    async def acall(self, **kwargs: Any) -> dict[str, Any]:
        return self(**kwargs)


def test_every_request_fits_the_window_minus_the_reply() -> None:
    recorder = Recorder("gpt-4o")
    summarizer = LiteLLMSummarizer(
        "gpt-4o", max_input_tokens=600, summary_tokens=100, completion=recorder
    )
    text = summarizer.summarize(history(80))
    assert len(recorder.requests) > 3
    assert max(recorder.sizes) <= 500  # request + reply allowance <= window
    assert set(recorder.max_tokens) == {100}
    assert text == f"short {len(recorder.requests)}"
    # The first requests summarize the transcript with the default prompt, the last merges.
    assert recorder.requests[0][0]["content"] == DEFAULT_SUMMARY_PROMPT
    assert recorder.requests[-1][0]["content"] == MERGE_PROMPT
    # Every transcript line went to exactly one chunk, in order.
    firsts = [m[1]["content"] for m in recorder.requests if m[0]["content"] != MERGE_PROMPT]
    joined = "\n".join(firsts)
    positions = [joined.index(f"turn {i} ") for i in range(80)]
    assert positions == sorted(positions)


def test_merges_recurse_until_one_summary_remains() -> None:
    # Counted in letters: 2000 per request; partials of ~600 letters, so a merge takes two and
    # the partials of the first round need several merge rounds.
    prompts: list[str] = []
    plan = summary_plan(history(60), prompt="Sum up.", input_budget=2000, count=letters)
    request = next(plan).request  # each step is an Effect asking for one model request
    while True:
        assert count_tokens(request.messages, estimate_tokens=letters) <= 2000
        prompts.append(request.messages[0]["content"])
        try:
            request = plan.send(f"partial {len(prompts):04d} " + "z" * 590).request
        except StopIteration as done:
            result = str(done.value)
            break
    first_round = prompts.count("Sum up.")
    assert first_round >= 4
    assert prompts[:first_round] == ["Sum up."] * first_round
    # Two partials per merge: more merges than a single round of first_round / 2 would need.
    assert prompts.count(MERGE_PROMPT) >= first_round - 1
    assert result.startswith(f"partial {len(prompts):04d}")


def test_a_message_longer_than_the_window_is_split_and_nothing_is_dropped() -> None:
    recorder = Recorder("gpt-4o")
    summarizer = LiteLLMSummarizer(
        "gpt-4o", max_input_tokens=400, summary_tokens=100, completion=recorder
    )
    words = " ".join(f"w{i}" for i in range(3000))
    summarizer.summarize([{"role": "tool", "content": words}])
    assert max(recorder.sizes) <= 300
    chunks = [m[1]["content"] for m in recorder.requests if m[0]["content"] != MERGE_PROMPT]
    assert len(chunks) > 3
    assert "".join(chunks) == f"tool: {words}"  # consecutive pieces, nothing lost


def test_partials_that_cannot_be_merged_are_a_clear_error() -> None:
    # A model that ignores max_tokens and answers at full length cannot be merged: the
    # summarizer says so instead of looping forever.
    def verbose(**kwargs: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"content": "y" * 1500}}]}

    summarizer = LiteLLMSummarizer(
        "some/model",
        max_input_tokens=2100,
        summary_tokens=100,
        estimate_tokens=letters,
        completion=verbose,
    )
    with pytest.raises(SummarizerError, match="do not fit"):
        summarizer.summarize(history(20))


def test_a_prompt_that_leaves_no_room_is_a_configuration_error() -> None:
    summarizer = LiteLLMSummarizer(
        "gpt-4o", prompt="long " * 400, max_input_tokens=600, summary_tokens=100
    )
    with pytest.raises(ctxstore.errors.ConfigurationError, match="half"):
        summarizer.summarize(history(2))


async def test_the_async_driver_makes_the_same_requests() -> None:
    sync_recorder, async_recorder = Recorder("gpt-4o"), Recorder("gpt-4o")
    options: dict[str, Any] = {"max_input_tokens": 500, "summary_tokens": 100}
    sync_text = LiteLLMSummarizer("gpt-4o", completion=sync_recorder, **options).summarize(
        history(40)
    )
    async_text = await LiteLLMSummarizer(
        "gpt-4o", acompletion=async_recorder.acall, **options
    ).asummarize(history(40))
    assert async_recorder.requests == sync_recorder.requests
    assert async_text == sync_text
    assert max(async_recorder.sizes) <= 400


def test_tool_calls_and_names_appear_in_the_transcript() -> None:
    recorder = Recorder("gpt-4o")
    messages = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "t",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "t", "name": "weather", "content": "-3 C"},
    ]
    LiteLLMSummarizer("gpt-4o", completion=recorder).summarize(messages)
    transcript = recorder.requests[0][1]["content"]
    assert 'weather({"city": "Oslo"})' in transcript
    assert "tool weather: -3 C" in transcript


@pytest.mark.parametrize(
    "options",
    [
        {"max_input_tokens": 100, "summary_tokens": 100},
        {"max_input_tokens": 0},
        {"summary_tokens": 0},
        {"prompt": "   "},
        {"completion": "not a function"},
    ],
)
def test_bad_summarizer_settings(options: dict[str, Any]) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError):
        LiteLLMSummarizer("gpt-4o", **options)
