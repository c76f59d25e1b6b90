"""The engine's token accounting, budgets and summaries: token_count(), resolve(max_tokens=,
max_messages=, full=), and a summary moved into the system prompt. Runs on every backend,
through the sync and the async engine."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore.messages.summaries import summary_section
from ctxstore.messages.tokens import count_tokens
from tests.support.wire import trace_wire


def letters(text: str) -> int:
    return len(text)


def contents(messages: list[dict[str, Any]]) -> list[Any]:
    return [m["content"] for m in messages]


def fill(engine: Any, count: int) -> list[str]:
    heads = []
    for i in range(count):
        engine.set(ctxstore.user(f"question {i}"))
        engine.set(ctxstore.assistant(f"answer {i}"))
        heads.append(engine.save())
    return heads


@pytest.mark.parametrize("model", [None, "gpt-4"])
def test_token_count_is_what_resolve_sends(make_engine: Any, model: str | None) -> None:
    engine = make_engine(model=model)
    engine.set(ctxstore.role("You are terse."), ctxstore.hint("Answer in French."))
    fill(engine, 3)
    engine.set(ctxstore.user("still pending"))
    sent = engine.resolve().with_system()
    assert engine.token_count() == count_tokens(sent, model)


def test_token_count_reads_no_payload(make_engine: Any) -> None:
    engine = make_engine(estimate_tokens=letters)
    fill(engine, 50)
    fresh = make_engine(estimate_tokens=letters)
    fresh.token_count()  # opened, and the script is cached on the server
    with trace_wire() as wire:
        count = fresh.token_count()
    assert wire.round_trips == 1
    assert count == count_tokens(fresh.resolve().with_system(), estimate_tokens=letters)


def test_resolve_with_a_token_budget_keeps_the_newest_that_fit(make_engine: Any) -> None:
    engine = make_engine(estimate_tokens=letters)
    fill(engine, 10)
    newest = [
        {"role": role, "content": f"{word} {turn}"}
        for turn in (8, 9)
        for role, word in (("user", "question"), ("assistant", "answer"))
    ]
    budget = count_tokens(newest, estimate_tokens=letters)  # the messages and the reply priming
    result = engine.resolve(max_tokens=budget)
    assert contents(result.messages) == ["question 8", "answer 8", "question 9", "answer 9"]
    assert len(engine.resolve(max_tokens=budget - 1).messages) == 3
    assert contents(engine.resolve(max_messages=3).messages) == [
        "answer 8",
        "question 9",
        "answer 9",
    ]
    assert len(engine.resolve().messages) == 20


def test_what_a_budgeted_resolve_returns_counts_at_most_the_budget(make_engine: Any) -> None:
    """By the store's own counter, the reply priming included, for every budget: the one
    exception is a newest message (with its tool group) that alone is over it."""
    engine = make_engine()
    for turn in range(10):
        engine.set(ctxstore.user(f"question number {turn} " * 6))
        engine.set(ctxstore.assistant(f"the answer is {turn} " * 5))
    engine.save()
    whole = count_tokens(engine.resolve().messages)
    assert whole == engine.token_count()
    newest_alone = count_tokens(engine.resolve(max_messages=1).messages)
    for budget in [*range(0, 60, 7), *range(whole - 40, whole + 3)]:
        sent = count_tokens(engine.resolve(max_tokens=budget).messages)
        assert sent <= budget or sent == newest_alone, budget
    assert count_tokens(engine.resolve(max_tokens=whole).messages) == whole
    assert len(engine.resolve(max_tokens=whole - 1).messages) == 19


def test_pending_messages_count_against_the_budget_and_are_always_sent(
    make_engine: Any,
) -> None:
    engine = make_engine(estimate_tokens=letters)
    fill(engine, 5)
    engine.set(ctxstore.user("a pending question"))
    pending = count_tokens(
        [{"role": "user", "content": "a pending question"}], estimate_tokens=letters
    )
    for budget in range(0, 120, 3):
        messages = engine.resolve(max_tokens=budget).messages
        assert messages[-1]["content"] == "a pending question"
        assert count_tokens(messages, estimate_tokens=letters) <= max(budget, pending)
    assert contents(engine.resolve(max_messages=3).messages) == [
        "question 4",
        "answer 4",
        "a pending question",
    ]
    assert contents(engine.resolve(max_messages=0).messages) == ["a pending question"]


def test_resolve_starts_after_the_summary_and_full_reads_everything(make_engine: Any) -> None:
    engine = make_engine(estimate_tokens=letters)
    engine.set(ctxstore.role("You are terse."))
    heads = fill(engine, 4)
    make_engine.store.write_summary(
        engine.chat_id, heads[1], "They asked two questions.", metadata={"covered": 4}
    )
    result = engine.resolve()
    assert contents(result.messages) == ["question 2", "answer 2", "question 3", "answer 3"]
    assert result.summary is not None
    assert result.summary["content"] == "They asked two questions."
    assert summary_section("They asked two questions.") in result.system_prompt
    assert result.system_prompt.startswith("<role>") or "You are terse." in result.system_prompt
    assert not any(m.get("metadata") for m in result.with_system())
    assert engine.token_count() == count_tokens(result.with_system(), estimate_tokens=letters)
    whole = engine.resolve(full=True)
    assert len(whole.messages) == 8
    assert whole.summary is None
    # A new engine's first resolve stops at the summary too.
    fresh = make_engine(estimate_tokens=letters)
    assert contents(fresh.resolve().messages) == contents(result.messages)


def test_rewinding_before_the_summary_resolves_without_it(make_engine: Any) -> None:
    engine = make_engine(estimate_tokens=letters)
    heads = fill(engine, 4)
    make_engine.store.write_summary(engine.chat_id, heads[2], "Three exchanges.")
    engine.rewind(heads[1])
    result = engine.resolve()
    assert result.summary is None
    assert len(result.messages) == 4


def test_counts_stored_at_save_use_the_engine_counter(make_engine: Any) -> None:
    engine = make_engine(estimate_tokens=lambda _text: 7)
    engine.set(ctxstore.user("anything"))
    engine.save()
    size = make_engine.store.branch_size(engine.chat_id)
    assert size.tokens == 3 + 7 + 7  # overhead + role + content
