"""The whole-chat graph, for inspection, trees and exports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore._core.format.chat import chat_meta
from ctxstore._core.format.fields import corrupt, pairs
from ctxstore._core.format.pointers import branch_record, checkpoint_record, to_branch_info
from ctxstore._core.format.records import (
    Slice,
    decode_records,
    derived_id,
    gc_paused,
    record_fields,
)
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import opened, opened_chat
from ctxstore._core.ops.reads import fetch_ranges, flat_ranges, slices
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.messages.text import message_label, preview

if TYPE_CHECKING:
    from ctxstore.models import ChatGraph, ChatMeta


def get_graph(
    state: StoreState,
    chat_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[ChatGraph]:
    """Every message (id, parent, role, preview), every branch and checkpoint.

    Messages come in write order, which puts parents before children; the chat is refused past
    ``limits.max_graph_messages`` messages, and the records are read in bounded chunks.
    """
    chat = state.keyspace.chat(chat_id)
    script = load_script("get_graph")
    reply = yield script_call(
        script,
        keys_for(script, chat),
        (
            *scope_args(user_id, incarnation),
            state.limits.max_graph_messages,
            state.limits.read_inline_messages,
        ),
        parse=lambda raw: raw,
        context=chat_context(chat_id),
    )
    flat_chat, flat_branches, flat_checkpoints, _count, covered, parts, left = reply
    meta = yield from opened_chat(state, chat_id, chat.key("chat"), flat_chat, chat_meta)
    loaded = slices(covered, parts)
    rest = flat_ranges(left)
    if rest:
        loaded = yield from fetch_ranges(state, chat, meta.incarnation, rest, chat_context(chat_id))
    branches = pairs(flat_branches, chat.key("branch"))
    checkpoints = pairs(flat_checkpoints, chat.key("checkpoint"))
    graph: ChatGraph = yield from opened(
        state,
        chat_id,
        meta.user_id,
        meta.incarnation,
        lambda seal: _graph(
            chat, meta, loaded, branches, checkpoints, pause_gc=state.settings.pause_gc, seal=seal
        ),
    )
    return graph


def _graph(
    chat: ChatKeys,
    meta: ChatMeta,
    parts: Sequence[Slice],
    branches: dict[str, Any],
    checkpoints: dict[str, Any],
    pause_gc: bool = True,
    seal: ChatSeal | None = None,
) -> ChatGraph:
    from ctxstore.models import ChatGraph, CheckpointInfo, GraphNode

    key = chat.key("log")
    ids: list[str] = []
    nodes = []
    count = sum(part.last - part.first + 1 for part in parts)
    with gc_paused(count, pause=pause_gc):
        for position, record in enumerate(decode_records(parts, key, seal)):
            parent, created_at, payload, chosen, tag = record_fields(record, key, position)
            if parent >= position or parent < -1:
                raise corrupt(
                    key,
                    str(position),
                    f"the record at position {position} names a parent ({parent}) that is not "
                    "an older position",
                )
            message_id = (
                chosen if chosen is not None else derived_id(position, meta.incarnation, tag)
            )
            ids.append(message_id)
            nodes.append(
                GraphNode(
                    id=message_id,
                    parent_id=ids[parent] if parent >= 0 else None,
                    role=message_label(payload),
                    preview=preview(payload),
                    created_at=created_at,
                )
            )
    branch_records = sorted(
        ((name, branch_record(name, raw, chat.key("branch"))) for name, raw in branches.items()),
        key=lambda pair: pair[1].seq,
    )
    for name, record in branch_records:
        _check_pointer(ids, chat.key("branch"), name, record.position, record.head)
    if meta.active_branch not in branches:
        raise corrupt(chat.key("chat"), "active_branch", "names no branch of the chat")
    branch_infos = tuple(
        to_branch_info(name, record, active=meta.active_branch) for name, record in branch_records
    )
    checkpoint_infos = []
    for name, raw in checkpoints.items():
        position, message_id, created_at, seq = checkpoint_record(name, raw, chat.key("checkpoint"))
        _check_pointer(ids, chat.key("checkpoint"), name, position, message_id)
        checkpoint_infos.append(
            (
                CheckpointInfo(name=name, message_id=message_id, created_at=created_at),
                seq,
            )
        )
    checkpoint_infos.sort(key=lambda pair: pair[1], reverse=True)
    return ChatGraph(
        chat=meta,
        messages=tuple(nodes),
        branches=branch_infos,
        checkpoints=tuple(info for info, _ in checkpoint_infos),
    )


def _check_pointer(
    ids: Sequence[str], key: str, name: str, position: int, message_id: str | None
) -> None:
    """A branch head or a checkpoint names the message at its position (-1: none)."""
    if position == -1 and message_id is None:
        return
    if not 0 <= position < len(ids) or ids[position] != message_id:
        raise corrupt(
            key,
            name,
            f"names message {message_id!r} at position {position}, which holds "
            f"{ids[position] if 0 <= position < len(ids) else 'no message'!r}",
        )
