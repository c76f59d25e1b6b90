"""ContextManager beyond the basics: where the context size comes from, thresholds at their
edges, sync and async compactions, the litellm summarizer bounded through the manager,
prepare_messages details, usage spellings, and what importing the manager costs."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import ctxstore
from ctxstore import ContextManager
from ctxstore.messages import count_tokens, is_context_summary
from ctxstore.messages.summaries import SUMMARY_CLOSE, SUMMARY_OPEN
from ctxstore.messages.usage import normalize_usage
from ctxstore.window.summarizer import MERGE_PROMPT


def letters(text: str) -> int:
    return len(text)


def turns(count: int, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i:02d}"}
        for i in range(start, start + count)
    ]


def manager(**options: Any) -> ContextManager:
    options.setdefault("max_tokens", 1000)
    options.setdefault("response_reserve", 100)
    options.setdefault("estimate_tokens", letters)
    options.setdefault("compactify", lambda messages: f"{len(messages)} earlier messages")
    return ContextManager(**options)


def of_size(tokens: int) -> list[dict[str, Any]]:
    """One user message list whose count (letters) is exactly ``tokens``."""
    overhead = count_tokens([{"role": "user", "content": ""}], estimate_tokens=letters)
    return [{"role": "user", "content": "x" * (tokens - overhead)}]


# --- the estimated context size ----------------------------------------------------------------


def test_the_newest_source_sets_the_context_size() -> None:
    cm = manager()
    shown = turns(3)
    cm.should_summarize(shown)
    assert cm.get_state()["estimated_context_size"] == count_tokens(shown, estimate_tokens=letters)
    assert not cm.should_summarize()
    cm.record_usage({"input_tokens": 560, "output_tokens": 120})
    assert cm.get_state()["estimated_context_size"] == 680  # newer than the list
    assert cm.should_summarize()  # None: the estimate as it stands, 680 >= 650
    cm.should_compactify(shown)
    assert cm.get_state()["estimated_context_size"] == count_tokens(shown, estimate_tokens=letters)
    cm.record_usage({"total_tokens": 10})  # no input/output: the size stays
    assert cm.get_state()["estimated_context_size"] == count_tokens(shown, estimate_tokens=letters)
    assert cm.get_state()["total_input_tokens"] == 560


@pytest.mark.parametrize(
    ("size", "summarize", "compactify"),
    [(649, False, False), (650, True, False), (799, True, False), (800, False, True)],
)
def test_thresholds_at_their_edges(size: int, summarize: bool, compactify: bool) -> None:
    cm = manager()  # soft: (size + 100) / 1000 >= 0.75 from 650; hard >= 0.9 from 800
    assert cm.should_summarize(of_size(size)) is summarize
    assert cm.should_compactify(of_size(size)) is compactify
    state = cm.get_state()
    assert state["usage_ratio"] == pytest.approx(min(1.0, (size + 100) / 1000))
    assert state["soft_threshold_exceeded"] is (size >= 650)
    assert state["hard_threshold_exceeded"] is compactify


def test_token_thresholds_agree_with_the_ratio_despite_floating_point() -> None:
    cm = ContextManager(max_tokens=100, response_reserve=0, soft_threshold=0.57, hard_threshold=1)
    assert cm.soft_tokens == 57  # 0.57 * 100 is 56.99999... in floating point
    cm.record_usage({"input_tokens": 56, "output_tokens": 0})
    assert not cm.get_state()["soft_threshold_exceeded"]
    assert not cm.should_summarize()
    cm.record_usage({"input_tokens": 57, "output_tokens": 0})
    assert cm.should_summarize()
    cm.record_usage({"input_tokens": 100, "output_tokens": 0})
    assert cm.should_compactify()  # hard threshold 1: a full window


def test_metadata_for_a_stream_is_json_and_reset_clears_everything() -> None:
    cm = manager(min_recent_messages=1)
    cm.record_usage({"inputTokens": 40, "outputTokens": 2})
    cm.compactify(turns(3))
    metadata = cm.get_message_metadata()
    assert json.loads(json.dumps(metadata)) == metadata
    assert metadata["total_tokens"] == 42
    assert metadata["summary_count"] == 1
    cm.reset()
    state = cm.get_state()
    assert (state["total_input_tokens"], state["estimated_context_size"]) == (0, 0)
    assert state["summary_count"] == 0


def test_camel_case_usage_of_the_js_sdks() -> None:
    assert normalize_usage({"inputTokens": 7, "outputTokens": 3, "totalTokens": 11}) == {
        "input_tokens": 7,
        "output_tokens": 3,
        "total_tokens": 11,
    }
    assert normalize_usage({"promptTokens": 5, "completionTokens": 1})["total_tokens"] == 6
    with pytest.raises(ctxstore.ValidationError, match="inputTokens"):
        normalize_usage({"tokens": 3})


# --- configuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {"soft_threshold": True},
        {"soft_threshold": 0.8, "hard_threshold": 0.8},
        {"min_recent_messages": 1.5},
        {"max_tokens": True},
        {"summary_model": ""},
        {"summary_prompt": "  "},
        {"summary_options": ["mock_response"]},
        {"model": 3},
    ],
)
def test_more_bad_settings(options: dict[str, Any]) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError):
        manager(**options)


def test_an_unknown_summary_model_fails_at_construction_unless_its_window_is_given() -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="summary_max_tokens"):
        ContextManager(max_tokens=1000, response_reserve=10, summary_model="nobody/model-x")
    cm = ContextManager(
        max_tokens=1000,
        response_reserve=10,
        summary_model="nobody/model-x",
        summary_max_tokens=5000,
        completion=lambda **_kwargs: {"choices": [{"message": {"content": "ok"}}]},
    )
    assert cm.compactify(turns(6))[0]["content"] == "ok"


# --- compaction ---------------------------------------------------------------------------------


def test_the_summarizer_gets_a_copy_and_the_input_is_not_changed() -> None:
    def vandal(messages: list[dict[str, Any]]) -> str:
        for message in messages:
            message["content"] = "changed"
        return "summary"

    history = turns(6)
    before = json.dumps(history)
    out = manager(compactify=vandal, min_recent_messages=2).compactify(history)
    assert json.dumps(history) == before
    assert out[1:] == turns(6)[4:]


def test_rolling_summaries_add_up_what_they_cover() -> None:
    seen: list[list[dict[str, Any]]] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return f"summary {len(seen)}"

    cm = manager(compactify=summarize, min_recent_messages=2)
    first = cm.compactify(turns(5))
    assert first[0]["metadata"]["covered"] == 3
    second = cm.compactify([*first, *turns(4, start=5)])
    assert [m["content"] for m in seen[1]] == [
        "summary 1",
        "message 03",
        "message 04",
        *[f"message {i:02d}" for i in (5, 6)],
    ]
    assert second[0]["metadata"]["covered"] == 3 + 4
    assert second[0]["content"] == "summary 2"
    assert second[1:] == turns(4, start=5)[2:]
    # Nothing newer than the kept part: the summary stays, no call.
    assert cm.compactify(second) == second
    assert len(seen) == 2
    assert cm.get_state()["summary_count"] == 2


def test_the_state_after_a_compaction_is_the_new_lists_size() -> None:
    cm = manager(min_recent_messages=2)
    out = cm.compactify(turns(8))
    assert cm.get_state()["estimated_context_size"] == count_tokens(out, estimate_tokens=letters)
    summary = out[0]
    assert summary["metadata"]["tokens_after"] == count_tokens(
        {"role": "assistant", "content": summary["content"]}, estimate_tokens=letters
    )


def test_the_kept_part_grows_back_to_the_call_of_its_first_result() -> None:
    call = {
        "role": "assistant",
        "content": "checking",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "b", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": "a", "content": "ra"},
        {"role": "tool", "tool_call_id": "b", "content": "rb"},
    ]
    history = [*turns(4), call, *results, {"role": "assistant", "content": "done"}]
    out = manager(min_recent_messages=2).compactify(history)  # would start at result b
    assert out[1:] == [call, *results, {"role": "assistant", "content": "done"}]
    assert out[0]["metadata"]["covered"] == 4
    only_a_group = [call, *results]
    assert manager(min_recent_messages=1).compactify(only_a_group) == only_a_group


@pytest.mark.parametrize("reply", [None, "", "   ", 42])
def test_a_summarizer_without_text_is_an_error(reply: object) -> None:
    cm = manager(compactify=lambda _messages: reply, min_recent_messages=1)
    with pytest.raises(ctxstore.ValidationError):
        cm.compactify(turns(4))
    assert cm.get_state()["summary_count"] == 0


def test_a_bad_covered_count_in_a_previous_summary_is_an_error() -> None:
    bad = {
        "role": "assistant",
        "content": "s",
        "metadata": {"type": "context-summary", "covered": "3"},
    }
    with pytest.raises(ctxstore.ValidationError, match="covered"):
        manager(min_recent_messages=1).compactify([bad, *turns(3)])


def test_an_async_summarizer_in_the_sync_call_is_refused_before_it_runs() -> None:
    started: list[int] = []

    async def summarize(messages: list[dict[str, Any]]) -> str:
        started.append(len(messages))
        return "never"

    class AsyncCallable:
        async def __call__(self, messages: list[dict[str, Any]]) -> str:
            started.append(len(messages))
            return "never"

    for function in (summarize, AsyncCallable()):
        with pytest.raises(ctxstore.errors.ConfigurationError, match="acompactify"):
            manager(compactify=function, min_recent_messages=1).compactify(turns(4))
    assert started == []


async def test_acompactify_with_every_kind_of_summarizer() -> None:
    async def asynchronous(messages: list[dict[str, Any]]) -> str:
        return f"async {len(messages)}"

    class AsyncCallable:
        async def __call__(self, messages: list[dict[str, Any]]) -> str:
            return f"callable {len(messages)}"

    for function, expected in (
        (asynchronous, "async 3"),
        (AsyncCallable(), "callable 3"),
        (lambda messages: f"sync {len(messages)}", "sync 3"),
    ):
        out = await manager(compactify=function, min_recent_messages=2).acompactify(turns(5))
        assert out[0]["content"] == expected
        assert is_context_summary(out[0])
        assert out[1:] == turns(5)[3:]


async def test_sync_and_async_compactions_give_the_same_list() -> None:
    history = [{"role": "system", "content": "rules"}, *turns(9)]
    sync_out = manager(min_recent_messages=3).compactify(history)
    async_out = await manager(min_recent_messages=3).acompactify(history)
    assert async_out == sync_out


async def test_no_summarizer_is_an_error_async_too() -> None:
    cm = ContextManager(max_tokens=1000, response_reserve=10)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="compactify="):
        await cm.acompactify(turns(10))


def test_the_manager_bounds_the_summary_models_input() -> None:
    sizes: list[int] = []
    prompts: list[str] = []

    def completion(**kwargs: Any) -> dict[str, Any]:
        sizes.append(count_tokens(kwargs["messages"], "gpt-4o-mini"))
        prompts.append(kwargs["messages"][0]["content"])
        return {"choices": [{"message": {"content": f"part {len(sizes)}"}}]}

    cm = ContextManager(
        model="gpt-4o-mini",
        max_tokens=100_000,
        summary_model="gpt-4o-mini",
        summary_max_tokens=700,
        summary_tokens=100,
        summary_prompt="Summarize briefly.",
        min_recent_messages=2,
        completion=completion,
    )
    long_history = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "text " * 60}
        for i in range(40)
    ]
    out = cm.compactify(long_history)
    assert len(sizes) > 2
    assert max(sizes) <= 600
    assert prompts[0] == "Summarize briefly."
    assert prompts[-1] == MERGE_PROMPT
    assert out[0]["content"] == f"part {len(sizes)}"
    assert out[0]["metadata"]["covered"] == 38


async def test_litellm_mock_response_through_the_async_path() -> None:
    cm = ContextManager(
        model="gpt-4o-mini",
        summary_model="gpt-4o-mini",
        min_recent_messages=1,
        summary_options={"mock_response": "Mocked async summary."},
    )
    out = await cm.acompactify(turns(4))
    assert out[0]["content"] == "Mocked async summary."
    assert out[0]["metadata"]["covered"] == 3


# --- prepare_messages ---------------------------------------------------------------------------


def test_prepare_messages_sends_no_marker_and_no_metadata() -> None:
    cm = manager(min_recent_messages=2)
    noted = {"role": "user", "content": "hi", "metadata": {"source": "web"}}
    compacted = cm.compactify([*turns(4), noted, {"role": "assistant", "content": "yo"}])
    prepared = cm.prepare_messages(compacted)
    system = prepared[0]
    assert system["role"] == "system"
    assert system["content"].startswith(SUMMARY_OPEN)
    assert system["content"].endswith(SUMMARY_CLOSE)
    assert "4 earlier messages" in system["content"]
    assert prepared[1:] == [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "yo"},
    ]
    assert compacted[-2]["metadata"] == {"source": "web"}  # the caller's list is untouched
    assert cm.get_state()["estimated_context_size"] == count_tokens(
        prepared, estimate_tokens=letters
    )


def test_prepare_messages_reads_system_messages_with_content_parts() -> None:
    cm = manager()
    parts = {"role": "system", "content": [{"type": "text", "text": "part one"}]}
    prepared = cm.prepare_messages([parts, *turns(1)], system_prompt="first")
    assert prepared[0] == {"role": "system", "content": "first\n\npart one"}
    assert prepared[1:] == turns(1)
    with pytest.raises(ctxstore.ValidationError):
        cm.prepare_messages(turns(1), system_prompt=3)  # type: ignore[arg-type]


# --- import cost --------------------------------------------------------------------------------


def test_importing_the_manager_loads_neither_litellm_tiktoken_nor_the_store() -> None:
    code = (
        "import sys, ctxstore\n"
        "cm = ctxstore.ContextManager(max_tokens=1000, response_reserve=10,"
        " estimate_tokens=len, compactify=lambda m: 's')\n"
        "cm.compactify([{'role': 'user', 'content': str(i)} for i in range(8)])\n"
        "print(sorted(m for m in ('litellm', 'tiktoken', 'redis', 'msgpack') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
