"""An engine with a ContextManager: saves past the soft threshold enqueue one job, a resolve
past the hard threshold compacts inline (under the chat's lease) and stays within budget."""

from __future__ import annotations

from typing import Any

import ctxstore
from ctxstore._core.ops import leases
from ctxstore.messages.tokens import count_tokens
from tests.support.keyspace import raw_client


def letters(text: str) -> int:
    return len(text)


def cm(summaries: list[int], **options: Any) -> ctxstore.ContextManager:
    def summarize(messages: list[dict[str, Any]]) -> str:
        summaries.append(len(messages))
        return "summary of the start"

    options.setdefault("max_tokens", 1000)
    return ctxstore.ContextManager(
        response_reserve=100,
        min_recent_messages=2,
        estimate_tokens=letters,
        compactify=summarize,
        **options,
    )


def say(engine: Any, count: int, start: int = 0) -> None:
    for i in range(start, start + count):
        engine.set(ctxstore.user(f"{i:03d}" + "x" * 40))  # 3 + 4 + 43 = 50 tokens
        engine.save()


def test_saves_past_the_soft_threshold_enqueue_exactly_one_job(
    make_engine: Any, backend: str
) -> None:
    summaries: list[int] = []
    engine = make_engine(context_manager=cm(summaries))
    say(engine, 16)  # 800 tokens: soft (650) crossed at the 13th save
    store = make_engine.store
    client = raw_client(backend)
    entries = [
        entry for stream in store.state.keyspace.job_streams() for entry in client.xrange(stream)
    ]
    client.close()
    assert len(entries) == 1
    assert entries[0][1][b"chat"] == b"c1"
    assert summaries == []  # nothing summarized inline below the hard threshold


def test_a_resolve_past_the_hard_threshold_compacts_inline(make_engine: Any) -> None:
    summaries: list[int] = []
    engine = make_engine(context_manager=cm(summaries))
    say(engine, 17)  # 850 tokens: past hard (800)
    result = engine.resolve()
    assert summaries == [15]  # all but the two newest
    assert [m["content"][:3] for m in result.messages] == ["015", "016"]
    assert result.summary is not None
    assert "summary of the start" in result.system_prompt
    assert count_tokens(result.messages, estimate_tokens=letters) < 800
    # The next resolve reads from the summary on: no second compaction.
    engine.resolve()
    assert summaries == [15]


def test_a_held_lease_falls_back_to_a_window_within_the_hard_threshold(
    make_engine: Any,
) -> None:
    summaries: list[int] = []
    engine = make_engine(context_manager=cm(summaries))
    say(engine, 20)  # 1000 tokens
    store = make_engine.store
    token = leases.new_lease_token()
    assert store.run(leases.take_lease(store.state, "c1", token, 60_000))[0]
    result = engine.resolve()
    assert summaries == []  # another summarizer holds the chat
    assert sum(count_tokens(m, estimate_tokens=letters) for m in result.messages) <= 800
    assert result.messages[-1]["content"].startswith("019")


def test_full_resolve_never_compacts(make_engine: Any) -> None:
    summaries: list[int] = []
    engine = make_engine(context_manager=cm(summaries))
    say(engine, 20)
    assert len(engine.resolve(full=True).messages) == 20
    assert summaries == []


def test_the_manager_model_counts_the_saves(make_engine: Any) -> None:
    manager = ctxstore.ContextManager(model="gpt-4", compactify=lambda _m: "s")
    engine = make_engine(context_manager=manager)
    engine.set(ctxstore.user("hello world"))
    engine.save()
    size = make_engine.store.branch_size("c1")
    assert size.tokens == count_tokens({"role": "user", "content": "hello world"}, "gpt-4")
