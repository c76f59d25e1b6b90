"""A plain-dict chat message that carries an ``"id"`` is stored under that id, without the key
(Chat Completions refuses unknown message keys); an item with a ``"type"`` (a Responses item)
and ``NewMessage`` store a dict exactly as given, under a generated id."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage


def test_a_chat_message_id_names_the_message_and_leaves_the_payload(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    result = store.append(
        "c1", "main", [{"id": "ui-1", "role": "user", "content": "hi"}], expected_head=None
    )
    assert result.message_ids == ("ui-1",)
    stored = store.get_message("c1", "ui-1")
    assert stored["message"] == {"role": "user", "content": "hi"}


def test_appending_the_same_id_again_is_recognized(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1", "main", [{"id": "ui-1", "role": "user", "content": "hi"}], expected_head=None
    )
    before = snap()
    with pytest.raises(ctxstore.errors.MessageExistsError):
        store.append(
            "c1",
            "main",
            [{"id": "ui-1", "role": "user", "content": "hi"}],
            expected_head=first.head_message_id,
        )
    assert snap() == before
    edit = store.append(
        "c1",
        "main",
        [{"id": "ui-1", "role": "user", "content": "hello"}],
        expected_head=first.head_message_id,
        on_existing="fork",
    )
    assert edit.created_branches  # an edit: a new branch, the original kept
    assert store.get_message("c1", "ui-1")["message"]["content"] == "hi"


def test_a_typed_item_is_stored_as_given_under_a_generated_id(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    item = {"id": "__fake_id__", "type": "message", "role": "assistant", "content": "ok"}
    result = store.append("c1", "main", [item, item], expected_head=None)
    assert "__fake_id__" not in result.message_ids
    assert [m["message"] for m in store.load_branch("c1").messages] == [item, item]


def test_new_message_stores_the_dict_as_given(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    payload = {"id": "__fake_id__", "role": "user", "content": "hi"}
    first = store.append(
        "c1", "main", [NewMessage(payload), NewMessage(payload)], expected_head=None
    )
    assert len(set(first.message_ids)) == 2
    assert "__fake_id__" not in first.message_ids
    assert [m["message"] for m in store.load_branch("c1").messages] == [payload, payload]


@pytest.mark.parametrize(
    ("bad", "error"),
    [
        (7, ctxstore.ValidationError),
        ("a\nb", ctxstore.errors.InvalidIdError),
        ("", ctxstore.errors.InvalidIdError),
    ],
)
def test_a_bad_id_is_refused_and_nothing_written(
    store: Any, snap: Any, bad: Any, error: type[Exception]
) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(error):
        store.append(
            "c1", "main", [{"id": bad, "role": "user", "content": "x"}], expected_head=None
        )
    assert snap() == before
