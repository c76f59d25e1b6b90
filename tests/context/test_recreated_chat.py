"""A chat deleted and re-created under the same id by another user: an engine that knew the
old chat neither reads nor writes the new one."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


def test_an_old_engine_never_reads_or_writes_the_new_owners_chat(make_engine: Any) -> None:
    store = make_engine.store
    alice = make_engine(chat_id="c", user_id="alice")
    alice.set(ctxstore.user("alice's secret"))
    alice.save()
    alice.resolve()
    assert store.delete_chat("c", user_id="alice")
    store.upsert_chat("c", "bob")
    store.append(
        "c", "main", [{"role": "user", "content": "bob's private note"}], expected_head=None
    )
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        alice.resolve()
    alice.set(ctxstore.user("written into the wrong chat?"))
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        alice.save()
    contents = [m["message"]["content"] for m in store.load_branch("c").messages]
    assert contents == ["bob's private note"]
