"""Cursor pages of the chat listing: complete, in order, stable while chats are updated,
continued after the last entry read (keyset), with cursors that are checked."""

from __future__ import annotations

import base64
import random
from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops import listing


@pytest.fixture
def small_stretches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Index stretches of 3 entries, so a dozen chats take many reads and every boundary."""
    monkeypatch.setattr(listing, "SCAN_CHUNK", 3)


def make_chats(store: Any, count: int, user: str = "alice", first: int = 0) -> list[str]:
    ids = [f"c{i:02d}" for i in range(first, first + count)]
    for chat_id in ids:
        store.upsert_chat(chat_id, user)
    return ids


def page_through(store: Any, limit: int, user_id: str | None = None) -> list[list[str]]:
    pages: list[list[str]] = []
    cursor = None
    while True:
        page = store.list_chats_page(user_id=user_id, cursor=cursor, limit=limit)
        pages.append([chat.id for chat in page.chats])
        assert page.skipped == ()
        if page.next_cursor is None:
            return pages
        cursor = page.next_cursor


@pytest.mark.usefixtures("small_stretches")
@pytest.mark.parametrize("limit", [1, 2, 3, 4, 11, 12, 50])
def test_pages_hold_every_chat_once_in_listing_order(store: Any, limit: int) -> None:
    make_chats(store, 11)
    store.upsert_chat("b0", "bob")
    everything = [chat.id for chat in store.list_chats()]
    assert len(everything) == 12
    pages = page_through(store, limit)
    assert [chat_id for page in pages for chat_id in page] == everything
    assert all(len(page) == limit for page in pages[:-1])
    assert pages[-1], "the page that ends the listing says so: no empty page after it"
    alices = page_through(store, limit, user_id="alice")
    assert [chat_id for page in alices for chat_id in page] == everything[1:]  # b0 is newest


def test_an_empty_listing_is_one_page_without_a_cursor(store: Any) -> None:
    page = store.list_chats_page()
    assert page == ctxstore.models.ChatPage(chats=(), next_cursor=None, skipped=())
    assert store.list_chats_page(user_id="nobody", limit=1).next_cursor is None


def test_a_page_is_a_frozen_dataclass_of_chat_infos(store: Any) -> None:
    make_chats(store, 2)
    page = store.list_chats_page(limit=1)
    assert isinstance(page, ctxstore.models.ChatPage)
    assert isinstance(page.chats, tuple)
    assert all(isinstance(chat, ctxstore.models.ChatInfo) for chat in page.chats)
    assert isinstance(page.next_cursor, str)
    with pytest.raises(AttributeError):
        page.next_cursor = None  # type: ignore[misc]


@pytest.mark.usefixtures("small_stretches")
@pytest.mark.parametrize("seed", range(4))
def test_paging_while_chats_change_lists_every_unchanged_chat_exactly_once(
    store: Any, seed: int
) -> None:
    rng = random.Random(seed)
    ids = make_chats(store, 14)
    changed: set[str] = set()
    listed: list[str] = []
    cursor = None
    extra = 100
    while True:
        page = store.list_chats_page(cursor=cursor, limit=3)
        stamps = [chat.updated_at for chat in page.chats]
        assert stamps == sorted(stamps, reverse=True)
        listed += [chat.id for chat in page.chats]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        for _ in range(2):  # writes between two pages: updates, appends, deletions, new chats
            action, chat_id = rng.choice(["update", "append", "delete", "create"]), rng.choice(ids)
            changed.add(chat_id)
            if action == "update":
                store.update_chat(chat_id, title="moved")
            elif action == "append":
                store.append(
                    chat_id,
                    "main",
                    [{"role": "user", "content": "x"}],
                    expected_head=None,
                    on_conflict="rebase",
                )
            elif action == "delete":
                store.delete_chat(chat_id)
                ids.remove(chat_id)
            else:
                extra += 1
                store.upsert_chat(f"c{extra}", "alice")
        if not ids:
            break
    assert len(listed) == len(set(listed)), f"a chat listed twice: {listed}"
    unchanged = [chat_id for chat_id in make_ids(14) if chat_id not in changed]
    assert sorted(chat_id for chat_id in listed if chat_id in unchanged) == sorted(unchanged)


def make_ids(count: int) -> list[str]:
    return [f"c{i:02d}" for i in range(count)]


@pytest.mark.usefixtures("small_stretches")
@pytest.mark.parametrize("move", ["update", "delete"])
def test_chats_of_the_same_millisecond_page_by_id(store: Any, move: str) -> None:
    """Equal times are ordered by id; a page continues after its last chat even when that chat
    has moved or gone since (the stretch starts where it stood)."""
    store.state.clock = lambda: 1_700_000_000_000
    make_chats(store, 9)
    everything = [chat.id for chat in store.list_chats()]
    assert everything == sorted(everything, reverse=True)
    first = store.list_chats_page(limit=4)
    assert [chat.id for chat in first.chats] == everything[:4]
    store.state.clock = lambda: 1_700_000_000_001
    if move == "update":
        store.update_chat(everything[3], title="moved to the front")
    else:
        store.delete_chat(everything[3])
    rest = page_through_from(store, first.next_cursor, limit=2)
    assert rest == everything[4:]


def page_through_from(store: Any, cursor: str | None, limit: int) -> list[str]:
    listed: list[str] = []
    while cursor is not None:
        page = store.list_chats_page(cursor=cursor, limit=limit)
        listed += [chat.id for chat in page.chats]
        cursor = page.next_cursor
    return listed


def _cursor(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@pytest.mark.parametrize(
    "cursor",
    [
        "",
        "not a cursor!",
        "x" * 2000,
        _cursor(b"1\t1700000000000.0"),  # no member
        _cursor(b"2\t1700000000000.0\tc01"),  # another version
        _cursor(b"1\tnan\tc01"),
        _cursor(b"1\tinf\tc01"),
        _cursor(b"1\tsoon\tc01"),
        _cursor(b"1\t1700000000000.0\tc{01}"),  # no chat id
        _cursor(b"1\t1700000000000.0\t\xff"),
        _cursor(b"1\t1700000000000\tc01"),  # not as a listing writes it
        _cursor(b"1\t1700000000000.0\tc01") + "=",
        12345,
        b"bytes",
    ],
)
def test_a_malformed_cursor_is_a_validation_error(store: Any, cursor: Any) -> None:
    make_chats(store, 2)
    with pytest.raises(ctxstore.ValidationError, match="cursor"):
        store.list_chats_page(cursor=cursor)


def test_a_cursor_the_listing_gave_is_accepted_as_is(store: Any) -> None:
    make_chats(store, 3)
    cursor = store.list_chats_page(limit=1).next_cursor
    assert cursor is not None
    assert cursor.isascii()
    assert "=" not in cursor
    assert len(store.list_chats_page(cursor=cursor, limit=5).chats) == 2


@pytest.mark.parametrize("limit", [0, -1, True, 2**31, 1.5, "3", None])
def test_a_bad_page_size_is_a_validation_error(store: Any, limit: Any) -> None:
    with pytest.raises(ctxstore.ValidationError, match="limit"):
        store.list_chats_page(limit=limit)


def test_a_page_costs_two_round_trips(store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One read of the index stretch, one pipeline of the chat hashes; repairs only when
    something was stale."""
    from ctxstore._core import protocol

    make_chats(store, 6)
    store.list_chats_page(limit=1)  # the server learns the script (NOSCRIPT costs a resend)
    steps: list[int] = []
    original = protocol.Exchange.request

    def request(self: protocol.Exchange[Any]) -> list[protocol.WireCommand]:
        commands = original(self)
        steps.append(len(commands))
        return commands

    monkeypatch.setattr(protocol.Exchange, "request", request)
    page = store.list_chats_page(limit=3)
    assert steps == [1, 4]  # the stretch (one more entry than the page), then 4 hashes
    steps.clear()
    store.list_chats_page(cursor=page.next_cursor, limit=3)
    assert steps == [1, 3]  # the last page: three entries left
