"""Maintenance of the cross-chat indexes (chats by last update, per namespace and per user).

The indexes are sorted sets in their own Cluster slots. Only three writes move ``updated_at``:
append, update_chat and open_chat (creating a chat or merging metadata). On a single server (and
the embedded store) append and update_chat take the indexes as optional keys and move the chat
themselves, only when the write succeeded. Elsewhere the indexes are kept by idempotent calls:

* after the write, with the owner and time its reply names (open_chat always; the others when
  the owner is not known yet): ``ZADD ... GT`` (never moves a score back, so racing writers
  converge on the newest time);
* on a Cluster with the owner known, in the same round trip as the write:
  ``touch_index.lua`` moves the entry (``GT``) and returns the score it had. If the write then
  fails, :func:`restore_calls` puts that score back (or removes an entry the touch created),
  only while the entry still holds the touch's score: a refused write never moves a chat.

Entries can still go stale (a chat deleted between two commands, a worker dying between a
failed write and the restore). Listings check every entry against its chat and repair what
they saw, with :func:`repair_call`, which only changes an entry that still has the score the
listing read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ctxstore._core.protocol import Arg, Call, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState

TouchMode = Literal["NX", "GT"]


def touch_calls(
    state: StoreState, chat_id: str, user_id: str, score: int, mode: TouchMode
) -> tuple[Call[object], ...]:
    """Index commands recording that ``chat_id`` (owned by ``user_id``) was updated at ``score``."""
    return tuple(
        command_call(("ZADD", index, mode, score, chat_id), keys=(index,))
        for index in state.keyspace.indexes_of(user_id)
    )


def touch_script_calls(
    state: StoreState, chat_id: str, user_id: str, score: int
) -> tuple[Call[str | None], ...]:
    """``touch_index.lua`` on each index of ``user_id``: the chat moved to ``score`` (GT),
    each call returning the entry's score before (None: not listed), for :func:`restore_calls`."""
    script = load_script("touch_index")
    return tuple(
        script_call(script, (index,), (chat_id, score), parse=_previous_score)
        for index in state.keyspace.indexes_of(user_id)
    )


def _previous_score(reply: bytes | str) -> str | None:
    value = reply.decode("ascii") if isinstance(reply, bytes) else reply
    return value or None


def restore_calls(
    state: StoreState, chat_id: str, user_id: str, score: int, previous: Sequence[object]
) -> tuple[Call[object], ...]:
    """Undo the touches of a write that failed: each index entry the touch moved (``previous``
    holds what :func:`touch_script_calls` returned, in order) goes back to its old score, or is
    removed when the touch created it. An entry that moved again since is left alone."""
    calls: list[Call[object]] = []
    for index, before in zip(state.keyspace.indexes_of(user_id), previous, strict=True):
        if isinstance(before, BaseException):
            continue  # the touch itself failed: nothing moved, or nothing is known
        if before is not None and float(str(before)) >= score:
            continue  # the entry was already at or past this write's time: GT left it
        old = None if before is None else str(before)
        calls.append(repair_call(index, [(chat_id, float(score), old)]))
    return tuple(calls)


def removal_calls(state: StoreState, chat_id: str, user_id: str) -> tuple[Call[object], ...]:
    """Index commands forgetting a deleted chat."""
    return tuple(
        command_call(("ZREM", index, chat_id), keys=(index,))
        for index in state.keyspace.indexes_of(user_id)
    )


#: (index member, score the caller saw, new score or None to remove)
Repair = tuple[str | bytes, float, "int | str | None"]


def repair_call(index: str, repairs: Sequence[Repair], *, writes: bool = False) -> Call[object]:
    """Set each entry to its new score (or remove it), only if it still has the score seen.
    ``writes``: a store with ``durability=`` waits for it (the sweep's; a listing's repairs of
    what it read are best effort and never wait)."""
    args: list[Arg] = []
    for member, observed, new_score in repairs:
        args += [member, repr(observed), "" if new_score is None else new_score]
    return script_call(
        load_script("repair_index"), (index,), args, parse=lambda reply: reply, writes=writes
    )
