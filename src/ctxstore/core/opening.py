"""Opening a chat as its owner: create-or-check, merge metadata, optionally read the branch."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.core import indexes
from ctxstore.core.chats import chat_context, keys_for, log_index_failures, metadata_args
from ctxstore.core.ids import check_key_id
from ctxstore.core.keys import ChatKeys
from ctxstore.core.messages import max_depth_arg
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.records import branch_info, chain_messages, chat_meta, text
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.models import ChatMeta, OpenedChat


def open_chat(
    state: StoreState,
    chat_id: str,
    user_id: str,
    metadata: Mapping[str, Any] | None = None,
    *,
    load: bool = False,
    max_depth: int | None = None,
) -> Operation[OpenedChat]:
    """Create the chat if missing, else check the owner; merge metadata; read the active branch.

    One script: opening an existing chat is one round trip, with its conversation when
    ``load``. Creating one (or merging metadata) adds a round trip for the index entries,
    sent only after the script succeeded, so a refused open writes nothing anywhere.
    """
    chat = state.keyspace.chat(chat_id)
    check_key_id(user_id, "user_id")
    meta_args = metadata_args(metadata, state)
    script = load_script("open_chat")
    opened: OpenedChat = yield script_call(
        script,
        keys_for(script, chat),
        (user_id, state.clock(), "1" if load else "0", max_depth_arg(state, max_depth), *meta_args),
        parse=lambda reply: _parse(chat_id, chat, reply),
        context=chat_context(chat_id),
    )
    state.owners.remember(chat_id, opened.chat.user_id)
    if opened.created or meta_args:
        outcomes = yield indexes.touch_calls(state, chat_id, user_id, opened.chat.updated_at, "GT")
        log_index_failures(outcomes)
    return opened


def _parse(chat_id: str, chat: ChatKeys, reply: Sequence[Any]) -> OpenedChat:
    created, flat, active, raw_branch, length, ids, records = reply
    meta = chat_meta(chat_id, chat.key("chat"), flat)
    info, _seq = branch_info(
        text(active), raw_branch, active=text(active), length=int(length), key=chat.key("branch")
    )
    return OpenedChat(
        chat=meta,
        created=bool(created),
        branch=info,
        messages=chain_messages(chat.key("msg"), ids, records),
    )


def upsert_chat(
    state: StoreState, chat_id: str, user_id: str, metadata: Mapping[str, Any] | None = None
) -> Operation[ChatMeta]:
    """Create the chat if missing, else check that ``user_id`` owns it; merge ``metadata``."""
    opened = yield from open_chat(state, chat_id, user_id, metadata)
    meta: ChatMeta = opened.chat
    return meta
