"""Role-less items of OpenAI's Responses API (function calls, their outputs, reasoning) stored
beside chat messages: kept exactly as given, counted, and never cut from their group by a
window or a compaction cut."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.messages.text import preview
from ctxstore.messages.tokens import MESSAGE_OVERHEAD_TOKENS, NAME_OVERHEAD_TOKENS, count_tokens
from ctxstore.messages.tool_groups import (
    calls_tools,
    continues_tool_group,
    is_tool_call_item,
    is_tool_result,
    safe_cut_point,
    tool_group_end,
    tool_group_start,
    tool_groups,
)
from ctxstore.window.summarizer import transcript_lines
from tests.support.counting import letters, tokens_of


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def function_call(
    call_id: str, name: str = "lookup", arguments: str = '{"q":"x"}'
) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": "__fake_id__",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def output(call_id: str, text: str = "found") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def reasoning(text: str = "think") -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": text}],
    }


def answer(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "__fake_id__",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


#: A turn with parallel calls: user, reasoning, call a, call b, output a, output b, answer.
TURN = [
    user("weather in Paris and Rome?"),
    reasoning(),
    function_call("a"),
    function_call("b"),
    output("a"),
    output("b"),
    answer("sunny in both"),
]


def kinds(window: list[dict[str, Any]]) -> list[str]:
    return [m["message"].get("type") or m["message"]["role"] for m in window]


def no_output_without_its_call(items: list[dict[str, Any]]) -> bool:
    calls = {m["call_id"] for m in items if is_tool_call_item(m)}
    return all(m["call_id"] in calls for m in items if m.get("type") == "function_call_output")


# --- storing ------------------------------------------------------------------------------------


def test_role_less_items_are_stored_and_read_back_unchanged(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    result = store.append("c1", "main", TURN, expected_head=None)
    # Ids inside payloads are payload: the SDK repeats "__fake_id__", the store ids differ.
    assert len(set(result.message_ids)) == len(TURN)
    assert "__fake_id__" not in result.message_ids
    assert [m["message"] for m in store.load_branch("c1").messages] == TURN
    assert store.get_message("c1", result.message_ids[2])["message"] == function_call("a")


@pytest.mark.parametrize(
    "payload",
    [
        {"call_id": "a", "output": "x"},  # neither role nor type
        {"type": "", "output": "x"},
        {"type": 3},
        {"role": None, "content": "x"},
        {"role": "", "type": "function_call"},  # a role given must be a non-empty string
    ],
)
def test_a_dict_with_neither_role_nor_type_is_refused(store: Any, snap: Any, payload: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [user("a")], expected_head=None)
    before = snap()
    with pytest.raises(ctxstore.ValidationError, match="role"):
        store.append("c1", "main", [function_call("a"), payload], expected_head=None)
    assert snap() == before


# --- tokens -------------------------------------------------------------------------------------


def test_items_count_their_texts() -> None:
    call = function_call("call_1", "lookup", '{"city": "Paris"}')
    assert count_tokens(call, estimate_tokens=letters) == (
        MESSAGE_OVERHEAD_TOKENS + NAME_OVERHEAD_TOKENS + len("lookup")
    ) + len('{"city": "Paris"}') + len("call_1")
    assert count_tokens(output("call_1", "22 degrees"), estimate_tokens=letters) == (
        MESSAGE_OVERHEAD_TOKENS + len("call_1") + len("22 degrees")
    )
    parts = {
        "type": "function_call_output",
        "call_id": "c",
        "output": [{"type": "input_text", "text": "abc"}, {"type": "input_text", "text": "de"}],
    }
    assert count_tokens(parts, estimate_tokens=letters) == MESSAGE_OVERHEAD_TOKENS + 1 + 5
    assert count_tokens(reasoning("plan the trip"), estimate_tokens=letters) == (
        MESSAGE_OVERHEAD_TOKENS + len("plan the trip")
    )
    custom = {"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": "ls -la"}
    assert count_tokens(custom, estimate_tokens=letters) == (
        MESSAGE_OVERHEAD_TOKENS + NAME_OVERHEAD_TOKENS + 2 + 1 + len("ls -la")
    )
    # A message item's content parts count as before (input_text / output_text).
    assert count_tokens(answer("hello"), estimate_tokens=letters) == (
        MESSAGE_OVERHEAD_TOKENS + len("assistant") + len("hello")
    )
    # Chat messages with the same keys count only their chat fields.
    assert count_tokens(
        {"role": "user", "content": "hi", "output": "not sent"}, estimate_tokens=letters
    ) == (MESSAGE_OVERHEAD_TOKENS + len("user") + len("hi"))


# --- tool groups (pure) -------------------------------------------------------------------------


def test_calls_and_outputs_continue_the_group_of_the_item_before_them() -> None:
    assert [continues_tool_group(m) for m in TURN] == [False, False, True, True, True, True, False]
    assert is_tool_call_item(function_call("a"))
    assert calls_tools(function_call("a"))
    assert is_tool_result(output("a"))
    assert not is_tool_call_item(output("a"))
    for kind in ("custom_tool_call", "computer_call", "local_shell_call", "mcp_approval_request"):
        assert is_tool_call_item({"type": kind})
    for kind in ("custom_tool_call_output", "computer_call_output", "mcp_approval_response"):
        assert is_tool_result({"type": kind})
    # A chat message's role wins over a type it carries.
    assert not continues_tool_group({"role": "assistant", "type": "function_call"})
    assert not continues_tool_group(reasoning())
    assert [tool_group_start(TURN, i) for i in range(len(TURN))] == [0, 1, 1, 1, 1, 1, 6]
    assert [tool_group_end(TURN, i) for i in range(len(TURN))] == [1, 6, 6, 6, 6, 6, 7]
    assert tool_groups(TURN) == [(0, 1), (1, 6), (6, 7)]


@pytest.mark.parametrize("keep", range(len(TURN) + 2))
def test_a_cut_never_separates_an_output_from_its_call(keep: int) -> None:
    cut = safe_cut_point(TURN, keep)
    kept = TURN[cut:]
    assert len(kept) >= min(keep, len(TURN))
    assert no_output_without_its_call(kept)
    assert not kept or not continues_tool_group(kept[0])
    expected = {0: 7, 1: 6, 2: 1, 3: 1, 4: 1, 5: 1, 6: 1, 7: 0, 8: 0}
    assert cut == expected[keep]


def test_sequential_calls_without_reasoning_form_one_group_with_the_question() -> None:
    items = [user("q"), function_call("a"), output("a"), function_call("b"), output("b")]
    assert safe_cut_point(items, 2) == 0
    assert tool_groups(items) == [(0, 5)]


# --- windows on the store -----------------------------------------------------------------------


@pytest.fixture
def wstore(backend: str, namespace: str) -> Iterator[Any]:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    store.upsert_chat("w", "alice")
    yield store
    store.close()


def test_message_windows_keep_calls_with_their_outputs(wstore: Any) -> None:
    history = [user("hi"), answer("hello"), *TURN]
    wstore.append("w", "main", history, expected_head=None)
    expected = {
        1: ["message"],
        2: ["message"],  # would start at output b
        3: ["message"],
        4: ["message"],
        5: ["message"],  # would start at call a: the group starts at its reasoning item
        6: ["reasoning", "function_call", "function_call"]
        + ["function_call_output"] * 2
        + ["message"],
        7: ["user", "reasoning", "function_call", "function_call"]
        + ["function_call_output"] * 2
        + ["message"],
    }
    for size, want in expected.items():
        window = wstore.load_branch("w", max_messages=size).messages
        assert kinds(window) == want, size
        assert no_output_without_its_call([m["message"] for m in window])


def test_token_windows_keep_calls_with_their_outputs(wstore: Any) -> None:
    history = [user("hi"), answer("hello"), *TURN[:-1]]  # the head is output b
    wstore.append("w", "main", history, expected_head=None)
    sizes = [tokens_of(m) for m in history]
    for budget in range(sum(sizes) + 2):
        window = wstore.load_branch("w", max_tokens=budget).messages
        payloads = [m["message"] for m in window]
        assert payloads, budget  # at least the newest message with its group
        assert not continues_tool_group(payloads[0]) or len(payloads) == len(history)
        assert no_output_without_its_call(payloads)
    # Nothing fits: the newest item comes with its whole group, from the reasoning item on.
    assert kinds(wstore.load_branch("w", max_tokens=1).messages) == [
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]


# --- readers of the role ------------------------------------------------------------------------


def test_graph_log_and_transcripts_name_role_less_items(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", TURN, expected_head=None)
    nodes = store.get_graph("c1").messages
    assert [node.role for node in nodes] == [
        "user",
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
        "assistant",
    ]
    assert [node.preview for node in nodes] == [
        "weather in Paris and Rome?",
        "think",
        "calls lookup",
        "calls lookup",
        "found",
        "found",
        "sunny in both",
    ]
    assert preview({"type": "item_reference", "id": "x"}) == ""
    assert transcript_lines(TURN) == [
        "user: weather in Paris and Rome?",
        "reasoning: think",
        'function_call: [calls lookup({"q":"x"})]',
        'function_call: [calls lookup({"q":"x"})]',
        "function_call_output: found",
        "function_call_output: found",
        "assistant: sunny in both",
    ]
