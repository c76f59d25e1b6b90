"""Listing chats: newest ``updated_at`` first, by user or for the whole namespace.

The index (a sorted set, score = ``updated_at``) gives the order; the chat hashes give the truth.
A listing reads index entries in order, then the chat hashes of those entries in one pipeline,
and keeps going until the page is full. Entries found stale (the chat is gone, belongs to someone
else, or its score disagrees with its ``updated_at``) are skipped and repaired, so the positions
of the next page are right again: pages neither repeat nor skip chats while no one writes.

Without a metadata filter the index offset is used directly (cost ~ the page). With one, the
listing must look at every chat before the offset (cost ~ offset + page): metadata lives in the
chat hashes, which no index covers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ctxstore.core import indexes
from ctxstore.core.codec import decode, encode
from ctxstore.core.ids import check_key_id, check_name
from ctxstore.core.protocol import Call, Operation, command_call
from ctxstore.core.records import chat_info, text
from ctxstore.core.state import StoreState
from ctxstore.errors import CtxStoreError, ValidationError

if TYPE_CHECKING:
    from ctxstore.models import ChatInfo

#: Index entries read per step when scanning for a metadata filter or an unbounded listing.
SCAN_CHUNK = 200


#: The largest limit or offset a listing takes (Redis takes 64-bit signed ranges; this is far
#: beyond any namespace and keeps every arithmetic on them exact).
MAX_PAGE = 2**31 - 1


def _check_page(limit: int | None, offset: int) -> None:
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_PAGE
    ):
        raise ValidationError(
            f"limit must be None or an integer from 0 to {MAX_PAGE}, got {limit!r}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_PAGE:
        raise ValidationError(f"offset must be an integer from 0 to {MAX_PAGE}, got {offset!r}")


def _check_filter(metadata: tuple[str, Any] | None, state: StoreState) -> tuple[str, Any] | None:
    """The filter with its value canonicalized by a msgpack round trip (tuples become lists...).

    Stored values come back from msgpack, so comparing against the round-tripped query keeps
    the match type-exact without false misses.
    """
    if metadata is None:
        return None
    if not isinstance(metadata, tuple) or len(metadata) != 2:
        raise ValidationError("metadata filter must be a (key, value) tuple")
    key, value = metadata
    check_name(key, "metadata key")
    packed = encode(value, what="metadata filter", limit=state.limits.max_message_bytes)
    return key, decode(packed, key="metadata filter", field=key)


def same_value(left: Any, right: Any) -> bool:
    """Equality that also requires equal types, at every depth (``1 != 1.0 != True``)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, dict):
        return left.keys() == right.keys() and all(same_value(left[k], right[k]) for k in left)
    if isinstance(left, list):
        return len(left) == len(right) and all(map(same_value, left, right))
    return bool(left == right)


def _read_call(state: StoreState, chat_id: str) -> Call[Any]:
    key = state.keyspace.chat(chat_id).key("chat")
    return command_call(
        ("HGETALL", key),
        keys=(key,),
        parse=lambda flat: chat_info(chat_id, key, flat) if flat else None,
    )


def list_chats(
    state: StoreState,
    *,
    user_id: str | None = None,
    metadata: tuple[str, Any] | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Operation[list[ChatInfo]]:
    """Chats newest first, each with its message and branch counts."""
    _check_page(limit, offset)
    wanted = _check_filter(metadata, state)
    if user_id is not None:
        index = state.keyspace.user_index(check_key_id(user_id, "user_id"))
    else:
        index = state.keyspace.all_chats_index
    position = offset if wanted is None else 0
    to_skip = 0 if wanted is None else offset
    found: list[ChatInfo] = []
    while limit is None or len(found) < limit:
        chunk = SCAN_CHUNK if (limit is None or wanted is not None) else limit - len(found)
        entries = yield _range_call(index, position, chunk)
        if not entries:
            break
        outcomes = yield tuple(_read_call(state, chat_id) for chat_id, _ in entries)
        live, repairs = _sort_out(entries, outcomes, user_id)
        if repairs:
            yield indexes.repair_call(index, repairs)
        position += len(live)  # removed entries no longer take a place in the index
        for info in live:
            if wanted is not None and not _matches(info, wanted):
                continue
            if to_skip:
                to_skip -= 1
            elif limit is None or len(found) < limit:
                found.append(info)
        if len(entries) < chunk:
            break
    return found


def _sort_out(
    entries: list[tuple[str, float]], outcomes: list[Any], user_id: str | None
) -> tuple[list[ChatInfo], list[indexes.Repair]]:
    """The chats that are really there, and the repairs the stale entries need.

    A missing chat, or (in a user's index) a chat of another user, is removed from the index;
    a score that disagrees with the chat's ``updated_at`` is set to it.
    """
    live: list[ChatInfo] = []
    repairs: list[indexes.Repair] = []
    for (chat_id, score), info in zip(entries, outcomes, strict=True):
        if isinstance(info, CtxStoreError):
            raise info
        if info is None or (user_id is not None and info.user_id != user_id):
            repairs.append((chat_id, score, None))
            continue
        if score != info.updated_at:
            repairs.append((chat_id, score, info.updated_at))
        live.append(info)
    return live, repairs


def _range_call(index: str, position: int, count: int) -> Call[list[tuple[str, float]]]:
    def parse(reply: Sequence[Any]) -> list[tuple[str, float]]:
        # redis-py pairs WITHSCORES replies up itself; a raw reply is flat.
        if reply and isinstance(reply[0], (list, tuple)):
            return [(text(member), float(score)) for member, score in reply]
        return [(text(reply[i]), float(reply[i + 1])) for i in range(0, len(reply), 2)]

    return command_call(
        ("ZRANGE", index, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", position, count, "WITHSCORES"),
        keys=(index,),
        parse=parse,
    )


def _matches(info: ChatInfo, wanted: tuple[str, Any]) -> bool:
    key, value = wanted
    return key in info.metadata and same_value(info.metadata[key], value)
