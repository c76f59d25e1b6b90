"""No command carries more than 3,999 arguments, whatever the input: the cap ElastiCache
Serverless puts on a request. Counted on the wire, on the embedded store, a server and a Cluster.

A long append packs its records into two arguments (``lua/append.lua``: an empty marker, their
lengths, their bytes); imports stage a thousand records a command; reads send a few arguments
whatever they return.
"""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore._core import protocol
from ctxstore._core.ops import append as append_op
from ctxstore._core.protocol import MAX_COMMAND_ARGUMENTS, Call, Exchange
from ctxstore.errors import ValidationError
from tests.support.wire import trace_wire

LONG = 10_000


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {"role": "user", "content": text, **extra}


def contents(store: ctxstore.Store, chat: str, branch: str | None = None) -> list[str]:
    chain = store.load_branch(chat, branch)
    return [item["message"]["content"] for item in chain.messages]


def test_a_10000_message_append_sends_a_few_arguments(sync_store: ctxstore.Store) -> None:
    sync_store.upsert_chat("c", "u")
    with trace_wire() as wire:
        result = sync_store.append(
            "c", "main", [user(f"m{i}") for i in range(LONG)], expected_head=None
        )
    assert 0 < wire.widest <= 30  # the keys, four fields and the packed records
    assert len(contents(sync_store, "c")) == LONG
    assert sync_store.get_chain("c", result.head_message_id)[-1]["message"]["content"] == "m9999"
    assert sync_store.verify_chat("c").problems == ()


def test_chosen_ids_and_an_edit_in_a_packed_append(sync_store: ctxstore.Store) -> None:
    """The packed records go through the same rewrites as single ones: chosen ids, and an edit
    (an existing id) that forks a branch at its parent and carries the rest there."""
    sync_store.upsert_chat("c", "u")
    first = sync_store.append(
        "c", "main", [user("root", id="r"), user("old", id="x")], expected_head=None
    )
    more = append_op.PACKED_FROM + 100
    batch = [user("edited", id="x"), *(user(f"n{i}", id=f"n{i}") for i in range(more))]
    with trace_wire() as wire:
        result = sync_store.append(
            "c", "main", batch, expected_head=first.head_message_id, on_existing="fork"
        )
    assert wire.widest <= 30
    assert result.branch != "main"
    assert contents(sync_store, "c", result.branch) == ["root", "edited"] + [
        f"n{i}" for i in range(more)
    ]
    assert contents(sync_store, "c", "main") == ["root", "old"]
    last = f"n{more - 1}"
    assert sync_store.get_message("c", last)["message"]["content"] == last
    assert sync_store.verify_chat("c").problems == ()


@pytest.mark.parametrize("count", [append_op.PACKED_FROM - 1, append_op.PACKED_FROM])
def test_the_last_single_and_the_first_packed_append_store_the_same(
    sync_store: ctxstore.Store, count: int
) -> None:
    for chat in ("single", "packed"):
        sync_store.upsert_chat(chat, "u")
    messages = [user(f"m{i}", metadata={"i": i}) for i in range(count)]
    with trace_wire() as wire:
        sync_store.append("single", "main", messages, expected_head=None)
    packed = count >= append_op.PACKED_FROM
    assert (wire.widest < count) == packed
    sync_store.append("packed", "main", messages, expected_head=None)
    one = sync_store.load_branch("single")
    other = sync_store.load_branch("packed")
    assert [m["message"] for m in one.messages] == [m["message"] for m in other.messages]
    assert [m.get("metadata") for m in one.messages] == [m.get("metadata") for m in other.messages]
    assert one.tokens == other.tokens


