"""A write that fails leaves the listings as if it had never been attempted: the same chats, in
the same order, at the same offsets and cursors, in the namespace's index and the owner's.

On a Redis Cluster the indexes live in other slots than the chat, so a write sends its index
update beside its script; these tests hold every kind of refused write to that promise on
every backend."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import ctxstore

USER_MESSAGE = {"role": "user", "content": "hello"}


def listing_view(store: Any) -> dict[str, Any]:
    """Everything a caller can see of the listings: whole, by offsets, by cursor, per user."""
    view: dict[str, Any] = {}
    for user_id in (None, "alice"):
        everything = [(c.id, c.updated_at) for c in store.list_chats(user_id=user_id)]
        view[f"all {user_id}"] = everything
        for offset in range(len(everything) + 1):
            view[f"offset {user_id} {offset}"] = [
                c.id for c in store.list_chats(user_id=user_id, limit=2, offset=offset)
            ]
        pages, cursor = [], None
        while True:
            page = store.list_chats_page(user_id=user_id, cursor=cursor, limit=2)
            pages.append([c.id for c in page.chats])
            cursor = page.next_cursor
            if cursor is None:
                break
        view[f"pages {user_id}"] = pages
    return view


def make_four(store: Any) -> str:
    """Chats c0..c3 of alice (c3 newest); c0, the oldest, holds message "m1" (its head) and
    checkpoint "cp", and is the chat every failing write aims at."""
    for i in range(4):
        store.upsert_chat(f"c{i}", "alice")
        if i == 0:
            first = ctxstore.NewMessage(USER_MESSAGE, id="m1")
            store.append("c0", "main", [first], expected_head=None)
            store.upsert_checkpoint("c0", "cp", "m1")
    return "m1"


def _append(
    branch: str = "main",
    expected_head: str | None = "m1",
    messages: list[Any] | None = None,
    **kwargs: Any,
) -> Callable[[Any], Any]:
    def write(store: Any) -> Any:
        batch = messages or [USER_MESSAGE]
        return store.append("c0", branch, batch, expected_head=expected_head, **kwargs)

    return write


FAILING_WRITES: dict[str, tuple[Callable[[Any], Any], type[Exception]]] = {
    "append to an unknown branch": (_append(branch="nope"), ctxstore.BranchNotFoundError),
    "append on a stale head": (_append(expected_head=None), ctxstore.HeadConflictError),
    "append an existing message": (
        _append(messages=[ctxstore.NewMessage(USER_MESSAGE, id="m1")]),
        ctxstore.MessageExistsError,
    ),
    "append as another user": (_append(user_id="mallory"), ctxstore.PermissionDeniedError),
    "update another user's chat": (
        lambda store: store.update_chat("c0", title="t", user_id="mallory"),
        ctxstore.PermissionDeniedError,
    ),
    "update with a bad title": (
        lambda store: store.update_chat("c0", title="two\nlines"),
        ctxstore.ValidationError,
    ),
    "open another user's chat": (
        lambda store: store.upsert_chat("c0", "mallory", {"k": 1}),
        ctxstore.PermissionDeniedError,
    ),
    "create an existing branch": (
        lambda store: store.create_branch("c0", "m1", name="main"),
        ctxstore.BranchExistsError,
    ),
    "branch from an unknown message": (
        lambda store: store.create_branch("c0", "nope"),
        ctxstore.MessageNotFoundError,
    ),
    "branch from an unknown checkpoint": (
        lambda store: store.branch_from_checkpoint("c0", "nope"),
        ctxstore.CheckpointNotFoundError,
    ),
    "activate an unknown branch": (
        lambda store: store.set_active_branch("c0", "nope"),
        ctxstore.BranchNotFoundError,
    ),
    "checkpoint an unknown message": (
        lambda store: store.upsert_checkpoint("c0", "cp2", "nope"),
        ctxstore.MessageNotFoundError,
    ),
    "add usage as another user": (
        lambda store: store.add_usage("c0", {"input_tokens": 1}, user_id="mallory"),
        ctxstore.PermissionDeniedError,
    ),
    "summarize an unknown message": (
        lambda store: store.write_summary("c0", "nope", "summary"),
        ctxstore.MessageNotFoundError,
    ),
    "delete another user's chat": (
        lambda store: store.delete_chat("c0", user_id="mallory"),
        ctxstore.PermissionDeniedError,
    ),
}


@pytest.mark.parametrize("kind", FAILING_WRITES)
def test_a_failed_write_leaves_every_listing_as_it_was(store: Any, kind: str) -> None:
    make_four(store)
    write, error = FAILING_WRITES[kind]
    before = listing_view(store)
    assert before["all None"][-1][0] == "c0"
    with pytest.raises(error):
        write(store)
    assert listing_view(store) == before


def test_a_failed_write_to_a_missing_chat_lists_nothing(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.delete_chat("c1")
    store.upsert_chat("c2", "alice")
    store.state.owners.remember("c1", "alice")  # a worker that still believes c1 exists
    before = listing_view(store)
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.update_chat("c1", title="gone")
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.append("c1", "main", [USER_MESSAGE], expected_head=None)
    assert listing_view(store) == before
