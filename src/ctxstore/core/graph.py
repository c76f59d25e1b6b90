"""The whole-chat graph, for inspection, trees and exports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore.core.chats import chat_context, keys_for
from ctxstore.core.keys import ChatKeys
from ctxstore.core.preview import preview
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.records import (
    branch_record,
    chat_meta,
    checkpoint_info,
    pairs,
    stored_message,
    text,
    to_branch_info,
)
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.models import ChatGraph, GraphNode


def get_graph(state: StoreState, chat_id: str) -> Operation[ChatGraph]:
    """Every message (id, parent, role, preview), every branch and checkpoint, in one script.

    Messages come parents first (by depth), then by creation time; the chat is refused past
    ``limits.max_graph_messages`` messages so one call cannot pull an unbounded reply.
    """
    chat = state.keyspace.chat(chat_id)
    script = load_script("get_graph")
    graph: ChatGraph = yield script_call(
        script,
        keys_for(script, chat),
        (state.limits.max_graph_messages,),
        parse=lambda reply: _parse(chat_id, chat, reply),
        context=chat_context(chat_id),
    )
    return graph


def _parse(chat_id: str, chat: ChatKeys, reply: Sequence[Any]) -> ChatGraph:
    parents, records, depths, branches, checkpoints = (pairs(part) for part in reply[1:])
    meta = chat_meta(chat_id, chat.key("chat"), reply[0])
    nodes = []
    for message_id, raw in records.items():
        message = stored_message(message_id, None, raw, chat.key("msg"))
        parent = text(parents.get(message_id, b""))
        nodes.append(
            GraphNode(
                id=message_id,
                parent_id=parent or None,
                role=str(message["message"].get("role", "")),
                preview=preview(message["message"]),
                created_at=message["created_at"],
            )
        )
    # Parents before children (depth), then creation time: a stable order for drawing.
    nodes.sort(key=lambda node: (int(depths.get(node.id, 0)), node.created_at, node.id))
    branch_records = sorted(
        ((name, branch_record(name, raw, chat.key("branch"))) for name, raw in branches.items()),
        key=lambda pair: pair[1].seq,
    )
    branch_infos = tuple(
        to_branch_info(
            name,
            record,
            active=meta.active_branch,
            length=int(depths.get(record.head, 0)) if record.head else 0,
        )
        for name, record in branch_records
    )
    checkpoint_infos = sorted(
        (checkpoint_info(name, raw, chat.key("checkpoint")) for name, raw in checkpoints.items()),
        key=lambda pair: pair[1],
        reverse=True,
    )
    return ChatGraph(
        chat=meta,
        messages=tuple(nodes),
        branches=branch_infos,
        checkpoints=tuple(info for info, _ in checkpoint_infos),
    )
