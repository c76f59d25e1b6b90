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
    "append to an unknown branch": (_append(branch="nope"), ctxstore.errors.BranchNotFoundError),
    "append on a stale head": (_append(expected_head=None), ctxstore.HeadConflictError),
    "append an existing message": (
        _append(messages=[ctxstore.NewMessage(USER_MESSAGE, id="m1")]),
        ctxstore.errors.MessageExistsError,
    ),
    "append as another user": (_append(user_id="mallory"), ctxstore.ChatNotFoundError),
    "update another user's chat": (
        lambda store: store.update_chat("c0", title="t", user_id="mallory"),
        ctxstore.ChatNotFoundError,
    ),
    "update with a bad title": (
        lambda store: store.update_chat("c0", title="two\nlines"),
        ctxstore.ValidationError,
    ),
    "open another user's chat": (
        lambda store: store.upsert_chat("c0", "mallory", {"k": 1}),
        ctxstore.ChatNotFoundError,
    ),
    "create an existing branch": (
        lambda store: store.create_branch("c0", "m1", name="main"),
        ctxstore.errors.BranchExistsError,
    ),
    "branch from an unknown message": (
        lambda store: store.create_branch("c0", "nope"),
        ctxstore.errors.MessageNotFoundError,
    ),
    "branch from an unknown checkpoint": (
        lambda store: store.branch_from_checkpoint("c0", "nope"),
        ctxstore.errors.CheckpointNotFoundError,
    ),
    "activate an unknown branch": (
        lambda store: store.set_active_branch("c0", "nope"),
        ctxstore.errors.BranchNotFoundError,
    ),
    "checkpoint an unknown message": (
        lambda store: store.upsert_checkpoint("c0", "cp2", "nope"),
        ctxstore.errors.MessageNotFoundError,
    ),
    "add usage as another user": (
        lambda store: store.add_usage("c0", {"input_tokens": 1}, user_id="mallory"),
        ctxstore.ChatNotFoundError,
    ),
    "summarize an unknown message": (
        lambda store: store.write_summary("c0", "nope", "summary"),
        ctxstore.errors.MessageNotFoundError,
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


def _between_round_trips(operation: Any, meanwhile: Callable[[], None]) -> Any:
    """``operation``, with ``meanwhile`` run after its first round trip (another client's
    command landing between the write and what follows it)."""
    result = yield next(operation)
    meanwhile()
    step = operation.send(result)
    while True:
        result = yield step
        step = operation.send(result)


@pytest.mark.parametrize("moved", [False, True])
def test_a_refused_write_puts_back_only_the_score_its_touch_set(
    store: Any, backend: str, moved: bool
) -> None:
    """The index touches that ride beside a write (as on a Redis Cluster) are undone when the
    write is refused, unless another write moved the entry in between: that one stays."""
    from ctxstore._core.ops import chats
    from tests.support.keyspace import raw_client

    make_four(store)
    store.state.cluster = True  # every backend takes the Cluster's path
    index = store.state.keyspace.all_chats_index
    raw = raw_client(backend)
    before = raw.zscore(index, "c0")
    later = 1_900_000_000_000

    sealing = store.state.settings.encryption is not None  # (the encrypted pass)

    def another_writer() -> None:
        if sealing:  # refused before its touches: a seal's first read is of the owner
            assert raw.zscore(index, "c0") == before
        else:
            assert raw.zscore(index, "c0") > before  # the touch has moved the entry
        if moved:
            raw.zadd(index, {"c0": later})

    operation = chats.update_chat(store.state, "c0", title="t", user_id="mallory")
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.run(_between_round_trips(operation, another_writer))
    assert raw.zscore(index, "c0") == (later if moved else before)
    raw.close()


def test_what_a_refused_write_puts_back() -> None:
    """Per index: the old score when the touch raised it, a removal when the touch created the
    entry, nothing when the entry was already at or past the write's time or the touch failed."""
    from ctxstore._core.ops import indexes
    from ctxstore._core.state import StoreState

    state = StoreState()
    restores = indexes.restore_calls(state, "c0", "alice", 100, ["40", None])
    assert [call.args for call in restores] == [("c0", "100.0", "40"), ("c0", "100.0", "")]
    assert [call.keys for call in restores] == [
        (key,) for key in state.keyspace.indexes_of("alice")
    ]
    failed = ctxstore.BackendUnavailableError("down")
    assert indexes.restore_calls(state, "c0", "alice", 100, ["100", "150"]) == ()
    assert indexes.restore_calls(state, "c0", "alice", 100, [failed, failed]) == ()
