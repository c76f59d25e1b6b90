"""verify_chat: a chat's invariants checked against its records, and the derived keys rebuilt."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack
import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.verify import chat as verify
from ctxstore._core.protocol import Call, Operation
from ctxstore.errors import CtxStoreError
from ctxstore.settings import Limits
from tests.conftest import ENCRYPTED
from tests.support.keyspace import raw_client

Corrupt = Callable[[Any, ChatKeys, Any], None]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def build_chat(store: Any) -> None:
    """Chat ``c1`` of alice with every shape the layout has.

    main: m1 <- (generated) <- m3, then m3 edited (``on_existing="fork"``): main-v2 (active)
    holds m1 <- (generated) <- m3' (generated) <- m4; ``side`` forks at m1 and has two messages
    of its own; ``empty`` has none; checkpoints at a chosen and at a generated id.
    """
    store.upsert_chat("c1", "alice")
    first = store.append(
        "c1",
        "main",
        [NewMessage(user("a"), id="m1"), bot("b"), NewMessage(user("c"), id="m3")],
        expected_head=None,
    )
    store.append(
        "c1",
        "main",
        [NewMessage(user("c, edited"), id="m3"), NewMessage(bot("d"), id="m4")],
        expected_head=first.head_message_id,
        on_existing="fork",
    )
    side = store.create_branch("c1", "m1", name="side", activate=False)
    store.append("c1", "side", [bot("e"), user("f")], expected_head=side.head_message_id)
    store.create_branch("c1", None, name="empty", activate=False)
    store.upsert_checkpoint("c1", "start", "m1")
    store.upsert_checkpoint("c1", "answer", first.message_ids[1])


@pytest.fixture
def chat(store: Any) -> str:
    build_chat(store)
    return "c1"


def corrupt(backend: str, store: Any, change: Corrupt) -> None:
    client = raw_client(backend)
    try:
        change(client, store.state.keyspace.chat("c1"), store.state.keyspace)
    finally:
        client.close()


def log_of(backend: str, store: Any) -> list[bytes]:
    client = raw_client(backend)
    try:
        return list(client.lrange(store.state.keyspace.chat("c1").key("log"), 0, -1))
    finally:
        client.close()


def chains(url: str, namespace: str) -> dict[str, list[ctxstore.StoredMessage]]:
    """Every branch's chain, read by a store with no cache (so from the keys as they are)."""
    with ctxstore.connect(url, namespace=namespace, cache_bytes=0).admin() as fresh:
        return {
            branch.name: fresh.load_branch("c1", branch.name).messages
            for branch in fresh.list_branches("c1")
        }


def kinds(report: verify.VerifyReport) -> set[str]:
    return {problem.kind for problem in report.problems}


# --- a sound chat ----------------------------------------------------------------------------


def test_a_sound_chat_verifies_ok(store: Any, chat: str) -> None:
    report = store.verify_chat(chat)
    assert report == verify.VerifyReport(chat, messages=7, branches=4, problems=(), repaired=())
    assert report.ok


def test_repairing_a_sound_chat_changes_nothing(store: Any, chat: str, snap: Any) -> None:
    before = snap()
    report = store.verify_chat(chat, repair=True)
    assert report.ok
    assert report.repaired == ()
    assert snap() == before


def test_a_chat_missing_from_its_owners_record_is_reported_and_recorded(
    store: Any, chat: str, backend: str
) -> None:
    """A chat of a release that kept no owner record (or whose entry was lost): erasure would
    miss it were it not in the listing index too; verify finds it, repair records it."""
    record = store.state.keyspace.owner_record("alice")
    raw = raw_client(backend)
    entry = raw.hget(record, chat)
    assert entry is not None
    raw.hdel(record, chat)
    report = store.verify_chat(chat)
    assert [(p.kind, p.key, p.field) for p in report.problems] == [("owner record", record, chat)]
    repaired = store.verify_chat(chat, repair=True)
    assert repaired.ok
    assert repaired.repaired == (f"owner record {record}",)
    assert raw.hget(record, chat).split(b"\t")[1] == entry.split(b"\t")[1]  # its incarnation
    raw.close()


def test_an_unknown_chat_is_not_found(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError, match="'nope' does not exist"):
        store.verify_chat("nope")


# --- derived keys: detected and rebuilt --------------------------------------------------------


