"""Message records, and chain reads split into bounded chunks.

A record is the msgpack array ``[parent position, created_at, payload, chosen id or nil, tag]``:
the parent is -1 for a root and -2 for "the position before mine", so the client builds each
record before knowing where it lands and the script rewrites only the few whose parent is
elsewhere. The tag (6 random characters) ends every generated id. A
script returns a chain as *ranges* of log positions (a chain's positions grow from root to
head), with the records when there are few. A long chain's records are read by the client with
plain ``LRANGE`` commands of bounded size, pipelined in one round trip (:func:`fetch_ranges`):
records never change, so reading them after the script is as consistent as reading them in it,
no single command holds Redis for long, and Redis spends a tenth of the time it spends passing
each record through Lua. A whole chain decodes with one ``msgpack.unpackb``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore.core.keys import ChatKeys
from ctxstore.core.protocol import Call, Operation, command_call
from ctxstore.core.records import corrupt, gc_paused
from ctxstore.core.state import StoreState
from ctxstore.errors import ChatReplacedError, CorruptionError, CtxStoreError
from ctxstore.results import StoredMessage

#: Chains at least this long are decoded with the cyclic garbage collector paused.
GC_PAUSE_FROM = 256


#: A record's parent field meaning "the position right before this one".
PREVIOUS = -2


def derived_id(position: int, incarnation: str, tag: str) -> str:
    """The id of a message whose id was generated: ``<position>.<incarnation>.<tag>``."""
    return f"{position}.{incarnation}.{tag}"


def parent_position(parent: int, position: int) -> int:
    """A record's parent field as a position (-1 for a root)."""
    return position - 1 if parent == PREVIOUS else parent


@dataclass(frozen=True)
class Slice:
    """Consecutive log positions ``first..last`` and their records."""

    first: int
    last: int
    records: Sequence[bytes]


def slices(covered: Sequence[Any], parts: Sequence[Sequence[bytes]]) -> list[Slice]:
    """Pair a reply's flat covered ranges with its LRANGE replies."""
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
    blob = b"".join([_array_header(count), *(record for part in parts for record in part.records)])
    try:
        records = msgpack.unpackb(blob, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        position = _first_undecodable(parts)
        raise corrupt(
            key, str(position), f"the record at position {position} is not valid msgpack ({exc})"
        ) from exc
    return list(records)


def _first_undecodable(parts: Sequence[Slice]) -> int:
    """Where decoding a chain failed: the first record that is not exactly one msgpack value."""
    for part in parts:
        for position, record in zip(range(part.first, part.last + 1), part.records, strict=True):
            try:
                msgpack.unpackb(record, raw=False, strict_map_key=False)
            except Exception:  # msgpack raises several unrelated types for bad input
                return position
    return parts[0].first if parts else 0


def _bad_record(key: str, position: int) -> CorruptionError:
    return corrupt(key, str(position), f"the record at position {position} is not a message record")


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
    ):
        raise _bad_record(key, position)
    return parent_position(parent, position), created_at, payload, chosen, tag


def chain_messages(
    parts: Sequence[Slice], incarnation: str, key: str, parent_id: str | None
) -> tuple[list[StoredMessage], list[dict[str, Any]], str]:
    """The messages of a chain's slices (root first), their payloads, and the last one's tag.

    Each message's parent is the one before it (``parent_id`` for the first): a chain's records
    are consecutive ancestors, which the script's walk guarantees.
    """
    count = sum(part.last - part.first + 1 for part in parts)
    if count < GC_PAUSE_FROM:  # the usual warm read: a few new messages, no pause needed
        return _decode_chain(parts, incarnation, key, parent_id)
    with gc_paused():
        return _decode_chain(parts, incarnation, key, parent_id)


def _decode_chain(
    parts: Sequence[Slice], incarnation: str, key: str, parent_id: str | None
) -> tuple[list[StoredMessage], list[dict[str, Any]], str]:
    positions = [p for part in parts for p in range(part.first, part.last + 1)]
    records = decode_records(parts, key)
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
        ):
            raise _bad_record(key, position)
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
        raise _bad_record(key, position)
    return {
        "id": chosen if chosen is not None else f"{position}.{incarnation}.{tag}",
        "parent_id": parent_id,
        "created_at": created_at,
        "message": payload,
        "metadata": metadata,
    }


def fetch_ranges(
    state: StoreState,
    chat: ChatKeys,
    incarnation: str,
    ranges: Sequence[int],
    context: dict[str, Any],
) -> Operation[list[Slice]]:
    """The records of ``ranges`` (flat first, last pairs), in one pipelined round trip of plain
    ``LRANGE`` commands of at most ``limits.read_chunk_messages`` records each.

    Redis serves other clients between the commands, so a long read never holds it for long.
    The ``HGET`` of the incarnation comes last: incarnations never repeat, so if the chat was
    deleted or re-created before any of the ``LRANGE`` commands ran, the ``HGET`` sees it.
    """
    log_key, chat_key = chat.key("log"), chat.key("chat")
    chunk = state.limits.read_chunk_messages
    wanted: list[tuple[int, int]] = []
    for i in range(0, len(ranges), 2):
        first, last = ranges[i], ranges[i + 1]
        for start in range(first, last + 1, chunk):
            wanted.append((start, min(start + chunk - 1, last)))
    calls: list[Call[Any]] = [
        command_call(("LRANGE", log_key, first, last), keys=(log_key,)) for first, last in wanted
    ]
    calls.append(command_call(("HGET", chat_key, "inc"), keys=(chat_key,)))
    outcomes = yield tuple(calls)
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            raise outcome
    if outcomes[-1] is None or outcomes[-1] != incarnation.encode():
        raise ChatReplacedError(
            f"chat {chat.chat_id!r} was deleted or re-created while it was being read",
            **context,
        )
    fetched = []
    for (first, last), records in zip(wanted, outcomes, strict=False):
        if len(records) != last - first + 1:
            raise corrupt(
                log_key, str(last), f"the chain reaches position {last}, past the end of the log"
            )
        fetched.append(Slice(first, last, records))
    return fetched


@dataclass(frozen=True)
class ChainReply:
    """The chain part of a read reply (see ``chain_reply`` in the Lua prelude)."""

    head: int
    length: int
    base: int
    parts: list[Slice]
    left: list[int]
    #: Where the walk must go on (another call), -1 when it is complete.
    next: int
    #: The chain's tokens (-1: not asked, as when a chat is opened).
    tokens: int = -1
    #: How many of the newest messages the read returns (the chain length unless a window).
    kept: int = -1
    #: The tokens of those messages.
    kept_tokens: int = -1
    #: The newest summary on the chain when the read asked for it (-1, None: none).
    summary_position: int = -1
    summary: bytes | None = None
    #: The tokens of that summary and every message after it (the chain's, without one).
    context_tokens: int = -1


def parse_chain_reply(reply: Sequence[Any]) -> ChainReply:
    head, length, base, covered, parts, left, next_position, *sizes = reply
    tokens, kept, kept_tokens = (int(value) for value in sizes[:3]) if sizes else (-1, -1, -1)
    summary_position, summary, context_tokens = -1, None, tokens
    if len(sizes) > 3:
        summary_position, context_tokens = int(sizes[3]), int(sizes[5])
        summary = sizes[4] if summary_position >= 0 else None
    return ChainReply(
        int(head),
        int(length),
        int(base),
        slices(covered, parts),
        flat_ranges(left),
        int(next_position),
        tokens,
        kept,
        kept_tokens,
        summary_position,
        summary,
        context_tokens,
    )
