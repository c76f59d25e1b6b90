"""Every value a read returns is the caller's: mutating it at any depth (its lists, its dicts,
the dicts inside them) never changes what a later read returns, through the same store, another
store of the same process, or another engine. The values stay plain mutable dicts and lists.
Every backend, both shells."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage
from ctxstore._base.owned import OwnedList, owned

Read = Callable[[Any, Any], Any]


def seed(store: Any) -> None:
    """alice's chat c1: a question with nested content and metadata, an answer, a tool call and
    its result, a checkpoint, and a second version of the answer."""
    store.upsert_chat("c1", "alice", {"labels": ["travel"], "nested": {"a": [1, 2]}})
    store.append(
        "c1",
        "main",
        [
            NewMessage(
                {"role": "user", "content": [{"type": "text", "text": "Plan a weekend."}]},
                id="m1",
                metadata={"tags": ["first"], "deep": {"k": [1]}},
            ),
            NewMessage({"role": "assistant", "content": "Alfama."}, id="m2"),
        ],
        expected_head=None,
        user_id="alice",
    )
    store.upsert_checkpoint("c1", "cp", "m1", user_id="alice")
    store.create_branch("c1", "m1", user_id="alice")
    store.append(
        "c1",
        None,
        [NewMessage({"role": "assistant", "content": "Belem."}, id="m3")],
        expected_head="m1",
        user_id="alice",
    )


def engine_of(store: Any, loop_thread: Any) -> Any:
    from tests.support.facade import SyncOverAsync

    if isinstance(store, SyncOverAsync):
        return SyncOverAsync(
            ctxstore.AsyncContextEngine(store=store.wrapped, chat_id="c1", user_id="alice"),
            loop_thread,
        )
    return ctxstore.ContextEngine(store=store, chat_id="c1", user_id="alice")


READS: dict[str, Read] = {
    "load_branch": lambda s, _e: s.load_branch("c1", "main", user_id="alice").messages,
    "load_branch window": lambda s, _e: (
        s.load_branch("c1", "main", max_messages=1, user_id="alice").messages
    ),
    "get_chain": lambda s, _e: s.get_chain("c1", "m2", user_id="alice"),
    "get_message": lambda s, _e: s.get_message("c1", "m1", user_id="alice"),
    "open_chat": lambda s, _e: s.open_chat("c1", "alice", load=True).messages,
    "get_chat": lambda s, _e: s.get_chat("c1", user_id="alice").metadata,
    "list_chats": lambda s, _e: [c.metadata for c in s.list_chats(user_id="alice")],
    "list_chats_page": lambda s, _e: [c.metadata for c in s.list_chats_page(user_id="alice").chats],
    "message_versions": lambda s, _e: [
        v.message for v in s.message_versions("c1", "m2", user_id="alice")
    ],
    "export_chat": lambda s, _e: list(s.export_chat("c1", user_id="alice")),
    "resolve messages": lambda _s, e: e.resolve().messages,
    "resolve full": lambda _s, e: e.resolve(full=True).messages,
    "with_system": lambda _s, e: e.resolve().with_system(),
    "ui_messages": lambda _s, e: e.resolve().ui_messages,
}


def mutate(value: Any) -> None:
    """Change every dict and list inside ``value``, at every depth."""
    if isinstance(value, dict):
        for item in list(value.values()):
            mutate(item)
        value["mutated"] = True
        for key in [k for k in value if isinstance(value[k], str)]:
            value[key] = value[key] + "!"
    elif isinstance(value, list):
        for item in value:
            mutate(item)
        value.append("mutated")
    elif hasattr(value, "__dict__") and not isinstance(value, type):
        for item in vars(value).values():
            mutate(item)


def snapshot(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=repr)


@pytest.mark.parametrize("name", sorted(READS))
def test_mutating_what_a_read_returns_never_changes_a_later_read(
    store: Any, loop_thread: Any, name: str, backend: str, namespace: str
) -> None:
    seed(store)
    read = READS[name]
    engine = engine_of(store, loop_thread)
    first = read(store, engine)
    before = snapshot(first)
    assert isinstance(first, (list, dict))  # plain mutable values, as ever
    mutate(first)
    assert snapshot(first) != before  # the caller's copy changed
    assert snapshot(read(store, engine)) == before  # the same store, the same engine
    assert snapshot(read(store, engine_of(store, loop_thread))) == before  # a new engine
    with ctxstore.connect(backend, namespace=namespace).admin() as other:  # another store
        assert snapshot(read(other, engine_of(other, loop_thread))) == before


def test_the_adapters_items_are_the_callers(store: Any, backend: str, namespace: str) -> None:
    pytest.importorskip("langchain_core")
    from ctxstore.integrations.langchain import CtxStoreChatMessageHistory

    seed(store)
    plain = ctxstore.connect(backend, namespace=namespace)
    history = CtxStoreChatMessageHistory("c1", store=plain.for_user("alice"))
    first = history.messages
    before = [m.model_dump_json() for m in first]
    for message in first:
        message.content = "changed"
        message.additional_kwargs["x"] = 1
    assert [m.model_dump_json() for m in history.messages] == before
    plain.close()


def test_an_owned_list_is_a_plain_list_whose_items_are_copied_as_they_are_handed_out() -> None:
    shared = [{"n": [1]}, {"n": [2]}, {"n": [3]}]
    kept = copy.deepcopy(shared)
    out = OwnedList.over(shared, 2, [{"n": [9]}])
    assert isinstance(out, list)
    assert out == [{"n": [1]}, {"n": [2]}, {"n": [9]}]
    assert json.dumps(out) == '[{"n": [1]}, {"n": [2]}, {"n": [9]}]'
    handed = [
        lambda: out[0],
        lambda: out[-3],
        lambda: out[0:2][1],
        lambda: next(iter(out)),
        lambda: list(out)[1],
        lambda: [*out][0],  # noqa: RUF015 - the unpacking is what is tested
        lambda: out.copy()[1],
        lambda: copy.copy(out)[0],
        lambda: ([{"n": [0]}] + out)[1],  # noqa: RUF005 - concatenation is what is tested
        lambda: (out + [])[0],  # noqa: RUF005
        lambda: sorted(out, key=lambda d: d["n"][0])[0],
        lambda: tuple(out)[1],
        lambda: next(reversed(out)),
        lambda: (out * 2)[0],
        lambda: dict(enumerate(out))[1],
    ]
    for take in handed:
        item = take()
        item["n"].append("x")
        item["y"] = 1
    assert shared == kept  # the cache's items never changed
    fresh = OwnedList.over(shared, 3)
    fresh.sort(key=lambda d: -d["n"][0])
    fresh[0]["n"].append("z")
    fresh.append({"n": [4]})
    del fresh[1]
    assert shared == kept
    popped = OwnedList.over(shared, 3).pop()
    popped["n"].append("p")
    assert shared == kept


def test_owned_copies_every_container_and_keeps_the_leaves() -> None:
    value = {"a": [1, {"b": (2, [3])}], "c": "text", "d": b"bytes", "e": None}
    copied = owned(value)
    assert copied == value
    assert copied is not value
    assert copied["a"] is not value["a"]
    assert copied["a"][1] is not value["a"][1]
    assert copied["a"][1]["b"][1] is not value["a"][1]["b"][1]
    assert copied["c"] is value["c"]
