"""ContextManager: windows, usage accounting, thresholds, compactify (tool groups, rolling,
sync and async summarizers), prepare_messages, and bad configuration."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import ctxstore
from ctxstore import ContextManager
from ctxstore.messages import count_tokens, is_context_summary
from ctxstore.messages.summaries import summary_section


def letters(text: str) -> int:
    return len(text)


def turns(count: int) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i:02d}"}
        for i in range(count)
    ]


def manager(**options: Any) -> ContextManager:
    options.setdefault("max_tokens", 1000)
    options.setdefault("response_reserve", 100)
    options.setdefault("estimate_tokens", letters)
    options.setdefault("compactify", lambda messages: f"{len(messages)} earlier messages")
    return ContextManager(**options)


def test_the_window_comes_from_litellms_map_offline() -> None:
    known = ContextManager(model="gpt-4.1")
    assert (known.max_tokens, known.get_state()["max_tokens_source"]) == (1_047_576, "model")
    given = ContextManager(model="gpt-4o", max_tokens=5000).get_state()
    assert (given["max_tokens"], given["max_tokens_source"]) == (5000, "max_tokens")


@pytest.mark.parametrize("options", [{}, {"model": "someone/unknown-model"}])
def test_without_a_window_the_default_is_128000_and_says_so(
    options: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The seed's default: a manager works out of the box, and its state says where its window
    came from."""
    with caplog.at_level("INFO", logger="ctxstore.window.manager"):
        cm = ContextManager(**options)
    assert cm.get_state()["max_tokens"] == 128_000
    assert cm.get_state()["max_tokens_source"] == "default"
    assert "default window of 128000 tokens" in caplog.text


@pytest.mark.parametrize(
    "options",
    [
        {"soft_threshold": 0.9, "hard_threshold": 0.8},
        {"hard_threshold": 1.5},
        {"soft_threshold": 0},
        {"response_reserve": -1},
        {"response_reserve": 1000},
        {"min_recent_messages": -1},
        {"max_tokens": 0},
        {"compactify": "not a function"},
    ],
)
def test_bad_settings_are_configuration_errors(options: dict[str, Any]) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError):
        manager(**options)


def test_usage_in_every_spelling_adds_up() -> None:
    cm = manager()
    cm.record_usage({"prompt_tokens": 100, "completion_tokens": 20})
    cm.record_usage({"inputTokens": 200, "outputTokens": 30, "totalTokens": 230})
    cm.record_usage(SimpleNamespace(input_tokens=300, output_tokens=40))
    state = cm.get_state()
    assert state["total_input_tokens"] == 600
    assert state["total_output_tokens"] == 90
    assert state["estimated_context_size"] == 340  # the last step's input and output
    assert state["usage_ratio"] == pytest.approx((340 + 100) / 1000)
    assert state["max_tokens"] == 1000
    metadata = cm.get_message_metadata()
    assert metadata["total_tokens"] == 690
    cm.reset()
    assert cm.get_state()["total_input_tokens"] == 0


def test_thresholds_count_the_response_reserve() -> None:
    cm = manager()  # soft at 750 - 100 = 650 tokens of context, hard at 900 - 100 = 800
    small = [{"role": "user", "content": "x" * 100}]
    assert not cm.should_summarize(small)
    assert not cm.should_compactify(small)
    middle = [{"role": "user", "content": "x" * 700}]
    assert cm.should_summarize(middle)
    assert not cm.should_compactify(middle)
    assert cm.get_state()["soft_threshold_exceeded"]
    big = [{"role": "user", "content": "x" * 900}]
    assert not cm.should_summarize(big)  # only between the thresholds
    assert cm.should_compactify(big)
    state = cm.get_state()
    assert state["hard_threshold_exceeded"]
    assert state["usage_ratio"] == 1.0  # capped
    assert (cm.soft_tokens, cm.hard_tokens) == (650, 800)


