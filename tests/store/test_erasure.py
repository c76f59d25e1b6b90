"""``admin.erase_user``: every chat of a user, and everything derived from them, gone from the
whole keyspace; the other users' data untouched, byte for byte; a run cut off midway finished by
the next; the owner record that makes it complete whatever the listing index lost. On the
embedded store, a redis-server and a Cluster, through the sync and the async shell."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from redis.cluster import RedisCluster

import ctxstore
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.ops import turns
from ctxstore.errors import BackendUnavailableError, ScopeError
from ctxstore.models import CompactionTrigger
from tests.support import servers
from tests.support.facade import SyncOverAsync
from tests.support.keyspace import raw_client, snapshot_of
from tests.support.proxy import ReplyDroppingProxy

TRIGGER = CompactionTrigger(soft_tokens=1, min_recent_messages=1)


class Secrets:
    """Random fragments of one user's data: every one must vanish with an erasure."""

    def __init__(self, label: str) -> None:
        self.user = f"{label}-{secrets.token_hex(4)}"
        self.tokens: list[str] = [self.user]

    def new(self, kind: str) -> str:
        token = f"{kind}{secrets.token_hex(6)}"
        self.tokens.append(token)
        return token


def fill(store: Any, owner: Secrets, chats: int = 2) -> list[str]:
    """Chats of ``owner`` holding everything an erasure must reach: messages, metadata, a title,
    branches, checkpoints, a summary, a streamed answer, a turn lease, compaction jobs, a dead
    letter and a worker's last-job record."""
    state = store.state
    raw = raw_client(store.url)
    made = []
    for _ in range(chats):
        chat_id = owner.new("chat")
        made.append(chat_id)
        store.upsert_chat(chat_id, owner.user, {"note": owner.new("meta")})
        head = None
        ids = []
        for _message in range(5):
            result = store.append(
                chat_id,
                None,
                [{"role": "user", "content": f"my secret is {owner.new('text')}"}],
                expected_head=head,
                compaction=TRIGGER,
            )
            head = result.head_message_id
            ids.append(head)
        store.update_chat(chat_id, title=f"about {owner.new('title')}")
        store.create_branch(chat_id, ids[1], name=owner.new("branch"), activate=False)
        store.upsert_checkpoint(chat_id, owner.new("checkpoint"), ids[2])
        store.write_summary(chat_id, ids[2], f"they said {owner.new('summary')}")
        stream_id = store.run(
            answer_stream.begin_stream(state, chat_id, "main", writer_ttl_ms=60_000)
        )
        store.run(
            answer_stream.write_stream(
                state, chat_id, stream_id, 1, owner.new("answer"), writer_ttl_ms=60_000
            )
        )
        store.run(turns.take_turn(state, chat_id, owner.new("turn"), 60_000))
        raw.xadd(
            state.keyspace.dead_letters,
            {"chat": chat_id, "branch": "main", "error": f"boom {owner.new('error')}"},
        )
        raw.hset(state.keyspace.worker_last_jobs, owner.new("worker"), f"1\tsummarized\t{chat_id}")
    raw.close()
    return made


def plain_dump(url: str, base: str) -> dict[bytes, list[bytes]]:
    """Every key under ``<base>:`` with every byte string it holds, read by type (no DUMP: a
    serialized value may be compressed, and a fragment must be found wherever it is)."""
    client = raw_client(url)
    try:
        pattern = f"{base}:*"
        keys = list(
            client.scan_iter(match=pattern, target_nodes=RedisCluster.PRIMARIES)
            if isinstance(client, RedisCluster)
            else client.scan_iter(match=pattern)
        )
        dump: dict[bytes, list[bytes]] = {}
        for key in keys:
            kind = client.type(key)
            kind = kind.decode() if isinstance(kind, bytes) else kind
            values: list[bytes] = []
            if kind == "string":
                values = [client.get(key) or b""]
            elif kind == "list":
                values = list(client.lrange(key, 0, -1))
            elif kind == "hash":
                values = [part for pair in client.hgetall(key).items() for part in pair]
            elif kind == "zset":
                values = [member for member, _score in client.zrange(key, 0, -1, withscores=True)]
            elif kind == "set":
                values = list(client.smembers(key))
            elif kind == "stream":
                for entry_id, fields in client.xrange(key):
                    values.append(entry_id)
                    values += [part for pair in fields.items() for part in pair]
            else:
                raise AssertionError(f"{key!r} is a {kind}")
            dump[key] = values
        return dump
    finally:
        client.close()


