"""Corrupt data: every store call that reads a malformed value raises a CorruptionError naming
the key (and the field), and a write that reads one writes nothing.

The matrix is generated: each corruption names the key and field it garbles and the
operations that read that field; each test builds one chat, garbles one field with plain
commands, then runs every operation that reads it. A refused call writes nothing, so every
operation of a corruption runs on the same garbled chat, and the whole keyspace is compared
after each write (and after the last read).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any
from unittest import mock

import msgpack
import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.leases import take_lease
from ctxstore._core.protocol import Exchange, Operation, command_call
from ctxstore.models import CompactionTrigger
from tests.support.keyspace import raw_client, snapshot_of

CHAT = "c1"


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def bot(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


@dataclass(frozen=True)
class Chat:
    """The chat every case starts from: main holds m1 (chosen id, position 0) <- g1 <- head
    (generated, positions 1 and 2); ``side`` (not active) starts at m1; checkpoint ``cp`` names
    m1; a summary hangs on m1; one usage counter and one metadata key are set."""

    keys: ChatKeys
    inc: str
    g1: str
    head: str
    created_at: int

    def tag(self, message_id: str) -> str:
        return message_id.rsplit(".", 1)[1]


def build(store: Any) -> Chat:
    store.upsert_chat(CHAT, "alice", metadata={"k": "v"})
    result = store.append(
        CHAT,
        "main",
        [NewMessage(user("a"), id="m1"), bot("b"), user("c")],
        expected_head=None,
    )
    store.create_branch(CHAT, "m1", name="side", activate=False)
    store.upsert_checkpoint(CHAT, "cp", "m1")
    store.write_summary(CHAT, "m1", "the user said a")
    store.add_usage(CHAT, {"input_tokens": 5})
    meta = store.get_chat(CHAT)
    return Chat(
        keys=store.state.keyspace.chat(CHAT),
        inc=meta.incarnation,
        g1=result.message_ids[1],
        head=result.head_message_id,
        created_at=meta.created_at,
    )


# --- operations ------------------------------------------------------------------------------

Run = Callable[[Any, Chat], Any]


@dataclass(frozen=True)
class Op:
    run: Run
    writes: bool


def _append(**kwargs: Any) -> Run:
    def run(store: Any, chat: Chat) -> Any:
        messages = kwargs.get("messages", [user("x")])
        expected = chat.g1 if kwargs.get("on_conflict") == "fork" else chat.head
        return store.append(
            CHAT,
            "main",
            messages,
            expected_head=expected,
            **{name: value for name, value in kwargs.items() if name != "messages"},
        )

    return run


def _resent_append(store: Any, chat: Chat) -> Any:
    """An append whose request id is one the chat remembers (a resend after a lost reply)."""
    with mock.patch("ctxstore._core.ops.append.new_request_id", return_value=RESENT):
        return store.append(CHAT, "main", [user("x")], expected_head=chat.g1)


RESENT = "resent-request"

OPS: dict[str, Op] = {
    # reads
    "get_chat": Op(lambda s, _c: s.get_chat(CHAT), False),
    "open_chat": Op(lambda s, _c: s.open_chat(CHAT, "alice", load=True), False),
    "get_branch": Op(lambda s, _c: s.get_branch(CHAT), False),
    "get_main": Op(lambda s, _c: s.get_branch(CHAT, "main"), False),
    "list_branches": Op(lambda s, _c: s.list_branches(CHAT), False),
    "load_branch": Op(lambda s, _c: s.load_branch(CHAT), False),
    "load_window": Op(lambda s, _c: s.load_branch(CHAT, max_messages=2), False),
    "load_summary": Op(lambda s, _c: s.load_branch(CHAT, after_summary=True), False),
    "branch_size": Op(lambda s, _c: s.branch_size(CHAT), False),
    "get_chain": Op(lambda s, c: s.get_chain(CHAT, c.head), False),
    "get_chain_m1": Op(lambda s, _c: s.get_chain(CHAT, "m1"), False),
    "get_message": Op(lambda s, c: s.get_message(CHAT, c.head), False),
    "get_message_g1": Op(lambda s, c: s.get_message(CHAT, c.g1), False),
    "get_message_m1": Op(lambda s, _c: s.get_message(CHAT, "m1"), False),
    "get_checkpoint": Op(lambda s, _c: s.get_checkpoint(CHAT, "cp"), False),
    "list_checkpoints": Op(lambda s, _c: s.list_checkpoints(CHAT), False),
    "get_graph": Op(lambda s, _c: s.get_graph(CHAT), False),
    # writes
    "update_chat": Op(lambda s, _c: s.update_chat(CHAT, metadata={"k2": 2}), True),
    "upsert_chat": Op(lambda s, _c: s.upsert_chat(CHAT, "alice", metadata={"k2": 2}), True),
    "add_usage": Op(lambda s, _c: s.add_usage(CHAT, {"input_tokens": 1}), True),
    "append": Op(_append(), True),
    "append_fork": Op(_append(on_conflict="fork"), True),
    "append_edit": Op(_append(messages=[NewMessage(user("x"), id="m1")], on_existing="fork"), True),
    "append_compaction": Op(_append(compaction=CompactionTrigger(soft_tokens=1)), True),
    "append_resent": Op(_resent_append, True),
    "create_branch": Op(lambda s, c: s.create_branch(CHAT, c.head), True),
    "create_branch_m1": Op(lambda s, _c: s.create_branch(CHAT, "m1"), True),
    "restore": Op(lambda s, _c: s.branch_from_checkpoint(CHAT, "cp"), True),
    "activate": Op(lambda s, _c: s.set_active_branch(CHAT, "main"), True),
    "checkpoint": Op(lambda s, c: s.upsert_checkpoint(CHAT, "cp2", c.head), True),
    "checkpoint_m1": Op(lambda s, _c: s.upsert_checkpoint(CHAT, "cp2", "m1"), True),
    "delete_checkpoint": Op(lambda s, _c: s.delete_checkpoint(CHAT, "cp"), True),
    "summarize": Op(lambda s, c: s.write_summary(CHAT, c.head, "s", job="j"), True),
    "summarize_m1": Op(lambda s, _c: s.write_summary(CHAT, "m1", "s", job="j"), True),
    "take_lease": Op(lambda s, _c: s.run(take_lease(s.state, CHAT, "token", 60_000)), True),
    "delete_chat": Op(lambda s, _c: s.delete_chat(CHAT), True),
}

#: Every operation on the chat (all of them read the chat's identity: owner, format,
#: incarnation), delete_chat excepted (it reads the owner only).
CHAT_OPS = tuple(name for name in OPS if name != "delete_chat")
#: Listings: a corrupt chat is skipped and named, not an error (its own test).
LISTING = "list_chats"
#: Operations that parse the whole chat hash into a chat model.
CHAT_HASH_OPS = ("get_chat", LISTING, "open_chat", "get_graph", "update_chat", "upsert_chat")
#: Writes that carry a request id: they read the chat's slot of its request ring.
REQUEST_OPS = ("append", "add_usage", "create_branch", "restore", "checkpoint", "delete_checkpoint")
#: Operations that follow main's head (main is the active branch) to its message.
HEAD_OPS = (
    "open_chat",
    "load_branch",
    "load_window",
    "load_summary",
    "branch_size",
    "get_graph",
    "append",
    "append_fork",
    "append_edit",
    "append_compaction",
)
#: Operations that read main's branch record.
BRANCH_OPS = (
    *HEAD_OPS,
    "get_branch",
    "get_main",
    "list_branches",
    "activate",
    "upsert_chat",
)
#: Operations that find m1 through the alias hash.
ALIAS_OPS = (
    "get_message_m1",
    "get_chain_m1",
    "create_branch_m1",
    "checkpoint_m1",
    "summarize_m1",
    "append_edit",
)
#: Operations that walk the runs of main's chain.
RUNS_OPS = (
    "get_chain",
    "get_chain_m1",
    "load_branch",
    "load_window",
    "load_summary",
    "branch_size",
    "open_chat",
    "get_message",
    "append_fork",
    "append_edit",
    "create_branch",
    "create_branch_m1",
    "restore",
    "summarize",
)
#: Operations that decode the records of main's chain.
RECORD_OPS = (
    "get_chain",
    "load_branch",
    "load_window",
    "load_summary",
    "open_chat",
    "get_graph",
    "get_message",
)
#: Operations that create a branch (they count it in the chat hash).
FORK_OPS = ("create_branch", "create_branch_m1", "restore", "append_fork", "append_edit")
APPENDS = ("append", "append_fork", "append_edit", "append_compaction")


# --- corruptions -----------------------------------------------------------------------------

Apply = Callable[[Any, Chat], None]


@dataclass(frozen=True)
class Case:
    name: str
    #: The key (its name within the chat) and field an error must name (None: no field).
    key: str
    field: str | None
    apply: Apply
    ops: tuple[str, ...]
    #: Whether verify_chat reads it (the resend memory is not chat data: verify leaves it be).
    verified: bool = True


def hset(field: bytes | str, value: bytes | str, key: str = "chat") -> Apply:
    return lambda client, chat: client.hset(chat.keys.key(key), field, value)


def hdel(field: str, key: str = "chat") -> Apply:
    return lambda client, chat: client.hdel(chat.keys.key(key), field)


def branch(record: Callable[[Chat], str | bytes]) -> Apply:
    return lambda client, chat: client.hset(chat.keys.key("branch"), "main", record(chat))


def checkpoint(record: Callable[[Chat], str | bytes]) -> Apply:
    return lambda client, chat: client.hset(chat.keys.key("checkpoint"), "cp", record(chat))


def log_record(position: int, change: Callable[[bytes, Chat], bytes]) -> Apply:
    def apply(client: Any, chat: Chat) -> None:
        key = chat.keys.key("log")
        client.lset(key, position, change(client.lindex(key, position), chat))

    return apply


def with_parent(parent: Any) -> Callable[[bytes, Chat], bytes]:
    def change(record: bytes, chat: Chat) -> bytes:
        fields = msgpack.unpackb(record, raw=False)
        fields[0] = parent
        return bytes(msgpack.packb(fields, use_bin_type=True))

    return change


def with_tag(tag: str) -> Callable[[bytes, Chat], bytes]:
    def change(record: bytes, chat: Chat) -> bytes:
        fields = msgpack.unpackb(record, raw=False)
        fields[-1] = tag
        return bytes(msgpack.packb(fields, use_bin_type=True))

    return change


def runs_member(member: str) -> Apply:
    def apply(client: Any, chat: Chat) -> None:
        key = chat.keys.key("runs")
        client.zremrangebyscore(key, 0, 0)
        client.zadd(key, {member: 0})

    return apply


def summary_member(member: bytes) -> Apply:
    def apply(client: Any, chat: Chat) -> None:
        key = chat.keys.key("summary")
        client.zremrangebyscore(key, 0, 0)
        client.zadd(key, {member: 0})

    return apply


def truncate_tok(client: Any, chat: Chat) -> None:
    key = chat.keys.key("tok")
    client.set(key, client.get(key)[:12])


def branch_name_not_utf8(client: Any, chat: Chat) -> None:
    key = chat.keys.key("branch")
    client.hset(key, b"\xff\xfe", client.hget(key, "side"))


def head_record(chat: Chat, position: int, message_id: str, depth: str = "3") -> str:
    return f"{position}\t{message_id}\t{chat.created_at}\t1\t{depth}"


TOKENS = (7).to_bytes(5, "big")

CASES = (
    # the chat hash: identity
    Case("owner missing", "chat", "user_id", hdel("user_id"), (*CHAT_OPS, "delete_chat")),
    Case(
        "owner not UTF-8",
        "chat",
        "user_id",
        hset("user_id", b"\xff\xfe"),
        (*CHAT_OPS, "delete_chat"),
    ),
    Case("format not a format", "chat", "fmt", hset("fmt", "v2"), CHAT_OPS),
    Case("incarnation missing", "chat", "inc", hdel("inc"), CHAT_OPS),
    Case("incarnation not UTF-8", "chat", "inc", hset("inc", b"\xff\xfe"), CHAT_OPS),
    # the chat hash: fields
    Case(
        "created_at not a time",
        "chat",
        "created_at",
        hset("created_at", "yesterday"),
        CHAT_HASH_OPS,
    ),
    Case(
        "updated_at not a time",
        "chat",
        "updated_at",
        hset("updated_at", "later"),
        (*CHAT_HASH_OPS, *APPENDS),
    ),
    Case(
        "message_count a fraction",
        "chat",
        "message_count",
        hset("message_count", "1.5"),
        (LISTING, *APPENDS),
    ),
    Case(
        "branch_count not a number",
        "chat",
        "branch_count",
        hset("branch_count", "x"),
        (LISTING, *FORK_OPS),
    ),
    Case("branch_seq a fraction", "chat", "branch_seq", hset("branch_seq", "1.5"), FORK_OPS),
    Case(
        "checkpoint_seq not a number",
        "chat",
        "checkpoint_seq",
        hset("checkpoint_seq", "x"),
        ("checkpoint", "checkpoint_m1"),
    ),
    Case("title not UTF-8", "chat", "title", hset("title", b"\xc3\x28"), CHAT_HASH_OPS),
    Case(
        "active branch missing",
        "chat",
        "active_branch",
        hdel("active_branch"),
        (*CHAT_HASH_OPS, "get_branch", "list_branches", "load_branch", "branch_size"),
    ),
    Case(
        "active branch names no branch",
        "chat",
        "active_branch",
        hset("active_branch", "ghost"),
        (
            "open_chat",
            "get_branch",
            "list_branches",
            "load_branch",
            "load_window",
            "branch_size",
            "get_graph",
            "upsert_chat",
        ),
    ),
    Case(
        "active branch not UTF-8",
        "chat",
        "active_branch",
        hset("active_branch", b"\xff"),
        (*CHAT_HASH_OPS, "get_branch", "list_branches", "load_branch"),
    ),
    Case("metadata not msgpack", "chat", "m:k", hset("m:k", b"\xc1"), CHAT_HASH_OPS),
    Case("metadata string not UTF-8", "chat", "m:k", hset("m:k", b"\xa2\xff\xfe"), CHAT_HASH_OPS),
    Case("metadata truncated", "chat", "m:k", hset("m:k", b"\x92\x01"), CHAT_HASH_OPS),
    Case("metadata with extra bytes", "chat", "m:k", hset("m:k", b"\x01\x02"), CHAT_HASH_OPS),
    Case(
        "metadata with a list as a map key",
        "chat",
        "m:k",
        hset("m:k", b"\x81\x91\x01\x02"),
        CHAT_HASH_OPS,
    ),
    Case("metadata an extension type", "chat", "m:k", hset("m:k", b"\xd4\x01\x00"), CHAT_HASH_OPS),
    Case(
        "usage counter not a number",
        "chat",
        "u:input_tokens",
        hset("u:input_tokens", "lots"),
        (*CHAT_HASH_OPS, "add_usage"),
    ),
    Case(
        "usage counter a fraction",
        "chat",
        "u:input_tokens",
        hset("u:input_tokens", "1.5"),
        (*CHAT_HASH_OPS, "add_usage"),
    ),
    Case("field name not UTF-8", "chat", None, hset(b"m:\xff", b"\x01"), CHAT_HASH_OPS),
    Case("compaction marker garbled", "chat", "cjob", hset("cjob", "x"), ("append_compaction",)),
    Case("compaction lease garbled", "chat", "clease", hset("clease", "x"), ("take_lease",)),
    Case(
        "request slot not a number",
        "chat",
        "req_slot",
        hset("req_slot", "x"),
        REQUEST_OPS,
    ),
    Case(
        "request slot past the ring",
        "chat",
        "req_slot",
        hset("req_slot", "32"),
        REQUEST_OPS,
    ),
    Case(
        "request summary garbled",
        "reqs",
        RESENT,
        hset("0", f"{RESENT}\tgarbage", "reqs"),
        ("append_resent",),
        verified=False,
    ),
    Case(
        "request summary not UTF-8",
        "reqs",
        RESENT,
        hset("0", f"{RESENT}\t".encode() + b"\xff", "reqs"),
        ("append_resent",),
        verified=False,
    ),
    # branch records
    Case("branch record garbled", "branch", "main", branch(lambda _c: "garbage"), BRANCH_OPS),
    Case(
        "branch record without its depth",
        "branch",
        "main",
        branch(lambda c: f"2\t{c.head}\t{c.created_at}\t1"),
        BRANCH_OPS,
    ),
    Case(
        "branch depth not a number",
        "branch",
        "main",
        branch(lambda c: head_record(c, 2, c.head, "x")),
        BRANCH_OPS,
    ),
    Case(
        "branch head past the log",
        "branch",
        "main",
        branch(lambda c: head_record(c, 9, f"9.{c.inc}.aaaaaa", "10")),
        HEAD_OPS,
    ),
    Case(
        "branch head with another tag",
        "branch",
        "main",
        branch(lambda c: head_record(c, 2, f"2.{c.inc}.zzzzzz")),
        HEAD_OPS,
    ),
    Case(
        "branch head naming another message",
        "branch",
        "main",
        branch(lambda c: head_record(c, 2, "m1")),
        HEAD_OPS,
    ),
    Case(
        "branch name not UTF-8",
        "branch",
        None,
        branch_name_not_utf8,
        ("list_branches", "get_graph"),
    ),
    # checkpoint records
    Case(
        "checkpoint garbled",
        "checkpoint",
        "cp",
        checkpoint(lambda _c: "junk"),
        ("get_checkpoint", "list_checkpoints", "get_graph", "restore"),
    ),
    Case(
        "checkpoint at a negative position",
        "checkpoint",
        "cp",
        checkpoint(lambda c: f"-1\tm1\t{c.created_at}\t1"),
        ("get_checkpoint", "list_checkpoints", "get_graph", "restore"),
    ),
    Case(
        "checkpoint past the log",
        "checkpoint",
        "cp",
        checkpoint(lambda c: f"9\tm1\t{c.created_at}\t1"),
        ("get_graph", "restore"),
    ),
    Case(
        "checkpoint naming another message",
        "checkpoint",
        "cp",
        checkpoint(lambda c: f"1\tm1\t{c.created_at}\t1"),
        ("get_graph", "restore"),
    ),
    Case(
        "checkpoint id not UTF-8",
        "checkpoint",
        "cp",
        checkpoint(lambda _c: b"0\t\xff\t1\t1"),
        ("get_checkpoint", "list_checkpoints", "get_graph", "restore"),
    ),
    # log records
    Case(
        "head record not msgpack",
        "log",
        "2",
        log_record(2, lambda _r, _c: b"\xc1junk"),
        (*RECORD_OPS, *HEAD_OPS, "create_branch", "checkpoint", "summarize"),
    ),
    Case(
        "head record truncated",
        "log",
        "2",
        log_record(2, lambda r, _c: r[:-3]),
        (*RECORD_OPS, *HEAD_OPS, "create_branch", "checkpoint", "summarize"),
    ),
    Case(
        "record truncated inside the chain",
        "log",
        "1",
        log_record(1, lambda r, _c: r[:-3]),
        ("get_chain", "load_branch", "open_chat", "get_graph", "get_message", "get_message_g1"),
    ),
    Case(
        "record whose parent is not a number",
        "log",
        "2",
        log_record(2, with_parent("x")),
        RECORD_OPS,
    ),
    Case("record whose parent is a float", "log", "2", log_record(2, with_parent(1.0)), RECORD_OPS),
    # a tag outside the alphabet made an id get_message then could not find
    Case("record tag malformed", "log", "1", log_record(1, with_tag("ABCDEF")), RECORD_OPS),
    # runs
    Case("run member garbled", "runs", "junk", runs_member("junk"), RUNS_OPS),
    Case("run depth not a number", "runs", "0:-1:x", runs_member("0:-1:x"), RUNS_OPS),
    # a start past its score sent a walk to a position that is not older, without end
    Case("run start past its score", "runs", "1:-1:1", runs_member("1:-1:1"), RUNS_OPS),
    # token entries
    Case(
        "token entries truncated",
        "tok",
        None,
        truncate_tok,
        (
            "get_chain",
            "load_branch",
            "load_window",
            "load_summary",
            "branch_size",
            "summarize",
            *APPENDS,
        ),
    ),
    # summaries
    Case(
        "summary not msgpack",
        "summary",
        "0",
        summary_member(TOKENS + b"\xc1junk"),
        ("load_summary", "branch_size", "summarize_m1"),
    ),
    Case(
        "summary not a summary record",
        "summary",
        "0",
        summary_member(TOKENS + msgpack.packb({"x": 1})),
        ("load_summary", "branch_size", "summarize_m1"),
    ),
    Case(
        "summary without a record",
        "summary",
        "0",
        summary_member(b"\x00\x01"),
        ("load_summary", "branch_size", "summarize_m1", "append_compaction"),
    ),
    # alias
    Case("alias not a number", "alias", "m1", hset("m1", "x", "alias"), ALIAS_OPS),
    Case("alias a fraction", "alias", "m1", hset("m1", "0.5", "alias"), ALIAS_OPS),
    Case("alias past the log", "alias", "m1", hset("m1", "9", "alias"), ALIAS_OPS),
    Case("alias naming another record", "alias", "m1", hset("m1", "1", "alias"), ALIAS_OPS),
)


@pytest.fixture(scope="module")
def server_clients() -> Iterator[dict[str, Any]]:
    """Raw clients of the real servers, opened once (a Cluster client costs a topology read)."""
    opened: dict[str, Any] = {}
    yield opened
    for client in opened.values():
        client.close()


@pytest.fixture
def client(backend: str, server_clients: dict[str, Any]) -> Iterator[Any]:
    """A plain client on the test's backend, for garbling keys and taking snapshots."""
    if not backend.startswith("memory://"):
        if backend not in server_clients:
            server_clients[backend] = raw_client(backend)
        yield server_clients[backend]
        return
    opened = raw_client(backend)
    yield opened
    opened.close()


