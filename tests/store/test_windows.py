"""Stored token counts and window reads: the newest messages within a token or message budget,
never cut between a tool call and its results, and chain sizes without payloads."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from tests.support.counting import letters, tokens_of, user
from tests.support.wire import trace_wire


@pytest.fixture
def wstore(backend: str, namespace: str) -> Iterator[Any]:
    """A store counting one token per character (plus the per-message overhead)."""
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    store.upsert_chat("w", "alice")
    yield store
    store.close()


def append_all(store: Any, messages: list[dict[str, Any]], head: str | None = None) -> str | None:
    for message in messages:
        head = store.append("w", "main", [message], expected_head=head).head_message_id
    return head


def contents(messages: list[Any]) -> list[Any]:
    return [m["message"]["content"] for m in messages]


def test_stored_counts_sum_along_the_chain(wstore: Any) -> None:
    texts = [user("a" * n) for n in (1, 10, 100)]
    append_all(wstore, texts)
    size = wstore.branch_size("w")
    assert size.messages == 3
    assert size.tokens == sum(tokens_of(m) for m in texts)
    whole = wstore.load_branch("w")
    assert whole.chain_tokens == whole.tokens == size.tokens
    assert whole.chain_length == 3


def test_a_token_window_is_the_newest_suffix_that_fits(wstore: Any) -> None:
    texts = [user(str(i) * 10) for i in range(10)]  # 3 + 4 + 10 = 17 tokens each
    append_all(wstore, texts)
    window = wstore.load_branch("w", max_tokens=17 * 4 + 16)
    assert contents(window.messages) == [m["content"] for m in texts[-4:]]
    assert window.tokens == 17 * 4
    assert window.chain_tokens == 170
    # The first kept message names its real parent (read for its id, not returned).
    whole = wstore.load_branch("w").messages
    assert window.messages[0]["parent_id"] == whole[-5]["id"]
    assert [m["id"] for m in window.messages] == [m["id"] for m in whole[-4:]]
    assert contents(wstore.load_branch("w", max_tokens=10_000).messages) == contents(whole)


def test_a_message_window_keeps_the_newest_k(wstore: Any) -> None:
    append_all(wstore, [user(str(i)) for i in range(6)])
    assert contents(wstore.load_branch("w", max_messages=2).messages) == ["4", "5"]
    assert wstore.load_branch("w", max_messages=0).messages == []
    assert contents(wstore.load_branch("w", max_messages=2, max_tokens=8).messages) == ["5"]


def tool_turn(call_id: str, results: int) -> list[dict[str, Any]]:
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"{call_id}{i}", "type": "function", "function": {"name": "f", "arguments": ""}}
            for i in range(results)
        ],
    }
    return [call] + [
        {"role": "tool", "tool_call_id": f"{call_id}{i}", "content": f"r{i}"}
        for i in range(results)
    ]


def test_a_window_never_starts_with_a_tool_result(wstore: Any) -> None:
    messages = [user("question"), *tool_turn("c", 3), {"role": "assistant", "content": "done"}]
    append_all(wstore, messages)
    # The newest 3 would start with the second tool result: the group is dropped whole.
    window = wstore.load_branch("w", max_messages=3)
    assert [m["message"]["role"] for m in window.messages] == ["assistant"]
    assert contents(window.messages) == ["done"]
    # A budget that reaches the call keeps the whole group.
    group_tokens = sum(tokens_of(m) for m in messages[1:])
    window = wstore.load_branch("w", max_tokens=group_tokens)
    assert [m["message"]["role"] for m in window.messages] == [
        "assistant",
        "tool",
        "tool",
        "tool",
        "assistant",
    ]


def test_when_nothing_fits_the_newest_message_comes_with_its_tool_group(wstore: Any) -> None:
    messages = [user("question"), *tool_turn("c", 2)]
    append_all(wstore, messages)
    window = wstore.load_branch("w", max_tokens=1)
    assert [m["message"]["role"] for m in window.messages] == ["assistant", "tool", "tool"]
    # A plain newest message alone.
    append_all(wstore, [user("long " * 20)], window.branch.head_message_id)
    assert contents(wstore.load_branch("w", max_tokens=1).messages) == ["long " * 20]
    # A message budget smaller than the newest group returns nothing rather than split it.
    head = append_all(wstore, tool_turn("d", 2), wstore.load_branch("w").branch.head_message_id)
    assert head is not None
    assert wstore.load_branch("w", max_tokens=1, max_messages=2).messages == []


def test_windows_follow_branches_across_runs(wstore: Any) -> None:
    """A branch forked mid-chain is two runs; the window crosses into the older one."""
    head = append_all(wstore, [user(f"m{i}") for i in range(5)])
    chain = wstore.load_branch("w").messages
    wstore.create_branch("w", chain[2]["id"], name="alt")  # alt: m0 m1 m2
    alt_head = chain[2]["id"]
    for text in ("x1", "x2"):
        alt_head = wstore.append("w", "alt", [user(text)], expected_head=alt_head).head_message_id
    assert head is not None
    window = wstore.load_branch("w", "alt", max_messages=4)
    assert contents(window.messages) == ["m1", "m2", "x1", "x2"]
    assert window.messages[0]["parent_id"] == chain[0]["id"]
    per_message = tokens_of(user("m0"))
    window = wstore.load_branch("w", "alt", max_tokens=3 * per_message)
    assert contents(window.messages) == ["m2", "x1", "x2"]
    assert wstore.branch_size("w", "alt").tokens == 5 * per_message


def test_get_chain_newest_cuts_instead_of_raising(wstore: Any) -> None:
    head = append_all(wstore, [user(str(i)) for i in range(5)])
    with pytest.raises(ctxstore.errors.LimitExceededError):
        wstore.get_chain("w", head, max_depth=3)
    assert contents(wstore.get_chain("w", head, max_depth=3, newest=True)) == ["2", "3", "4"]
    assert contents(wstore.get_chain("w", head, max_depth=9, newest=True)) == list("01234")


def test_a_window_read_is_one_round_trip_and_reads_only_its_records(wstore: Any) -> None:
    append_all(wstore, [user(str(i)) for i in range(300)])
    wstore.load_branch("w", max_messages=1)  # the script is cached on the server
    with trace_wire() as wire:
        window = wstore.load_branch("w", max_messages=5)
    assert len(window.messages) == 5
    assert wire.round_trips == 1  # one script; the 6 records (5 + the parent) come back inline


@pytest.mark.parametrize(
    "kwargs",
    [{"max_tokens": -1}, {"max_messages": -2}, {"max_tokens": 1.5}, {"max_messages": True}],
)
def test_bad_window_bounds_are_validation_errors(wstore: Any, kwargs: dict[str, Any]) -> None:
    with pytest.raises(ctxstore.ValidationError):
        wstore.load_branch("w", **kwargs)


def test_a_bad_token_count_writes_nothing(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=lambda _t: -5).admin()
    store.upsert_chat("w", "alice")
    with pytest.raises(ctxstore.ValidationError, match="estimate_tokens"):
        store.append("w", "main", [user("x")], expected_head=None)
    assert store.branch_size("w").messages == 0
    store.close()


def test_verify_still_passes_with_token_entries(wstore: Any) -> None:
    append_all(wstore, [user("a"), *tool_turn("c", 1)])
    assert wstore.verify_chat("w").ok


def test_totals_stay_exact_when_a_writer_guessed_the_size_wrong(
    backend: str, namespace: str
) -> None:
    """Two writers take turns on one chat with rebase: each one's idea of the head's size is
    stale half the time, and the script corrects the entries it sends."""
    first = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    second = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    first.upsert_chat("t", "alice")
    texts = []
    heads = {id(first): None, id(second): None}
    for i in range(12):
        writer = first if i % 3 else second
        text = "x" * (i + 1)
        texts.append(text)
        result = writer.append(
            "t", "main", [user(text)], expected_head=heads[id(writer)], on_conflict="rebase"
        )
        heads[id(writer)] = result.head_message_id
    expected = sum(tokens_of(user(text)) for text in texts)
    assert first.branch_size("t").tokens == expected
    per_message = [tokens_of(user(text)) for text in texts]
    assert first.load_branch("t", max_tokens=sum(per_message[-3:])).tokens == sum(per_message[-3:])
    first.close()
    second.close()
