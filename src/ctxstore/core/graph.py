"""The whole-chat graph, for inspection, trees and exports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.core.chain import (
    Slice,
    decode_records,
    derived_id,
    fetch_ranges,
    flat_ranges,
    record_fields,
    slices,
)
from ctxstore.core.chats import chat_context, keys_for, scope_args
from ctxstore.core.keys import ChatKeys
from ctxstore.core.preview import preview
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.records import (
    branch_record,
    chat_meta,
    checkpoint_info,
    gc_paused,
    pairs,
    to_branch_info,
)
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.errors import CorruptionError

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
    meta = chat_meta(chat_id, chat.key("chat"), flat_chat)
    loaded = slices(covered, parts)
    rest = flat_ranges(left)
    if rest:
        loaded = yield from fetch_ranges(state, chat, meta.incarnation, rest, chat_context(chat_id))
    return _graph(chat, meta, loaded, pairs(flat_branches), pairs(flat_checkpoints))


def _graph(
    chat: ChatKeys,
    meta: ChatMeta,
    parts: Sequence[Slice],
    branches: dict[str, Any],
    checkpoints: dict[str, Any],
) -> ChatGraph:
    from ctxstore.models import ChatGraph, GraphNode

    key = chat.key("log")
    ids: list[str] = []
    nodes = []
    with gc_paused(True):
        for position, record in enumerate(decode_records(parts, key)):
            parent, created_at, payload, chosen, tag = record_fields(record, key, position)
            if parent >= position:
                raise CorruptionError(
                    f"the record at {key} position {position} names a parent not older than it",
                    key=key,
                    field=str(position),
                )
            message_id = (
                chosen if chosen is not None else derived_id(position, meta.incarnation, tag)
            )
            ids.append(message_id)
            nodes.append(
                GraphNode(
                    id=message_id,
                    parent_id=ids[parent] if parent >= 0 else None,
                    role=str(payload.get("role", "")),
                    preview=preview(payload),
                    created_at=created_at,
                )
            )
    branch_records = sorted(
        ((name, branch_record(name, raw, chat.key("branch"))) for name, raw in branches.items()),
        key=lambda pair: pair[1].seq,
    )
    branch_infos = tuple(
        to_branch_info(name, record, active=meta.active_branch) for name, record in branch_records
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
