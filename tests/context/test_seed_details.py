"""Details the seed (``@deepagents/context``) has and a port must keep: a chat's title from its
first save whatever its branch holds, ``last_assistant_message`` over a pending answer, the
fragment predicates, ``prepare_messages`` dropping what a summary covers, the seed's metadata
filter spelling (tests/store/test_listing.py) and window default (tests/manager)."""

from __future__ import annotations

from typing import Any

import ctxstore
from ctxstore import assistant, user
from ctxstore.messages import is_context_summary, summary_section
from ctxstore.prompt import (
    fragment,
    hint,
    is_fragment,
    is_fragment_object,
    is_lazy_fragment,
    is_message_fragment,
    last_assistant_message,
)
from ctxstore.window import ContextManager
from tests.support.wire import trace_wire


def test_the_first_save_titles_an_untitled_chat_whatever_its_branch_holds(
    make_engine: Any, backend: str
) -> None:
    store = make_engine.store
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [{"role": "user", "content": "imported"}], expected_head=None)
    assert store.get_chat("c1").title is None
    engine = make_engine()
    engine.resolve()
    engine.set(user("  What is   the weather in Paris? "), assistant("Sunny."))
    with trace_wire() as wire:
        engine.save()
    if not backend.startswith("redis+cluster"):  # the Cluster moves the indexes after
        assert (wire.round_trips, wire.script_calls) == (1, 1)  # the title rides on the append
    assert store.get_chat("c1").title == "What is the weather in Paris?"
    engine.set(user("second question"))
    engine.save()
    assert store.get_chat("c1").title == "What is the weather in Paris?"


def test_a_save_keeps_a_title_set_meanwhile(make_engine: Any) -> None:
    engine = make_engine()
    engine.resolve()  # the engine saw the chat without a title
    make_engine.store.update_chat("c1", title="Named elsewhere")
    engine.set(user("hello"))
    engine.save()
    assert make_engine.store.get_chat("c1").title == "Named elsewhere"


def test_a_save_without_a_user_message_sets_no_title(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(assistant("I start."))
    engine.save()
    assert make_engine.store.get_chat("c1").title is None


def test_last_assistant_message_replaces_the_pending_answer(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q1"), assistant("draft", id="a1"), user("q2"), assistant("draft 2"))
    engine.set(last_assistant_message("final"))
    assert [item.data["content"] for item in engine.pending] == ["q1", "draft", "q2", "final"]
    head = engine.save()
    stored = make_engine.store.load_branch("c1").messages
    assert [m["message"]["content"] for m in stored] == ["q1", "draft", "q2", "final"]
    assert engine.branch == "main"
    assert head == stored[-1]["id"]
    assert "metadata" not in stored[-1]  # the replace flag is not stored


def test_last_assistant_message_keeps_the_pending_answers_id(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(user("q1"), assistant("draft", id="answer-1"))
    engine.set(last_assistant_message("final"))
    engine.save()
    assert make_engine.store.get_message("c1", "answer-1")["message"]["content"] == "final"


def test_the_fragment_predicates() -> None:
    lazy = fragment("data", {"rows": lambda: [1, 2]})
    assert is_fragment(hint("x"))
    assert not is_fragment({"name": "x", "data": 1})
    assert is_fragment_object({"a": 1})
    assert not is_fragment_object(hint("x"))
    assert not is_fragment_object([1])
    assert is_message_fragment(user("x"))
    assert not is_message_fragment(hint("x"))
    assert is_lazy_fragment(lazy)
    assert not is_lazy_fragment(hint("x"))
    assert not is_lazy_fragment(lambda: 1)
    for name in ("is_fragment", "is_fragment_object", "is_lazy_fragment", "is_message_fragment"):
        assert name in ctxstore.prompt.__all__


def test_prepare_messages_drops_what_the_summary_covers() -> None:
    """[old q, old a, SUMMARY, new q, new a]: the model gets the summary in the system prompt
    and the two new messages, never the two it covers."""
    cm = ContextManager(max_tokens=10_000)
    summary = {
        "role": "assistant",
        "content": "they talked about Paris",
        "metadata": {"type": "context-summary", "covered": 2},
    }
    messages = [
        {"role": "system", "content": "rules"},
        {"role": "user", "content": "old q"},
        {"role": "assistant", "content": "old a"},
        summary,
        {"role": "user", "content": "new q"},
        {"role": "assistant", "content": "new a"},
    ]
    prepared = cm.prepare_messages(messages, "You are terse.")
    assert prepared == [
        {
            "role": "system",
            "content": "You are terse.\n\nrules\n\n" + summary_section("they talked about Paris"),
        },
        {"role": "user", "content": "new q"},
        {"role": "assistant", "content": "new a"},
    ]
    assert not any(is_context_summary(item) for item in prepared)
    two = [*messages[1:], {**summary, "content": "newer"}, {"role": "user", "content": "last"}]
    assert cm.prepare_messages(two)[1:] == [{"role": "user", "content": "last"}]
    assert summary_section("newer") in cm.prepare_messages(two)[0]["content"]
