"""The versions of a message: the messages that share its parent, across branches (an edit
forks a branch at the parent, a regenerated answer too), each with the branches that hold it
(one ``message_versions.lua`` call); and where a branch's chain passes such messages, with their
rank (``chain_versions.lua``, sent beside a read): what a chat UI shows as "< 2/3 >"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ctxstore._base.ids import check_name
from ctxstore._core.format.fields import text
from ctxstore._core.format.records import Slice, chain_messages, record_id
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import opened
from ctxstore._core.protocol import Call, Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.models import MessageVersion


def message_versions(
    state: StoreState,
    chat_id: str,
    message_id: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[list[MessageVersion]]:
    """The messages that share ``message_id``'s parent, oldest first (it among them)."""
    chat = state.keyspace.chat(chat_id)
    check_name(message_id, "message_id")
    script = load_script("message_versions")
    key = chat.key("log")

    def decode(reply: Sequence[Any], seal: ChatSeal | None) -> list[MessageVersion]:
        inc, parent_position, parent_record, versions = reply
        parent_id = None
        if int(parent_position) >= 0:
            parent_id = record_id(parent_record, inc, key, int(parent_position))
        found = []
        for position, record, branches in versions:
            own = Slice(int(position), int(position), [record])
            stored = chain_messages([own], inc, key, parent_id, seal=seal)[0][0]
            found.append(
                MessageVersion(
                    id=stored["id"],
                    parent_id=parent_id,
                    created_at=stored["created_at"],
                    message=stored["message"],
                    metadata=stored.get("metadata"),
                    branches=tuple(text(name) for name in branches),
                )
            )
        return found

    reply: list[Any] = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), message_id),
        parse=lambda raw: [text(raw[0]), *raw[1:4]],
        context=chat_context(chat_id),
    )
    versions: list[MessageVersion] = yield from opened(
        state, chat_id, user_id, reply[0], lambda seal: decode(reply, seal)
    )
    return versions


#: A message id -> (its rank among its versions, oldest first from 0; how many there are).
ChainVersions = dict[str, tuple[int, int]]


def chain_versions_call(
    state: StoreState,
    chat_id: str,
    branch: str | None,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Call[ChainVersions]:
    """The call that finds the messages with versions on ``branch``'s chain (None: the active
    branch), to send beside the read of that chain."""
    chat = state.keyspace.chat(chat_id)
    script = load_script("chain_versions")
    key = chat.key("log")

    def parse(reply: Sequence[Any]) -> ChainVersions:
        inc, found = text(reply[0]), reply[1]
        versions: ChainVersions = {}
        for position, record, index, count in found:
            versions[record_id(record, inc, key, int(position))] = (int(index), int(count))
        return versions

    return script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), branch or ""),
        parse=parse,
        context=chat_context(chat_id),
    )
