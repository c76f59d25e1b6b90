"""A store with encryption: message payloads and metadata are sealed on the client, bound to
their place; what Redis holds shows none of their text; a sealed value moved, swapped or
replayed does not open; chats in the clear and sealed chats refuse the other kind of store.

On the embedded store, a redis-server and the Cluster, through the sync and the async shell.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import ctxstore
from ctxstore.crypto import LocalKeyProvider
from ctxstore.errors import (
    ChatNotFoundError,
    ConfigurationError,
    CorruptionError,
    KeyUnavailableError,
)
from tests.conftest import Clock
from tests.support.facade import LoopThread
from tests.support.keyspace import raw_client, snapshot
from tests.support.sealing import connect, contents, every_byte, fill, marker, streamed
from tests.support.wire import trace_wire


def test_what_redis_holds_shows_none_of_the_messages_text(
    sealed: Any, backend: str, namespace: str
) -> None:
    marks, ids = fill(sealed)
    raw = every_byte(backend, f"ctx:{namespace}")
    assert b"MARK" not in raw
    assert contents(sealed.load_branch("c1", user_id="alice").messages) == marks[:3]
    assert sealed.get_message("c1", ids[2], user_id="alice")["metadata"] == {"note": marks[3]}
    assert contents(sealed.load_branch("c1", "side", user_id="alice").messages) == [
        marks[0],
        marks[4],
    ]
    summary = sealed.load_branch("c1", user_id="alice", after_summary=True).summary
    assert summary is not None
    assert (summary["content"], summary["metadata"]["note"]) == (marks[5], marks[6])


def test_every_read_opens_the_sealed_records(sealed: Any) -> None:
    marks, ids = fill(sealed)
    graph = sealed.get_graph("c1")
    assert [node.preview for node in graph.messages] == [*marks[:3], marks[4]]
    versions = sealed.message_versions("c1", ids[1], user_id="alice")
    assert [version.message["content"] for version in versions] == [marks[1], marks[4]]
    exported = list(sealed.export_chat("c1"))
    texts = [item["message"]["content"] for item in exported if item["type"] == "message"]
    assert texts == [*marks[:3], marks[4]]
    summaries = [item for item in exported if item["type"] == "summary"]
    assert [item["content"] for item in summaries] == [marks[5]]
    assert sealed.verify_chat("c1").ok


def test_a_sealed_chats_title_and_metadata_read_back_everywhere_and_filter_a_listing(
    sealed: Any, backend: str, namespace: str
) -> None:
    marks, _ids = fill(sealed)
    fill(sealed, "c2", "bob")
    wanted = {"topic": marks[7], "tags": [marks[9]]}
    chat = sealed.get_chat("c1", user_id="alice")
    assert (chat.title, chat.metadata) == (marks[8], wanted)
    assert sealed.open_chat("c1", "alice").chat.metadata == wanted
    listed = sealed.list_chats(user_id="alice")
    assert [(c.id, c.title, c.metadata) for c in listed] == [("c1", marks[8], wanted)]
    assert [c.id for c in sealed.list_chats(metadata=("topic", marks[7]))] == ["c1"]
    assert sealed.list_chats(metadata=("topic", "MARK-none")) == []
    assert {c.user_id for c in sealed.list_chats()} == {"alice", "bob"}  # each owner's key
    header = next(iter(sealed.export_chat("c1")))
    assert (header["title"], header["metadata"]) == (marks[8], wanted)
    assert sealed.get_graph("c1").chat.title == marks[8]
    key = f"ctx:{namespace}:{{c1}}:chat"
    client = raw_client(backend)
    try:
        stored = client.hgetall(key)
    finally:
        client.close()
    assert set(stored) >= {b"title", b"m:topic", b"m:tags"}  # names in the clear, not values
    assert marks[8].encode() not in stored[b"title"]


@pytest.mark.parametrize("move", ["title to another chat", "value to another key"])
def test_a_sealed_title_or_metadata_value_moved_does_not_open(
    sealed: Any, backend: str, namespace: str, move: str
) -> None:
    fill(sealed)
    fill(sealed, "c2")
    client = raw_client(backend)
    one, two = (f"ctx:{namespace}:{{{chat}}}:chat" for chat in ("c1", "c2"))
    try:
        if move == "title to another chat":
            client.hset(two, "title", client.hget(one, "title"))
            field = "title"
        else:
            client.hset(two, "m:topic", client.hget(two, "m:tags"))
            field = "m:topic"
    finally:
        client.close()
    with pytest.raises(CorruptionError) as caught:
        sealed.get_chat("c2", user_id="alice")
    assert (caught.value.details["key"], caught.value.details["field"]) == (two, field)
    assert "MARK" not in str(caught.value)
    assert sealed.get_chat("c1", user_id="alice").title is not None
    page = sealed.list_chats_page(user_id="alice")
    assert ([c.id for c in page.chats], list(page.skipped)) == (["c1"], ["c2"])
    report = sealed.verify_chat("c2")
    assert [(p.key, p.field) for p in report.problems] == [(two, field)]
    assert sealed.verify_chat("c1").ok


def test_an_open_with_metadata_seals_it_for_the_chats_incarnation(
    sealed: Any, backend: str, namespace: str
) -> None:
    """A cold process's open of an existing chat predicts a new chat's incarnation: the
    script names the chat's own and writes nothing; the metadata lands sealed for it."""
    sealed.open_chat("c1", "alice", metadata={"a": 1})
    _forget_process_caches()
    with trace_wire() as wire:
        opened = sealed.open_chat("c1", "alice", metadata={"b": marker()})
    assert sorted(opened.chat.metadata) == ["a", "b"]
    if "cluster" not in backend:  # the owner's keys, the open refused, the open, the index
        assert wire.round_trips == 4
    assert sealed.get_chat("c1", user_id="alice").metadata == opened.chat.metadata


