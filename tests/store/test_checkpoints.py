"""Checkpoints: named pointers to messages."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


def test_upsert_get_and_move(store: Any, chat: str) -> None:
    first = store.upsert_checkpoint(chat, "before", "m1")
    assert (first.name, first.message_id) == ("before", "m1")
    assert store.get_checkpoint(chat, "before") == first
    moved = store.upsert_checkpoint(chat, "before", "m2")
    assert moved.message_id == "m2"
    assert moved.created_at >= first.created_at
    assert [c.name for c in store.list_checkpoints(chat)] == ["before"]


def test_list_newest_first(store: Any, chat: str) -> None:
    store.upsert_checkpoint(chat, "one", "m1")
    store.upsert_checkpoint(chat, "two", "m2")
    store.upsert_checkpoint(chat, "three", "m1")
    assert [c.name for c in store.list_checkpoints(chat)] == ["three", "two", "one"]
    store.upsert_checkpoint(chat, "one", "m2")
    assert [c.name for c in store.list_checkpoints(chat)] == ["one", "three", "two"]


def test_delete(store: Any, chat: str) -> None:
    store.upsert_checkpoint(chat, "cp", "m1")
    assert store.delete_checkpoint(chat, "cp") is True
    assert store.delete_checkpoint(chat, "cp") is False
    with pytest.raises(ctxstore.errors.CheckpointNotFoundError, match="cp"):
        store.get_checkpoint(chat, "cp")
    assert store.get_message(chat, "m1")["message"]["content"] == "a"


def test_checkpoint_of_unknown_message_or_chat(store: Any, chat: str, snap: Any) -> None:
    before = snap()
    with pytest.raises(ctxstore.errors.MessageNotFoundError):
        store.upsert_checkpoint(chat, "cp", "ghost")
    assert snap() == before
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.upsert_checkpoint("ghost", "cp", "m1")
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.list_checkpoints("ghost")