def delete_alias(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.delete(keys.key("alias"))


def wrong_alias(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("alias"), mapping={"m1": 5, "ghost": 1})


def remove_a_run(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.zrem(keys.key("runs"), client.zrange(keys.key("runs"), -1, -1)[0])


def wrong_run_depth(client: Any, keys: ChatKeys, _space: Any) -> None:
    member = client.zrange(keys.key("runs"), -1, -1)[0].decode()
    start, parent, depth = member.split(":")
    client.zrem(keys.key("runs"), member)
    client.zadd(keys.key("runs"), {f"{start}:{parent}:{int(depth) + 1}": int(start)})


def wrong_branch_length(client: Any, keys: ChatKeys, _space: Any) -> None:
    position, head, created, seq, _length = client.hget(keys.key("branch"), "main").split(b"\t")
    client.hset(keys.key("branch"), "main", b"\t".join((position, head, created, seq, b"7")))


def wrong_branch_head_id(client: Any, keys: ChatKeys, _space: Any) -> None:
    position, _head, created, seq, length = client.hget(keys.key("branch"), "side").split(b"\t")
    client.hset(keys.key("branch"), "side", b"\t".join((position, b"m1", created, seq, length)))


def wrong_checkpoint_id(client: Any, keys: ChatKeys, _space: Any) -> None:
    position, _id, created, seq = client.hget(keys.key("checkpoint"), "answer").split(b"\t")
    client.hset(keys.key("checkpoint"), "answer", b"\t".join((position, b"m4", created, seq)))


def wrong_message_count(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("chat"), "message_count", 3)


def wrong_branch_count(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("chat"), "branch_count", 9)


def not_in_the_user_index(client: Any, _keys: ChatKeys, space: Any) -> None:
    client.zrem(space.user_index("alice"), "c1")


def not_in_the_namespace_index(client: Any, _keys: ChatKeys, space: Any) -> None:
    client.zrem(space.all_chats_index, "c1")


def stale_index_score(client: Any, _keys: ChatKeys, space: Any) -> None:
    client.zadd(space.user_index("alice"), {"c1": 5})


DERIVED = [
    (delete_alias, "alias"),
    (wrong_alias, "alias"),
    (remove_a_run, "runs"),
    (wrong_run_depth, "runs"),
    (wrong_branch_length, "branch"),
    (wrong_branch_head_id, "branch"),
    (wrong_checkpoint_id, "checkpoint"),
    (wrong_message_count, "count"),
    (wrong_branch_count, "count"),
    (not_in_the_user_index, "index"),
    (not_in_the_namespace_index, "index"),
    (stale_index_score, "index"),
]


@pytest.mark.parametrize(("change", "kind"), DERIVED, ids=[c.__name__ for c, _ in DERIVED])
def test_a_broken_derived_key_is_found_and_rebuilt(
    store: Any, chat: str, backend: str, namespace: str, change: Corrupt, kind: str
) -> None:
    expected_chains = chains(backend, namespace)
    log = log_of(backend, store)
    corrupt(backend, store, change)

    found = store.verify_chat(chat)
    assert not found.ok
    assert kinds(found) == {kind}
    assert found.repaired == ()

    repaired = store.verify_chat(chat, repair=True)
    assert repaired.ok, repaired.problems
    assert repaired.repaired
    assert store.verify_chat(chat).ok
    assert log_of(backend, store) == log
    assert chains(backend, namespace) == expected_chains
    for name, chain in expected_chains.items():
        assert store.load_branch(chat, name).messages == chain


def test_several_broken_keys_are_rebuilt_at_once(
    store: Any, chat: str, backend: str, namespace: str
) -> None:
    expected_chains = chains(backend, namespace)
    for change in (delete_alias, remove_a_run, wrong_branch_length, wrong_message_count):
        corrupt(backend, store, change)
    corrupt(backend, store, not_in_the_user_index)
    assert kinds(store.verify_chat(chat)) == {"alias", "runs", "branch", "count", "index"}
    report = store.verify_chat(chat, repair=True)
    assert report.ok
    user_index = store.state.keyspace.user_index("alice")
    assert set(report.repaired) == {
        "alias",
        "runs",
        "branch 'main'",
        "message_count",
        f"index {user_index}",
    }
    assert chains(backend, namespace) == expected_chains


def test_a_long_log_is_read_in_chunks(backend: str, namespace: str) -> None:
    with ctxstore.connect(
        backend, namespace=namespace, limits=Limits(read_chunk_messages=3)
    ).admin() as s:
        s.upsert_chat("c1", "alice")
        s.append(
            "c1",
            "main",
            [NewMessage(user(str(i)), id=f"k{i}") for i in range(10)],
            expected_head=None,
        )
        assert s.verify_chat("c1") == verify.VerifyReport("c1", 10, 1, (), ())
        corrupt(backend, s, delete_alias)
        assert kinds(s.verify_chat("c1")) == {"alias"}
        assert s.verify_chat("c1", repair=True).ok
        assert s.get_message("c1", "k9")["message"] == user("9")


# --- the records themselves: reported, never rewritten ----------------------------------------


def record(parent: int, chosen: str | None = None) -> bytes:
    return msgpack.packb([parent, 1_700_000_000_000, user("x"), chosen, "abcdef"])


def parent_is_itself(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 4, record(4))


def parent_is_newer(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 1, record(6))


def parent_is_below_minus_one(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 1, record(-5))


def not_msgpack(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 2, b"\xc1")


def not_a_message_record(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 2, msgpack.packb({"parent": 1}))


def duplicate_chosen_id(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.lset(keys.key("log"), 6, record(0, "m1"))


def reserved_chosen_id(client: Any, keys: ChatKeys, _space: Any) -> None:
    inc = client.hget(keys.key("chat"), "inc").decode()
    client.lset(keys.key("log"), 6, record(0, f"900.{inc}.abcdef"))


RECORDS = [
    (parent_is_itself, "cycle"),
    (parent_is_newer, "cycle"),
    (parent_is_below_minus_one, "parent"),
    (not_msgpack, "record"),
    (not_a_message_record, "record"),
    (duplicate_chosen_id, "id"),
    (reserved_chosen_id, "id"),
]


#: A record whose parent or id is rewritten in place: in a sealed chat its values no longer open
#: there, which verify reports as a broken record before what the rewrite did (tests/crypto).
PLAINTEXT_RECORDS = pytest.mark.skipif(
    ENCRYPTED, reason="a sealed record rewritten in place is a record that does not open"
)


@PLAINTEXT_RECORDS
@pytest.mark.parametrize(("change", "kind"), RECORDS, ids=[c.__name__ for c, _ in RECORDS])
def test_a_broken_record_is_reported_and_left_alone(
    sync_store: ctxstore.Store, backend: str, change: Corrupt, kind: str
) -> None:
    build_chat(sync_store)
    corrupt(backend, sync_store, change)
    corrupt(backend, sync_store, delete_alias)
    corrupt(backend, sync_store, wrong_message_count)
    log = log_of(backend, sync_store)
    found = sync_store.verify_chat("c1")
    assert kind in kinds(found)
    report = sync_store.verify_chat("c1", repair=True)
    assert kind in kinds(report)
    # Nothing derived from broken records is rebuilt; the counter does not depend on them.
    assert report.repaired == ("message_count",)
    assert "alias" in kinds(report)
    assert log_of(backend, sync_store) == log


def checkpoint_past_the_log(client: Any, keys: ChatKeys, _space: Any) -> None:
    _position, message_id, created, seq = client.hget(keys.key("checkpoint"), "start").split(b"\t")
    client.hset(keys.key("checkpoint"), "start", b"\t".join((b"40", message_id, created, seq)))


def head_past_the_log(client: Any, keys: ChatKeys, _space: Any) -> None:
    _position, head, created, seq, length = client.hget(keys.key("branch"), "side").split(b"\t")
    client.hset(keys.key("branch"), "side", b"\t".join((b"40", head, created, seq, length)))


def not_a_branch_record(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("branch"), "side", "garbage")


def no_such_active_branch(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("chat"), "active_branch", "gone")


def no_owner(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hdel(keys.key("chat"), "user_id")


def other_format(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.hset(keys.key("chat"), "fmt", "1")


def token_entries_cut_short(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.set(keys.key("tok"), client.get(keys.key("tok"))[:-1])


def token_total_below_the_parent(client: Any, keys: ChatKeys, _space: Any) -> None:
    entries = bytearray(client.get(keys.key("tok")))
    entries[6:12] = bytes(6)  # position 1: flags 0, a chain total of 0 below position 0's
    client.set(keys.key("tok"), bytes(entries))


def unknown_token_flags(client: Any, keys: ChatKeys, _space: Any) -> None:
    entries = bytearray(client.get(keys.key("tok")))
    entries[0] = 7
    client.set(keys.key("tok"), bytes(entries))


def summary_past_the_log(client: Any, keys: ChatKeys, _space: Any) -> None:
    client.zadd(keys.key("summary"), {b"\x00\x00\x00\x00\x05not a record": 99})


def summary_of_another_message(client: Any, keys: ChatKeys, _space: Any) -> None:
    record = msgpack.packb(
        {"message_id": "someone-else", "created_at": 1, "content": "x", "metadata": {}}
    )
    client.zadd(keys.key("summary"), {bytes(5) + record: 0})


UNDERIVABLE = [
    (token_entries_cut_short, "tokens"),
    (token_total_below_the_parent, "tokens"),
    (unknown_token_flags, "tokens"),
    (summary_past_the_log, "summary"),
    (summary_of_another_message, "summary"),
    (checkpoint_past_the_log, "checkpoint"),
    (head_past_the_log, "branch"),
    (not_a_branch_record, "branch"),
    (no_such_active_branch, "active_branch"),
    (no_owner, "chat"),
    (other_format, "format"),
]


@pytest.mark.parametrize(("change", "kind"), UNDERIVABLE, ids=[c.__name__ for c, _ in UNDERIVABLE])
def test_what_the_records_do_not_determine_is_reported_not_repaired(
    sync_store: ctxstore.Store, backend: str, snap: Any, change: Corrupt, kind: str
) -> None:
    build_chat(sync_store)
    corrupt(backend, sync_store, change)
    before = snap()
    assert kind in kinds(sync_store.verify_chat("c1"))
    report = sync_store.verify_chat("c1", repair=True)
    assert kind in kinds(report)
    assert report.repaired == ()
    assert snap() == before


@PLAINTEXT_RECORDS
def test_problems_name_the_key_and_field(sync_store: ctxstore.Store, backend: str) -> None:
    build_chat(sync_store)
    corrupt(backend, sync_store, parent_is_itself)
    corrupt(backend, sync_store, checkpoint_past_the_log)
    keys = sync_store.state.keyspace.chat("c1")
    problems = set(sync_store.verify_chat("c1").problems)
    assert (
        verify.Problem(
            "cycle",
            keys.key("log"),
            "4",
            "names parent position 4, not older than itself (a cycle)",
        )
        in problems
    )
    assert (
        verify.Problem(
            "checkpoint", keys.key("checkpoint"), "start", "position 40 is not in the log"
        )
        in problems
    )


# --- repairs never erase a concurrent write ---------------------------------------------------


def write_before(
    operation: Operation[Any], when: Callable[[int, Any], bool], write: Callable[[], None]
) -> Operation[Any]:
    """``operation``, with ``write`` run once, just before the first step (its number, from 0,
    and the step) that ``when`` picks is sent."""
    pending = True
    number, step = 0, next(operation)
    while True:
        if pending and when(number, step):
            write()
            pending = False
        number += 1
        try:
            outcome = yield step
        except CtxStoreError as error:
            step = operation.throw(error)
            continue
        try:
            step = operation.send(outcome)
        except StopIteration as stop:
            return stop.value


def write_before_repair(operation: Operation[Any], write: Callable[[], None]) -> Operation[Any]:
    """``operation``, with ``write`` run just before its first repair script is sent."""

    def repairing(_number: int, step: Any) -> bool:
        if isinstance(step, Call) and step.script is not None:
            assert step.script.name == "repair_chat"
            return True
        return False

    return write_before(operation, repairing, write)


def test_a_write_between_read_and_repair_is_kept(
    sync_store: ctxstore.Store, backend: str, namespace: str
) -> None:
    build_chat(sync_store)
    corrupt(backend, sync_store, delete_alias)

    def append() -> None:
        with ctxstore.connect(backend, namespace=namespace).admin() as other:
            head = other.get_branch("c1", "side").head_message_id
            other.append("c1", "side", [NewMessage(user("g"), id="late")], expected_head=head)

    operation = verify.verify_chat(sync_store.state, "c1", repair=True)
    report = sync_store.run(write_before_repair(operation, append))
    assert report.ok
    assert report.messages == 8
    assert "alias" in report.repaired
    assert sync_store.get_message("c1", "late")["message"] == user("g")
    assert sync_store.get_message("c1", "m1")["message"] == user("a")


def test_a_write_between_the_reads_of_a_check_is_no_problem(
    sync_store: ctxstore.Store, backend: str, namespace: str
) -> None:
    """The chat hash and the index scores come in two round trips; a write between them moves
    the chat forward in its indexes, and the check reads again instead of reporting a stale
    index."""
    import time

    build_chat(sync_store)

    def append() -> None:
        time.sleep(0.003)  # a later updated_at, so the index entries move
        with ctxstore.connect(backend, namespace=namespace).admin() as other:
            head = other.get_branch("c1", "main").head_message_id
            other.append("c1", "main", [user("between")], expected_head=head)

    report = sync_store.run(
        write_before(verify.verify_chat(sync_store.state, "c1"), lambda n, _s: n == 1, append)
    )
    assert report.problems == ()
    assert report.ok
