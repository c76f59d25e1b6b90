"""Tool calls paired with their results, in both formats, for the message panel."""

from __future__ import annotations

from typing import Any

from ctxstore.models import NewMessage
from ctxstore.web.tools import calls_of, paired, result_id_of
from tests.web.conftest import Seeded


def test_responses_items_pair_by_call_id(seeded: Seeded) -> None:
    store = seeded.store
    items: list[dict[str, Any]] = [
        {"type": "function_call", "call_id": "fc_1", "name": "weather", "arguments": "{}"},
        {"type": "function_call", "call_id": "fc_2", "name": "hotels", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "fc_2", "output": "three hotels"},
        {"type": "function_call_output", "call_id": "fc_1", "output": "sunny"},
    ]
    ids = store.append(
        "trip", "main-v3", [NewMessage(item) for item in items], expected_head=seeded.v3[-1]
    ).message_ids
    state = store.state
    calls, answered = store.run(paired(state, "trip", ids[0], items[0]))
    assert answered is None
    assert [(c.call_id, c.result_id) for c in calls] == [("fc_1", ids[3])]
    assert calls[0].result is not None
    calls, answered = store.run(paired(state, "trip", ids[2], items[2]))
    assert calls == []
    assert answered is not None
    assert (answered.call_id, answered.name, answered.message_id) == ("fc_2", "hotels", ids[1])


def test_a_call_without_a_result_says_so_and_plain_messages_read_nothing(seeded: Seeded) -> None:
    store = seeded.store
    call = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c9", "type": "function", "function": {"name": "f", "arguments": ""}}
        ],
    }
    ids = store.append(
        "trip", "main-v3", [NewMessage(call)], expected_head=seeded.v3[-1]
    ).message_ids
    calls, _ = store.run(paired(store.state, "trip", ids[0], call))
    assert calls[0].result_id is None
    plain = {"role": "user", "content": "hi"}
    assert store.run(paired(store.state, "trip", seeded.main[0], plain)) == ([], None)
    assert calls_of(plain) == []
    assert result_id_of(plain) is None