def test_an_open_with_metadata_refused_makes_no_data_key(sealed: Any, snap: Any) -> None:
    sealed.open_chat("c1", "alice")
    before = snap()
    with pytest.raises(ChatNotFoundError):
        sealed.open_chat("c1", "mallory", metadata={"a": 1})
    assert snap() == before


def test_a_cold_process_reads_and_writes_a_sealed_chat(
    sealed: Any, backend: str, namespace: str, clock: Clock, provider: Any, shell: str,
    loop_thread: LoopThread,
) -> None:  # fmt: skip
    """A store that holds none of the chat (its process caches forgotten): it reads the owner's
    keys, and its first append, predicting no place, is sealed again for where it lands."""
    marks, _ids = fill(sealed)
    _forget_process_caches()
    other, close = connect(backend, namespace, clock, provider, shell, loop_thread)
    try:
        assert contents(other.load_branch("c1", user_id="alice").messages) == marks[:3]
        _forget_process_caches()
        more = marker()
        other.append(
            "c1", None, [{"role": "user", "content": more}], expected_head=None,
            on_conflict="rebase", user_id="alice",
        )  # fmt: skip
        assert contents(sealed.load_branch("c1", user_id="alice").messages) == [*marks[:3], more]
    finally:
        close()


def _forget_process_caches() -> None:
    from ctxstore._core.state import REGISTRY

    for caches in REGISTRY.all_caches():
        caches.data_keys = type(caches.data_keys)()
        caches.places = type(caches.places)()
        caches.chains.clear()
        caches.owners = type(caches.owners)()


def test_a_writer_between_costs_one_more_round_trip_and_lands_sealed_for_its_place(
    sealed: Any, backend: str
) -> None:
    sealed.open_chat("c1", "alice")
    first = sealed.append(
        "c1", None, [{"role": "user", "content": "one"}], expected_head=None, user_id="alice"
    )
    sealed.append(
        "c1", None, [{"role": "user", "content": "two"}], expected_head=first.head_message_id,
        user_id="alice",
    )  # fmt: skip
    with trace_wire() as wire:
        rebased = sealed.append(
            "c1", None, [{"role": "user", "content": "three"}],
            expected_head=first.head_message_id, on_conflict="rebase", user_id="alice",
        )  # fmt: skip
    assert rebased.rebased
    if "cluster" not in backend:  # (a Cluster's index touches ride along, and are put back)
        assert wire.round_trips == 2  # refused before any write, then sealed for its parent
    assert contents(sealed.load_branch("c1", user_id="alice").messages) == ["one", "two", "three"]


