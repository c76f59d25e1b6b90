"""Retention: ``ttl=`` on ``connect()`` (the default for new chats), on ``upsert_chat`` and through
``store.expire_chat``. Every write slides the expiry over all of the chat's keys at once; reads do
not; an expired chat vanishes whole, from the listings too."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from typing import Any

import pytest

import ctxstore
from ctxstore._core.keys import CHAT_KEY_NAMES
from tests.conftest import backend_url
from tests.support.facade import SyncOverAsync

#: The keys a chat's retention covers: all but the answer streams' (they expire on their own,
#: sooner: see tests/context/test_streamed_turn.py). The request ring is among them: it never
#: outlives its chat.
RETAINED = tuple(name for name in CHAT_KEY_NAMES if name not in ("stream", "stream_state"))


def command(store: Any, name: str, *args: Any) -> Any:
    """A plain client command through either shell's client."""
    if isinstance(store, SyncOverAsync):
        return store._loop.run(getattr(store.wrapped.client, name)(*args))
    return getattr(store.client, name)(*args)


def expiries(store: Any, chat_id: str) -> dict[str, int]:
    """Milliseconds left per existing retained key (-1: no expiry); absent keys left out."""
    keys = store.state.keyspace.chat(chat_id)
    found = {name: command(store, "pttl", keys.key(name)) for name in RETAINED}
    return {name: left for name, left in found.items() if left != -2}


def every_write(store: Any) -> list[tuple[str, Any]]:
    """Each kind of write, to run in turn on chat c1 (alice)."""
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    first = head.head_message_id
    return [
        (
            "append",
            lambda: store.append(
                "c1",
                "main",
                [ctxstore.NewMessage({"role": "assistant", "content": "b"}, id="chosen")],
                expected_head=first,
            ),
        ),
        ("create_branch", lambda: store.create_branch("c1", first, activate=False)),
        ("set_active_branch", lambda: store.set_active_branch("c1", "main")),
        ("upsert_checkpoint", lambda: store.upsert_checkpoint("c1", "cp", first)),
        ("upsert_checkpoint", lambda: store.upsert_checkpoint("c1", "kept", first)),
        ("branch_from_checkpoint", lambda: store.branch_from_checkpoint("c1", "cp")),
        ("delete_checkpoint", lambda: store.delete_checkpoint("c1", "cp")),
        ("write_summary", lambda: store.write_summary("c1", first, "a summary")),
        ("add_usage", lambda: store.add_usage("c1", {"input_tokens": 3})),
        ("update_chat", lambda: store.update_chat("c1", title="t", metadata={"k": 1})),
        ("upsert_chat", lambda: store.upsert_chat("c1", "alice", {"k": 2})),
        ("verify_chat", lambda: store.verify_chat("c1", repair=True)),
    ]


def test_every_write_gives_every_key_of_the_chat_the_same_expiry(store: Any) -> None:
    store.upsert_chat("c1", "alice", ttl=3600)
    for name, write in every_write(store):
        write()
        left = expiries(store, "c1")
        assert set(left) >= {"chat", "log", "branch"}, name
        assert all(3_500_000 < ms <= 3_600_000 for ms in left.values()), (name, left)
    assert set(expiries(store, "c1")) == set(RETAINED)  # every key was made, every key expires
    assert store.get_chat("c1").ttl == 3600


