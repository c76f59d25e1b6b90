"""One compaction of a branch (the step shared by the worker and inline compaction): what it
covers, what it keeps, the lease, failures, and messages appended while it runs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import leases
from ctxstore.messages.tokens import message_counter
from ctxstore.models import CompactionTrigger
from ctxstore.window.compaction import (
    CompactionPolicy,
    arun_compaction,
    compaction,
    cut_point,
    run_compaction,
)


def letters(text: str) -> int:
    return len(text)


COUNT = message_counter(estimate_tokens=letters)


@pytest.fixture
def cstore(backend: str, namespace: str) -> Iterator[Any]:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    store.upsert_chat("k", "alice")
    yield store
    store.close()


def fill(store: Any, texts: list[Any], head: str | None = None) -> list[str]:
    ids = []
    for item in texts:
        message = item if isinstance(item, dict) else {"role": "user", "content": item}
        head = store.append("k", "main", [message], expected_head=head).head_message_id
        assert head is not None
        ids.append(head)
    return ids


def compact(store: Any, summarize: Any, policy: CompactionPolicy | None = None, **kw: Any) -> Any:
    steps = compaction(store.state, "k", None, policy or CompactionPolicy(), COUNT, **kw)
    return run_compaction(store.run, steps, summarize)


def test_all_but_the_newest_are_summarized_onto_the_last_covered_message(cstore: Any) -> None:
    ids = fill(cstore, [f"m{i}" for i in range(10)])
    seen: list[list[dict[str, Any]]] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "six messages"

    result = compact(cstore, summarize, CompactionPolicy(summary_model="mock/model"))
    assert [m["content"] for m in seen[0]] == [f"m{i}" for i in range(6)]
    assert result.written
    assert result.covered == 6
    assert result.tokens_before == sum(
        COUNT({"role": "user", "content": f"m{i}"}) for i in range(6)
    )
    assert result.tokens_after == COUNT({"role": "assistant", "content": "six messages"})
    assert result.summary is not None
    assert result.summary["message_id"] == ids[5]
    assert result.summary["metadata"]["model"] == "mock/model"
    read = cstore.load_branch("k", after_summary=True)
    assert [m["message"]["content"] for m in read.messages] == ["m6", "m7", "m8", "m9"]


def test_a_rolling_compaction_covers_the_previous_summary(cstore: Any) -> None:
    ids = fill(cstore, [f"m{i}" for i in range(6)])
    compact(cstore, lambda _messages: "first", CompactionPolicy(min_recent_messages=2))
    ids += fill(cstore, [f"n{i}" for i in range(4)], ids[-1])
    seen: list[list[dict[str, Any]]] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "second"

    result = compact(cstore, summarize, CompactionPolicy(min_recent_messages=2))
    assert seen[0][0]["content"] == "first"
    assert seen[0][0]["metadata"]["type"] == "context-summary"
    assert [m["content"] for m in seen[0][1:]] == ["m4", "m5", "n0", "n1"]
    assert result.covered == 4 + 4
    assert result.summary is not None
    assert result.summary["message_id"] == ids[7]


def test_the_kept_part_never_starts_with_a_tool_result() -> None:
    call = {"role": "assistant", "tool_calls": [{"id": "t", "function": {"name": "f"}}]}
    result = {"role": "tool", "tool_call_id": "t", "content": "r"}
    payloads = [{"role": "user"}, call, result, result, {"role": "assistant"}]
    assert cut_point(payloads, 2) == 1  # keeps the call with both results
    assert cut_point(payloads, 1) == 4
    assert cut_point(payloads, 9) == 0


def test_a_job_that_is_not_due_settles_its_marker(cstore: Any) -> None:
    trigger = CompactionTrigger(soft_tokens=1)
    result = cstore.append(
        "k", "main", [{"role": "user", "content": "hi"}], expected_head=None, compaction=trigger
    )
    assert result.compaction_job is not None
    outcome = compact(
        cstore, lambda _m: "never", CompactionPolicy(soft_tokens=10_000), job=result.compaction_job
    )
    assert outcome.skipped == "not due"
    again = cstore.append(
        "k",
        "main",
        [{"role": "user", "content": "hi"}],
        expected_head=result.head_message_id,
        compaction=trigger,
    )
    assert again.compaction_job is not None  # the marker was cleared


def test_a_held_lease_skips_and_a_failed_summarizer_gives_it_back(cstore: Any) -> None:
    fill(cstore, [f"m{i}" for i in range(8)])
    other = leases.new_lease_token()
    assert cstore.run(leases.take_lease(cstore.state, "k", other, 60_000))[0]
    assert compact(cstore, lambda _m: "x").skipped == "leased"
    assert cstore.run(leases.give_lease(cstore.state, "k", other))

    def failing(_messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("model down")

    with pytest.raises(RuntimeError, match="model down"):
        compact(cstore, failing)
    assert cstore.load_branch("k", after_summary=True).summary is None
    assert compact(cstore, lambda _m: "ok").written  # the lease came back


def test_messages_appended_while_summarizing_are_kept(cstore: Any) -> None:
    ids = fill(cstore, [f"m{i}" for i in range(6)])

    def slow_summarizer(_messages: list[dict[str, Any]]) -> str:
        fill(cstore, ["late 1", "late 2"], ids[-1])  # another worker, meanwhile
        return "m0-m1"

    compact(cstore, slow_summarizer)
    read = cstore.load_branch("k", after_summary=True)
    assert [m["message"]["content"] for m in read.messages] == [
        "m2",
        "m3",
        "m4",
        "m5",
        "late 1",
        "late 2",
    ]


def test_the_async_driver_takes_an_async_summarizer(backend: str, namespace: str) -> None:
    async def scenario() -> Any:
        store = ctxstore.connect_async(
            backend, namespace=namespace, estimate_tokens=letters
        ).admin()
        await store.upsert_chat("k", "alice")
        head = None
        for i in range(6):
            head = (
                await store.append(
                    "k", "main", [{"role": "user", "content": f"m{i}"}], expected_head=head
                )
            ).head_message_id

        async def summarize(messages: list[dict[str, Any]]) -> str:
            await asyncio.sleep(0)
            return f"{len(messages)} messages"

        steps = compaction(store.state, "k", None, CompactionPolicy(), COUNT)
        result = await arun_compaction(store.run, steps, summarize)
        await store.close()
        return result

    result = asyncio.run(scenario())
    assert result.written
    assert result.summary is not None
    assert result.summary["content"] == "2 messages"