@pytest.mark.parametrize(
    ("lengths", "reason"),
    [
        (lambda sizes: sizes[:-1], "packed records and their lengths differ"),
        (lambda sizes: [*sizes[:-1], sizes[-1] + 1], "packed records and their lengths differ"),
        (lambda sizes: [*sizes[:-2], sizes[-2] + sizes[-1]], "one token entry per message"),
        (lambda sizes: [*sizes, ""], "packed record lengths"),
        (lambda sizes: [f"0{sizes[0]}", *sizes[1:]], "packed record lengths"),
        (lambda _sizes: [], "packed record lengths"),
        (lambda sizes: [0, *sizes], "packed record lengths"),
        (lambda sizes: ["x", *sizes[1:]], "packed record lengths"),
    ],
)
def test_packed_records_that_do_not_add_up_are_refused_and_nothing_is_written(
    sync_store: ctxstore.Store,
    snap: Any,
    monkeypatch: pytest.MonkeyPatch,
    lengths: Any,
    reason: str,
) -> None:
    sync_store.upsert_chat("c", "u")
    before = snap()

    def broken(records: list[bytes]) -> tuple[bytes | str, ...]:
        sizes = lengths([len(record) for record in records])
        return (b"", ",".join(map(str, sizes)), b"".join(records))

    monkeypatch.setattr(append_op, "record_arguments", broken)
    with pytest.raises(ValidationError, match=reason):
        sync_store.append("c", "main", [user(f"m{i}") for i in range(5)], expected_head=None)
    assert snap() == before


def test_long_reads_exports_imports_and_repairs_stay_within_the_cap(
    sync_store: ctxstore.Store,
) -> None:
    sync_store.upsert_chat("c", "u")
    sync_store.append("c", "main", [user(f"m{i}") for i in range(LONG)], expected_head=None)
    with trace_wire() as wire:
        assert len(sync_store.load_branch("c").messages) == LONG
        head = sync_store.get_branch("c", "main").head_message_id
        assert len(sync_store.get_chain("c", head, max_depth=LONG)) == LONG
        assert len(sync_store.get_graph("c").messages) == LONG
        exported = list(sync_store.export_chat("c"))
        sync_store.import_chat(exported, chat_id="copy")
        assert sync_store.verify_chat("copy", repair=True).problems == ()
        assert sync_store.delete_chat("c")
    assert len(contents(sync_store, "copy")) == LONG
    assert 0 < wire.widest <= MAX_COMMAND_ARGUMENTS


def test_an_import_where_every_message_starts_a_run_stays_within_the_cap(
    sync_store: ctxstore.Store,
) -> None:
    """Each message of this export answers the first one (regenerated answers): it carries an
    alias pair and a run pair, 5 arguments a message, so a thousand would need 5,000."""
    count = 2_500
    records: list[dict[str, Any]] = [
        {
            "type": "chat", "version": 1, "id": "c", "user_id": "u", "title": None,
            "created_at": 1, "updated_at": 2, "ttl_ms": None, "usage": {}, "metadata": {},
            "counts": {"messages": count, "branches": 1, "checkpoints": 0, "summaries": 0},
        },
        {"type": "message", "id": "q", "parent_id": None, "created_at": 1, "tokens": 5,
         "message": {"role": "user", "content": "q"}},
    ]  # fmt: skip
    records += [
        {"type": "message", "id": f"a{i}", "parent_id": "q", "created_at": 2, "tokens": 5,
         "message": {"role": "assistant", "content": f"answer {i}"}}
        for i in range(count - 1)
    ]  # fmt: skip
    records.append(
        {"type": "branch", "name": "main", "head": f"a{count - 2}", "created_at": 1, "active": True}
    )
    with trace_wire() as wire:
        sync_store.import_chat(records)
    assert MAX_COMMAND_ARGUMENTS - 20 < wire.widest <= MAX_COMMAND_ARGUMENTS
    assert contents(sync_store, "c") == ["q", f"answer {count - 2}"]
    assert len(sync_store.message_versions("c", "a0")) == count - 1
    assert sync_store.verify_chat("c").problems == ()


def test_the_managed_service_check_refuses_a_wider_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the checks on (the Valkey pass of .ci/run), a command over the cap raises before
    anything is sent; at the cap it goes."""

    def operation(width: int) -> Any:
        yield Call(script=None, keys=("k",), args=("RPUSH", "k", *["x"] * (width - 2)))

    monkeypatch.setattr(protocol, "CHECK_ARGUMENTS", True)
    assert len(Exchange(operation(MAX_COMMAND_ARGUMENTS)).request()[0]) == MAX_COMMAND_ARGUMENTS
    with pytest.raises(RuntimeError, match="RPUSH' with 4000 arguments"):
        Exchange(operation(MAX_COMMAND_ARGUMENTS + 1)).request()
    monkeypatch.setattr(protocol, "CHECK_ARGUMENTS", False)
    assert len(Exchange(operation(MAX_COMMAND_ARGUMENTS + 1)).request()[0]) == 4000
