"""Message fragments: the chat-message dicts they carry, their ids, and input checks."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic import BaseModel

import ctxstore
from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment, fragment
from ctxstore.prompt.messages import (
    LAST_ASSISTANT_METADATA,
    assistant,
    assistant_text,
    is_message_fragment,
    last_assistant_message,
    message,
    message_payload,
    user,
)

TOOL_CALL = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def _shape(item: Fragment) -> tuple[str, Any, str, Any]:
    return (item.name, item.data, item.kind, item.metadata)


def _assert_generated_id(item: Fragment) -> None:
    """No id of its own: the store generates one when the message is saved (a chosen id would
    cost an index entry in Redis)."""
    assert item.id is None


def test_user_text() -> None:
    item = user("hello")
    assert _shape(item) == ("user", {"role": "user", "content": "hello"}, "message", None)
    _assert_generated_id(item)


def test_user_with_id() -> None:
    assert user("hello", id="u1") == Fragment(
        "user", {"role": "user", "content": "hello"}, id="u1", kind="message"
    )


def test_two_saved_messages_get_distinct_generated_ids() -> None:
    store = ctxstore.connect("memory://").admin()
    store.upsert_chat("c1", "alice")
    result = store.append(
        "c1", "main", [message_payload(user("a")), message_payload(user("a"))], expected_head=None
    )
    assert len(set(result.message_ids)) == 2


def test_user_content_parts_are_copied() -> None:
    parts: list[dict[str, Any]] = [
        {"type": "text", "text": "look"},
        {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
    ]
    item = user(parts, id="u1")
    parts[1]["image_url"]["url"] = "changed"
    parts.append({"type": "text", "text": "more"})
    assert item.data == {
        "role": "user",
        "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
        ],
    }


def test_assistant_text_and_parts() -> None:
    assert assistant("hi", id="a1") == Fragment(
        "assistant", {"role": "assistant", "content": "hi"}, id="a1", kind="message"
    )
    assert assistant([{"type": "text", "text": "hi"}], id="a1").data == {
        "role": "assistant",
        "content": [{"type": "text", "text": "hi"}],
    }
    assert assistant_text("hi", id="a2") == Fragment(
        "assistant", {"role": "assistant", "content": "hi"}, id="a2", kind="message"
    )
    _assert_generated_id(assistant_text("hi"))


def test_assistant_full_message_with_tool_calls() -> None:
    source = {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL], "id": "a9"}
    item = assistant(source)
    assert item == Fragment(
        "assistant",
        {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]},
        id="a9",
        kind="message",
    )
    assert source["id"] == "a9"  # the caller's dict is untouched


def test_assistant_dict_without_role_or_id() -> None:
    item = assistant({"content": "x"})
    assert item.data == {"content": "x", "role": "assistant"}
    _assert_generated_id(item)
    assert assistant({"content": "x"}, id="k").id == "k"
    assert assistant({"content": "x", "id": "k"}, id="k").id == "k"


def test_message_of_every_role() -> None:
    assert message({"role": "system", "content": "be brief"}).name == "system"
    assert message({"role": "user", "content": "hi", "id": "u1"}) == Fragment(
        "user", {"role": "user", "content": "hi"}, id="u1", kind="message"
    )
    call = message({"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]})
    assert call.data == {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}
    result = message({"role": "tool", "tool_call_id": "call_1", "content": "42", "id": "t1"})
    assert result == Fragment(
        "tool", {"role": "tool", "tool_call_id": "call_1", "content": "42"}, id="t1", kind="message"
    )
    _assert_generated_id(message({"role": "system", "content": "x"}))


def test_message_copies_and_leaves_the_source_alone() -> None:
    source = {"role": "user", "content": [{"type": "text", "text": "a"}], "id": "u1"}
    item = message(source)
    source["content"][0]["text"] = "changed"  # type: ignore[index]
    assert source["id"] == "u1"
    assert item.data == {"role": "user", "content": [{"type": "text", "text": "a"}]}


class _Function(BaseModel):
    name: str
    arguments: str


class _ToolCall(BaseModel):
    id: str
    type: str
    function: _Function


class _Message(BaseModel):
    role: str
    content: str | None = None
    tool_calls: list[_ToolCall] | None = None
    name: str | None = None


def test_message_from_a_pydantic_object_drops_none_fields() -> None:
    source = _Message(
        role="assistant",
        tool_calls=[
            _ToolCall(id="call_1", type="function", function=_Function(name="f", arguments="{}"))
        ],
    )
    item = message(source)
    assert item.name == "assistant"
    assert item.data == {"role": "assistant", "tool_calls": [TOOL_CALL]}


def test_message_from_a_litellm_message() -> None:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    item = message(litellm.Message(role="assistant", content="done"))
    assert item.name == "assistant"
    assert item.data["content"] == "done"
    assert item.data["role"] == "assistant"
    assert "id" not in item.data


def test_last_assistant_message() -> None:
    item = last_assistant_message("rewritten")
    assert _shape(item) == (
        "assistant",
        {"role": "assistant", "content": "rewritten"},
        "message",
        {"replace": "last_assistant"},
    )
    _assert_generated_id(item)
    assert item.metadata is not LAST_ASSISTANT_METADATA
    with_tools = last_assistant_message({"content": None, "tool_calls": [TOOL_CALL]})
    assert with_tools.data == {"content": None, "tool_calls": [TOOL_CALL], "role": "assistant"}
    assert with_tools.metadata == {"replace": "last_assistant"}


def test_message_payload_is_a_copy() -> None:
    item = user([{"type": "text", "text": "a"}])
    payload = message_payload(item)
    assert payload == {"role": "user", "content": [{"type": "text", "text": "a"}]}
    payload["content"][0]["text"] = "changed"
    assert item.data == {"role": "user", "content": [{"type": "text", "text": "a"}]}


def test_is_message_fragment() -> None:
    assert is_message_fragment(user("x"))
    assert is_message_fragment(Fragment("note", "x", kind="message"))
    assert not is_message_fragment(fragment("x"))
    assert not is_message_fragment({"role": "user", "content": "x"})
    assert not is_message_fragment(None)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: user(3), "content must be a string or a list"),  # type: ignore[arg-type]
        (lambda: user({"role": "assistant", "content": "x"}), "got a 'assistant' message"),
        (lambda: user({"content": "x", "id": "a"}, id="b"), "two ids"),
        (lambda: user(["text"]), "content part 0"),  # type: ignore[list-item]
        (lambda: user([{"text": "no type"}]), "content part 0"),
        (lambda: assistant(None), "content must be a string or a list"),  # type: ignore[arg-type]
        (lambda: assistant({"role": "user", "content": "x"}), "got a 'user' message"),
        (lambda: assistant({"content": "x", "id": "a"}, id="b"), "two ids"),
        (lambda: assistant_text(["x"]), "needs a string"),  # type: ignore[arg-type]
        (lambda: message({"content": "x"}), "string 'role'"),
        (lambda: message({"role": 1, "content": "x"}), "string 'role'"),
        (lambda: message({"role": " ", "content": "x"}), "string 'role'"),
        (lambda: message({"role": "user", "content": "x", "id": 7}), "message id"),
        (lambda: message({"role": "user", "content": "x", "id": ""}), "message id"),
        (lambda: message({"role": "user", "content": 5}), "content must be"),
        (lambda: message({"role": "assistant", "tool_calls": {"id": "c"}}), "tool_calls"),
        (lambda: message({"role": "assistant", "tool_calls": ["c"]}), "tool_calls"),
        (lambda: message({"role": "user", 1: "x"}), "keys must be strings"),
        (lambda: message("hello"), "model_dump"),
        (lambda: message(user("x")), "model_dump"),
        (lambda: message_payload(fragment("x")), "not a message fragment"),
        (lambda: message_payload(Fragment("x", "text", kind="message")), "not a message fragment"),
        (lambda: user("x", id=""), "id must be a non-empty string"),
    ],
)
def test_bad_input_is_a_validation_error(call: Any, match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        call()