def _outcome(store: Any, chat: Chat, case: Case, name: str) -> str | None:
    """None when ``name`` raised the CorruptionError the case expects, else what went wrong."""
    store.clear_cache()
    try:
        OPS[name].run(store, chat)
    except ctxstore.errors.CorruptionError as error:
        key = chat.keys.key(case.key)
        named = error.details.get("key") == key and key in str(error)
        if case.field is not None:
            named = named and error.details.get("field") == case.field
            named = named and repr(case.field) in str(error)
        return None if named else f"{name}: the error does not name {key} {case.field!r}: {error}"
    except Exception as error:  # the matrix reports every other outcome, raw errors included
        return f"{name}: {type(error).__name__}: {error}"
    return f"{name}: no error"


def _changed(before: dict[bytes, Any], after: dict[bytes, Any], cluster: bool) -> list[str]:
    """The keys a call changed: none may change, the listing indexes included (on a Cluster a
    refused write puts back the index score its pipelined touch moved)."""
    del cluster
    keys = before.keys() | after.keys()
    return sorted(key.decode() for key in keys if before.get(key) != after.get(key))


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_corrupt_data_is_a_corruption_error_naming_it_and_nothing_is_written(
    store: Any, client: Any, namespace: str, backend: str, case: Case
) -> None:
    chat = build(store)
    case.apply(client, chat)
    base, cluster = f"ctx:{namespace}", "cluster" in backend
    before = snapshot_of(client, base)
    problems = []
    for name in dict.fromkeys(case.ops):
        if name == LISTING:
            continue  # a listing skips a corrupt chat instead: see the test below
        problem = _outcome(store, chat, case, name)
        if problem is not None:
            problems.append(problem)
        if OPS[name].writes:
            after = snapshot_of(client, base)
            changed = _changed(before, after, cluster)
            if changed:
                problems.append(f"{name}: wrote {changed}")
            before = after
    changed = _changed(before, snapshot_of(client, base), cluster)
    if changed:
        problems.append(f"a read wrote {changed}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(("found", "advice"), [("1", "older release"), ("4", "newer release")])
def test_a_chat_of_another_format_is_a_format_error_naming_both_and_nothing_is_written(
    store: Any, client: Any, namespace: str, backend: str, found: str, advice: str
) -> None:
    """A chat another release wrote is intact, not corrupt: every operation on it says which
    format it is in, which one this release reads and what to do, and writes nothing; a listing
    leaves it out and names it, verify reports it and repairs nothing."""
    chat = build(store)
    hset("fmt", found)(client, chat)
    base, cluster = f"ctx:{namespace}", "cluster" in backend
    before = snapshot_of(client, base)
    problems = []
    for name in dict.fromkeys(CHAT_OPS):
        if name == LISTING:
            continue
        store.clear_cache()
        try:
            OPS[name].run(store, chat)
        except ctxstore.errors.FormatError as error:
            if not (f"format {found}" in str(error) and "reads format 2" in str(error)):
                problems.append(f"{name}: the error does not name both formats: {error}")
            if advice not in str(error) or error.details["found"] != found:
                problems.append(f"{name}: the error does not say what to do: {error}")
            if isinstance(error, ctxstore.errors.CorruptionError):
                problems.append(f"{name}: a FormatError must not be a CorruptionError")
        except Exception as error:
            problems.append(f"{name}: {type(error).__name__}: {error}")
        else:
            problems.append(f"{name}: no error")
    changed = _changed(before, snapshot_of(client, base), cluster)
    if changed:
        problems.append(f"wrote {changed}")
    assert not problems, "\n".join(problems)
    assert CHAT in store.list_chats_page(user_id="alice").skipped


def test_verify_reports_another_formats_chat_and_repairs_nothing(
    sync_store: ctxstore.Store, client: Any, namespace: str
) -> None:
    chat = build(sync_store)
    hset("fmt", "4")(client, chat)
    before = snapshot_of(client, f"ctx:{namespace}")
    report = sync_store.verify_chat(CHAT, repair=True)
    assert [p.kind for p in report.problems if p.field == "fmt"] == ["format"]
    assert snapshot_of(client, f"ctx:{namespace}") == before


LISTED = [case for case in CASES if LISTING in case.ops]


@pytest.mark.parametrize("case", LISTED, ids=[case.name for case in LISTED])
def test_listings_skip_a_corrupt_chat_and_name_it(store: Any, client: Any, case: Case) -> None:
    """One corrupt chat never fails a listing: it is left out, logged and named in ``skipped``;
    the healthy chats are listed as ever."""
    chat = build(store)
    store.upsert_chat("healthy", "alice")
    case.apply(client, chat)
    for user_id in ("alice", None):
        assert [info.id for info in store.list_chats(user_id=user_id)] == ["healthy"]
        page = store.list_chats_page(user_id=user_id)
        assert [info.id for info in page.chats] == ["healthy"]
        assert CHAT in page.skipped


VERIFIED = [case for case in CASES if case.verified]


@pytest.mark.parametrize("case", VERIFIED, ids=[case.name for case in VERIFIED])
def test_verify_reports_the_corrupt_field(
    sync_store: ctxstore.Store, client: Any, case: Case
) -> None:
    chat = build(sync_store)
    case.apply(client, chat)
    report = sync_store.verify_chat(CHAT)
    key = chat.keys.key(case.key)
    named = [
        problem
        for problem in report.problems
        if problem.key == key
        and (
            case.field is None
            or problem.field == case.field
            or (problem.field == "" and f"'{case.field}" in problem.detail)
        )
    ]
    assert named, report.problems


#: Stored metadata values and whether ctxstore's reader decodes them: the scripts' msgpack and
#: UTF-8 checks (which guard writes that reply with the chat) must agree with it exactly.
METADATA_VALUES = [
    (b"\xa2\xc3\xa9", True),  # "é"
    (b"\xa4\xf4\x8f\xbf\xbf", True),  # U+10FFFF, the last code point
    (b"\xa2\xc0\x80", False),  # an overlong NUL
    (b"\xa3\xe0\x9f\xbf", False),  # an overlong three-byte form
    (b"\xa4\xf0\x8f\xbf\xbf", False),  # an overlong four-byte form
    (b"\xa3\xed\xa0\x80", False),  # a surrogate
    (b"\xa4\xf4\x90\x80\x80", False),  # past U+10FFFF
    (b"\xa2\xe2\x82", False),  # a sequence cut short
    (b"\xa1\x80", False),  # a lone continuation byte
    (b"\x91" * 1024 + b"\x01", True),  # as deep as the reader goes
    (b"\x91" * 1025 + b"\x01", False),
    (b"\x81\xc4\x01x\x01", True),  # bin, float and nil map keys
    (b"\x81\xcb" + bytes(8) + b"\x01", True),
    (b"\x81\xc0\x01", True),
    (b"\x81\x80\x01", False),  # a map as a map key
    (b"\xdc\x00\x02\x01\xa1a", True),  # array16
    (b"\xde\x00\x01\xa1a\xc3", True),  # map16
    (b"\xdd\xff\xff\xff\xff\x01", False),  # a count far past the bytes
    (b"\xcf" + bytes(8), True),  # uint64
    (b"\xd3\xff", False),  # int64 cut short
    (b"\xc7\x01\x05x", False),  # ext8
    (b"\xd6\xff" + bytes(4), False),  # a timestamp
    (b"\xdb\x00\x00\x00\x02ab", True),  # str32
    (b"\xc6\x00\x00\x00\x03ab", False),  # bin32 cut short
    (b"", False),
]


def test_the_scripts_accept_exactly_the_metadata_the_reader_decodes(
    store: Any, client: Any, namespace: str, backend: str
) -> None:
    store.upsert_chat(CHAT, "alice")
    key = store.state.keyspace.chat(CHAT).key("chat")
    wrong = []
    sealed = store.state.settings.encryption is not None  # (the encrypted pass)
    for raw, decodes in METADATA_VALUES:
        readable = decodes and not sealed  # a value in the clear, in a sealed chat: corrupt
        client.hset(key, "m:k", raw)
        before = snapshot_of(client, f"ctx:{namespace}")
        outcomes = []
        for call in (
            lambda: store.get_chat(CHAT),
            lambda: store.update_chat(CHAT, metadata={"other": 1}),
        ):
            try:
                call()
                outcomes.append(True)
            except ctxstore.errors.CorruptionError:
                outcomes.append(False)
        after = snapshot_of(client, f"ctx:{namespace}")
        if not readable and _changed(before, after, "cluster" in backend):
            outcomes.append("wrote")
        if outcomes != [readable, readable]:
            wrong.append(f"{raw[:12]!r}: expected {readable}, got {outcomes}")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("field", ["user_id", "inc"])
def test_an_empty_owner_or_incarnation_is_corrupt(
    store: Any, client: Any, namespace: str, backend: str, field: str
) -> None:
    store.upsert_chat(CHAT, "alice")
    key = store.state.keyspace.chat(CHAT).key("chat")
    client.hset(key, field, "")
    before = snapshot_of(client, f"ctx:{namespace}")
    for call in (
        lambda: store.get_chat(CHAT),
        lambda: store.update_chat(CHAT, metadata={"k": 1}),
        lambda: store.append(CHAT, "main", [user("x")], expected_head=None),
    ):
        with pytest.raises(ctxstore.errors.CorruptionError) as caught:
            call()
        assert caught.value.details["key"] == key
        assert caught.value.details["field"] == field
    assert not _changed(before, snapshot_of(client, f"ctx:{namespace}"), "cluster" in backend)


def test_a_reply_no_parser_expected_is_a_corruption_error_naming_the_key() -> None:
    """The net under the parsers: a raw Python error from reading a reply never escapes."""

    def operation() -> Operation[int]:
        value: int = yield command_call(("GET", "ctx:k"), keys=("ctx:k",), parse=int)
        return value

    exchange = Exchange(operation())
    with pytest.raises(ctxstore.errors.CorruptionError) as caught:
        exchange.respond([b"not a number"])
    assert caught.value.details["key"] == "ctx:k"
    assert "ctx:k" in str(caught.value)
    assert isinstance(caught.value.__cause__, ValueError)


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    ("members", "field"),
    [({"0:-1:1": 0, "3:2:1": 1}, "3:2:1"), ({"0:-1:1": 0, "2:-1:1": 1}, "2:-1:1")],
)
def test_a_run_whose_start_is_not_its_score_is_corrupt_and_nothing_is_written(
    store: Any, client: Any, namespace: str, members: dict[str, int], field: str
) -> None:
    """A walk that trusted such a member looped forever (the first), or read a chain of one
    message and stored a branch before failing (the second)."""
    store.upsert_chat("c", "alice")
    ids = store.append(
        "c", "main", [{"role": "user", "content": t} for t in "abc"], expected_head=None
    ).message_ids
    key = store.state.keyspace.chat("c").key("runs")
    client.delete(key)
    client.zadd(key, members)
    store.clear_cache()
    before = snapshot_of(client, f"ctx:{namespace}")
    for call in (
        lambda: store.get_chain("c", ids[2]),
        lambda: store.get_message("c", ids[1]),
        lambda: store.create_branch("c", ids[1]),
        lambda: store.load_branch("c"),
    ):
        with pytest.raises(ctxstore.errors.CorruptionError) as raised:
            call()
        assert raised.value.details.get("key") == key
        assert raised.value.details.get("field") == field
    assert snapshot_of(client, f"ctx:{namespace}") == before