def test_compactify_keeps_the_newest_and_marks_the_summary() -> None:
    cm = manager(min_recent_messages=4)
    seen: list[list[dict[str, Any]]] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "the first six"

    cm.compactify_function = summarize
    history = [{"role": "system", "content": "be brief"}, *turns(10)]
    result = cm.compactify(history)
    assert result[0] == {"role": "system", "content": "be brief"}
    summary = result[1]
    assert is_context_summary(summary)
    assert summary["role"] == "assistant"
    assert summary["content"] == "the first six"
    assert summary["metadata"]["covered"] == 6
    replaced = turns(10)[:6]
    assert summary["metadata"]["tokens_before"] == sum(
        count_tokens(m, estimate_tokens=letters) for m in replaced
    )
    assert summary["metadata"]["tokens_after"] == count_tokens(
        {"role": "assistant", "content": "the first six"}, estimate_tokens=letters
    )
    assert result[2:] == turns(10)[6:]
    assert [m["content"] for m in seen[0]] == [m["content"] for m in replaced]
    assert cm.get_state()["summary_count"] == 1
    # Rolling: the next compaction covers the previous summary too.
    again = cm.compactify([*result, *turns(14)[10:]])
    assert is_context_summary(seen[1][0])
    assert again[1]["metadata"]["covered"] == 6 + 4
    assert cm.get_state()["summary_count"] == 2


def test_compactify_never_separates_a_tool_call_from_its_results() -> None:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    results = [{"role": "tool", "tool_call_id": "t1", "content": f"r{i}"} for i in range(3)]
    history = [*turns(4), call, *results]
    out = manager(min_recent_messages=2).compactify(history)
    assert out[1:] == [call, *results]  # the group stays whole
    assert out[0]["metadata"]["covered"] == 4


def test_nothing_old_enough_means_no_summarizer_call() -> None:
    def never(_messages: list[dict[str, Any]]) -> str:
        raise AssertionError("called")

    assert manager(compactify=never).compactify(turns(3)) == turns(3)


def test_async_summarizers_and_the_async_form() -> None:
    async def summarize(messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0)
        return f"{len(messages)} summarized"

    cm = manager(compactify=summarize, min_recent_messages=2)
    result = asyncio.run(cm.acompactify(turns(6)))
    assert result[0]["content"] == "4 summarized"
    with pytest.raises(ctxstore.errors.ConfigurationError, match="acompactify"):
        cm.compactify(turns(6))


def test_litellm_writes_the_summary_with_mock_response() -> None:
    cm = ContextManager(
        model="gpt-4o-mini",
        summary_model="gpt-4o-mini",
        min_recent_messages=2,
        summary_options={"mock_response": "A mocked summary."},
    )
    assert cm.compactify(turns(5))[0]["content"] == "A mocked summary."
    assert asyncio.run(cm.acompactify(turns(5)))[0]["content"] == "A mocked summary."


def test_no_summarizer_is_a_clear_error_when_one_is_needed() -> None:
    cm = ContextManager(max_tokens=1000, response_reserve=10)
    assert cm.compactify(turns(2)) == turns(2)  # nothing to summarize: no error
    with pytest.raises(ctxstore.errors.ConfigurationError, match="summary_model"):
        cm.compactify(turns(10))


def test_prepare_messages_moves_the_summary_into_the_system_prompt() -> None:
    cm = manager(min_recent_messages=2)
    compacted = cm.compactify([{"role": "system", "content": "own rules"}, *turns(5)])
    prepared = cm.prepare_messages(compacted, system_prompt="You are terse.")
    system = prepared[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are terse.\n\nown rules\n\n")
    assert summary_section("3 earlier messages") in system["content"]
    assert prepared[1:] == turns(5)[3:]
    assert not any("metadata" in m or is_context_summary(m) for m in prepared)
    assert cm.prepare_messages(turns(2)) == turns(2)
    assert cm.prepare_messages(turns(1), "sys")[0] == {"role": "system", "content": "sys"}
    with pytest.raises(ctxstore.ValidationError):
        cm.prepare_messages(["not a message"])  # type: ignore[list-item]