def test_an_edit_is_sealed_for_the_parent_it_forks_from(sealed: Any) -> None:
    sealed.open_chat("c1", "alice")
    sealed.append(
        "c1", None,
        [{"role": "user", "content": "q", "id": "m1"}, {"role": "assistant", "content": "a",
                                                        "id": "m2"}],
        expected_head=None, user_id="alice",
    )  # fmt: skip
    edited = sealed.append(
        "c1", None, [{"role": "assistant", "content": "a2", "id": "m2"}], expected_head="m2",
        on_existing="fork", user_id="alice",
    )  # fmt: skip
    assert edited.created_branches
    assert contents(sealed.load_branch("c1", user_id="alice").messages) == ["q", "a2"]
    assert sealed.verify_chat("c1").ok


def log_key(namespace: str, chat_id: str) -> str:
    return f"ctx:{namespace}:{{{chat_id}}}:log"


@pytest.mark.parametrize("move", ["to another position", "swapped", "into another chat"])
def test_a_sealed_record_moved_from_its_place_does_not_open(
    sealed: Any, backend: str, namespace: str, move: str
) -> None:
    _marks, _ids = fill(sealed)
    client = raw_client(backend)
    key = log_key(namespace, "c1")
    try:
        records = client.lrange(key, 0, -1)
        if move == "to another position":
            client.lset(key, 2, records[1])
            broken = 2
        elif move == "swapped":
            client.lset(key, 1, records[2])
            client.lset(key, 2, records[1])
            broken = 1
        else:
            fill(sealed, "c2")
            client.lset(log_key(namespace, "c2"), 1, records[1])
            key, broken = log_key(namespace, "c2"), 1
    finally:
        client.close()
    chat_id = "c2" if move == "into another chat" else "c1"
    with pytest.raises(CorruptionError) as raised:
        sealed.load_branch(chat_id, user_id="alice")
    assert raised.value.details["key"] == key
    assert raised.value.details["field"] == str(broken)
    assert "does not open where it stands" in str(raised.value)
    assert "MARK" not in str(raised.value)
    assert not sealed.verify_chat(chat_id).ok


def test_an_old_record_replayed_into_a_recreated_chat_does_not_open(
    sealed: Any, backend: str, namespace: str
) -> None:
    fill(sealed)
    client = raw_client(backend)
    key = log_key(namespace, "c1")
    try:
        old = client.lrange(key, 0, -1)
        sealed.delete_chat("c1")
        sealed.open_chat("c1", "alice")
        sealed.append(
            "c1", None, [{"role": "user", "content": "new"}], expected_head=None, user_id="alice"
        )
        client.lset(key, 0, old[0])
    finally:
        client.close()
    with pytest.raises(CorruptionError) as raised:
        sealed.load_branch("c1", user_id="alice")
    assert raised.value.details["field"] == "0"


def test_another_users_record_does_not_open_in_a_chat(
    sealed: Any, backend: str, namespace: str
) -> None:
    fill(sealed, "c1", "alice")
    fill(sealed, "c2", "bob")
    client = raw_client(backend)
    try:
        client.lset(log_key(namespace, "c2"), 0, client.lindex(log_key(namespace, "c1"), 0))
    finally:
        client.close()
    with pytest.raises(CorruptionError) as raised:
        sealed.load_branch("c2", user_id="bob")
    assert "not a data key of the chat's owner" in str(raised.value)


def test_a_chat_in_the_clear_is_refused_by_a_store_with_encryption(
    sealed: Any, plain: Any, snap: Any
) -> None:
    plain.open_chat("c1", "alice")
    head = plain.append(
        "c1", None, [{"role": "user", "content": "clear"}], expected_head=None, user_id="alice"
    ).head_message_id
    before = snap()
    with pytest.raises(CorruptionError) as read:
        sealed.load_branch("c1", user_id="alice")
    assert "not sealed" in str(read.value)
    with pytest.raises(CorruptionError) as written:
        sealed.append(
            "c1", None, [{"role": "user", "content": "x"}], expected_head=head, user_id="alice"
        )
    assert "written without encryption" in str(written.value)
    assert written.value.details["key"].endswith(":chat")
    assert snap() == before


