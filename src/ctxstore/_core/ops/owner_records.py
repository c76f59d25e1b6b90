"""Owner records: the authoritative list of the chats each user owns.

The listing indexes (``idx:user:{<user>}``) are kept best effort: their entries follow a write
in another round trip on a Cluster, a failover can lose one, a listing repairs what it sees.
That is enough to list chats, not to erase a user. The owner record
(:meth:`~ctxstore._core.keys.Keyspace.owner_record`, a hash in the user's slot: chat id ->
``"<recorded at (epoch ms)>\t<incarnation>"``) is kept by a stricter rule:

* a chat is added *before* its first key is written: by ``open_chat.lua`` itself on a single
  server (same script); on a Cluster (the record lives in another slot) by
  :func:`created_after_record` before the creating call (``open_chat.lua`` refuses to create a
  chat its caller has not recorded), and so before an import publishes; a creating call that is
  refused takes its entry back, so a failed call leaves no trace;
* it is removed only *after* the chat's keys are gone (:func:`forget_calls`, which leaves an
  entry naming another incarnation: a chat of the same id recorded since).

So the record may name a chat whose creation failed, never miss one; erasure walks it (see
:mod:`ctxstore._core.ops.erasure`), and ``verify_chat`` reports (and with ``repair`` adds) a
chat its owner's record lacks (a chat written by a release that kept no record).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from ctxstore._core.format.fields import scored_pairs, text
from ctxstore._core.protocol import (
    Arg,
    Call,
    Operation,
    command_call,
    raise_first_error,
    script_call,
)
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import BackendError, CtxStoreError

T = TypeVar("T")

#: Hash fields (or sorted-set members) read per call when a record is walked.
MEMBERS_PER_READ = 500


def record_call(
    state: StoreState, user_id: str, chat_id: str, incarnation: str, when: int
) -> Call[bool]:
    """Add ``chat_id`` (as ``incarnation``, recorded at ``when``) to ``user_id``'s owner record,
    unless the record names it already; True when this call added it. An entry is never
    overwritten: it may stand for a chat that exists, and only its own deletion removes it."""
    record = state.keyspace.owner_record(user_id)
    return command_call(
        ("HSETNX", record, chat_id, f"{when}\t{incarnation}"),
        keys=(record,),
        parse=bool,
        writes=True,
    )


def created_after_record(
    state: StoreState, user_id: str, chat_id: str, incarnation: str, create: Call[T]
) -> Operation[T]:
    """Record ``chat_id`` (to be created as ``incarnation``) as ``user_id``'s, then run
    ``create``: the record holds the chat before its first key exists. A refused ``create``
    takes back the entry it added (none when the record named the chat already); one whose
    outcome is unknown (the server
    went away) leaves it, which erasure and the sweep tolerate: it names no chat."""
    added = yield record_call(state, user_id, chat_id, incarnation, state.clock())
    try:
        created: T = yield create
    except CtxStoreError as error:
        if added and not isinstance(error, BackendError):
            yield forget_calls(state, user_id, ((chat_id, incarnation),))
        raise
    return created


def forget_calls(
    state: StoreState, user_id: str, deleted: Sequence[tuple[str, str]]
) -> tuple[Call[int], ...]:
    """Take chats whose keys are gone out of ``user_id``'s record: ``deleted`` holds (chat id,
    the deleted incarnation) pairs; an entry of another incarnation stays
    (``forget_owned.lua``)."""
    if not deleted:
        return ()
    record = state.keyspace.owner_record(user_id)
    args: list[Arg] = []
    for chat_id, incarnation in deleted:
        args += [chat_id, incarnation]
    return (script_call(load_script("forget_owned"), (record,), args, parse=int, writes=True),)


def owned_chat_ids(state: StoreState, user_id: str) -> Operation[tuple[list[str], list[str]]]:
    """The chat ids ``user_id``'s owner record names, and those only the user's listing index
    names (chats of a release that kept no record, or a record entry lost): read, not changed."""
    recorded = yield from scan_members(state.keyspace.owner_record(user_id), "HSCAN")
    listed = yield from scan_members(state.keyspace.user_index(user_id), "ZSCAN")
    known = dict.fromkeys(recorded)
    return list(known), [chat_id for chat_id in dict.fromkeys(listed) if chat_id not in known]


def scan_members(key: str, command: str) -> Operation[list[str]]:
    """The fields of a hash (``HSCAN``) or members of a sorted set (``ZSCAN``), at most
    ``MEMBERS_PER_READ`` a call, so a large record never holds the server for long."""
    members: list[str] = []
    cursor: Any = 0
    while True:
        reply = yield command_call((command, key, cursor, "COUNT", MEMBERS_PER_READ), keys=(key,))
        cursor, items = reply[0], reply[1]
        members += [text(member) for member, _value in field_pairs(items)]
        if int(cursor) == 0:
            return members


def field_pairs(items: Any) -> list[tuple[Any, Any]]:
    """A scan's (field, value) pairs: redis-py answers HSCAN with a map, ZSCAN with pairs
    (read as a ``WITHSCORES`` reply is)."""
    if isinstance(items, Mapping):
        return list(items.items())
    return scored_pairs(items)


def missing_chats(state: StoreState, chat_ids: Sequence[str]) -> Operation[set[str]]:
    """Which of ``chat_ids`` have no chat hash: one ``EXISTS`` each, in one round trip, no
    payload read (an id that cannot name a chat is missing too)."""
    checks: list[tuple[str, Call[Any]]] = []
    missing: set[str] = set()
    for chat_id in chat_ids:
        try:
            key = state.keyspace.chat(chat_id).key("chat")
        except CtxStoreError:
            missing.add(chat_id)
            continue
        checks.append((chat_id, command_call(("EXISTS", key), keys=(key,))))
    if checks:
        outcomes = yield tuple(call for _chat_id, call in checks)
        raise_first_error(outcomes)
        missing |= {
            chat_id
            for (chat_id, _call), there in zip(checks, outcomes, strict=True)
            if not int(there)
        }
    return missing
