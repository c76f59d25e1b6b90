"""Tests of the command line, the tree view and the exports; graph builders they share.

The builders make :class:`~ctxstore.models.ChatGraph` values directly, so the drawing and export
rules can be checked on exact shapes (ties in creation time, orphans, 5,000-deep chains)
without a store.
"""

from __future__ import annotations

from collections.abc import Iterable

from ctxstore import BranchInfo, ChatMeta, CheckpointInfo
from ctxstore.models import ChatGraph, GraphNode


def node(
    message_id: str,
    parent_id: str | None = None,
    *,
    role: str = "user",
    preview: str = "hello",
    at: int = 0,
) -> GraphNode:
    return GraphNode(id=message_id, parent_id=parent_id, role=role, preview=preview, created_at=at)


def branch(name: str, head: str | None, *, active: bool = False, at: int = 0) -> BranchInfo:
    return BranchInfo(
        name=name, head_message_id=head, is_active=active, message_count=0, created_at=at
    )


def checkpoint(name: str, message_id: str, *, at: int = 0) -> CheckpointInfo:
    return CheckpointInfo(name=name, message_id=message_id, created_at=at)


def chat_graph(
    messages: Iterable[GraphNode],
    branches: Iterable[BranchInfo] = (),
    checkpoints: Iterable[CheckpointInfo] = (),
    *,
    chat_id: str = "c1",
) -> ChatGraph:
    chat = ChatMeta(id=chat_id, user_id="alice", created_at=0, updated_at=0)
    return ChatGraph(
        chat=chat,
        messages=tuple(messages),
        branches=tuple(branches),
        checkpoints=tuple(checkpoints),
    )


def chain(length: int) -> list[GraphNode]:
    """``length`` messages, each the only child of the one before."""
    return [
        node(f"m{index:07d}", f"m{index - 1:07d}" if index else None, at=index)
        for index in range(length)
    ]
