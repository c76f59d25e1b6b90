"""graph_window: the window of a chat's graph a drawing needs, read in one script, records for
the drawn messages only."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore._core.ops.graph_window import graph_window
from ctxstore.errors import ChatNotFoundError, NotFoundError, ValidationError
from ctxstore.models import NewMessage
from tests.support.keyspace import raw_client
from tests.support.wire import trace_wire


def _long_chat(store: Any, length: int) -> tuple[str, ...]:
    store.upsert_chat("long", "alice")
    return store.append(
        "long", "main",
        [NewMessage({"role": "user", "content": f"m{i}"}) for i in range(length)],
        expected_head=None,
    ).message_ids  # fmt: skip


def test_a_window_of_a_long_chain_is_radius_deep_on_each_side(store: Any) -> None:
    ids = _long_chat(store, 500)
    state = store.state
    window = store.run(graph_window(state, "long", around=ids[250], radius=5))
    assert [node.id for node in window.nodes] == list(ids[245:256])
    assert [node.depth for node in window.nodes] == list(range(246, 257))
    assert window.nodes[0].parent_id is None  # its parent is not drawn
    assert window.nodes[0].parent_position == 244
    assert all(node.parent_id == ids[245 + i] for i, node in enumerate(window.nodes[1:]))
    assert window.has_earlier
    assert window.has_later
    assert all(node.on_active_branch for node in window.nodes)
    head = store.run(graph_window(state, "long", radius=5))
    assert head.center_id == ids[-1]
    assert [node.id for node in head.nodes] == list(ids[494:])
    assert not head.has_later


def test_one_round_trip_and_one_record_read_per_message_drawn(
    server_backend: str, namespace: str
) -> None:
    store = ctxstore.connect(server_backend, namespace=namespace).admin()
    ids = _long_chat(store, 10_000)
    state = store.state
    store.run(graph_window(state, "long", around=ids[5000], radius=4))  # scripts loaded
    if state.cluster:
        store.close()
        pytest.skip("commandstats are per node; the standalone server counts them")
    raw = raw_client(server_backend)
    raw.config_resetstat()
    with trace_wire() as wire:
        window = store.run(graph_window(state, "long", around=ids[5000], radius=4))
    stats = raw.info("commandstats")
    store.close()
    assert wire.round_trips == 1
    assert len(window.nodes) == 9
    assert stats["cmdstat_lrange"]["calls"] == 1  # one segment: the nine records drawn
    assert stats["cmdstat_lindex"]["calls"] == 1  # the center's own record, checked


def test_versions_stand_in_lanes_and_pointers_come_along(store: Any) -> None:
    ids = _long_chat(store, 10)
    other = store.create_branch("long", ids[4], activate=False)
    alt = store.append(
        "long", other.name, [NewMessage({"role": "user", "content": "alt"})], expected_head=ids[4]
    ).message_ids
    store.upsert_checkpoint("long", "cp", ids[6])
    store.write_summary("long", ids[3], "early days", tokens=3)
    window = store.run(graph_window(store.state, "long", around=ids[5], radius=2))
    lanes = {node.id: node.lane for node in window.nodes}
    assert lanes[alt[0]] != lanes[ids[5]]
    assert {n.id for n in window.nodes if n.depth == 6} == {ids[5], alt[0]}
    assert {b.name for b in window.branches} == {"main", other.name}
    assert [c.name for c in window.checkpoints] == ["cp"]
    assert window.summaries[0].covered_ids == (ids[3],)  # of depths 1..4, only 4 is drawn
    assert not next(n for n in window.nodes if n.id == alt[0]).on_active_branch


def test_lanes_past_the_limit_are_counted_not_drawn(store: Any) -> None:
    ids = _long_chat(store, 3)
    for i in range(6):
        branch = store.create_branch("long", ids[1], activate=False)
        store.append(
            "long", branch.name, [NewMessage({"role": "user", "content": f"v{i}"})],
            expected_head=ids[1],
        )  # fmt: skip
    window = store.run(graph_window(store.state, "long", around=ids[2], radius=1, max_lanes=3))
    assert window.lanes == 3
    assert window.lanes_left_out == 4
    assert any(node.id == ids[2] for node in window.nodes)  # the center's lane is kept


def test_bad_arguments_and_missing_things(store: Any) -> None:
    ids = _long_chat(store, 3)
    state = store.state
    for bad in ({"radius": 0}, {"radius": 501}, {"max_lanes": 0}, {"radius": True}):
        with pytest.raises(ValidationError):
            store.run(graph_window(state, "long", **bad))
    with pytest.raises(ChatNotFoundError):
        store.run(graph_window(state, "nope"))
    with pytest.raises(NotFoundError):
        store.run(graph_window(state, "long", around="no-such-message"))
    store.upsert_chat("empty", "alice")
    empty = store.run(graph_window(state, "empty"))
    assert empty.nodes == ()
    assert empty.center_id is None
    assert ids