def test_a_sealed_chat_is_refused_by_a_store_without_encryption(
    sealed: Any, plain: Any, snap: Any
) -> None:
    _marks, ids = fill(sealed)
    before = snap()
    for call in (
        lambda: plain.load_branch("c1", user_id="alice"),
        lambda: plain.get_message("c1", ids[1], user_id="alice"),
        lambda: plain.append(
            "c1", None, [{"role": "user", "content": "x"}], expected_head=ids[-1],
            user_id="alice",
        ),
    ):  # fmt: skip
        with pytest.raises(ConfigurationError, match="encryption"):
            call()
    assert snap() == before


def test_records_sealed_before_a_new_key_encryption_key_still_open(
    backend: str, namespace: str, clock: Clock, shell: str, loop_thread: LoopThread
) -> None:
    provider = LocalKeyProvider.from_keys({"kek-1": os.urandom(32)}, current="kek-1")
    store, close = connect(backend, namespace, clock, provider, shell, loop_thread)
    try:
        fill(store, "c1", "alice")
        provider.add_key()
        fill(store, "c2", "bob")
        _forget_process_caches()
        assert len(store.load_branch("c1", user_id="alice").messages) == 3
        assert len(store.load_branch("c2", user_id="bob").messages) == 3
    finally:
        close()


def test_erasing_a_user_destroys_the_key_every_copy_of_their_records_needs(
    sealed: Any, backend: str, namespace: str
) -> None:
    """A copy taken before the erasure (every key, as a backup holds it) put back after it:
    the erased user's records never open again; the other user's still do."""
    fill(sealed, "c1", "alice")
    bob_marks, _ = fill(sealed, "c2", "bob")
    client = raw_client(backend)
    try:
        backup = {key: client.dump(key) for key in snapshot(backend, f"ctx:{namespace}")}
        receipt = sealed.erase_user("alice")
        assert receipt.removed["data keys"] == 1
        assert any("no longer open" in place for place in receipt.unreachable) or (
            backend.startswith("memory")
        )
        for key, dumped in backup.items():
            client.restore(key, 0, dumped, replace=True)
    finally:
        client.close()
    _forget_process_caches()
    with pytest.raises(KeyUnavailableError) as raised:
        sealed.load_branch("c1", user_id="alice")
    assert raised.value.details["subject"] == "alice"
    assert raised.value.details["key_id"]
    assert contents(sealed.load_branch("c2", user_id="bob").messages) == bob_marks[:3]


def test_an_append_refused_leaves_no_trace_not_even_a_data_key(sealed: Any, snap: Any) -> None:
    fill(sealed, "c1", "alice")
    before = snap()
    with pytest.raises(ChatNotFoundError):
        sealed.append("nope", None, [{"role": "user", "content": "x"}], expected_head=None)
    with pytest.raises(ChatNotFoundError):  # bob, who has no data key, and alice's chat
        sealed.append(
            "c1", None, [{"role": "user", "content": "x"}], expected_head=None, user_id="bob"
        )
    assert snap() == before


def test_a_chat_level_write_refused_makes_no_data_key(sealed: Any, plain: Any, snap: Any) -> None:
    """A summary, a title and a stream piece for a chat in the clear whose owner has no data
    key, and for another user's chat: refused, and no key is made for the owner."""
    from ctxstore._core.ops import streams as answer_stream

    plain.open_chat("c1", "carol")
    head = plain.append(
        "c1", None, [{"role": "user", "content": "clear"}], expected_head=None, user_id="carol"
    ).head_message_id
    stream_id = plain.run(
        answer_stream.begin_stream(plain.state, "c1", "main", writer_ttl_ms=60_000)
    )
    before = snap()
    writes = [
        lambda: sealed.write_summary("c1", head, "a summary", user_id="carol"),
        lambda: sealed.update_chat("c1", title="a title", user_id="carol"),
        lambda: sealed.run(
            answer_stream.write_stream(
                sealed.state, "c1", stream_id, 1, "piece", writer_ttl_ms=60_000, user_id="carol"
            )
        ),
    ]
    for write in writes:
        with pytest.raises(CorruptionError, match="written without encryption"):
            write()
    with pytest.raises(ChatNotFoundError):  # dave, who has no data key, and carol's chat
        sealed.write_summary("c1", head, "a summary", user_id="dave")
    assert snap() == before


