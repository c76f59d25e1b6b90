"""Tool groups: a call stays with its results wherever a history is cut."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore.messages.tool_groups import (
    calls_tools,
    is_tool_result,
    safe_cut_point,
    tool_group_end,
    tool_group_start,
    tool_groups,
)


def say(role: str, text: str = "x") -> dict[str, Any]:
    return {"role": role, "content": text}


def call(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ids
        ],
    }


def result(call_id: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": "r"}


#: user, call(a, b), result a, result b, assistant, user, legacy function call + result
HISTORY = [
    say("user"),
    call("a", "b"),
    result("a"),
    result("b"),
    say("assistant"),
    say("user"),
    {"role": "assistant", "content": None, "function_call": {"name": "g", "arguments": "{}"}},
    {"role": "function", "name": "g", "content": "r"},
]


def test_what_calls_and_what_answers() -> None:
    assert calls_tools(HISTORY[1])
    assert calls_tools(HISTORY[6])  # the legacy function_call
    assert not calls_tools({"role": "assistant", "content": "hi", "tool_calls": []})
    assert is_tool_result(HISTORY[2])
    assert is_tool_result(HISTORY[7])
    assert not is_tool_result(HISTORY[0])


def test_group_bounds() -> None:
    assert [tool_group_start(HISTORY, i) for i in range(len(HISTORY))] == [0, 1, 1, 1, 4, 5, 6, 6]
    assert [tool_group_end(HISTORY, i) for i in range(len(HISTORY))] == [1, 4, 4, 4, 5, 6, 8, 8]
    assert tool_groups(HISTORY) == [(0, 1), (1, 4), (4, 5), (5, 6), (6, 8)]
    assert tool_groups([]) == []
    with pytest.raises(ctxstore.ValidationError):
        tool_group_start(HISTORY, len(HISTORY))


@pytest.mark.parametrize(
    ("keep", "cut"),
    [
        (0, 8),  # nothing kept: everything may go
        (1, 6),  # the newest is a result: its call is kept too
        (2, 6),
        (3, 5),
        (4, 4),
        (5, 1),  # would start at result b: back to the call
        (6, 1),  # would start at result a: back to the call
        (7, 1),
        (8, 0),
        (20, 0),
    ],
)
def test_the_cut_never_leaves_a_result_first(keep: int, cut: int) -> None:
    assert safe_cut_point(HISTORY, keep) == cut
    kept = HISTORY[cut:]
    assert len(kept) >= min(keep, len(HISTORY))
    assert not kept or not is_tool_result(kept[0])


def test_results_without_a_call_keep_what_they_follow() -> None:
    orphans = [say("user"), say("user", "y"), result("z"), result("w")]
    assert safe_cut_point(orphans, 1) == 1
    assert safe_cut_point([result("z"), result("w")], 1) == 0


def test_a_bad_keep_is_a_validation_error() -> None:
    with pytest.raises(ctxstore.ValidationError):
        safe_cut_point(HISTORY, -1)
