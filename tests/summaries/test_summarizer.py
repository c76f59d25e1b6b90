"""The litellm summarizer: one call when the history fits, chunks and merges when it does not
(no request ever exceeds the model's window), litellm's mock_response end to end, failures."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest

import ctxstore
from ctxstore.messages.tokens import count_tokens
from ctxstore.window.summarizer import LiteLLMSummarizer, SummarizerError, litellm_summarizer

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def history(count: int, words: int = 30) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "word " * words}
        for i in range(count)
    ]


class Recorder:
    """A completion function that records each request's size and answers briefly."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.sizes: list[int] = []
        self.requests: list[list[dict[str, str]]] = []

    def __call__(self, **kwargs: Any) -> dict[str, Any]:
        messages = kwargs["messages"]
        self.requests.append(messages)
        self.sizes.append(sum(count_tokens(m["content"], self.model) for m in messages))
        return {"choices": [{"message": {"content": f"summary {len(self.requests)}"}}]}


def test_a_history_that_fits_is_one_call() -> None:
    recorder = Recorder("gpt-4o")
    summarizer = LiteLLMSummarizer("gpt-4o", completion=recorder)
    assert summarizer.summarize(history(10)) == "summary 1"
    assert len(recorder.requests) == 1
    system, transcript = recorder.requests[0]
    assert "decisions" in system["content"]
    assert transcript["content"].startswith("user: turn 0")


def test_a_history_longer_than_the_window_is_chunked_and_merged() -> None:
    recorder = Recorder("gpt-4o")
    summarizer = LiteLLMSummarizer(
        "gpt-4o", max_input_tokens=700, summary_tokens=100, completion=recorder
    )
    text = summarizer.summarize(history(60))
    assert len(recorder.requests) > 2  # several chunks, then a merge
    assert max(recorder.sizes) <= 600  # the window minus the reply's allowance
    assert text == f"summary {len(recorder.requests)}"
    merge = recorder.requests[-1]
    assert "Merge" in merge[0]["content"]


def test_one_message_longer_than_the_window_is_cut_not_sent_whole() -> None:
    recorder = Recorder("gpt-4o")
    summarizer = LiteLLMSummarizer(
        "gpt-4o", max_input_tokens=500, summary_tokens=100, completion=recorder
    )
    summarizer.summarize([{"role": "tool", "content": "data " * 5000}])
    assert max(recorder.sizes) <= 400


def test_litellm_mock_response_end_to_end() -> None:
    summarizer = LiteLLMSummarizer("gpt-4o-mini", mock_response="They planned a trip.")
    assert summarizer.summarize(history(3)) == "They planned a trip."
    summarize = litellm_summarizer("gpt-4o-mini", mock_response="Async summary.")
    assert asyncio.run(summarize(history(3))) == "Async summary."


def test_an_earlier_summary_is_labelled_in_the_transcript() -> None:
    recorder = Recorder("gpt-4o")
    earlier = {
        "role": "assistant",
        "content": "They met.",
        "metadata": {"type": "context-summary", "covered": 4},
    }
    LiteLLMSummarizer("gpt-4o", completion=recorder).summarize([earlier, *history(2)])
    assert recorder.requests[0][1]["content"].startswith("earlier summary: They met.")


def test_failures_are_clear_errors() -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="window"):
        LiteLLMSummarizer("no-such-provider/unknown-model")
    with pytest.raises(ctxstore.errors.ConfigurationError):
        LiteLLMSummarizer("")

    def empty(**_kwargs: Any) -> dict[str, Any]:
        return {"choices": [{"message": {"content": None}}]}

    with pytest.raises(SummarizerError):
        LiteLLMSummarizer("gpt-4o", completion=empty).summarize(history(2))