def leaks(dump: dict[bytes, list[bytes]], owner: Secrets) -> list[tuple[bytes, str]]:
    """Every (key, fragment) where one of ``owner``'s fragments is still found."""
    found = []
    for key, values in dump.items():
        for token in owner.tokens:
            needle = token.encode()
            if needle in key or any(needle in value for value in values):
                found.append((key, token))
    return found


def mentioning(dump: dict[bytes, list[bytes]], owner: Secrets) -> dict[bytes, list[bytes]]:
    """The parts of ``dump`` that hold one of ``owner``'s fragments (whole keys of its chats,
    and the entries of shared keys: listing indexes, job streams, records)."""
    needles = [token.encode() for token in owner.tokens]
    kept: dict[bytes, list[bytes]] = {}
    for key, values in dump.items():
        if any(needle in key for needle in needles):
            kept[key] = values
        else:
            hits = [value for value in values if any(needle in value for needle in needles)]
            if hits:
                kept[key] = sorted(hits)
    return kept


@pytest.fixture
def url_store(store: Any, backend: str) -> Any:
    store.url = backend
    return store


def test_an_erased_user_leaves_nothing_and_the_other_users_data_is_untouched(
    url_store: Any, namespace: str
) -> None:
    store = url_store
    gone, kept = Secrets("erased"), Secrets("kept")
    gone_chats = fill(store, gone)
    fill(store, kept)
    base = f"ctx:{namespace}"
    before = plain_dump(store.url, base)
    assert leaks(before, gone)  # the fixture wrote what it meant to
    client = raw_client(store.url)
    kept_keys = {key for key in before if any(t.encode() in key for t in kept.tokens)}
    kept_bytes = {key: dump for key, dump in snapshot_of(client, base).items() if key in kept_keys}

    progress: list[ctxstore.models.ErasureProgress] = []
    receipt = store.erase_user(gone.user, progress=progress.append)

    after = plain_dump(store.url, base)
    assert leaks(after, gone) == []
    assert mentioning(after, kept) == mentioning(before, kept)
    assert {key: value for key, value in snapshot_of(client, base).items() if key in kept_keys} == (
        kept_bytes
    )
    client.close()
    assert sorted(receipt.chat_ids) == sorted(gone_chats)
    assert receipt.user_id == gone.user
    removed = receipt.removed
    assert removed["chats"] == 2
    assert removed["messages"] == 10
    assert removed["answer stream entries"] >= 2
    assert removed["index entries"] == 4  # two chats, in two indexes each
    assert removed["owner record entries"] == 2
    assert removed["compaction jobs"] >= 2
    assert removed["dead letters"] == 2
    assert removed["worker records"] == 2
    assert receipt.started_at <= receipt.finished_at
    assert any(place.startswith("the LLM provider") for place in receipt.unreachable)
    assert [item.stage for item in progress][-1] == "record"
    assert store.for_user(gone.user).list_chats() == []
    again = store.erase_user(gone.user)
    assert again.chat_ids == ()
    assert again.total == 0
    assert set(again.removed.values()) == {0}


def test_after_an_erasure_a_new_chat_of_that_user_starts_clean(url_store: Any) -> None:
    store = url_store
    gone = Secrets("erased")
    [chat_id] = fill(store, gone, chats=1)
    store.erase_user(gone.user)
    user = store.for_user(gone.user)
    user.upsert_chat(chat_id)
    assert user.load_branch(chat_id).messages == []
    assert user.list_branches(chat_id)[0].name == "main"
    assert user.list_checkpoints(chat_id) == []
    assert [chat.id for chat in user.list_chats()] == [chat_id]
    assert user.get_chat(chat_id).title is None


def test_erasure_finds_a_chat_the_listing_index_lost_and_one_only_the_index_names(
    url_store: Any, namespace: str
) -> None:
    """The record is the truth: a chat missing from the listing (a failover lost the entry) is
    erased; a chat of a release that kept no record (only the index names it) is too."""
    store = url_store
    gone = Secrets("erased")
    unlisted, unrecorded = fill(store, gone, chats=2)
    raw = raw_client(store.url)
    raw.zrem(store.state.keyspace.user_index(gone.user), unlisted)
    raw.hdel(store.state.keyspace.owner_record(gone.user), unrecorded)
    raw.close()
    receipt = store.erase_user(gone.user)
    assert sorted(receipt.chat_ids) == sorted([unlisted, unrecorded])
    assert leaks(plain_dump(store.url, f"ctx:{namespace}"), gone) == []


