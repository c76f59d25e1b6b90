"""Bad input is refused whole, with a ctxstore error, and nothing is written: ids that are not
clean Unicode, payloads and metadata that would not read back, usage counts past what the
scripts count exactly, listing bounds, titles."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


@pytest.mark.parametrize("bad", ["a\ud800b", "a\u0085b", "a\u009bb", "x\x7fy"])
def test_ids_with_surrogates_or_control_characters_are_invalid(store: Any, bad: str) -> None:
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.upsert_chat(bad, "alice")
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.upsert_chat("c1", bad)
    assert store.list_chats() == []


@pytest.mark.parametrize(
    "content",
    [{(1, 2): "x"}, {frozenset({1}): "x"}, ["ok", {(3,): "nested"}], "lone \ud800 surrogate"],
)
def test_payloads_that_would_not_read_back_are_refused(store: Any, content: Any) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.errors.UnserializablePayloadError):
        store.append("c1", "main", [{"role": "user", "content": content}], expected_head=None)
    assert store.load_branch("c1").messages == []  # nothing stored, reads still work


def test_metadata_that_would_not_read_back_is_refused(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.errors.UnserializablePayloadError):
        store.update_chat("c1", metadata={"m": {(1, 2): 3}})
    with pytest.raises(ctxstore.errors.UnserializablePayloadError):
        store.append(
            "c1",
            "main",
            [ctxstore.NewMessage({"role": "user", "content": "x"}, metadata={"k": {(1,): 2}})],
            expected_head=None,
        )
    assert store.get_chat("c1").metadata == {}
    assert [chat.id for chat in store.list_chats()] == ["c1"]  # the listing still reads


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": 2**63},
        {"input_tokens": 2**53 + 1},
        {"output_tokens": -1},
        {"input_tokens": float("nan")},
        {"input_tokens": "12"},
    ],
)
def test_bad_usage_counts_are_validation_errors(store: Any, usage: dict[str, Any]) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ValidationError):
        store.add_usage("c1", usage)
    assert store.get_chat("c1").metadata == {}


def test_a_usage_whose_total_would_overflow_adds_nothing(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.add_usage("c1", {"input_tokens": 2**52, "output_tokens": 2**52})
    before = store.get_chat("c1").metadata
    with pytest.raises(ctxstore.ValidationError, match="2\\^53"):
        store.add_usage("c1", {"input_tokens": 1, "output_tokens": 1})  # total passes 2^53
    assert store.get_chat("c1").metadata == before


@pytest.mark.parametrize("page", [{"limit": 10**20}, {"offset": 10**20}, {"limit": -1}])
def test_listing_bounds_are_validation_errors(store: Any, page: dict[str, int]) -> None:
    with pytest.raises(ctxstore.ValidationError):
        store.list_chats(**page)


@pytest.mark.parametrize("title", ["two\nlines", "bell\x07", "c1\x85", "x" * 1025, "a\ud800"])
def test_bad_titles_are_refused(store: Any, title: str) -> None:
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ValidationError):
        store.update_chat("c1", title=title)
    assert store.get_chat("c1").title is None
    store.update_chat("c1", title="x" * 1024)  # the limit itself is fine


def test_deleting_another_users_chat_deletes_nothing_as_for_a_missing_chat(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    assert store.delete_chat("c1", user_id="mallory") is False
    assert store.get_chat("c1").user_id == "alice"
