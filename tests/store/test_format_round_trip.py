"""One storage format: a chat exported and imported reads back exactly as it was stored, token
entries and tool-group flags included, whatever its messages are (plain chat messages, tool
calls, parallel calls, Responses API items), and verify checks every flag against its payload.

The flag says that a message continues the tool group of the one before it (a tool result, a
Responses call or output item), so that no window starts with it. An import that derived it
from the role alone once turned ``[user, function_call, function_call_output, assistant]``
into flags ``[0, 0, 0, 0]``: the imported chat's 2-message window then started with an
orphaned ``function_call_output`` (which providers reject), and verify said ok."""

from __future__ import annotations

from typing import Any

import pytest

from ctxstore._core.format.tokens import TOK_WIDTH, TOOL_RESULT, entry_at, flags_of
from tests.store.test_retention import command

USER = {"role": "user", "content": "Find a hotel in Lisbon and the weather there."}
RESPONSES_TURN = [
    USER,
    {
        "type": "function_call",
        "call_id": "fc_1",
        "name": "search_hotels",
        "arguments": '{"city": "Lisbon"}',
    },
    {"type": "function_call_output", "call_id": "fc_1", "output": "Hotel A, Hotel B"},
    {"role": "assistant", "content": "Hotel A is near the river."},
]
TOOL_CALLS_TURN = [
    {"role": "user", "content": "And the weather and the flights?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_w",
                "type": "function",
                "function": {"name": "weather", "arguments": '{"city": "Lisbon"}'},
            },
            {
                "id": "call_f",
                "type": "function",
                "function": {"name": "flights", "arguments": '{"to": "LIS"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "call_w", "content": "Sunny, 24 C"},
    {"role": "tool", "tool_call_id": "call_f", "content": "TP1350 at 09:05"},
    {"role": "assistant", "content": "Sunny; take TP1350."},
]
PARALLEL_ITEMS_TURN = [
    {"role": "user", "content": "Book both."},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Two."}]},
    {"type": "function_call", "call_id": "fc_2", "name": "book", "arguments": '{"h": "A"}'},
    {"type": "function_call", "call_id": "fc_3", "name": "book", "arguments": '{"f": "TP"}'},
    {"type": "function_call_output", "call_id": "fc_2", "output": "booked A"},
    {"type": "function_call_output", "call_id": "fc_3", "output": "booked TP1350"},
    {"role": "assistant", "content": "Both booked."},
]
LEGACY_FUNCTION_TURN = [
    {"role": "user", "content": "Convert 10 EUR."},
    {
        "role": "assistant",
        "content": None,
        "function_call": {"name": "convert", "arguments": '{"eur": 10}'},
    },
    {"role": "function", "name": "convert", "content": "10.8 USD"},
    {"role": "assistant", "content": "10.8 USD."},
]
CONVERSATION = [*RESPONSES_TURN, *TOOL_CALLS_TURN, *PARALLEL_ITEMS_TURN, *LEGACY_FUNCTION_TURN]


def token_entries(store: Any, chat_id: str) -> bytes:
    return bytes(command(store, "get", store.state.keyspace.chat(chat_id).key("tok")) or b"")


def flags(store: Any, chat_id: str) -> list[int]:
    tok = token_entries(store, chat_id)
    return [entry_at(tok, index)[0] for index in range(len(tok) // TOK_WIDTH)]


def saved(store: Any, chat_id: str, messages: list[dict[str, Any]]) -> str:
    store.upsert_chat(chat_id, "alice")
    return store.append(chat_id, "main", messages, expected_head=None).head_message_id


def copied(store: Any, source: str, target: str) -> None:
    store.import_chat(list(store.export_chat(source)), chat_id=target)


def test_a_responses_turn_keeps_its_flags_through_an_export_and_an_import(store: Any) -> None:
    saved(store, "source", RESPONSES_TURN)
    copied(store, "source", "copy")
    assert flags(store, "source") == [0, TOOL_RESULT, TOOL_RESULT, 0]
    assert flags(store, "copy") == flags(store, "source")
    window = store.load_branch("copy", max_messages=2).messages
    expected = store.load_branch("source", max_messages=2).messages
    assert [item["message"] for item in window] == [item["message"] for item in expected]
    assert window[0]["message"].get("type") != "function_call_output"
    assert store.verify_chat("copy").ok


def test_every_kind_of_message_reads_back_the_same_after_an_import(store: Any) -> None:
    saved(store, "source", CONVERSATION)
    copied(store, "source", "copy")
    assert flags(store, "source") == [flags_of(message) for message in CONVERSATION]
    assert token_entries(store, "copy") == token_entries(store, "source")
    for size in range(1, len(CONVERSATION) + 1):
        source = store.load_branch("source", max_messages=size)
        copy = store.load_branch("copy", max_messages=size)
        assert [item["message"] for item in copy.messages] == [
            item["message"] for item in source.messages
        ], size
        assert [item["id"] for item in copy.messages] == [item["id"] for item in source.messages], (
            size
        )
        assert (copy.tokens, copy.chain_tokens, copy.chain_length) == (
            source.tokens,
            source.chain_tokens,
            source.chain_length,
        ), size
    assert store.branch_size("copy") == store.branch_size("source")
    assert store.verify_chat("copy").ok


def test_no_window_of_an_imported_chat_starts_inside_a_tool_group(store: Any) -> None:
    saved(store, "source", CONVERSATION)
    copied(store, "source", "copy")
    for size in range(1, len(CONVERSATION) + 1):
        first = store.load_branch("copy", max_messages=size).messages[0]["message"]
        assert not flags_of(first), (size, first)


def break_flags(store: Any, chat_id: str, wrong: dict[int, int]) -> None:
    """Give the entries at ``wrong``'s positions another flag, as the earlier import did."""
    key = store.state.keyspace.chat(chat_id).key("tok")
    for position, flag in wrong.items():
        command(store, "setrange", key, position * TOK_WIDTH, bytes((flag,)))


def test_verify_reports_a_flag_its_payload_contradicts_and_repair_fixes_it(store: Any) -> None:
    saved(store, "c1", RESPONSES_TURN)
    good = token_entries(store, "c1")
    break_flags(store, "c1", {1: 0, 2: 0})
    broken = store.load_branch("c1", max_messages=2).messages
    assert broken[0]["message"]["type"] == "function_call_output"  # what the bug served
    report = store.verify_chat("c1")
    assert not report.ok
    assert [(problem.kind, problem.field) for problem in report.problems] == [
        ("tokens", "1"),
        ("tokens", "2"),
    ]
    assert "payload gives 1" in report.problems[0].detail
    repaired = store.verify_chat("c1", repair=True)
    assert repaired.ok
    assert repaired.repaired == ("token flag at 1", "token flag at 2")
    assert token_entries(store, "c1") == good
    window = store.load_branch("c1", max_messages=2).messages
    assert not flags_of(window[0]["message"])


def test_a_flag_set_on_a_message_that_starts_a_group_is_reported_too(store: Any) -> None:
    saved(store, "c1", TOOL_CALLS_TURN)
    break_flags(store, "c1", {0: TOOL_RESULT})
    report = store.verify_chat("c1")
    assert [(problem.kind, problem.field) for problem in report.problems] == [("tokens", "0")]
    assert store.verify_chat("c1", repair=True).ok
    assert flags(store, "c1") == [flags_of(message) for message in TOOL_CALLS_TURN]


@pytest.mark.parametrize("message", CONVERSATION, ids=lambda m: m.get("role") or m["type"])
def test_the_flag_is_the_tool_group_rule_of_the_payload(message: dict[str, Any]) -> None:
    from ctxstore.messages.tool_groups import continues_tool_group

    assert flags_of(message) == (TOOL_RESULT if continues_tool_group(message) else 0)
