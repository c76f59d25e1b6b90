"""Listings follow the chats, not the index: an entry whose score disagrees with its chat's
``updated_at`` is placed by the chat and repaired; a corrupt chat or an index member that is no
chat id is left out, logged and named, and the rest of the namespace still lists."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest

from ctxstore._core.ops import listing
from tests.support.keyspace import raw_client


@pytest.fixture
def raw(backend: str) -> Iterator[Any]:
    client = raw_client(backend)
    yield client
    client.close()


def make_chats(store: Any, count: int) -> list[str]:
    ids = [f"c{i:02d}" for i in range(count)]
    for chat_id in ids:
        store.upsert_chat(chat_id, "alice", {"team": "a"})
    return ids


def indexes(store: Any) -> tuple[str, str]:
    return store.state.keyspace.indexes_of("alice")


def cursor_pages(store: Any, limit: int, user_id: str | None = None) -> list[Any]:
    pages, cursor = [], None
    while True:
        page = store.list_chats_page(user_id=user_id, cursor=cursor, limit=limit)
        pages.append(page)
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


LISTINGS = {
    "whole": lambda store: [c.id for c in store.list_chats()],
    "by user": lambda store: [c.id for c in store.list_chats(user_id="alice")],
    "pages of 1": lambda store: [c.id for p in cursor_pages(store, 1) for c in p.chats],
    "pages of 2": lambda store: [c.id for p in cursor_pages(store, 2) for c in p.chats],
    "first two": lambda store: [c.id for c in store.list_chats(limit=2)],
}


@pytest.mark.parametrize("listing_kind", LISTINGS)
def test_a_score_above_the_chats_time_is_listed_by_the_chats_time(
    store: Any, raw: Any, listing_kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a writer leaves when it dies between a refused write and putting the score back."""
    monkeypatch.setattr(listing, "SCAN_CHUNK", 2)
    ids = make_chats(store, 5)
    truth = list(reversed(ids))
    for index in indexes(store):
        raw.zadd(index, {"c00": 1_800_000_000_000})
    expected = truth[:2] if listing_kind == "first two" else truth
    assert LISTINGS[listing_kind](store) == expected
    c00 = store.get_chat("c00").updated_at
    read = indexes(store)[1 if listing_kind == "by user" else 0]
    if listing_kind != "first two":  # a listing repairs every entry it reads
        assert raw.zscore(read, "c00") == c00
    assert [c.id for c in store.list_chats()] == truth
    assert [c.id for c in store.list_chats(limit=2, offset=3)] == truth[3:]


def test_a_score_below_the_chats_time_is_listed_once_and_repaired(
    store: Any, raw: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An index update lost after a write: the chat is where the index has it, once."""
    monkeypatch.setattr(listing, "SCAN_CHUNK", 2)
    ids = make_chats(store, 5)
    for index in indexes(store):
        raw.zadd(index, {"c03": 1})
    listed = [c.id for p in cursor_pages(store, 2) for c in p.chats]
    assert sorted(listed) == ids
    assert listed[-1] == "c03"
    assert [c.id for c in store.list_chats()] == list(reversed(ids))


CORRUPTIONS = {
    "undecodable metadata": {"m:team": b"\xc1"},
    "a time that is no number": {"updated_at": b"soon"},
    "a title that is no UTF-8": {"title": b"\xff\xfe"},
    "a usage counter that is no number": {"u:input_tokens": b"many"},
    "a count that is no number": {"message_count": b"x"},
}


def corrupt(store: Any, raw: Any, chat_id: str, kind: str) -> None:
    key = store.state.keyspace.chat(chat_id).key("chat")
    if kind == "no owner":
        raw.hdel(key, "user_id")
    elif kind == "not a hash":
        raw.delete(key)
        raw.set(key, b"garbage")
    else:
        raw.hset(key, mapping=CORRUPTIONS[kind])


@pytest.mark.parametrize("kind", [*CORRUPTIONS, "no owner", "not a hash"])
def test_a_corrupt_chat_is_left_out_logged_and_named(
    store: Any, raw: Any, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    ids = make_chats(store, 4)
    store.update_chat("c01", title="bump")  # c01 first in the index, before c03 and the rest
    corrupt(store, raw, "c01", kind)
    others = ["c03", "c02", "c00"]
    caplog.set_level(logging.WARNING, logger="ctxstore")
    assert [c.id for c in store.list_chats()] == others
    assert [c.id for c in store.list_chats(user_id="alice")] == others
    assert [c.id for c in store.list_chats(metadata=("team", "a"))] == others
    assert any(
        record.name == "ctxstore" and "c01" in record.getMessage() for record in caplog.records
    )
    pages = cursor_pages(store, 2)
    assert [[c.id for c in page.chats] for page in pages] == [["c03"], ["c02", "c00"]]
    assert [page.skipped for page in pages] == [("c01",), ()]
    # A corrupt chat keeps its place, so offset pages neither overlap nor skip a chat.
    by_offset = [[c.id for c in store.list_chats(limit=1, offset=i)] for i in range(len(ids))]
    assert by_offset == [[], ["c03"], ["c02"], ["c00"]]


@pytest.mark.parametrize("member", ["bad{id}", b"\xff\xfe", "tab\tid"])
def test_an_index_member_that_is_no_chat_id_is_left_out_and_removed(
    store: Any, raw: Any, member: Any, caplog: pytest.LogCaptureFixture
) -> None:
    make_chats(store, 3)
    for index in indexes(store):
        raw.zadd(index, {member: 1_750_000_000_000})
    caplog.set_level(logging.WARNING, logger="ctxstore")
    page = store.list_chats_page(user_id="alice")
    assert [c.id for c in page.chats] == ["c02", "c01", "c00"]
    assert len(page.skipped) == 1
    assert any(record.name == "ctxstore" for record in caplog.records)
    assert [c.id for c in store.list_chats()] == ["c02", "c01", "c00"]
    assert raw.zscore(indexes(store)[1], member) is None  # removed from the index read
    assert store.list_chats_page(user_id="alice").skipped == ()


def test_a_listing_that_may_not_repair_leaves_the_index_as_it_is(store: Any, raw: Any) -> None:
    """``repair=False`` (the web console, which never writes): a stale entry is placed where
    its chat belongs, and the index keeps it as it was."""
    ids = make_chats(store, 4)
    for index in indexes(store):
        raw.zadd(index, {"c00": 1_800_000_000_000, "ghost": 1_900_000_000_000})
    before = {index: raw.zrange(index, 0, -1, withscores=True) for index in indexes(store)}
    page = store.run(listing.list_chats_page(store.state, limit=10, repair=False))
    assert [c.id for c in page.chats] == list(reversed(ids))
    assert {index: raw.zrange(index, 0, -1, withscores=True) for index in indexes(store)} == before
    store.list_chats_page(limit=10)  # the store's own listing repairs
    assert raw.zscore(indexes(store)[0], "ghost") is None
