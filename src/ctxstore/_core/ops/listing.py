"""Listing chats: newest ``updated_at`` first, by user or for the whole namespace.

The index (a sorted set, score = ``updated_at``) gives the order; the chat hashes give the truth.
A listing reads a stretch of index entries (``lua/read_index.lua``), then the chat hashes of
those entries in one pipeline, and checks every entry against its chat before it uses it:

* an entry whose chat is gone, or (in a user's index) belongs to someone else, or whose member
  is no chat id at all, is left out and removed from the index;
* an entry whose score is above the chat's ``updated_at`` (a write that failed after its index
  update was sent, by a writer that died before putting the old score back) is placed by
  ``updated_at``, and the score repaired. When that place lies below the stretch read, the chat
  is left for the stretch that reaches it, so the order is the order of the truth;
* an entry whose score is below ``updated_at`` (an index update lost after a write) stands
  where the index has it, once, and is repaired: the next listing has it in its place;
* a chat whose hash cannot be read (a field that is not what ctxstore writes) is left out where
  it stands, logged (logger ``ctxstore``) and named in ``ChatPage.skipped``: one bad chat never
  makes the namespace unlistable.

Stretches continue after the last entry read (keyset paging by score and member), so a whole
listing costs time in proportion to the chats listed. ``list_chats(offset=...)`` starts at that
rank of the index without reading what comes before (cost ~ the page); with a metadata filter
it must read every chat before the offset (metadata lives in the chat hashes, which no index
covers; a sealed chat's metadata values are opened with its owner's data key, read once per
owner and process, and compared in the clear). ``list_chats_page`` pages with an opaque cursor
instead, which stays right while chats are updated: a chat not updated during the paging
appears exactly once; a chat updated during it moves to the front, so it may be missed by the
pages still to come (it was seen, or will be seen first, by the next listing).
"""

from __future__ import annotations

import base64
import logging
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ctxstore._base.ids import check_key_id, check_name
from ctxstore._core.format.chat import chat_info
from ctxstore._core.format.codec import decode, encode
from ctxstore._core.ops import indexes
from ctxstore._core.ops.data_keys import opened_chat
from ctxstore._core.protocol import Call, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import (
    CorruptionError,
    CtxStoreError,
    FormatError,
    InvalidIdError,
    KeyUnavailableError,
    ValidationError,
)
from ctxstore.models import ChatPage

if TYPE_CHECKING:
    from ctxstore.models import ChatInfo

log = logging.getLogger("ctxstore")

#: Index entries read per step when scanning for a metadata filter or an unbounded listing.
SCAN_CHUNK = 200

#: The largest limit or offset a listing takes (Redis takes 64-bit signed ranges; this is far
#: beyond any namespace and keeps every arithmetic on them exact).
MAX_PAGE = 2**31 - 1

#: Where an entry stands in an index: (score, member bytes), compared as Redis orders them.
Position = tuple[float, bytes]


def _check_page(limit: int | None, offset: int) -> None:
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_PAGE
    ):
        raise ValidationError(
            f"limit must be None or an integer from 0 to {MAX_PAGE}, got {limit!r}"
        )
    if isinstance(offset, bool) or not isinstance(offset, int) or not 0 <= offset <= MAX_PAGE:
        raise ValidationError(f"offset must be an integer from 0 to {MAX_PAGE}, got {offset!r}")


def _check_filter(
    metadata: tuple[str, Any] | Mapping[str, Any] | None, state: StoreState
) -> tuple[str, Any] | None:
    """The filter with its value canonicalized by a msgpack round trip (tuples become lists...).

    Stored values come back from msgpack, so comparing against the round-tripped query keeps
    the match type-exact without false misses.
    """
    if metadata is None:
        return None
    if isinstance(metadata, Mapping) and set(metadata) == {"key", "value"}:
        metadata = (metadata["key"], metadata["value"])  # the seed's {"key": k, "value": v}
    if not isinstance(metadata, tuple) or len(metadata) != 2:
        raise ValidationError(
            'metadata filter must be a (key, value) tuple or {"key": k, "value": v}'
        )
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


def _index_of(state: StoreState, user_id: str | None) -> str:
    if user_id is not None:
        return state.keyspace.user_index(check_key_id(user_id, "user_id"))
    return state.keyspace.all_chats_index


# --- cursors ----------------------------------------------------------------------------------

_CURSOR_VERSION = b"1"
_CURSOR_TEXT = re.compile(r"[A-Za-z0-9_-]{1,1024}")


