"""The JSON surface of the value types: pydantic-style methods over frozen dataclasses.

Chats, branches, checkpoints and graphs serialize straight into HTTP responses and back, so what
``model_dump`` writes must load back equal, and what ``model_validate`` takes must be refused
when a field is missing, unknown or of the wrong type, at any depth.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic
import pytest

from ctxstore import BranchInfo, ChatMeta
from ctxstore.models import ChatGraph, ChatInfo
from tests.cli import branch, chat_graph, checkpoint, node


def graph() -> ChatGraph:
    return chat_graph(
        [node("root", at=1), node("reply", "root", role="assistant", preview="hi", at=2)],
        [branch("main", "reply", active=True, at=1), branch("empty", None, at=3)],
        [checkpoint("start", "root", at=4)],
    )


def test_model_dump_gives_plain_values_nested_values_included() -> None:
    dumped = graph().model_dump()
    assert dumped["chat"] == {
        "id": "c1",
        "user_id": "alice",
        "title": None,
        "metadata": {},
        "created_at": 0,
        "updated_at": 0,
        "active_branch": "main",
        "incarnation": "",
        "ttl": None,
    }
    assert dumped["messages"][1] == {
        "id": "reply",
        "parent_id": "root",
        "role": "assistant",
        "preview": "hi",
        "created_at": 2,
    }
    assert isinstance(dumped["branches"], tuple)
    assert isinstance(graph().model_dump(mode="json")["branches"], list)


def test_model_dump_takes_pydantics_options() -> None:
    chat = ChatInfo(
        id="c1", user_id="alice", created_at=1, updated_at=2, message_count=3, branch_count=1
    )
    assert chat.model_dump(exclude={"id", "incarnation", "metadata"}) == {
        "user_id": "alice",
        "title": None,
        "created_at": 1,
        "updated_at": 2,
        "active_branch": "main",
        "ttl": None,
        "message_count": 3,
        "branch_count": 1,
    }
    assert set(chat.model_dump(include={"id", "ttl"})) == {"id", "ttl"}
    assert json.loads(chat.model_dump_json(indent=2))["message_count"] == 3


def test_a_dump_loads_back_equal_from_a_dict_and_from_json() -> None:
    value = graph()
    assert ChatGraph.model_validate(value.model_dump()) == value
    assert ChatGraph.model_validate(value.model_dump(mode="json")) == value
    assert ChatGraph.model_validate_json(value.model_dump_json()) == value
    assert ChatGraph.model_validate_json(value.model_dump_json().encode()) == value
    loaded = ChatGraph.model_validate(value.model_dump())
    assert isinstance(loaded.chat, ChatMeta)
    assert isinstance(loaded.branches[0], BranchInfo)


def test_a_copy_replaces_only_the_fields_named() -> None:
    value = graph()
    renamed = value.chat.model_copy(update={"title": "Renamed"})
    assert renamed.title == "Renamed"
    assert renamed.model_dump(exclude={"title"}) == value.chat.model_dump(exclude={"title"})


def without(data: dict[str, Any], name: str) -> dict[str, Any]:
    return {key: item for key, item in data.items() if key != name}


@pytest.mark.parametrize(
    ("change", "where"),
    [
        (lambda data: {**data, "colour": "red"}, ("colour",)),
        (lambda data: {**data, "chat": {**data["chat"], "colour": "red"}}, ("chat", "colour")),
        (
            lambda data: {**data, "messages": [{**data["messages"][0], "colour": "red"}]},
            ("messages", 0, "colour"),
        ),
        (lambda data: without(data, "branches"), ("branches",)),
        (lambda data: {**data, "chat": without(data["chat"], "user_id")}, ("chat", "user_id")),
        (
            lambda data: {**data, "chat": {**data["chat"], "created_at": "soon"}},
            ("chat", "created_at"),
        ),
        (lambda data: {**data, "messages": "none"}, ("messages",)),
    ],
    ids=[
        "unknown-field",
        "unknown-nested-field",
        "unknown-field-in-a-list",
        "missing-field",
        "missing-nested-field",
        "mistyped-field",
        "mistyped-list",
    ],
)
def test_validation_refuses_a_missing_unknown_or_mistyped_field(
    change: Any, where: tuple[str | int, ...]
) -> None:
    data = change(graph().model_dump(mode="json"))
    with pytest.raises(pydantic.ValidationError) as caught:
        ChatGraph.model_validate(data)
    assert [error["loc"] for error in caught.value.errors()] == [where]
    with pytest.raises(pydantic.ValidationError) as caught:
        ChatGraph.model_validate_json(json.dumps(data))
    assert [error["loc"] for error in caught.value.errors()] == [where]
