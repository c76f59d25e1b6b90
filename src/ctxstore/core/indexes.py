"""Maintenance of the cross-chat indexes (chats by last update, per namespace and per user).

The indexes are sorted sets in their own Cluster slots. On a single server (and the embedded
store) the append script, the hottest write, takes them as optional keys and moves the chat
itself, only when the write succeeded. Elsewhere (a Cluster, the other writes) they are kept by
idempotent plain commands sent in the same pipeline as the chat script whenever the owner is
known (one round trip), or right after it:

* ``ZADD ... NX`` when a chat may just have been created (never moves an existing score),
* ``ZADD ... GT`` after a write that bumped ``updated_at`` (never moves a score back, so racing
  writers converge on the newest time).

Entries can go stale (a chat deleted between two commands, a worker dying mid-way, a write that
failed after its index touch was sent). Listings detect that and repair what they saw, with
:func:`repair_call`, which only changes an entry that still has the score the listing read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ctxstore.core.protocol import Arg, Call, command_call, script_call
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState

TouchMode = Literal["NX", "GT"]


def touch_calls(
    state: StoreState, chat_id: str, user_id: str, score: int, mode: TouchMode
) -> tuple[Call[object], ...]:
    """Index commands recording that ``chat_id`` (owned by ``user_id``) was updated at ``score``."""
    return tuple(
        command_call(("ZADD", index, mode, score, chat_id), keys=(index,))
        for index in state.keyspace.indexes_of(user_id)
    )


def removal_calls(state: StoreState, chat_id: str, user_id: str) -> tuple[Call[object], ...]:
    """Index commands forgetting a deleted chat."""
    return tuple(
        command_call(("ZREM", index, chat_id), keys=(index,))
        for index in state.keyspace.indexes_of(user_id)
    )


#: (chat id, score the listing read, new score or None to remove)
Repair = tuple[str, float, "int | None"]


def repair_call(index: str, repairs: Sequence[Repair]) -> Call[object]:
    args: list[Arg] = []
    for chat_id, observed, new_score in repairs:
        args += [chat_id, repr(observed), "" if new_score is None else new_score]
    return script_call(load_script("repair_index"), (index,), args, parse=lambda reply: reply)
