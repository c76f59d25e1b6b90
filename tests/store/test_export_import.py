"""Export and import of a whole chat: ``store.export_chat`` yields its records, ``import_chat``
rebuilds it elsewhere, and the two read the same, on every backend and through both shells.

An export of the imported chat is byte-identical to the export it came from, apart from the
chat's id (and its owner when imported under another). An import is built aside and published in
one script: until then nothing of it can be seen, and a failed import leaves nothing behind."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._core import protocol
from ctxstore._core.format.portable import dumps_line
from ctxstore._core.ops.transfer import imports
from ctxstore._core.ops.transfer.imports import ChatImport
from tests.conftest import Clock
from tests.store.test_retention import RETAINED, command
from tests.support.facade import LoopThread, SyncOverAsync
from tests.support.keyspace import snapshot

CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "search", "arguments": '{"q": "Lisbon\\nhotels", "max": 3}'},
}


def rich_chat(store: Any, chat_id: str = "c1") -> dict[str, str]:
    """A chat with everything an export carries: chosen and generated ids, an edit, tool calls
    with arguments, multi-line and non-ASCII text, values JSON cannot hold, message metadata,
    four branches (one empty, the edit's one active), checkpoints, a summary, usage, metadata,
    a title. Returns some of its message ids."""
    store.upsert_chat(chat_id, "alice", {"channel": "web", "raw": b"\x00\xff", "n": 3})
    store.update_chat(chat_id, title="Lisbon \u2600 trip")
    first = store.append(
        chat_id,
        "main",
        [
            {"role": "system", "content": "Be brief."},
            NewMessage(
                {
                    "role": "user",
                    "content": "Plan a weekend\nin Lisbon \u2600 \u2014 a\u00e7\u00e3o",
                },
                id="q1",
                metadata={"client": "web", "bin": b"\x01"},
            ),
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_1", "content": "Hotel A\r\nHotel B\u2028C"},
            {
                "role": "assistant",
                "content": "Day 1: Alfama.\nDay 2: Bel\u00e9m.",
                "extra": {"score": 0.5, "odd": float("nan"), 7: "int key"},
            },
        ],
        expected_head=None,
    )
    edit = store.append(
        chat_id,
        "main",
        [NewMessage({"role": "user", "content": "Plan a weekend in Porto"}, id="q1")],
        expected_head=first.head_message_id,
        on_existing="fork",
    )
    store.append(
        chat_id,
        edit.branch,
        [{"role": "assistant", "content": "Porto: Ribeira."}],
        expected_head=edit.head_message_id,
    )
    store.create_branch(chat_id, first.message_ids[2], name="side", activate=False)
    store.create_branch(chat_id, None, name="empty", activate=False)
    store.upsert_checkpoint(chat_id, "start", first.message_ids[0])
    store.upsert_checkpoint(chat_id, "answer", first.head_message_id)
    store.write_summary(
        chat_id, first.message_ids[3], "They looked for hotels.", metadata={"model": "m"}
    )
    store.add_usage(chat_id, {"input_tokens": 120, "output_tokens": 30})
    return {"system": first.message_ids[0], "tool": first.message_ids[3]}


def lines(store: Any, chat_id: str, **options: Any) -> list[str]:
    return [dumps_line(record) for record in store.export_chat(chat_id, **options)]


def records(store: Any, chat_id: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines(store, chat_id)]


def same_shell(store: Any, backend: str, namespace: str, loop_thread: LoopThread) -> Any:
    """A store of the same shell as ``store`` on the same backend, in ``namespace``."""
    if isinstance(store, SyncOverAsync):
        return SyncOverAsync(
            ctxstore.connect_async(backend, namespace=namespace).admin(), loop_thread
        )
    return ctxstore.connect(backend, namespace=namespace).admin()


def close(store: Any, loop_thread: LoopThread) -> None:
    if isinstance(store, SyncOverAsync):
        loop_thread.run(store.wrapped.close())
    else:
        store.close()


def reads(store: Any, chat_id: str) -> str:
    """Everything a reader can see of a chat, but its id and incarnation (as its repr: a
    payload holds a NaN, which is unequal to itself)."""
    chat = store.get_chat(chat_id).model_dump(exclude={"id", "incarnation"})
    graph = store.get_graph(chat_id)
    branches = store.list_branches(chat_id)
    seen: dict[str, Any] = {
        "chat": chat,
        "graph": (graph.messages, graph.branches, graph.checkpoints),
        "branches": branches,
        "checkpoints": store.list_checkpoints(chat_id),
        "messages": [store.get_message(chat_id, node.id) for node in graph.messages],
    }
    for branch in branches:
        name = branch.name
        seen[name] = (
            store.load_branch(chat_id, name),
            store.load_branch(chat_id, name, max_tokens=40),
            store.load_branch(chat_id, name, max_messages=2),
            store.load_branch(chat_id, name, after_summary=True),
            store.branch_size(chat_id, name),
            store.get_chain(chat_id, branch.head_message_id),
        )
    return repr(seen)


# --- the round trip --------------------------------------------------------------------------


def test_an_imported_chat_exports_byte_identically_and_reads_the_same(
    store: Any, backend: str, namespace: str, loop_thread: LoopThread
) -> None:
    rich_chat(store)
    original = lines(store, "c1")
    moved = store.import_chat((json.loads(line) for line in original), chat_id="c2")
    assert moved.id == "c2"
    renamed = lines(store, "c2")
    header = json.loads(original[0])
    assert renamed[0] == dumps_line({**header, "id": "c2"})  # the only field that differs
    assert renamed[1:] == original[1:]
    assert reads(store, "c2") == reads(store, "c1")
    assert store.verify_chat("c2").ok
    other = same_shell(store, backend, namespace + "x", loop_thread)
    try:
        assert other.import_chat(json.loads(line) for line in original).id == "c1"
        assert lines(other, "c1") == original
        assert reads(other, "c1") == reads(store, "c1")
        assert other.verify_chat("c1").ok
    finally:
        close(other, loop_thread)


def test_a_deleted_chat_comes_back_from_its_export(store: Any) -> None:
    ids = rich_chat(store)
    original = lines(store, "c1")
    seen = reads(store, "c1")
    old = store.get_chat("c1").incarnation
    store.delete_chat("c1")
    restored = store.import_chat(json.loads(line) for line in original)
    assert restored.incarnation != old  # what knew the deleted chat never takes this one for it
    assert lines(store, "c1") == original
    assert reads(store, "c1") == seen
    assert store.get_message("c1", ids["tool"])["message"]["role"] == "tool"
    assert [chat.id for chat in store.list_chats(user_id="alice")] == ["c1"]


def test_the_export_holds_everything_exactly(store: Any) -> None:
    ids = rich_chat(store)
    exported = records(store, "c1")
    chat, *rest = exported
    assert chat["type"] == "chat"
    assert chat["version"] == 1
    assert chat["title"] == "Lisbon \u2600 trip"
    assert chat["usage"] == {"input_tokens": 120, "output_tokens": 30, "total_tokens": 150}
    assert "metadata" not in chat  # bytes: the metadata goes as msgpack
    assert chat["counts"] == {"messages": 7, "branches": 4, "checkpoints": 2, "summaries": 1}
    messages = [record for record in rest if record["type"] == "message"]
    assert [message["id"] for message in messages][:2] == [ids["system"], "q1"]
    assert messages[1]["message"]["content"] == (
        "Plan a weekend\nin Lisbon \u2600 \u2014 a\u00e7\u00e3o"
    )
    assert "metadata_msgpack" in messages[1]  # {"bin": b"\x01"}
    assert messages[2]["message"]["tool_calls"] == [CALL]
    assert "message" not in messages[4]  # a NaN and an int key: the payload goes as msgpack
    assert "message_msgpack" in messages[4]
    assert messages[5]["parent_id"] == ids["system"]  # the edit forked at q1's parent
    assert [message["tokens"] > 0 for message in messages] == [True] * 7
    branches = [record for record in rest if record["type"] == "branch"]
    assert [(b["name"], b["active"]) for b in branches] == [
        ("main", False),
        ("main-v2", True),
        ("side", False),
        ("empty", False),
    ]
    assert branches[3]["head"] is None
    summaries = [record for record in rest if record["type"] == "summary"]
    assert summaries[0]["message_id"] == ids["tool"]
    assert summaries[0]["metadata"] == {"model": "m", "type": "context-summary"}
    assert [record["type"] for record in rest] == ["message"] * 7 + ["branch"] * 4 + [
        "checkpoint"
    ] * 2 + ["summary"]


def test_an_import_under_another_owner_differs_in_the_owner_only(store: Any) -> None:
    rich_chat(store)
    original = records(store, "c1")
    meta = store.import_chat(original, chat_id="c2", user_id="bob")
    assert meta.user_id == "bob"
    again = records(store, "c2")
    assert again[0] == {**original[0], "id": "c2", "user_id": "bob"}
    assert again[1:] == original[1:]
    assert [chat.id for chat in store.list_chats(user_id="bob")] == ["c2"]
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c2", user_id="alice")


def test_an_imported_chat_takes_new_messages_under_ids_of_its_own(store: Any) -> None:
    ids = rich_chat(store)
    meta = store.import_chat(records(store, "c1"), chat_id="c2")
    assert meta.incarnation != store.get_chat("c1").incarnation
    head = store.get_branch("c2").head_message_id
    added = store.append("c2", "main-v2", [{"role": "user", "content": "and?"}], expected_head=head)
    assert added.head_message_id.split(".")[1] == meta.incarnation
    assert store.get_message("c2", ids["system"])["message"]["content"] == "Be brief."
    assert store.get_chain("c2", added.head_message_id)[-2]["id"] == head
    assert store.verify_chat("c2").ok


def test_the_retention_travels_with_the_chat(store: Any) -> None:
    store.upsert_chat("keep", "alice")
    store.append("keep", "main", [{"role": "user", "content": "a"}], expected_head=None)
    store.upsert_chat("brief", "alice", ttl=3600)
    store.append("brief", "main", [{"role": "user", "content": "a"}], expected_head=None)
    kept = store.import_chat(records(store, "keep"), chat_id="keep2")
    brief = store.import_chat(records(store, "brief"), chat_id="brief2")
    assert kept.ttl is None
    assert brief.ttl == 3600
    # A renamed staging key keeps its expiry unless the publish clears it.
    keep_expiries = {command(store, "pttl", key) for key in _retained_keys(store, "keep2")}
    assert keep_expiries == {-1}
    brief_expiries = [command(store, "pttl", key) for key in _retained_keys(store, "brief2")]
    assert all(3_590_000 < left <= 3_600_000 for left in brief_expiries), brief_expiries


def _retained_keys(store: Any, chat_id: str) -> list[str]:
    keys = store.state.keyspace.chat(chat_id)
    # the keys an import of these chats makes (no checkpoint, summary, chosen id or request)
    absent = ("checkpoint", "summary", "alias", "reqs")
    names = [name for name in RETAINED if name not in absent]
    return [keys.key(name) for name in names]


def test_an_empty_chat_round_trips(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    exported = records(store, "c1")
    assert [record["type"] for record in exported] == ["chat", "branch"]
    meta = store.import_chat(exported, chat_id="c2")
    assert (meta.active_branch, meta.title, meta.metadata) == ("main", None, {})
    assert records(store, "c2")[1:] == exported[1:]
    assert store.load_branch("c2").messages == []
    assert store.verify_chat("c2").ok


def test_an_export_of_a_missing_or_foreign_chat_is_refused(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError):
        list(store.export_chat("nope"))
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.ChatNotFoundError):
        list(store.export_chat("c1", user_id="bob"))
    assert len(list(store.export_chat("c1", user_id="alice"))) == 2  # the chat and main


def test_an_export_of_a_chat_deleted_meanwhile_is_refused(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append("c1", "main", [{"role": "user", "content": "a"}], expected_head=None)
    exported = iter(store.export_chat("c1"))
    assert next(exported)["type"] == "chat"
    store.delete_chat("c1")
    store.upsert_chat("c1", "alice")
    with pytest.raises(ctxstore.errors.ChatReplacedError):
        next(exported)


# --- refusals: nothing is written ------------------------------------------------------------


def test_an_import_into_an_existing_chat_is_a_conflict_and_writes_nothing(
    store: Any, snap: Any
) -> None:
    rich_chat(store)
    exported = records(store, "c1")
    before = snap()
    with pytest.raises(ctxstore.ConflictError, match="exists"):
        store.import_chat(exported)
    assert snap() == before


def _mutations() -> list[tuple[str, Any, str]]:
    """(name, how the records are spoiled, what the error says)."""

    def drop(kind: str) -> Any:
        def spoil(items: list[dict[str, Any]]) -> None:
            items.remove(next(item for item in items if item["type"] == kind))

        return spoil

    def set_field(index: int, name: str, value: Any) -> Any:
        def spoil(items: list[dict[str, Any]]) -> None:
            items[index][name] = value

        return spoil

    return [
        ("no chat record first", lambda items: items.pop(0), r"record 1 \(message\)"),
        ("another version", set_field(0, "version", 2), r"record 1 \(chat\).*version 2"),
        ("unknown type", lambda items: items.insert(3, {"type": "note"}), "record 4 has type"),
        ("unknown field", set_field(2, "colour", "red"), r"record 3 \(message\).*colour"),
        ("not a mapping", lambda items: items.insert(2, ["message"]), "record 3 is not a map"),
        ("missing parent", set_field(3, "parent_id", "ghost"), "record 4.*ghost"),
        ("repeated id", set_field(3, "id", "q1"), "record 4.*repeats message id 'q1'"),
        ("bad payload", set_field(2, "message", {"role": 5, "content": "x"}), "record 3.*role"),
        ("bad item type", set_field(2, "message", {"type": ""}), "record 3.*type"),
        ("bad tokens", set_field(2, "tokens", -1), "record 3.*tokens"),
        ("bad base64", set_field(5, "message_msgpack", "%%%"), "record 6.*base64"),
        ("truncated", drop("summary"), "1 summaries|0 summaries"),
        ("no message", drop("message"), "record"),
        (
            "two active",
            lambda items: [i.update(active=True) for i in items if i["type"] == "branch"],
            "active",
        ),
        (
            "bad head",
            lambda items: next(i for i in items if i["type"] == "branch").update(head="x"),
            "names no message",
        ),
        ("bad title", set_field(0, "title", "two\nlines"), "title"),
    ]


@pytest.mark.parametrize(
    ("spoil", "error"), [m[1:] for m in _mutations()], ids=[m[0] for m in _mutations()]
)
def test_a_malformed_import_names_its_record_and_writes_nothing(
    store: Any, snap: Any, spoil: Any, error: str
) -> None:
    rich_chat(store)
    exported = records(store, "c1")
    spoil(exported)
    before = snap()
    with pytest.raises(ctxstore.ValidationError, match=error):
        store.import_chat(exported, chat_id="c2")
    assert snap() == before


def test_a_failure_after_chunks_were_staged_leaves_nothing(
    store: Any, backend: str, snap: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(imports, "CHUNK_RECORDS", 10)
    store.upsert_chat("c1", "alice")
    head = None
    for start in range(0, 45, 15):
        batch = [{"role": "user", "content": f"m{i}"} for i in range(start, start + 15)]
        head = store.append("c1", "main", batch, expected_head=head).head_message_id
    exported = records(store, "c1")
    staged: list[int] = []

    def spoiled() -> Iterator[dict[str, Any]]:
        yield from exported[:40]
        staged.append(_staging_keys_now(backend, store))
        raise RuntimeError("the source broke off")

    before = snap()
    with pytest.raises(RuntimeError, match="broke off"):
        store.import_chat(spoiled(), chat_id="c2")
    assert staged == [4]  # three chunks of messages were staged: log, alias, runs, tok
    assert snap() == before


def _staging_keys_now(backend: str, store: Any) -> int:
    return sum(1 for key in snapshot(backend, store.state.keyspace.base) if b":staging:" in key)


def test_nothing_of_an_import_is_visible_before_it_is_published(
    sync_store: ctxstore.Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(imports, "CHUNK_RECORDS", 2)
    store = sync_store
    rich_chat(store)
    importer = ChatImport(store.state, chat_id="c2")
    staged = 0
    for record in records(store, "c1"):
        chunk = importer.feed(record)
        if chunk is not None:
            store.run(chunk)
            staged += 1
    assert staged >= 5
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_chat("c2")
    assert [chat.id for chat in store.list_chats()] == ["c1"]
    assert store.run(importer.finish()).id == "c2"
    assert sorted(chat.id for chat in store.list_chats()) == ["c1", "c2"]


def test_a_publish_whose_staging_expired_is_refused_and_writes_nothing(
    sync_store: ctxstore.Store, snap: Any
) -> None:
    store = sync_store
    rich_chat(store)
    importer = ChatImport(store.state, chat_id="c2")
    for record in records(store, "c1"):
        fed = importer.feed(record)
        if fed is not None:  # a store with encryption: the owner's keys, after the chat record
            assert record["type"] == "chat"
            store.run(fed)
    before = snap()
    finish = importer.finish()
    stage = next(finish)  # the last chunk's staging call
    assert isinstance(stage, protocol.Call)
    outcome = store.run(_only(stage))
    assert outcome > 0
    store.client.delete(store.state.keyspace.chat("c2").staging(importer._token, "runs"))
    with pytest.raises(ctxstore.ConflictError, match="lost what it had staged"):
        store.run(_rest(finish))
    cleanup = importer.discard()
    assert cleanup is not None
    store.run(cleanup)
    assert snap() == before


def _only(call: protocol.Call[Any]) -> protocol.Operation[Any]:
    result = yield call
    return result


def _rest(operation: protocol.Operation[Any]) -> protocol.Operation[Any]:
    """The rest of an operation whose first step ran already (its result sent as None)."""
    return (yield from _resumed(operation))


def _resumed(operation: protocol.Operation[Any]) -> protocol.Operation[Any]:
    """Drive ``operation`` on: each step's result sent in, each step's error thrown in (so the
    operation's own clean-up on a refusal runs, as under a store)."""
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            step = operation.throw(error) if error is not None else operation.send(value)
        except StopIteration as stop:
            return stop.value
        try:
            value, error = (yield step), None
        except Exception as caught:
            value, error = None, caught


# --- bounded work ----------------------------------------------------------------------------


def test_a_long_chat_moves_in_bounded_chunks(
    store: Any, recorded_calls: list[protocol.Call[Any]], clock: Clock
) -> None:
    store.upsert_chat("c1", "alice")
    head = None
    for _ in range(3):
        batch = [{"role": "user", "content": "x" * 20} for _ in range(900)]
        head = store.append("c1", "main", batch, expected_head=head).head_message_id
    recorded_calls.clear()
    exported = list(store.export_chat("c1"))
    ranges = [call.args for call in recorded_calls if call.args and call.args[0] == "LRANGE"]
    assert [(first, last) for _, _, first, last in ranges] == [
        (0, 1023),
        (1024, 2047),
        (2048, 2699),
    ]
    recorded_calls.clear()
    store.import_chat(exported, chat_id="c2")
    # (a call re-sent after NOSCRIPT is recorded twice: one call object)
    calls = list({id(call): call for call in recorded_calls}.values())
    stages = [call for call in calls if call.script and call.script.name == "import_stage"]
    assert [int(call.args[3].split("\t")[0]) for call in stages] == [1000, 1000, 700]
    assert store.load_branch("c2").messages == store.load_branch("c1").messages


@pytest.fixture
def recorded_calls(monkeypatch: pytest.MonkeyPatch) -> list[protocol.Call[Any]]:
    calls: list[protocol.Call[Any]] = []
    original = protocol.Call.wire

    def wire(self: protocol.Call[Any], form: int = protocol.EVALSHA) -> Any:
        calls.append(self)
        return original(self, form)

    monkeypatch.setattr(protocol.Call, "wire", wire)
    return calls


# --- the async shell -------------------------------------------------------------------------


def test_the_async_store_imports_from_an_async_iterable(
    backend: str, namespace: str, loop_thread: LoopThread
) -> None:
    async def scenario() -> tuple[list[str], list[str]]:
        async with ctxstore.connect_async(backend, namespace=namespace).admin() as store:
            await store.upsert_chat("c1", "alice")
            await store.append(
                "c1", "main", [{"role": "user", "content": "hi"}], expected_head=None
            )
            exported = [dumps_line(record) async for record in store.export_chat("c1")]

            async def source() -> AsyncIterator[dict[str, Any]]:
                for line in exported:
                    yield json.loads(line)

            await store.import_chat(source(), chat_id="c2")
            again = [dumps_line(record) async for record in store.export_chat("c2")]
            return exported, again

    exported, again = loop_thread.run(scenario())
    assert again[1:] == exported[1:]
    assert json.loads(again[0])["id"] == "c2"