def test_chats_without_a_ttl_never_expire(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    for _name, write in every_write(store):
        write()
    assert set(expiries(store, "c1").values()) == {-1}
    assert store.get_chat("c1").ttl is None


def test_expire_chat_sets_and_clears_the_retention(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    assert store.expire_chat("c1", timedelta(minutes=5)) == 300
    assert all(290_000 < ms <= 300_000 for ms in expiries(store, "c1").values())
    assert store.get_chat("c1").ttl == 300
    assert store.expire_chat("c1", None) is None
    assert set(expiries(store, "c1").values()) == {-1}
    assert store.get_chat("c1").ttl is None


def test_upsert_with_a_ttl_changes_an_existing_chat(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.upsert_chat("c1", "alice", ttl=120)
    assert store.get_chat("c1").ttl == 120
    assert all(100_000 < ms <= 120_000 for ms in expiries(store, "c1").values())
    store.upsert_chat("c1", "alice")  # no ttl given: unchanged
    assert store.get_chat("c1").ttl == 120
    store.upsert_chat("c1", "alice", ttl=None)
    assert store.get_chat("c1").ttl is None
    assert set(expiries(store, "c1").values()) == {-1}


def test_reads_do_not_slide_the_expiry(store: Any) -> None:
    store.upsert_chat("c1", "alice", ttl=3600)
    head = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    command(store, "pexpire", store.state.keyspace.chat("c1").key("chat"), 1_000_000)
    store.get_chat("c1")
    store.load_branch("c1")
    store.get_chain("c1", head.head_message_id)
    store.get_graph("c1")
    store.list_chats()
    assert expiries(store, "c1")["chat"] <= 1_000_000


@pytest.mark.parametrize("ttl", [0, -1, "60", math.nan, math.inf, 10**12, True])
def test_a_bad_ttl_is_refused_and_nothing_is_written(store: Any, snap: Any, ttl: Any) -> None:
    with pytest.raises(ctxstore.ValidationError):
        store.upsert_chat("c1", "alice", ttl=ttl)
    assert snap() == {}
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(ctxstore.ValidationError):
        store.expire_chat("c1", ttl)
    assert snap() == before


def test_another_users_chat_refuses_expire_chat(store: Any, snap: Any) -> None:
    store.upsert_chat("c1", "alice")
    before = snap()
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.expire_chat("c1", 60, user_id="mallory")
    assert snap() == before


def test_a_store_ttl_is_the_default_for_new_chats(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace, ttl=600).admin()
    store.upsert_chat("plain", "alice")
    engine = ctxstore.ContextEngine(store=store, chat_id="engine", user_id="alice")
    engine.set(ctxstore.user("hi"))
    engine.save()
    store.upsert_chat("forever", "alice", ttl=None)
    assert store.get_chat("plain").ttl == 600
    assert store.get_chat("engine").ttl == 600
    assert store.get_chat("forever").ttl is None
    assert all(0 < ms <= 600_000 for ms in expiries(store, "engine").values())
    store.close()
    with pytest.raises(ctxstore.ValidationError):
        ctxstore.connect(backend, namespace=namespace, ttl=-5)


# --- real expiry on real servers ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["redis", "cluster"])
def test_writes_slide_and_an_expired_chat_vanishes_whole(
    request: pytest.FixtureRequest, kind: str, namespace: str
) -> None:
    store = ctxstore.connect(backend_url(request, kind), namespace=namespace, ttl=1.0).admin()
    store.upsert_chat("keep", "alice", ttl=None)
    store.upsert_chat("c1", "alice")
    first = store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    store.upsert_checkpoint("c1", "cp", first.head_message_id)
    time.sleep(0.6)
    store.append(  # slides the whole chat on to about 1.6 s
        "c1", "main", [{"role": "assistant", "content": "b"}], expected_head=first.head_message_id
    )
    time.sleep(0.6)  # 1.2 s: past the first deadline, before the slid one
    assert [m["message"]["content"] for m in store.load_branch("c1").messages] == ["a", "b"]
    assert store.get_checkpoint("c1", "cp").message_id == first.head_message_id
    time.sleep(0.7)  # 1.9 s: the read at 1.2 s did not slide it
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c1")
    assert expiries(store, "c1") == {}  # every key went
    assert [chat.id for chat in store.list_chats()] == ["keep"]
    assert [chat.id for chat in store.list_chats(user_id="alice")] == ["keep"]
    assert [chat.id for chat in store.list_chats_page().chats] == ["keep"]
    index = store.state.keyspace.all_chats_index
    assert store.client.zscore(index, "c1") is None  # the listing removed the stale entry
    store.close()


def test_an_engine_that_knew_an_expired_chat_gets_chat_replaced(
    request: pytest.FixtureRequest, namespace: str
) -> None:
    store = ctxstore.connect(backend_url(request, "redis"), namespace=namespace, ttl=0.3).admin()
    engine = ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")
    engine.set(ctxstore.user("hi"))
    engine.save()
    time.sleep(0.5)
    engine.set(ctxstore.user("still there?"))
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        engine.save()
    store.close()
