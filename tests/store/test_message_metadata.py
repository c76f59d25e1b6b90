"""Per-message metadata: stored beside the payload, returned by the store, never sent to a
model; through the store and through the engine's message fragments."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage


def test_metadata_is_stored_beside_the_payload(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    result = store.append(
        "c1",
        "main",
        [
            NewMessage({"role": "user", "content": "hi"}, metadata={"source": "web", "n": 1}),
            {"role": "assistant", "content": "hello"},
            NewMessage({"role": "user", "content": "x"}, id="chosen", metadata={"k": [1, 2]}),
        ],
        expected_head=None,
    )
    messages = store.load_branch("c1").messages
    assert messages[0]["metadata"] == {"source": "web", "n": 1}
    assert "metadata" not in messages[0]["message"]
    assert "metadata" not in messages[1]
    assert messages[2]["id"] == "chosen"
    assert messages[2]["metadata"] == {"k": [1, 2]}
    assert messages[1]["parent_id"] == messages[0]["id"]
    assert store.get_message("c1", result.message_ids[0])["metadata"] == {"source": "web", "n": 1}
    assert store.verify_chat("c1").ok


def test_an_edit_keeps_the_metadata_of_the_new_version(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append(
        "c1", "main", [NewMessage({"role": "user", "content": "a"}, id="m1")], expected_head=None
    )
    edited = store.append(
        "c1",
        "main",
        [NewMessage({"role": "user", "content": "b"}, id="m1", metadata={"edited": True})],
        expected_head="m1",
        on_existing="fork",
    )
    chain = store.load_branch("c1", edited.branch).messages
    assert [m["message"]["content"] for m in chain] == ["b"]
    assert chain[0]["metadata"] == {"edited": True}


@pytest.mark.parametrize("bad", [["not", "a", "mapping"], {1: "non-string key"}, {"x": object()}])
def test_bad_metadata_writes_nothing(store: Any, bad: Any) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ValidationError):
        store.append(
            "c1",
            "main",
            [NewMessage({"role": "user", "content": "a"}, metadata=bad)],
            expected_head=None,
        )
    assert store.load_branch("c1").messages == []


def test_engine_stores_fragment_metadata_and_never_sends_it(make_engine: Any) -> None:
    engine = make_engine()
    engine.set(ctxstore.message({"role": "user", "content": "hi"}, metadata={"trace": "t1"}))
    engine.save()
    engine.set(ctxstore.prompt.last_assistant_message("draft"))
    engine.save()
    sent = engine.resolve().with_system()
    assert all("metadata" not in m for m in sent)
    stored = make_engine.store.load_branch("c1").messages
    assert stored[0]["metadata"] == {"trace": "t1"}
    assert "metadata" not in stored[1]  # the engine's own flag is not stored