def test_a_chat_of_the_same_id_another_user_owns_now_is_left_alone(url_store: Any) -> None:
    store = url_store
    gone, other = Secrets("erased"), Secrets("other")
    [chat_id] = fill(store, gone, chats=1)
    store.delete_chat(chat_id)
    store.upsert_chat(chat_id, other.user)
    store.append(chat_id, None, [{"role": "user", "content": "mine"}], expected_head=None)
    raw = raw_client(store.url)
    raw.hset(store.state.keyspace.owner_record(gone.user), chat_id, "1\tstale")
    raw.close()
    receipt = store.erase_user(gone.user)
    assert receipt.chat_ids == ()
    assert [m["message"]["content"] for m in store.load_branch(chat_id).messages] == ["mine"]
    assert [chat.id for chat in store.for_user(other.user).list_chats()] == [chat_id]


def test_erase_user_is_an_operators_call(backend: str, namespace: str) -> None:
    store = ctxstore.connect(backend, namespace=namespace)
    with pytest.raises(ScopeError, match="admin"):
        store.erase_user("alice")
    with pytest.raises(ScopeError, match="admin"):
        store.export_user("alice")
    with pytest.raises(ctxstore.errors.InvalidIdError):
        store.admin().erase_user("bad{id}")
    store.close()


def test_export_user_streams_every_chat_of_the_user_one_after_another(url_store: Any) -> None:
    store = url_store
    owner, other = Secrets("owner"), Secrets("other")
    chats = fill(store, owner)
    fill(store, other, chats=1)
    records = list(store.export_user(owner.user))
    starts = [record for record in records if record["type"] == "chat"]
    assert sorted(record["id"] for record in starts) == sorted(chats)
    assert {record["user_id"] for record in starts} == {owner.user}
    first = [dict(record) for record in store.export_chat(chats[0])]
    second = [dict(record) for record in store.export_chat(chats[1])]
    assert records in ([*first, *second], [*second, *first])
    assert list(store.export_user(Secrets("nobody").user)) == []


# --- an erasure cut off midway ---------------------------------------------------------------


@pytest.fixture
def proxied(
    redis_server: servers.RedisProcess, namespace: str
) -> Iterator[tuple[Any, ReplyDroppingProxy]]:
    with ReplyDroppingProxy("127.0.0.1", redis_server.port) as proxy:
        url = f"redis://127.0.0.1:{proxy.port}/0"
        opened = ctxstore.connect(url, namespace=namespace)
        store = opened.admin()
        store.url = url  # type: ignore[attr-defined]
        yield store, proxy
        opened.close()


@pytest.mark.parametrize("marker", [b"ZREM", b"XRANGE", b"HDEL"])
def test_an_erasure_cut_off_midway_is_finished_by_the_next_run(
    proxied: tuple[Any, ReplyDroppingProxy], namespace: str, marker: bytes
) -> None:
    store, proxy = proxied
    gone, kept = Secrets("erased"), Secrets("kept")
    fill(store, gone)
    fill(store, kept)
    base = f"ctx:{namespace}"
    kept_before = mentioning(plain_dump(store.url, base), kept)
    proxy.drop_next_reply(marker, times=20)  # more than redis-py's retries: the call fails
    with pytest.raises(BackendUnavailableError):
        store.erase_user(gone.user)
    assert proxy.dropped >= 1
    proxy.drop_next_reply(b"-nothing-", times=0)
    second = store.erase_user(gone.user)
    assert len(second.chat_ids) == 2  # still named by the record: it goes last
    assert second.removed["owner record entries"] == 2
    assert leaks(plain_dump(store.url, base), gone) == []
    assert mentioning(plain_dump(store.url, base), kept) == kept_before
    assert store.erase_user(gone.user).total == 0


def test_the_async_shell_erases_as_the_sync_one_does(
    backend: str, namespace: str, loop_thread: Any
) -> None:
    """Both shells drive the one operation; the async one is reached through its own method."""
    async_store = ctxstore.connect_async(backend, namespace=namespace)
    store = SyncOverAsync(async_store.admin(), loop_thread)
    store.upsert_chat("c1", "alice")
    receipt = store.erase_user("alice")
    assert receipt.chat_ids == ("c1",)
    assert isinstance(receipt, ctxstore.models.ErasureReceipt)
    loop_thread.run(async_store.close())