def encode_cursor(position: Position) -> str:
    """An opaque, URL-safe cursor: the index position the next page continues after."""
    score, member = position
    raw = b"\t".join((_CURSOR_VERSION, repr(score).encode("ascii"), member))
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def decode_cursor(cursor: object) -> Position:
    """The position a cursor names; anything but a cursor a listing returned is refused."""
    if not isinstance(cursor, str) or not _CURSOR_TEXT.fullmatch(cursor):
        raise ValidationError(f"cursor is not a listing cursor: {str(cursor)[:64]!r}")
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        version, score_text, member = raw.split(b"\t", 2)
        score = float(score_text.decode("ascii"))
        check_key_id(member.decode("utf-8"), "chat_id")
    except (ValueError, UnicodeDecodeError, InvalidIdError):
        raise ValidationError(f"cursor is not a listing cursor: {cursor[:64]!r}") from None
    position = (score, member)
    if version != _CURSOR_VERSION or not math.isfinite(score) or encode_cursor(position) != cursor:
        raise ValidationError(f"cursor is not a listing cursor: {cursor[:64]!r}")
    return position


# --- reading the index and the chats ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Corrupt:
    """A chat hash that could not be read as a chat."""

    reason: str


def _read_call(state: StoreState, chat_id: str) -> Call[Any]:
    key = state.keyspace.chat(chat_id).key("chat")
    return command_call(("HGETALL", key), keys=(key,), parse=lambda flat: flat or None)


def _read_info(state: StoreState, chat_id: str, outcome: Any) -> Operation[Any]:
    """The chat an index entry names, from its hash as read (or the error reading it): its
    :class:`ChatInfo` (a sealed chat's title and metadata opened), :class:`_Corrupt` when it
    cannot be read here (a chat whose owner's keys are gone included), None when it is gone."""
    if outcome is None or isinstance(outcome, BaseException):
        return outcome
    key = state.keyspace.chat(chat_id).key("chat")
    try:
        info = yield from opened_chat(state, chat_id, key, outcome, chat_info)
    except (
        CorruptionError,
        FormatError,
        KeyUnavailableError,
        ValueError,
        TypeError,
    ) as error:  # not readable here
        return _Corrupt(str(error))
    return info


def _range_call(index: str, count: int, start: int | Position) -> Call[list[tuple[bytes, float]]]:
    def parse(reply: Sequence[Any]) -> list[tuple[bytes, float]]:
        return [(_raw(reply[i]), float(reply[i + 1])) for i in range(0, len(reply), 2)]

    if isinstance(start, int):
        args: tuple[str | bytes | int, ...] = (count, start, "", "")
    else:
        args = (count, 0, repr(start[0]), start[1])
    return script_call(load_script("read_index"), (index,), args, parse=parse)


