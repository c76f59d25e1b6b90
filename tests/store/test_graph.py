"""The whole-chat graph."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore import NewMessage


def test_graph_holds_messages_branches_and_checkpoints(store: Any) -> None:
    store.upsert_chat("c1", "alice")
    store.append(
        "c1",
        "main",
        [
            NewMessage({"role": "user", "content": "hello\n  there " + "x" * 100}, id="m1"),
            NewMessage(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": "t",
                            "type": "function",
                            "function": {"name": "search", "arguments": "{}"},
                        }
                    ],
                },
                id="m2",
            ),
        ],
        expected_head=None,
    )
    store.create_branch("c1", "m1", activate=True)
    store.append(
        "c1", "main-v2", [NewMessage({"role": "user", "content": "b"}, id="m3")], expected_head="m1"
    )
    store.upsert_checkpoint("c1", "start", "m1")
    graph = store.get_graph("c1")
    assert isinstance(graph, ctxstore.models.ChatGraph)
    assert graph.chat.id == "c1"
    nodes = {node.id: node for node in graph.messages}
    assert graph.messages[0].id == "m1"
    assert nodes["m2"].parent_id == "m1"
    assert nodes["m3"].parent_id == "m1"
    assert nodes["m1"].parent_id is None
    assert nodes["m1"].role == "user"
    assert nodes["m1"].preview.startswith("hello there x")
    assert "\n" not in nodes["m1"].preview
    assert len(nodes["m1"].preview) <= 60
    assert nodes["m2"].preview == "calls search"
    assert [(b.name, b.head_message_id, b.is_active, b.message_count) for b in graph.branches] == [
        ("main", "m2", False, 2),
        ("main-v2", "m3", True, 2),
    ]
    assert [(c.name, c.message_id) for c in graph.checkpoints] == [("start", "m1")]


def test_graph_of_unknown_chat(store: Any) -> None:
    with pytest.raises(ctxstore.ChatNotFoundError):
        store.get_graph("ghost")


def test_graph_size_is_bounded(backend: str, namespace: str) -> None:
    store = ctxstore.connect(
        backend, namespace=namespace, limits=ctxstore.Limits(max_graph_messages=3)
    ).admin()
    store.upsert_chat("c1", "alice")
    store.append(
        "c1", "main", [{"role": "user", "content": str(i)} for i in range(4)], expected_head=None
    )
    with pytest.raises(ctxstore.errors.LimitExceededError):
        store.get_graph("c1")
    store.close()
