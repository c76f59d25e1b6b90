"""Message records: what one entry of a chat's ``log`` list holds, and how a chain of them decodes.

A record is the msgpack array ``[parent, created_at, payload, chosen id or nil, tag]`` (with
per-message metadata, ``[parent, created_at, payload, metadata, chosen id or nil, tag]``). The
parent is a log position, -1 for a root, or :data:`PREVIOUS` (-2) for "the position before
mine": a client builds each record before knowing where it lands, and the append script
rewrites the parent of the few whose parent is elsewhere. The tag (:data:`TAG_LENGTH` random
characters) ends every generated id, ``<position>.<incarnation>.<tag>``, so an id is never
handed out twice, even if Redis loses acknowledged writes and a position is used again.

A chat's linear *runs* (the ``runs`` ZSET) are derived from the records: a run starts at every
root and every message that is not the child of the one before it (:func:`run_member`).

Everything that builds a record (an append, an import) goes through :func:`encode_record`, and
everything that reads one (chain reads, the graph, exports, verify) through
:func:`record_fields` or :func:`chain_messages`. A whole chain decodes with one
``msgpack.unpackb``.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore._core.format.codec import plain_dict
from ctxstore._core.format.fields import corrupt
from ctxstore._core.format.sealed import (
    GENERATED_ID,
    METADATA,
    PAYLOAD,
    ChatSeal,
    array_header,
)
from ctxstore.crypto.seal import is_sealed
from ctxstore.errors import ConfigurationError, CorruptionError, CtxStoreError, ValidationError
from ctxstore.models import StoredMessage

#: Characters of a record's tag (lowercase base32: 30 random bits).
TAG_LENGTH = 6
#: A record's parent meaning "the position right before this one" (-1 is a root).
PREVIOUS = -2
#: The characters of a tag (lowercase base32), as ``str.strip`` takes them: a tag stripped of
#: them is empty.
TAG_ALPHABET = "abcdefghijklmnopqrstuvwxyz234567"

#: msgpack: an array of 5 (6 with metadata) elements, and the packed parent -2 and nil.
_ARRAY_5 = b"\x95"
_ARRAY_6 = b"\x96"
_PACKED_PREVIOUS = b"\xfe"
_NIL = b"\xc0"


def derived_id(position: int, incarnation: str, tag: str) -> str:
    """The id of a message whose id was generated: ``<position>.<incarnation>.<tag>``."""
    return f"{position}.{incarnation}.{tag}"


def is_generated_id(message_id: str, incarnation: str) -> bool:
    """Whether ``message_id`` has the form of an id this chat (of ``incarnation``) generates: a
    chosen id of that form is refused, it could name another message."""
    found = GENERATED_ID.fullmatch(message_id)
    return found is not None and found.group(2) == incarnation


def run_member(start: int, parent: int, depth: int) -> str:
    """The ``runs`` member of a run starting at ``start``: ``<start>:<parent>:<depth>``."""
    return f"{start}:{parent}:{depth}"


def encode_record(
    body: bytes,
    *,
    created_at: bytes,
    tag: str,
    chosen: str = "",
    metadata: bytes = b"",
    parent: int = PREVIOUS,
) -> bytes:
    """One record from its encoded parts: ``body`` (the payload's msgpack), ``created_at``
    (msgpack of the epoch milliseconds, shared by a whole append), ``metadata`` (msgpack of a
    map, or empty for none), ``chosen`` ("" for a generated id) and ``tag``."""
    return b"".join(
        (
            _ARRAY_6 if metadata else _ARRAY_5,
            _PACKED_PREVIOUS if parent == PREVIOUS else msgpack.packb(parent),
            created_at,
            body,
            metadata,
            msgpack.packb(chosen) if chosen else _NIL,
            msgpack.packb(tag),
        )
    )


#: Chains at least this long are decoded with the cyclic garbage collector paused.
GC_PAUSE_FROM = 256


def packed_time(milliseconds: int) -> bytes:
    """A record's ``created_at`` as :func:`encode_record` takes it (one pack for a whole append)."""
    packed: bytes = msgpack.packb(milliseconds)
    return packed


def read_record(
    raw: bytes, key: str, position: int, seal: ChatSeal | None = None
) -> tuple[int, int, dict[str, Any], str | None, str]:
    """(parent position, created_at, payload, chosen id or None, tag) of one stored record
    (its values opened with ``seal``, a sealed chat's); a ``CorruptionError`` (its
    ``details["reason"]`` says why) when it is not a message record."""
    try:
        record = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise corrupt(key, str(position), f"not valid msgpack ({exc})") from exc
    if seal is not None:
        open_record(record, position, seal, key)
    return record_fields(record, key, position)


def record_id(raw: bytes, incarnation: str, key: str, position: int) -> str:
    """The id of the message a stored record holds (its chosen id, or the generated one),
    read without its payload: what a read needs of a parent or a version it does not return
    (a sealed record's values stay closed)."""
    try:
        record = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise corrupt(key, str(position), f"not valid msgpack ({exc})") from exc
    if type(record) is not list or len(record) not in (5, 6):
        raise _bad_record(key, position)
    chosen, tag = record[-2], record[-1]
    if type(tag) is not str or len(tag) != TAG_LENGTH or tag.strip(TAG_ALPHABET):
        raise _bad_record(key, position)
    if chosen is None:
        return derived_id(position, incarnation, tag)
    if type(chosen) is not str:
        raise _bad_record(key, position)
    return chosen


def open_record(record: Any, position: int, seal: ChatSeal, key: str) -> None:
    """Replace a decoded record's sealed payload and metadata by what they seal, in place (a
    record of another shape is left for :func:`record_fields` to refuse)."""
    if type(record) is not list or len(record) not in (5, 6) or type(record[0]) is not int:
        return
    parent = parent_position(record[0], position)
    record[2] = seal.open(PAYLOAD, record[2], position, parent, key=key)
    if len(record) == 6:
        record[3] = seal.open(METADATA, record[3], position, parent, key=key)


def parent_position(parent: int, position: int) -> int:
    """A record's parent field as a position (-1 for a root)."""
    return position - 1 if parent == PREVIOUS else parent


@dataclass(frozen=True)
class Slice:
    """Consecutive log positions ``first..last`` and their records."""

    first: int
    last: int
    records: Sequence[bytes]


def decode_records(parts: Sequence[Slice], key: str, seal: ChatSeal | None = None) -> list[Any]:
    """Every record of ``parts`` (in order), decoded with one msgpack call, their values
    opened with ``seal`` (a sealed chat's)."""
    count = sum(part.last - part.first + 1 for part in parts)
    if count == 0:
        return []
    blob = b"".join([array_header(count), *(record for part in parts for record in part.records)])
    try:
        records = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        position = _first_undecodable(parts)
        raise corrupt(
            key, str(position), f"the record at position {position} is not valid msgpack ({exc})"
        ) from exc
    if seal is not None:
        open_records(
            records, [p for part in parts for p in range(part.first, part.last + 1)], seal, key
        )
    return list(records)


def open_records(records: list[Any], positions: list[int], seal: ChatSeal, key: str) -> None:
    """:func:`open_record` of many records at once: their payloads, then their metadata, each
    kind opened and decoded together (one msgpack call for a whole chain)."""
    with_metadata = seal.open_payloads(records, positions, key=key)
    if with_metadata:
        items = [(record[3], position, parent) for record, position, parent in with_metadata]
        opened = seal.open_all(METADATA, items, key=key)
        for (record, _position, _parent), found in zip(with_metadata, opened, strict=True):
            record[3] = found


def _first_undecodable(parts: Sequence[Slice]) -> int:
    """Where decoding a chain failed: the first record that is not exactly one msgpack value."""
    for part in parts:
        for position, record in zip(range(part.first, part.last + 1), part.records, strict=True):
            try:
                msgpack.unpackb(record, raw=False, strict_map_key=False)
            except Exception:  # msgpack raises several unrelated types for bad input
                return position
    return parts[0].first if parts else 0


def _bad_record(key: str, position: int, record: Any = None) -> CtxStoreError:
    field = str(position)
    if (
        type(record) is list
        and len(record) in (5, 6)
        and type(record[2]) is bytes
        and is_sealed(record[2])
    ):
        return ConfigurationError(
            f"{key} holds sealed records (a chat of a store with encryption): this store "
            "has none; connect with encryption=<the KeyProvider> (docs/encryption.md)",
            key=key,
            field=field,
        )
    return CorruptionError(
        f"corrupt data at {key} field {field!r}: the record at position {position} is not a "
        "message record",
        key=key,
        field=field,
        reason="not a message record",
    )


def record_fields(
    record: Any, key: str, position: int
) -> tuple[int, int, dict[str, Any], str | None, str]:
    """(parent position, created_at, payload, chosen id or None, tag) of a decoded record."""
    if type(record) is not list or len(record) not in (5, 6):
        raise _bad_record(key, position)
    parent, created_at, payload, chosen, tag = record[0], record[1], record[2], *record[-2:]
    if (
        type(parent) is not int
        or type(created_at) is not int
        or type(payload) is not dict
        or not (chosen is None or type(chosen) is str)
        or type(tag) is not str
        or len(tag) != TAG_LENGTH
        or tag.strip(TAG_ALPHABET)
    ):
        raise _bad_record(key, position, record)
    return parent_position(parent, position), created_at, payload, chosen, tag


def chain_messages(
    parts: Sequence[Slice],
    incarnation: str,
    key: str,
    parent_id: str | None,
    *,
    pause_gc: bool = True,
    seal: ChatSeal | None = None,
) -> tuple[list[StoredMessage], list[dict[str, Any]], str]:
    """The messages of a chain's slices (root first), their payloads, and the last one's tag;
    ``seal`` opens a sealed chat's values.

    Each message's parent is the one before it (``parent_id`` for the first): a chain's records
    are consecutive ancestors, which the script's walk guarantees.
    """
    count = sum(part.last - part.first + 1 for part in parts)
    with gc_paused(count, pause=pause_gc):  # a warm read (a few new messages) never pauses
        return _decode_chain(parts, incarnation, key, parent_id, seal)


def _decode_chain(
    parts: Sequence[Slice],
    incarnation: str,
    key: str,
    parent_id: str | None,
    seal: ChatSeal | None,
) -> tuple[list[StoredMessage], list[dict[str, Any]], str]:
    positions = [p for part in parts for p in range(part.first, part.last + 1)]
    records = decode_records(parts, key, seal)
    messages: list[StoredMessage] = []
    payloads: list[dict[str, Any]] = []
    append_message, append_payload = messages.append, payloads.append
    tag = ""
    for position, record in zip(positions, records, strict=True):
        # record_fields, inlined: this loop runs once per message of every read.
        if type(record) is not list or len(record) != 5:
            if type(record) is list and len(record) == 6:
                append_message(_with_metadata(record, position, incarnation, key, parent_id))
                append_payload(record[2])
                parent_id = messages[-1]["id"]
                tag = record[5]
                continue
            raise _bad_record(key, position)
        created_at, payload, chosen, tag = record[1], record[2], record[3], record[4]
        if (
            type(payload) is not dict
            or type(created_at) is not int
            or type(tag) is not str
            or type(record[0]) is not int
            or len(tag) != TAG_LENGTH
            or tag.strip(TAG_ALPHABET)  # a tag makes the id: one outside the alphabet is no id
        ):
            raise _bad_record(key, position, record)
        if chosen is None:
            message_id = f"{position}.{incarnation}.{tag}"
        elif type(chosen) is str:
            message_id = chosen
        else:
            raise _bad_record(key, position)
        append_message(
            {
                "id": message_id,
                "parent_id": parent_id,
                "created_at": created_at,
                "message": payload,
            }
        )
        append_payload(payload)
        parent_id = message_id
    return messages, payloads, tag


def _with_metadata(
    record: list[Any], position: int, incarnation: str, key: str, parent_id: str | None
) -> StoredMessage:
    """A message whose record carries metadata (6 elements; the rare, slower path)."""
    _parent, created_at, payload, chosen, tag = record_fields(record, key, position)
    metadata = record[3]
    if type(metadata) is not dict:
        raise _bad_record(key, position, record)
    return {
        "id": chosen if chosen is not None else f"{position}.{incarnation}.{tag}",
        "parent_id": parent_id,
        "created_at": created_at,
        "message": payload,
        "metadata": metadata,
    }


def check_payload(payload: object, where: str, *, any_item: bool = False) -> dict[str, Any]:
    """A message: a mapping with string keys that is a chat message (a non-empty string
    ``role``) or a role-less item of OpenAI's Responses API (a non-empty string ``type``:
    ``function_call``, ``function_call_output``, ``reasoning``, ...).

    ``any_item`` also takes a mapping with neither (an *opaque* item: what a framework's
    session stores as it is given, such as the OpenAI Agents SDK's encrypted envelopes); only
    the adapters and imports ask for it, so a store user's typo (``{"rol": "user"}``) is
    still refused."""
    if type(payload) is not dict and not isinstance(payload, Mapping):
        raise ValidationError(
            f"{where} must be a chat-message mapping, got {type(payload).__name__}"
        )
    role = payload.get("role")
    if role is None and any_item and "type" not in payload:
        pass  # an opaque item
    elif role is None:
        kind = payload.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValidationError(
                f"{where} needs a non-empty string 'role' (a chat message) or, without a role, "
                f"a non-empty string 'type' (an item such as function_call), got neither"
            )
    elif not isinstance(role, str) or not role:
        raise ValidationError(f"{where} needs a non-empty string 'role', got {role!r}")
    for key in payload:
        if not isinstance(key, str):
            raise ValidationError(f"{where} has a non-string key {key!r}")
    return plain_dict(payload)


def check_metadata(metadata: object, where: str) -> dict[str, Any]:
    """A message's metadata: a mapping with string keys (encoded like the payload)."""
    if not isinstance(metadata, Mapping):
        raise ValidationError(f"{where} metadata must be a mapping, got {type(metadata).__name__}")
    for key in metadata:
        if not isinstance(key, str):
            raise ValidationError(f"{where} metadata has a non-string key {key!r}")
    return plain_dict(metadata)


class _CollectorPause:
    """The collector's pause, counted across the threads that decode at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.holders = 0  # decodes running with the collector paused
        self.was_on = False  # what the first of them found


_COLLECTOR = _CollectorPause()


@contextmanager
def gc_paused(count: int, *, pause: bool = True) -> Iterator[None]:
    """The cyclic garbage collector off while ``count`` records (:data:`GC_PAUSE_FROM` or
    more) are decoded; ``pause=False`` (``Settings.pause_gc``) leaves it alone.

    Decoding allocates a few dicts per message, all of them acyclic and kept; left running, the
    cyclic collector walks that growing heap again and again (on a 10,000-message cold read
    the pause saves about a sixth of the time, and most of the slow tail). The collector is
    process-wide, so the pause is counted across threads: the first decode turns it off (if it
    was on), the last one turns it back on, and a collector the application had turned off
    stays off.
    """
    if not pause or count < GC_PAUSE_FROM:
        yield
        return
    with _COLLECTOR.lock:
        if _COLLECTOR.holders == 0:
            _COLLECTOR.was_on = gc.isenabled()
            gc.disable()
        _COLLECTOR.holders += 1
    try:
        yield
    finally:
        with _COLLECTOR.lock:
            _COLLECTOR.holders -= 1
            if _COLLECTOR.holders == 0 and _COLLECTOR.was_on:
                gc.enable()
