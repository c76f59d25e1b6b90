"""Message records, and chain reads split into bounded chunks.

A record is the msgpack array ``[parent position, created_at, payload, chosen id or nil]``; the
append script writes its first element and the rest comes from the client as opaque bytes. A
script returns a chain as *ranges* of log positions (a chain's positions grow from root to
head) with each slice of records concatenated into one string, so a whole chain decodes with
one ``msgpack.unpackb``. Whatever the first call could not return within its budget is read by
further ``read_log`` calls (:func:`read_rest`): records never change, so a chain read in chunks
is as consistent as one read, and no single call holds Redis for long.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore.core.keys import ChatKeys
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.records import gc_paused
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.errors import CorruptionError
from ctxstore.models import StoredMessage

#: Chains at least this long are decoded with the cyclic garbage collector paused.
GC_PAUSE_FROM = 256


def derived_id(position: int, incarnation: str) -> str:
    """The id of a message whose id was generated: ``<position>.<incarnation>``."""
    return f"{position}.{incarnation}"


@dataclass(frozen=True)
class Slice:
    """Consecutive log positions ``first..last`` and their records, concatenated."""

    first: int
    last: int
    blob: bytes


def slices(covered: Sequence[Any], parts: Sequence[bytes]) -> list[Slice]:
    """Pair a reply's flat covered ranges with its record strings."""
    return [
        Slice(int(covered[2 * i]), int(covered[2 * i + 1]), part) for i, part in enumerate(parts)
    ]


def flat_ranges(reply: Sequence[Any]) -> list[int]:
    return [int(value) for value in reply]


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 + count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def decode_records(parts: Sequence[Slice], key: str) -> list[Any]:
    """Every record of ``parts`` (in order), decoded with one msgpack call."""
    count = sum(part.last - part.first + 1 for part in parts)
    if count == 0:
        return []
    blob = b"".join([_array_header(count), *(part.blob for part in parts)])
    try:
        records = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        position = _first_undecodable(parts)
        raise CorruptionError(
            f"the record at {key} position {position} is not valid msgpack ({exc})",
            key=key,
            field=str(position),
        ) from exc
    return list(records)


def _first_undecodable(parts: Sequence[Slice]) -> int:
    """Where decoding a chain failed: records one by one, the first that does not decode (or
    the first position of the slice whose records do not add up)."""
    for part in parts:
        unpacker = msgpack.Unpacker(raw=False, strict_map_key=False)
        unpacker.feed(part.blob)
        for position in range(part.first, part.last + 1):
            try:
                unpacker.unpack()
            except Exception:  # the bad record, or the end of a slice that lost bytes
                return position
        if unpacker.tell() != len(part.blob):
            return part.first
    return parts[0].first if parts else 0


def _bad_record(key: str, position: int) -> CorruptionError:
    return CorruptionError(
        f"the record at {key} position {position} is not a message record",
        key=key,
        field=str(position),
    )


def record_fields(record: Any, key: str, position: int) -> tuple[int, int, dict[str, Any], Any]:
    """(parent position, created_at, payload, chosen id or None) of a decoded record."""
    if not isinstance(record, list) or len(record) < 4:
        raise _bad_record(key, position)
    parent, created_at, payload, chosen = record[0], record[1], record[2], record[3]
    if (
        not isinstance(parent, int)
        or not isinstance(created_at, int)
        or not isinstance(payload, dict)
        or not (chosen is None or isinstance(chosen, str))
    ):
        raise _bad_record(key, position)
    return parent, created_at, payload, chosen


def chain_messages(
    parts: Sequence[Slice], incarnation: str, key: str, parent_id: str | None
) -> tuple[list[StoredMessage], list[dict[str, Any]]]:
    """The messages of a chain's slices (root first) and their payloads.

    Each message's parent is the one before it (``parent_id`` for the first): a chain's records
    are consecutive ancestors, which the script's walk guarantees.
    """
    positions = [p for part in parts for p in range(part.first, part.last + 1)]
    with gc_paused(len(positions) >= GC_PAUSE_FROM):
        records = decode_records(parts, key)
        messages: list[StoredMessage] = []
        payloads: list[dict[str, Any]] = []
        for position, record in zip(positions, records, strict=True):
            _parent, created_at, payload, chosen = record_fields(record, key, position)
            message_id = chosen if chosen is not None else f"{position}.{incarnation}"
            messages.append(
                {
                    "id": message_id,
                    "parent_id": parent_id,
                    "created_at": created_at,
                    "message": payload,
                }
            )
            payloads.append(payload)
            parent_id = message_id
        return messages, payloads


def read_rest(
    state: StoreState,
    chat: ChatKeys,
    incarnation: str,
    left: Sequence[int],
    context: dict[str, Any],
) -> Operation[list[Slice]]:
    """Read the ranges ``left`` (root first, flat) with as many bounded calls as they take."""
    script = load_script("read_log")
    keys = chat.select(script.key_names)
    gathered: list[Slice] = []
    pending = list(left)
    while pending:
        newest_first = []
        for i in range(len(pending) - 2, -1, -2):
            newest_first += [pending[i], pending[i + 1]]
        reply = yield script_call(
            script,
            keys,
            (
                "",
                incarnation,
                state.limits.read_chunk_messages,
                state.limits.read_chunk_bytes,
                *newest_first,
            ),
            parse=lambda raw: raw,
            context=context,
        )
        covered, parts, rest = reply
        gathered += slices(covered, parts)
        pending = flat_ranges(rest)
    gathered.sort(key=lambda part: part.first)
    return gathered


@dataclass(frozen=True)
class ChainReply:
    """The chain part of a read reply (see ``chain_reply`` in the Lua prelude)."""

    head: int
    length: int
    base: int
    parts: list[Slice]
    left: list[int]


def parse_chain_reply(reply: Sequence[Any]) -> ChainReply:
    head, length, base, covered, parts, left = reply
    return ChainReply(int(head), int(length), int(base), slices(covered, parts), flat_ranges(left))