def _raw(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8")


@dataclass(frozen=True, slots=True)
class _Place:
    """A chat's place in a listing: where it stands, the chat (None: left out, corrupt), and
    the repair its entry needs once the listing has passed it (a score below the chat's time:
    moved up before the listing passed it, it would land behind the listing and be missed)."""

    position: Position
    chat_id: str
    info: ChatInfo | None
    repair: indexes.Repair | None = None


@dataclass
class _Stretch:
    """What one read of the index gave: the places that can be listed now, in order, the
    members left out as not being chat ids, and where the next stretch starts (None: the
    index has no more)."""

    places: list[_Place] = field(default_factory=list)
    bad_members: list[str] = field(default_factory=list)
    after: Position | None = None


def _read_stretch(
    state: StoreState,
    index: str,
    user_id: str | None,
    start: int | Position,
    count: int,
    repair: bool = True,
) -> Operation[_Stretch]:
    """Read ``count`` index entries from ``start`` and check each against its chat (and repair
    the entries found stale, unless ``repair`` is False)."""
    entries = yield _range_call(index, count, start)
    stretch = _Stretch(after=(entries[-1][1], entries[-1][0]) if len(entries) == count else None)
    repairs: list[indexes.Repair] = []
    readable: list[tuple[bytes, float, str]] = []
    for member, score in entries:
        chat_id = _chat_id(member)
        if chat_id is None:
            name = member.decode("utf-8", "backslashreplace")
            log.warning("index %s holds %r, which is no chat id: removed from it", index, name)
            stretch.bad_members.append(name)
            repairs.append((member, score, None))
        else:
            readable.append((member, score, chat_id))
    infos: list[Any] = []
    if readable:
        hashes = yield tuple(_read_call(state, chat_id) for _, _, chat_id in readable)
        for (_member, _score, chat_id), outcome in zip(readable, hashes, strict=True):
            infos.append((yield from _read_info(state, chat_id, outcome)))
    places = [
        place
        for entry, info in zip(readable, infos, strict=True)
        if (place := _place(entry, info, user_id, repairs)) is not None
    ]
    if repair:
        yield from _repair(index, repairs)
    places.sort(key=lambda place: place.position, reverse=True)
    boundary = stretch.after
    stretch.places = [p for p in places if boundary is None or p.position >= boundary]
    return stretch


def _place(
    entry: tuple[bytes, float, str],
    outcome: Any,
    user_id: str | None,
    repairs: list[indexes.Repair],
) -> _Place | None:
    """Where one index entry's chat goes in the listing (None: nowhere), noting the repair its
    entry needs in ``repairs``."""
    member, score, chat_id = entry
    if isinstance(outcome, CorruptionError) or (
        isinstance(outcome, CtxStoreError) and "WRONGTYPE" in str(outcome)
    ):
        outcome = _Corrupt(str(outcome))  # the chat's key holds no hash
    if isinstance(outcome, CtxStoreError):
        raise outcome
    if isinstance(outcome, _Corrupt):
        log.warning("chat %r left out of the listing, its hash is corrupt: %s", chat_id, outcome)
        return _Place((score, member), chat_id, None)
    if outcome is None or (user_id is not None and outcome.user_id != user_id):
        repairs.append((member, score, None))
        return None
    truth = float(outcome.updated_at)
    if truth < score:  # moves down: the listing reaches it there
        repairs.append((member, score, outcome.updated_at))
    elif truth > score:
        return _Place((score, member), chat_id, outcome, (member, score, outcome.updated_at))
    return _Place((truth, member), chat_id, outcome)


def _repair(index: str, repairs: list[indexes.Repair]) -> Operation[None]:
    """Apply repairs (one script call), logging a failure: the listing itself stands."""
    if not repairs:
        return
    outcomes = yield (indexes.repair_call(index, repairs),)
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            log.warning("chat index repair failed (a later listing retries): %s", outcome)


def _chat_id(member: bytes) -> str | None:
    try:
        return check_key_id(member.decode("utf-8"), "chat_id")
    except (UnicodeDecodeError, InvalidIdError):
        return None


# --- the listings ---------------------------------------------------------------------------------


def list_chats(
    state: StoreState,
    *,
    user_id: str | None = None,
    metadata: tuple[str, Any] | Mapping[str, Any] | None = None,
    limit: int | None = None,
    offset: int = 0,
) -> Operation[list[ChatInfo]]:
    """Chats newest first, each with its message and branch counts.

    A corrupt chat is left out where it stands: it takes its place in the order (``limit``
    and ``offset`` count it, so pages never overlap); with a metadata filter, which cannot be
    checked on it, it takes none. Either way it is logged.
    """
    _check_page(limit, offset)
    wanted = _check_filter(metadata, state)
    index = _index_of(state, user_id)
    start: int | Position | None = offset if wanted is None else 0
    to_skip = 0 if wanted is None else offset
    found: list[ChatInfo] = []
    passed: list[indexes.Repair] = []
    taken = 0  # places of this page used, by chats and by chats left out
    while start is not None and (limit is None or taken < limit):
        chunk = (
            SCAN_CHUNK if limit is None or wanted is not None else min(limit - taken, SCAN_CHUNK)
        )
        stretch = yield from _read_stretch(state, index, user_id, start, chunk)
        start = stretch.after
        for place in stretch.places:
            if limit is not None and taken >= limit:
                break
            if place.repair is not None:
                passed.append(place.repair)
            if wanted is not None and (place.info is None or not _matches(place.info, wanted)):
                continue
            if to_skip:
                to_skip -= 1
                continue
            taken += 1
            if place.info is not None:
                found.append(place.info)
    yield from _repair(index, passed)
    return found


def list_chats_page(
    state: StoreState,
    *,
    user_id: str | None = None,
    cursor: str | None = None,
    limit: int = 50,
    repair: bool = True,
) -> Operation[ChatPage]:
    """One page of chats newest first, and the cursor of the next (None after the last).

    A corrupt chat takes its place in the page and is named in ``skipped`` instead of listed;
    an index member that is no chat id is named there too, and removed from the index.
    ``repair=False`` reads only: stale index entries are placed as ever but left as they are
    (the web console, which never writes).
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be an integer from 1 to {MAX_PAGE}, got {limit!r}")
    after = None if cursor is None else decode_cursor(cursor)
    index = _index_of(state, user_id)
    start: int | Position = 0 if after is None else after
    chats: list[ChatInfo] = []
    skipped: list[str] = []
    passed: list[indexes.Repair] = []
    last: Position | None = None
    taken = 0  # places of the page used, by chats and by chats left out as corrupt
    while True:
        # The stretch that can end the page reads one entry more than the page needs: a page
        # that ends the listing says so.
        left = limit - taken
        chunk = left + 1 if left <= SCAN_CHUNK else SCAN_CHUNK
        stretch = yield from _read_stretch(state, index, user_id, start, chunk, repair)
        skipped += stretch.bad_members
        for place in stretch.places[:left]:
            taken += 1
            last = place.position
            if place.repair is not None:
                passed.append(place.repair)
            if place.info is None:
                skipped.append(place.chat_id)
            else:
                chats.append(place.info)
        more = len(stretch.places) > left or (taken == limit and stretch.after is not None)
        if more or stretch.after is None:
            break
        start = stretch.after
    if repair:
        yield from _repair(index, passed)
    next_cursor = encode_cursor(_given(last)) if more else None
    return ChatPage(tuple(chats), next_cursor, tuple(skipped))


def _given(position: Position | None) -> Position:
    assert position is not None, "a full page has a last place"
    return position


def _matches(info: ChatInfo, wanted: tuple[str, Any]) -> bool:
    key, value = wanted
    return key in info.metadata and same_value(info.metadata[key], value)