def test_a_sealed_chat_whose_owner_has_no_key_yet_gets_one_with_its_first_append(
    sealed: Any, backend: str, namespace: str
) -> None:
    """An open that created the chat and stopped before making the owner's key: the first
    append asks the script where its records land (sealing nothing it keeps), then makes it."""
    sealed.open_chat("c1", "alice")
    client = raw_client(backend)
    try:
        client.delete(f"ctx:{namespace}:dkey:{{alice}}")
    finally:
        client.close()
    _forget_process_caches()
    sealed.append("c1", None, [{"role": "user", "content": "first"}], expected_head=None)
    assert contents(sealed.load_branch("c1", user_id="alice").messages) == ["first"]


def test_an_import_by_a_store_with_encryption_is_sealed(
    sealed: Any, backend: str, namespace: str
) -> None:
    """An export is plaintext for its caller; imported again, the chat is sealed for its new
    incarnation, and nothing of it is in the clear."""
    marks, _ids = fill(sealed)
    records = list(sealed.export_chat("c1"))
    sealed.delete_chat("c1")
    sealed.import_chat(records, chat_id="c9")
    assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")
    assert contents(sealed.load_branch("c9", user_id="alice").messages) == marks[:3]
    assert sealed.verify_chat("c9").ok


def test_rotate_keys_rewraps_every_data_key_and_changes_no_record(
    backend: str, namespace: str, clock: Clock, shell: str, loop_thread: LoopThread,
    tmp_path: Any,
) -> None:  # fmt: skip
    """After a new key-encryption key and a rotation, the old key can go: every data key is
    wrapped under the new one, and no record changed."""
    provider = LocalKeyProvider(tmp_path / "keys")
    old = provider.current_key_id
    store, close = connect(backend, namespace, clock, provider, shell, loop_thread)
    try:
        alice, _ = fill(store, "c1", "alice")
        bob, _ = fill(store, "c2", "bob")
        logs = _logs(backend, namespace)
        new = provider.add_key()
        rotation = store.rotate_keys()
        assert (rotation.key_id, rotation.users, rotation.data_keys) == (new, 2, 2)
        assert _logs(backend, namespace) == logs
        (tmp_path / "keys" / "keys" / old).unlink()  # the old key-encryption key is gone
        _forget_process_caches()
        assert contents(store.load_branch("c1", user_id="alice").messages) == alice[:3]
        assert contents(store.load_branch("c2", user_id="bob").messages) == bob[:3]
        assert store.rotate_keys().data_keys == 2  # idempotent: wrapped again, same keys
    finally:
        close()


def _logs(backend: str, namespace: str) -> dict[str, list[bytes]]:
    client = raw_client(backend)
    try:
        return {chat: client.lrange(log_key(namespace, chat), 0, -1) for chat in ("c1", "c2")}
    finally:
        client.close()


def test_rotate_keys_needs_encryption(plain: Any) -> None:
    with pytest.raises(ConfigurationError, match="encryption"):
        plain.rotate_keys()


def test_a_summary_moved_to_another_chat_does_not_open(
    sealed: Any, backend: str, namespace: str
) -> None:
    fill(sealed, "c1")
    fill(sealed, "c2")
    client = raw_client(backend)
    try:
        key = f"ctx:{namespace}:{{c1}}:summary"
        ((member, score),) = client.zrange(key, 0, -1, withscores=True)
        other = f"ctx:{namespace}:{{c2}}:summary"
        client.delete(other)
        client.zadd(other, {member: score})
    finally:
        client.close()
    with pytest.raises(CorruptionError, match="does not open where it stands"):
        sealed.load_branch("c2", user_id="alice", after_summary=True)
    assert not sealed.verify_chat("c2").ok


def test_a_summary_in_the_clear_is_refused_in_a_sealed_chat_and_the_other_way(
    sealed: Any, plain: Any, snap: Any
) -> None:
    _marks, ids = fill(sealed, "c1")
    plain.open_chat("c2", "alice")
    head = plain.append(
        "c2", None, [{"role": "user", "content": "q"}], expected_head=None, user_id="alice"
    ).head_message_id
    before = snap()
    with pytest.raises(ConfigurationError, match="encryption"):
        plain.write_summary("c1", ids[2], "a summary in the clear", user_id="alice")
    with pytest.raises(CorruptionError, match="written without encryption"):
        sealed.write_summary("c2", head, "a sealed summary", user_id="alice")
    assert snap() == before


