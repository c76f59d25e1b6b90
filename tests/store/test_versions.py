"""The versions of a message (what a chat UI shows as "< 2/3 >"): the messages that share its
parent, across branches, oldest first, each with the branches that hold it; one round trip;
and the engine's switch to a version. On every backend, through both shells."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from tests.support.wire import trace_wire


def msg(message_id: str, role: str, content: str) -> dict[str, str]:
    return {"id": message_id, "role": role, "content": content}


def three_answers(store: Any) -> tuple[str, str]:
    """u1 -> a1 on main; a1 edited twice: main-v2 and main-v2-v2 hold the new answers."""
    store.upsert_chat("c1", "alice")
    store.append(
        "c1", "main", [msg("u1", "user", "q"), msg("a1", "assistant", "one")], expected_head=None
    )
    second = store.append(
        "c1", "main", [msg("a1", "assistant", "two")], expected_head="a1", on_existing="fork"
    )
    third = store.append(
        "c1",
        second.branch,
        [msg("a1", "assistant", "three"), msg("u2", "user", "more")],
        expected_head=second.head_message_id,
        on_existing="fork",
    )
    return second.branch, third.branch


def test_the_versions_of_an_answer_across_branches(store: Any, backend: str) -> None:
    second, third = three_answers(store)
    store.message_versions("c1", "u1")  # the script is loaded once per server
    with trace_wire() as wire:
        versions = store.message_versions("c1", "a1")
    if not backend.startswith("redis+cluster"):
        assert (wire.round_trips, wire.script_calls) == (1, 1)
    assert [v.message["content"] for v in versions] == ["one", "two", "three"]
    assert [v.branches for v in versions] == [("main",), (second,), (third,)]
    assert {v.parent_id for v in versions} == {"u1"}
    assert versions[0].id == "a1"
    # any version names the same set
    assert store.message_versions("c1", versions[2].id) == versions


def test_a_message_without_siblings_is_its_only_version(store: Any) -> None:
    second, third = three_answers(store)
    (root,) = store.message_versions("c1", "u1")
    assert root.id == "u1"
    assert root.parent_id is None
    assert root.branches == ("main", second, third)
    (later,) = store.message_versions("c1", "u2")
    assert later.branches == (third,)


def test_a_branch_made_at_a_message_holds_no_version_of_its_children(store: Any) -> None:
    three_answers(store)
    side = store.create_branch("c1", "u1", name="side")
    versions = store.message_versions("c1", "a1")
    assert all(side.name not in v.branches for v in versions)
    assert side.name in store.message_versions("c1", "u1")[0].branches


def test_versions_of_an_unknown_message_or_chat(store: Any) -> None:
    three_answers(store)
    with pytest.raises(ctxstore.errors.NotFoundError):
        store.message_versions("c1", "nope")
    with pytest.raises(ctxstore.errors.NotFoundError):
        store.message_versions("other", "a1")
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.message_versions("c1", "a1", user_id="mallory")


def test_the_engine_switches_to_the_newest_branch_holding_a_version(make_engine: Any) -> None:
    second, _third = three_answers(make_engine.store)
    engine = make_engine()
    versions = make_engine.store.message_versions("c1", "a1")
    assert engine.switch_to_version(versions[1].id).name == second
    assert engine.branch == second
    assert [m["content"] for m in engine.resolve().messages] == ["q", "two"]
    assert engine.switch_to_version("a1").name == "main"
    assert make_engine.store.get_chat("c1").active_branch == "main"


def ui(message_id: str, role: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}]}


def test_a_ui_engine_shows_the_versions_of_its_chain(make_engine: Any, backend: str) -> None:
    """u1 -> a1 (regenerated twice: three versions), u2 edited once (two versions): the UI
    messages of each branch say which version each is; a message without siblings says
    nothing."""
    store = make_engine.store
    store.upsert_chat("c1", "alice")
    store.append(
        "c1", "main", [ui("u1", "user", "q"), ui("a1", "assistant", "one")], expected_head=None
    )
    second = store.append(
        "c1", "main", [ui("a1", "assistant", "two")], expected_head="a1", on_existing="fork"
    )
    third = store.append(
        "c1",
        second.branch,
        [ui("a1", "assistant", "three"), ui("u2", "user", "next")],
        expected_head=second.head_message_id,
        on_existing="fork",
    )
    edited = store.append(
        "c1",
        third.branch,
        [ui("u2", "user", "next, edited")],
        expected_head=third.head_message_id,
        on_existing="fork",
    )
    make_engine(message_format="ui").resolve()  # the scripts are loaded once per server
    engine = make_engine(message_format="ui")
    with trace_wire() as wire:
        shown = engine.resolve().ui_messages
    if not backend.startswith("redis+cluster"):
        assert wire.round_trips == 2  # opening the chat, then the read and the versions
    assert [m.get("metadata", {}).get("versions") for m in shown] == [
        None,
        {"index": 2, "count": 3},
        {"index": 1, "count": 2},
    ]
    assert shown[2]["parts"][0]["text"] == "next, edited"
    assert edited.branch == store.get_chat("c1").active_branch
    with trace_wire() as wire:
        again = engine.resolve().ui_messages
    if not backend.startswith("redis+cluster"):
        assert wire.round_trips == 1  # the read and the versions script share the round trip
    assert again == shown
    engine.switch_branch("main")
    assert [m.get("metadata", {}).get("versions") for m in engine.resolve().ui_messages] == [
        None,
        {"index": 0, "count": 3},
    ]
    plain = make_engine()  # an engine of any format shows them (on main, active now)
    assert [m.get("metadata", {}).get("versions") for m in plain.resolve().ui_messages] == [
        None,
        {"index": 0, "count": 3},
    ]


def test_every_engine_shows_versions_with_no_round_trip_more_for_a_chat_without_forks(
    make_engine: Any, backend: str
) -> None:
    """A default engine (no message_format): a chat without forks (one run) reads in one round
    trip and shows no versions; a chat with forks costs the engine's first read one more round
    trip (the versions' script), then the script shares the read's round trip."""
    store = make_engine.store
    store.upsert_chat("c1", "alice")
    store.append(
        "c1",
        "main",
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": "one"}],
        expected_head=None,
    )
    warm = make_engine()  # the scripts are loaded once per server
    warm.resolve()
    warm.resolve()
    cluster = backend.startswith("redis+cluster")
    linear = make_engine()
    with trace_wire() as wire:
        shown = linear.resolve().ui_messages
    assert all("versions" not in (m.get("metadata") or {}) for m in shown)
    assert cluster or wire.round_trips == 1
    with trace_wire() as wire:
        linear.resolve()
    assert cluster or (wire.round_trips, wire.script_calls) == (1, 1)
    head = store.get_branch("c1").head_message_id
    first = store.get_chain("c1", head)[0]["id"]
    store.create_branch("c1", first)  # main-v2 from the question, activated
    store.append(
        "c1", None, [{"role": "assistant", "content": "two"}], expected_head=first
    )  # a regenerated answer: the question has two children
    warm.resolve()  # (loads the versions' script)
    forked = make_engine()
    with trace_wire() as wire:
        shown = forked.resolve().ui_messages
    assert [(m.get("metadata") or {}).get("versions") for m in shown] == [
        None,
        {"index": 1, "count": 2},
    ]
    assert cluster or wire.round_trips == 2  # the open with the read, then the versions
    with trace_wire() as wire:
        again = forked.resolve().ui_messages
    assert again == shown
    assert cluster or (wire.round_trips, wire.script_calls) == (1, 2)  # one trip, two scripts
    with trace_wire() as wire:  # the engine that read it linear learns of the forks
        assert [
            (m.get("metadata") or {}).get("versions") for m in linear.resolve().ui_messages
        ] == [
            None,
            {"index": 0, "count": 2},  # it stays on main: the first answer
        ]
    assert cluster or wire.round_trips == 2
