"""Chat metadata is bounded (``Limits.max_metadata_keys``, ``max_metadata_bytes``): a call past
a bound, alone or merged with what the chat holds, is a LimitExceededError and writes nothing:
no chat created, no title changed, no index moved."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore

#: Small bounds keep the tests fast; the defaults are checked on their own below.
SMALL = ctxstore.Limits(max_metadata_keys=4, max_metadata_bytes=200)


@pytest.fixture
def bounded(store: Any) -> Any:
    store.state.settings = store.state.settings.replace(limits=SMALL)
    return store


def field_bytes(key: str, value: Any) -> int:
    """What one metadata key costs against max_metadata_bytes: its field name and value."""
    import msgpack

    return len(f"m:{key}".encode()) + len(msgpack.packb(value, use_bin_type=True))


def keys(count: int, first: int = 0) -> dict[str, int]:
    return {f"k{i}": i for i in range(first, first + count)}


def test_the_bounds_themselves_are_allowed(bounded: Any) -> None:
    bounded.upsert_chat("c1", "alice", keys(4))
    assert len(bounded.get_chat("c1").metadata) == 4
    value = "x" * (200 - len("m:big") - 2)  # a str8 header takes 2 bytes
    assert field_bytes("big", value) == 200
    bounded.upsert_chat("c2", "alice", {"big": value})
    assert bounded.get_chat("c2").metadata == {"big": value}


@pytest.mark.parametrize(
    "metadata",
    [keys(5), {"big": "x" * 300}, {"a": "x" * 100, "b": "y" * 100}],
    ids=["too many keys", "one value too big", "too many bytes together"],
)
def test_creating_a_chat_past_a_bound_creates_nothing(
    bounded: Any, snap: Any, metadata: dict[str, Any]
) -> None:
    bounded.upsert_chat("other", "alice")
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata"):
        bounded.upsert_chat("c1", "alice", metadata)
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata"):
        bounded.open_chat("c1", "alice", metadata, load=True)
    assert snap() == before
    with pytest.raises(ctxstore.ChatNotFoundError):
        bounded.get_chat("c1")
    assert [chat.id for chat in bounded.list_chats()] == ["other"]


def test_an_update_whose_merge_passes_the_key_bound_writes_nothing(bounded: Any, snap: Any) -> None:
    bounded.upsert_chat("c1", "alice", keys(3))
    bounded.upsert_chat("c2", "alice")
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata keys") as caught:
        bounded.update_chat("c1", title="renamed", metadata=keys(2, first=3))  # 3 + 2 keys
    assert caught.value.details["limit"] == 4
    assert snap() == before
    meta = bounded.get_chat("c1")
    assert meta.title is None
    assert meta.metadata == keys(3)
    assert [chat.id for chat in bounded.list_chats()] == ["c2", "c1"]
    # Keys the chat already has count once: replacing them stays within the bound.
    bounded.update_chat("c1", title="renamed", metadata={"k0": "new", "k3": 3})
    assert bounded.get_chat("c1").metadata == {"k0": "new", "k1": 1, "k2": 2, "k3": 3}


def test_an_update_whose_merge_passes_the_byte_bound_writes_nothing(
    bounded: Any, snap: Any
) -> None:
    bounded.upsert_chat("c1", "alice", {"a": "x" * 120})
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata bytes"):
        bounded.update_chat("c1", title="renamed", metadata={"b": "y" * 80})
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata bytes"):
        bounded.upsert_chat("c1", "alice", {"b": "y" * 80})  # open_chat merges too
    assert snap() == before
    assert bounded.get_chat("c1").title is None
    bounded.update_chat("c1", metadata={"a": "x" * 60, "b": "y" * 80})  # a shrinks: it fits
    assert bounded.get_chat("c1").metadata == {"a": "x" * 60, "b": "y" * 80}


def test_a_chat_already_past_the_bounds_takes_no_more_metadata(store: Any, snap: Any) -> None:
    """A chat written before the bounds (or under larger ones) still reads and lists; a merge
    that leaves it past them is refused, one that is not a merge is not affected."""
    store.upsert_chat("c1", "alice", keys(6))
    store.state.settings = store.state.settings.replace(limits=SMALL)
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError):
        store.update_chat("c1", metadata={"k0": 0})
    assert snap() == before
    store.update_chat("c1", title="a title needs no metadata")
    assert len(store.get_chat("c1").metadata) == 6
    assert [chat.id for chat in store.list_chats()] == ["c1"]


@pytest.mark.parametrize("count", [4000, 5000])
def test_thousands_of_keys_are_refused_by_the_default_bounds(
    store: Any, snap: Any, count: int
) -> None:
    store.upsert_chat("c2", "alice")
    before = snap()
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata keys"):
        store.upsert_chat("c1", "alice", keys(count))
    with pytest.raises(ctxstore.errors.LimitExceededError, match="metadata keys"):
        store.update_chat("c2", title="renamed", metadata=keys(count))
    assert snap() == before
    assert store.get_chat("c2").title is None
    store.upsert_chat("c1", "alice", keys(256))
    assert len(store.get_chat("c1").metadata) == 256


def test_the_default_bounds() -> None:
    limits = ctxstore.Limits()
    assert (limits.max_metadata_keys, limits.max_metadata_bytes) == (256, 64 * 1024)


@pytest.mark.parametrize("field", ["max_metadata_keys", "max_metadata_bytes"])
@pytest.mark.parametrize("value", [0, -1, True, 1.5])
def test_bad_bounds_are_configuration_errors(field: str, value: Any) -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match=field):
        ctxstore.Limits(**{field: value})
