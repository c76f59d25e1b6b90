"""Listing chats: order, counts, filters, pagination, stale index entries."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore


def make_chats(store: Any, count: int, user: str = "alice") -> list[str]:
    ids = [f"c{i:02d}" for i in range(count)]
    for chat_id in ids:
        store.upsert_chat(chat_id, user)
    return ids


def test_newest_update_first_with_counts(store: Any) -> None:
    make_chats(store, 3)
    store.append("c00", "main", [{"role": "user", "content": "x"}] * 1, expected_head=None)
    listed = store.list_chats()
    assert [chat.id for chat in listed] == ["c00", "c02", "c01"]
    assert all(isinstance(chat, ctxstore.models.ChatInfo) for chat in listed)
    assert [(c.message_count, c.branch_count) for c in listed] == [(1, 1), (0, 1), (0, 1)]
    assert [c.updated_at for c in listed] == sorted((c.updated_at for c in listed), reverse=True)


def test_counts_follow_messages_and_branches(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    result = store.append(
        "c1", "main", [{"role": "user", "content": str(i)} for i in range(3)], expected_head=None
    )
    store.create_branch("c1", result.message_ids[0])
    [info] = store.list_chats()
    assert (info.message_count, info.branch_count) == (3, 2)


def test_filter_by_user(store: Any) -> None:
    make_chats(store, 2, "alice")
    store.upsert_chat("b1", "bob")
    assert [c.id for c in store.list_chats(user_id="bob")] == ["b1"]
    assert {c.id for c in store.list_chats(user_id="alice")} == {"c00", "c01"}
    assert store.list_chats(user_id="nobody") == []
    assert len(store.list_chats()) == 3


def test_metadata_filter_is_type_exact(store: Any) -> None:
    values = {"int": 1, "float": 1.0, "bool": True, "str": "1", "list": [1], "dict": {"a": 1}}
    for name, value in values.items():
        store.upsert_chat(name, "alice", {"v": value})
    store.upsert_chat("none", "alice")
    for name, value in values.items():
        assert [c.id for c in store.list_chats(metadata=("v", value))] == [name]
    assert [c.id for c in store.list_chats(metadata=("v", (1,)))] == ["list"]
    assert store.list_chats(metadata=("v", None)) == []
    assert store.list_chats(metadata=("missing", 1)) == []


def test_metadata_filter_takes_the_seeds_key_value_dict(store: Any) -> None:
    store.upsert_chat("p", "alice", {"project": "x"})
    store.upsert_chat("q", "alice", {"project": "y"})
    assert [c.id for c in store.list_chats(metadata={"key": "project", "value": "x"})] == ["p"]
    for bad in ({"key": "project"}, {"project": "x"}, ["project", "x"]):
        with pytest.raises(ctxstore.errors.ValidationError, match="metadata filter"):
            store.list_chats(metadata=bad)


@pytest.mark.parametrize("page", [1, 3, 4, 7])
def test_pagination_has_no_duplicates_or_gaps(store: Any, page: int) -> None:
    ids = make_chats(store, 10)
    everything = [c.id for c in store.list_chats()]
    assert sorted(everything) == ids
    seen: list[str] = []
    offset = 0
    while True:
        chunk = store.list_chats(limit=page, offset=offset)
        assert len(chunk) <= page
        seen += [c.id for c in chunk]
        offset += page
        if len(chunk) < page:
            break
    assert seen == everything


def test_pagination_with_metadata_filter(store: Any) -> None:
    for i in range(9):
        store.upsert_chat(f"c{i}", "alice", {"team": "a" if i % 3 else "b"})
    wanted = [c.id for c in store.list_chats(metadata=("team", "a"))]
    assert len(wanted) == 6
    pages = [
        [c.id for c in store.list_chats(metadata=("team", "a"), limit=4, offset=offset)]
        for offset in (0, 4)
    ]
    assert pages[0] + pages[1] == wanted
    assert store.list_chats(limit=0) == []


def test_bad_paging_arguments(store: Any) -> None:
    with pytest.raises(ctxstore.ValidationError):
        store.list_chats(limit=-1)
    with pytest.raises(ctxstore.ValidationError):
        store.list_chats(offset=-1)
    with pytest.raises(ctxstore.ValidationError):
        store.list_chats(metadata=("only-key",))  # type: ignore[arg-type]


def test_stale_index_entries_are_skipped_and_repaired(store: Any, backend: str) -> None:
    from tests.support.keyspace import raw_client

    make_chats(store, 5)
    client = raw_client(backend)
    keyspace = store.state.keyspace
    for key in keyspace.chat("c02").select(("chat", "log", "alias", "runs", "branch")):
        client.delete(key)  # a chat deleted without its index entries
    client.zadd(keyspace.user_index("alice"), {"c03": 1})  # a lagging score
    first = store.list_chats(user_id="alice", limit=2)
    assert [c.id for c in first] == ["c04", "c01"]  # c02 skipped, the next chat fills its place
    assert client.zscore(keyspace.user_index("alice"), "c02") is None
    second = store.list_chats(user_id="alice", limit=2, offset=2)
    assert [c.id for c in first + second] == ["c04", "c01", "c00", "c03"]  # no gap, no repeat
    c03 = store.get_chat("c03")
    assert client.zscore(keyspace.user_index("alice"), "c03") == c03.updated_at
    assert [c.id for c in store.list_chats(user_id="alice")] == ["c04", "c03", "c01", "c00"]
    client.close()


def test_a_foreign_chat_in_a_users_index_is_never_listed(store: Any, backend: str) -> None:
    from tests.support.keyspace import raw_client

    store.upsert_chat("theirs", "bob")
    client = raw_client(backend)
    client.zadd(store.state.keyspace.user_index("alice"), {"theirs": 1})
    client.close()
    assert store.list_chats(user_id="alice") == []
