"""Chats: create, read, update, usage, delete."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


def test_upsert_creates_chat_with_empty_active_main_branch(store: Any) -> None:
    meta = store.upsert_chat("c1", "alice")
    assert (meta.id, meta.user_id, meta.title, meta.metadata) == ("c1", "alice", None, {})
    assert meta.created_at == meta.updated_at
    assert meta.active_branch == "main"
    [main] = store.list_branches("c1")
    assert (main.name, main.head_message_id, main.is_active, main.message_count) == (
        "main",
        None,
        True,
        0,
    )


def test_upsert_is_idempotent_for_the_owner(store: Any) -> None:
    first = store.upsert_chat("c1", "alice", {"source": "web"})
    again = store.upsert_chat("c1", "alice")
    assert again.created_at == first.created_at
    assert again.metadata == {"source": "web"}
    assert len(store.list_branches("c1")) == 1


def test_upsert_merges_metadata_into_an_existing_chat(store: Any) -> None:
    store.upsert_chat("c1", "alice", {"a": 1})
    meta = store.upsert_chat("c1", "alice", {"b": 2})
    assert meta.metadata == {"a": 1, "b": 2}


def test_upsert_of_another_users_chat_is_refused_and_writes_nothing(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice", {"secret": "plans"})
    before = snap()
    with pytest.raises(ctxstore.ChatNotFoundError) as caught:
        store.upsert_chat("c1", "mallory", {"x": 1})
    assert "c1" in str(caught.value)
    assert "alice" not in str(caught.value)
    assert "plans" not in str(caught.value)
    assert snap() == before


def test_get_chat(store: Any) -> None:
    store.upsert_chat("c1", "alice", {"k": [1, {"n": None}]})
    meta = store.get_chat("c1")
    assert isinstance(meta, ctxstore.ChatMeta)
    assert meta.metadata == {"k": [1, {"n": None}]}


def test_get_unknown_chat_is_not_found(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError, match="nope"):
        store.get_chat("nope")


def test_update_chat_replaces_title_and_merges_metadata(store: Any, clock: Any) -> None:
    created = store.upsert_chat("c1", "alice", {"a": 1, "b": 2})
    updated = store.update_chat("c1", title="Trip", metadata={"b": 3, "c": {"d": True}})
    assert updated.title == "Trip"
    assert updated.metadata == {"a": 1, "b": 3, "c": {"d": True}}
    assert updated.updated_at > created.updated_at
    kept = store.update_chat("c1", metadata={"e": 1.5})
    assert kept.title == "Trip"
    assert kept.metadata["e"] == 1.5


def test_update_chat_never_moves_updated_at_back(store: Any, clock: Any) -> None:
    store.upsert_chat("c1", "alice")
    later = store.update_chat("c1", title="x")
    clock.now -= 60_000  # a worker whose clock is behind
    behind = store.update_chat("c1", title="y")
    assert behind.updated_at == later.updated_at
    assert behind.title == "y"


def test_update_unknown_chat_is_not_found(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.update_chat("ghost", title="x")


def test_metadata_key_usage_is_reserved(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(ctxstore.ValidationError, match="usage"):
        store.update_chat("c1", metadata={"usage": {"input_tokens": 1}})
    assert snap() == before


def test_metadata_must_be_a_mapping_of_string_keys(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ValidationError):
        store.update_chat("c1", metadata=["not", "a", "mapping"])
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.update_chat("c1", metadata={"": 1})


def test_add_usage_accumulates_both_spellings_and_details(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.add_usage("c1", {"prompt_tokens": 10, "completion_tokens": 5})
    totals = store.add_usage(
        "c1",
        {
            "input_tokens": 1,
            "output_tokens": 2,
            "input_tokens_details": {"cached_tokens": 3},
            "output_tokens_details": {"reasoning_tokens": 4},
        },
    )
    assert totals == {
        "input_tokens": 11,
        "output_tokens": 7,
        "total_tokens": 18,
        "cached_input_tokens": 3,
        "reasoning_tokens": 4,
    }
    assert store.get_chat("c1").metadata["usage"] == totals


def test_add_usage_reads_usage_objects(store: Any) -> None:
    class Details:
        cached_tokens = 2

    class Usage:
        def __init__(self) -> None:
            self.prompt_tokens = 7
            self.completion_tokens = 1
            self.total_tokens = 8
            self.prompt_tokens_details = Details()

    store.upsert_chat("c1", "alice")
    assert store.add_usage("c1", Usage()) == {
        "input_tokens": 7,
        "output_tokens": 1,
        "total_tokens": 8,
        "cached_input_tokens": 2,
    }


@pytest.mark.parametrize(
    "usage",
    [{}, {"input_tokens": -1}, {"input_tokens": "3"}, {"output_tokens": True}, {"x": 1}],
)
def test_add_usage_refuses_bad_counts(store: Any, snap: Any, usage: dict[str, Any]) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(ctxstore.ValidationError):
        store.add_usage("c1", usage)
    assert snap() == before


def test_add_usage_to_unknown_chat_is_not_found(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.add_usage("ghost", {"input_tokens": 1})


def test_delete_chat_removes_every_key_and_index_entry(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice", {"a": 1})
    result = store.append("c1", "main", [{"role": "user", "content": "hi"}], expected_head=None)
    store.create_branch("c1", result.head_message_id)
    store.upsert_checkpoint("c1", "cp", result.head_message_id)
    store.upsert_chat("c2", "alice")
    assert store.delete_chat("c1") is True
    remaining = snap()
    assert not [key for key in remaining if b"{c1}" in key]
    assert [chat.id for chat in store.list_chats()] == ["c2"]
    assert [chat.id for chat in store.list_chats(user_id="alice")] == ["c2"]
    assert store.delete_chat("c1") is False
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c1")


def test_delete_chat_with_user_id_only_deletes_the_owners_chat(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    assert store.delete_chat("c1", user_id="mallory") is False  # as for a chat that is not there
    assert snap() == before
    assert store.delete_chat("missing", user_id="mallory") is False
    assert store.delete_chat("c1", user_id="alice") is True
    assert snap() == {}
