"""Checkpoint operations: named pointers to messages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_name
from ctxstore._core import telemetry
from ctxstore._core.format.fields import pairs
from ctxstore._core.format.pointers import checkpoint_info
from ctxstore._core.ids import new_request_id
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState

if TYPE_CHECKING:
    from ctxstore.models import CheckpointInfo


def upsert_checkpoint(
    state: StoreState,
    chat_id: str,
    name: str,
    message_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[CheckpointInfo]:
    """Name ``message_id``; an existing checkpoint of that name moves to it. A resent call
    (its reply lost) answers with the first call's record instead of moving it again."""
    chat = state.keyspace.chat(chat_id)
    check_name(name, "checkpoint name")
    check_name(message_id, "message_id")
    script = load_script("upsert_checkpoint")
    info: CheckpointInfo = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), name, message_id, state.clock(), new_request_id()),
        parse=lambda raw: checkpoint_info(name, telemetry.recalled(raw), chat.key("checkpoint"))[0],
        context=chat_context(chat_id),
        writes=True,
    )
    return info


def get_checkpoint(
    state: StoreState,
    chat_id: str,
    name: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[CheckpointInfo]:
    chat = state.keyspace.chat(chat_id)
    check_name(name, "checkpoint name")
    script = load_script("get_checkpoint")
    info: CheckpointInfo = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), name),
        parse=lambda raw: checkpoint_info(name, raw, chat.key("checkpoint"))[0],
        context=chat_context(chat_id),
    )
    return info


def list_checkpoints(
    state: StoreState,
    chat_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[list[CheckpointInfo]]:
    """Every checkpoint, newest first (most recently placed or moved)."""
    chat = state.keyspace.chat(chat_id)
    script = load_script("list_checkpoints")

    def parse(flat: Sequence[Any]) -> list[CheckpointInfo]:
        ordered = [
            checkpoint_info(name, raw, chat.key("checkpoint"))
            for name, raw in pairs(flat, chat.key("checkpoint")).items()
        ]
        ordered.sort(key=lambda pair: pair[1], reverse=True)
        return [info for info, _seq in ordered]

    checkpoints: list[CheckpointInfo] = yield script_call(
        script,
        keys_for(script, chat),
        scope_args(user_id, incarnation),
        parse=parse,
        context=chat_context(chat_id),
    )
    return checkpoints


def delete_checkpoint(
    state: StoreState,
    chat_id: str,
    name: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[bool]:
    """Remove a checkpoint; True if it existed (a resent call answers like the first one).
    The message it named stays."""
    chat = state.keyspace.chat(chat_id)
    check_name(name, "checkpoint name")
    script = load_script("delete_checkpoint")
    deleted: bool = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), name, new_request_id()),
        parse=lambda raw: bool(telemetry.recalled(raw)),
        context=chat_context(chat_id),
        writes=lambda deleted: deleted,
    )
    return deleted
