"""``append(chat_id, None, ...)`` writes to the branch active when the script runs: a writer
that does not know (or track) which branch is active never writes to a stale one."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


def say(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def texts(store: Any, branch: str | None = None) -> list[str]:
    return [m["message"]["content"] for m in store.load_branch("c1", branch).messages]


def test_none_appends_to_the_active_branch(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    first = store.append("c1", None, [say("a"), say("b")], expected_head=None)
    assert first.branch == "main"
    alt = store.create_branch("c1", first.message_ids[0], name="alt")  # activated
    assert alt.is_active
    result = store.append(
        "c1", None, [say("c")], expected_head=first.head_message_id, on_conflict="rebase"
    )
    assert result.branch == "alt"
    assert result.rebased  # the head it knew was main's
    assert texts(store, "alt") == ["a", "c"]
    assert texts(store, "main") == ["a", "b"]
    store.set_active_branch("c1", "main")
    with pytest.raises(ctxstore.HeadConflictError) as caught:
        store.append("c1", None, [say("d")], expected_head=result.head_message_id)
    assert caught.value.current_head == first.head_message_id
    store.append("c1", None, [say("d")], expected_head=first.head_message_id)
    assert texts(store) == ["a", "b", "d"]


def test_none_on_a_missing_or_foreign_chat_writes_nothing(store: Any, snap: Any) -> None:
    before = snap()
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.append("c1", None, [say("a")], expected_head=None)
    assert snap() == before
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.append("c1", None, [say("a")], expected_head=None, user_id="mallory")
    assert snap() == before