@pytest.mark.parametrize(
    ("name", "kind"),
    [("log", "string"), ("runs", "hash"), ("tok", "list"), ("branch", "string"), ("chat", "list")],
)
def test_a_key_of_the_wrong_type_is_corrupt_naming_it_and_nothing_is_written(
    store: Any, client: Any, namespace: str, name: str, kind: str
) -> None:
    """Redis refuses a command on a key of another type without saying which key: the store
    asks the keys' types and names the one that is wrong."""
    store.upsert_chat("c", "alice")
    head = store.append(
        "c", "main", [{"role": "user", "content": "a"}], expected_head=None
    ).head_message_id
    key = store.state.keyspace.chat("c").key(name)
    client.delete(key)
    {
        "string": lambda: client.set(key, "x"),
        "hash": lambda: client.hset(key, "x", "y"),
        "list": lambda: client.rpush(key, "x"),
    }[kind]()
    store.clear_cache()
    before = snapshot_of(client, f"ctx:{namespace}")
    calls = [lambda: store.load_branch("c")]
    if name != "runs":  # an append that continues its run reads no run
        calls.append(
            lambda: store.append(
                "c", "main", [{"role": "user", "content": "b"}], expected_head=head
            )
        )
    for call in calls:
        with pytest.raises(ctxstore.errors.CorruptionError) as raised:
            call()
        assert raised.value.details.get("key") == key, raised.value
        assert key in str(raised.value)
    assert snapshot_of(client, f"ctx:{namespace}") == before
