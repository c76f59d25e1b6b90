"""Bad input gets a clear error from the ctxstore tree, and nothing is written."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage

LONG = "x" * 257


@pytest.fixture
def chat(store: Any) -> str:
    store.upsert_chat("c1", "alice")
    store.append(
        "c1", "main", [NewMessage({"role": "user", "content": "a"}, id="m1")], expected_head=None
    )
    return "c1"


@pytest.mark.parametrize(
    ("chat_id", "reason"),
    [
        ("", "empty"),
        (LONG, "256 bytes"),
        ("a{b", "hash tag"),
        ("a}b", "hash tag"),
        ("a\nb", "control"),
        ("a\x00b", "control"),
        (42, "string"),
    ],
)
def test_bad_chat_ids_are_refused(store: Any, snap: Any, chat_id: Any, reason: str) -> None:
    with pytest.raises(ctxstore.errors.InvalidIdError, match=reason):
        store.upsert_chat(chat_id, "alice")
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.get_chain(chat_id, None)
    assert snap() == {}


@pytest.mark.parametrize("user_id", ["", LONG, "u{1}", "u\t1"])
def test_bad_user_ids_are_refused(store: Any, snap: Any, user_id: str) -> None:
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.upsert_chat("c1", user_id)
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.list_chats(user_id=user_id)
    assert snap() == {}


def test_ids_that_look_like_other_keys_stay_in_their_own_chat(store: Any) -> None:
    store.upsert_chat("a:b", "alice")
    store.upsert_chat("a", "alice")
    store.append("a:b", "main", [{"role": "user", "content": "x"}], expected_head=None)
    assert store.get_chain("a", None) == []
    assert store.get_branch("a", "main").message_count == 0
    assert store.get_branch("a:b", "main").message_count == 1


@pytest.mark.parametrize(
    ("call", "args"),
    [
        ("append", ("main", [NewMessage({"role": "user", "content": "x"}, id="")])),
        ("append", ("", [{"role": "user", "content": "x"}])),
        ("append", ("main", [NewMessage({"role": "user", "content": "x"}, id=LONG)])),
        ("append", ("main", [NewMessage({"role": "user", "content": "x"}, id="a\rb")])),
    ],
)
def test_bad_message_ids_and_branch_names(
    store: Any, chat: str, snap: Any, call: str, args: tuple[Any, ...]
) -> None:
    before = snap()
    with pytest.raises(ctxstore.errors.InvalidIdError):
        getattr(store, call)(chat, *args, expected_head="m1")
    assert snap() == before


@pytest.mark.parametrize(
    "payload",
    [
        {"role": "user", "content": {1, 2}},
        {"role": "user", "content": datetime.datetime(2026, 1, 1)},
        {"role": "user", "content": object()},
        {"role": "user", "content": 2**70},
    ],
)
def test_payloads_msgpack_cannot_encode(
    store: Any, chat: str, snap: Any, payload: dict[str, Any]
) -> None:
    before = snap()
    with pytest.raises(ctxstore.errors.UnserializablePayloadError, match=r"messages\[1\]\.content"):
        store.append(chat, "main", [{"role": "user", "content": "ok"}, payload], expected_head="m1")
    assert snap() == before


@pytest.mark.parametrize(
    "payload",
    ["just text", {"content": "no role"}, {"role": ""}, {"role": 3}, {1: "x", "role": "user"}],
)
def test_payloads_that_are_not_chat_messages(
    store: Any, chat: str, snap: Any, payload: Any
) -> None:
    before = snap()
    with pytest.raises(ctxstore.ValidationError):
        store.append(chat, "main", [payload], expected_head="m1")
    assert snap() == before


def test_empty_append_is_refused(store: Any, chat: str) -> None:
    with pytest.raises(ctxstore.ValidationError, match="at least one"):
        store.append(chat, "main", [], expected_head="m1")


def test_unknown_policies_are_refused(store: Any, chat: str) -> None:
    with pytest.raises(ctxstore.ValidationError, match="on_conflict"):
        store.append(
            chat,
            "main",
            [{"role": "user", "content": "x"}],
            expected_head="m1",
            on_conflict="merge",
        )
    with pytest.raises(ctxstore.ValidationError, match="on_existing"):
        store.append(
            chat,
            "main",
            [{"role": "user", "content": "x"}],
            expected_head="m1",
            on_existing="overwrite",
        )


def test_payload_over_the_default_limit(store: Any, chat: str, snap: Any) -> None:
    before = snap()
    big = {"role": "user", "content": "x" * (1 << 20)}
    with pytest.raises(ctxstore.errors.PayloadTooLargeError, match="1048576"):
        store.append(chat, "main", [big], expected_head="m1")
    with pytest.raises(ctxstore.errors.PayloadTooLargeError):
        store.update_chat(chat, metadata={"blob": "x" * (1 << 20)})
    assert snap() == before


def test_payload_limit_is_configurable(backend: str, namespace: str) -> None:
    store = ctxstore.connect(
        backend, namespace=namespace, limits=ctxstore.Limits(max_message_bytes=100)
    ).admin()
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [{"role": "user", "content": "x" * 50}], expected_head=None)
    with pytest.raises(ctxstore.errors.PayloadTooLargeError):
        store.append(
            "c1",
            "main",
            [{"role": "user", "content": "x" * 100}],
            expected_head=None,
            on_conflict="rebase",
        )
    store.close()
    with pytest.raises(ctxstore.errors.ConfigurationError):
        ctxstore.Limits(max_message_bytes=0)


def test_batch_size_is_bounded(backend: str, namespace: str) -> None:
    store = ctxstore.connect(
        backend, namespace=namespace, limits=ctxstore.Limits(max_batch=2)
    ).admin()
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ValidationError, match="at most 2"):
        store.append("c1", "main", [{"role": "user", "content": "x"}] * 3, expected_head=None)
    store.close()


def test_a_record_that_is_not_msgpack_is_a_corruption_error(
    store: Any, chat: str, backend: str
) -> None:
    from tests.support.keyspace import raw_client

    client = raw_client(backend)
    key = store.state.keyspace.chat(chat).key("log")
    client.lset(key, 0, b"\xc1\xff not msgpack")
    client.close()
    store.clear_cache()
    with pytest.raises(ctxstore.errors.CorruptionError) as caught:
        store.get_message(chat, "m1")
    assert key in str(caught.value)
    assert caught.value.details["key"] == key
    assert caught.value.details["field"] == "0"
    with pytest.raises(ctxstore.errors.CorruptionError, match="position 0 "):
        store.get_chain(chat, "m1")


def test_corrupt_metadata_and_branch_records(store: Any, chat: str, backend: str) -> None:
    from tests.support.keyspace import raw_client

    client = raw_client(backend)
    keys = store.state.keyspace.chat(chat)
    client.hset(keys.key("branch"), "broken", b"{not json")
    with pytest.raises(ctxstore.errors.CorruptionError, match="broken"):
        store.list_branches(chat)
    client.hset(keys.key("chat"), "m:bad", b"\xc1")
    client.close()
    with pytest.raises(ctxstore.errors.CorruptionError, match="m:bad"):
        store.get_chat(chat)


@pytest.mark.parametrize(
    ("namespace_value", "prefix"),
    [
        ("a:b", "ctx"),
        ("a*", "ctx"),
        ("a b", "ctx"),
        ("a{b}", "ctx"),
        ("", "ctx"),
        ("ok", "c{x}"),
        ("ok", ""),
    ],
)
def test_bad_namespace_or_prefix(namespace_value: str, prefix: str) -> None:
    with pytest.raises(ctxstore.errors.InvalidIdError):
        ctxstore.connect("memory://", namespace=namespace_value, prefix=prefix)


def test_namespaces_fence_tenants(backend: str) -> None:
    one = ctxstore.connect(backend, namespace="tenant1").admin()
    two = ctxstore.connect(backend, namespace="tenant2").admin()
    try:
        one.upsert_chat("shared-id", "alice")
        with pytest.raises(ctxstore.ChatNotFoundError):
            two.get_chat("shared-id")
        two.upsert_chat("shared-id", "bob")
        assert one.get_chat("shared-id").user_id == "alice"
        assert [c.user_id for c in two.list_chats()] == ["bob"]
    finally:
        one.delete_chat("shared-id")
        two.delete_chat("shared-id")
        one.close()
        two.close()