def test_an_answer_streams_pieces_are_sealed_and_bound_to_their_stream_and_write(
    sealed: Any, plain: Any, backend: str, namespace: str
) -> None:
    fill(sealed)
    pieces = [marker(), "", marker()]
    stream_id = streamed(sealed, "c1", pieces)
    assert b"MARK" not in every_byte(backend, f"ctx:{namespace}")
    assert [piece.text for piece in sealed.read_stream("c1", stream_id)] == [pieces[0], pieces[2]]
    with pytest.raises(ConfigurationError, match="encryption"):
        list(plain.read_stream("c1", stream_id))
    client = raw_client(backend)
    try:  # the two pieces swapped: each names its write, now out of their order
        key = f"ctx:{namespace}:{{c1}}:stream"
        entries = client.xrange(key)
        texts = [index for index, (_entry, fields) in enumerate(entries) if b"d" in fields]
        one, two = texts[:2]
        swapped = [dict(fields) for _entry, fields in entries]
        swapped[one][b"d"], swapped[two][b"d"] = swapped[two][b"d"], swapped[one][b"d"]
        ttl = client.pttl(key)
        client.delete(key)
        for (entry, _fields), fields in zip(entries, swapped, strict=True):
            client.xadd(key, fields, id=entry)
        client.pexpire(key, ttl)
    finally:
        client.close()
    with pytest.raises(CorruptionError, match="a piece of write 1 after write 3"):
        list(sealed.read_stream("c1", stream_id))


def test_a_snapshot_taken_before_an_erasure_never_opens_the_erased_users_records(
    redis_server: Any, namespace: str, tmp_path: Any
) -> None:
    """``BGSAVE`` before ``erase_user``, that RDB file loaded into a fresh redis-server after
    it: with the same provider, nothing of the erased user opens; the other user's does."""
    import shutil
    import time as clock_time

    from tests.support import servers

    provider = LocalKeyProvider(tmp_path / "keys")
    with ctxstore.connect(redis_server.url, namespace=namespace, encryption=provider) as opened:
        store = opened.admin()
        fill(store, "c1", "alice")
        bob, _ = fill(store, "c2", "bob")
        client = raw_client(redis_server.url)
        try:
            # Done when no change is left unsaved (LASTSAVE counts seconds: a save in the
            # second the server started would leave it as it was).
            client.bgsave()
            deadline = clock_time.monotonic() + 30
            while not _saved(client.info("persistence")):
                assert clock_time.monotonic() < deadline, "BGSAVE did not finish"
                clock_time.sleep(0.05)
            found = client.config_get("dir")["dir"], client.config_get("dbfilename")["dbfilename"]
        finally:
            client.close()
        backup = tmp_path / "backup"
        backup.mkdir()
        shutil.copy(os.path.join(*found), backup / "dump.rdb")
        store.erase_user("alice")
    _forget_process_caches()
    with (
        servers.standalone(backup) as fresh,
        ctxstore.connect(fresh.url, namespace=namespace, encryption=provider) as restored,
    ):
        admin = restored.admin()
        copy = raw_client(fresh.url)
        try:  # the copy holds the chat...
            assert copy.hget(f"ctx:{namespace}:{{c1}}:chat", "user_id") == b"alice"
        finally:
            copy.close()
        for read in (  # ...which nothing opens: its messages, its title
            lambda: admin.load_branch("c1", user_id="alice"),
            lambda: admin.get_chat("c1"),
        ):
            with pytest.raises(KeyUnavailableError) as raised:
                read()
            assert raised.value.details["subject"] == "alice"
        assert contents(admin.load_branch("c2", user_id="bob").messages) == bob[:3]


def _saved(persistence: dict[str, Any]) -> bool:
    """Whether a background save finished with every change in its file."""
    return (
        persistence["rdb_bgsave_in_progress"] == 0
        and persistence["rdb_changes_since_last_save"] == 0
        and persistence["rdb_last_bgsave_status"] == "ok"
    )
