"""Sealing a chat written without encryption, online (``ctxstore migrate --encrypt``,
``admin.migrate(encrypt=True)``; docs/encryption.md).

A store with encryption refuses a chat in the clear (``CorruptionError``): its values could
have been put there by anyone who can write to Redis. Sealing one turns it into the sealed
format (:data:`~ctxstore._core.format.versions.SEALED_FORMAT`) in place, keeping its
incarnation, its ids, positions, branches, checkpoints, token entries and expiry:

1. One round trip reads the chat hash, the log's length and first records, the summaries and
   the answer streams' entries; the rest of the log follows in bounded reads.
2. Every value is sealed for where it stands, as a write of a sealed chat would have sealed it
   (records for their position and parent, summaries for the message they cover, pieces for
   their stream and write, the title and metadata values for the chat), under the owner's
   data key (made now if the owner has none), and added to *staging keys* beside the chat's
   (``lua/seal_stage.lua``: one kind of value a call, bounded, expiring on their own; the
   title and metadata values staged as read and as sealed).
3. ``lua/seal_publish.lua`` renames them into place and seals the chat hash's values, if
   nothing changed since the read: records, summaries and entries only grow, and change in
   place only by a redaction, which moves the chat's ``rgen``, so the counts, the stream's
   last entry and ``rgen`` say the copy is whole; the title and metadata values are compared
   with the staged ones. A chat written meanwhile is read and sealed again (a few times); one
   with an answer being streamed into it is left for the next run, refused before its owner
   gets a data key.

Readers see the chat in the clear until the publish, sealed after it; never a mix. A failure on
the way removes the staging keys (if the process dies, they expire).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore._core.format.codec import decode
from ctxstore._core.format.fields import corrupt, field_text, pairs, text
from ctxstore._core.format.records import encode_record, record_fields
from ctxstore._core.format.sealed import METADATA, PAYLOAD, ChatSeal
from ctxstore._core.format.summaries import parse_summary_member, summary_member
from ctxstore._core.format.versions import FORMAT, SEALED_FORMAT, chat_format_error
from ctxstore._core.ids import new_incarnation
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.chats import chat_context
from ctxstore._core.ops.data_keys import owner_keys
from ctxstore._core.ops.streams import stream_kind
from ctxstore._core.ops.transfer.imports import CHUNK_BYTES, CHUNK_RECORDS, STAGING_TTL_MS
from ctxstore._core.protocol import Arg, Call, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatNotFoundError, ConflictError, CtxStoreError

#: How many times a chat written while it was being sealed is read and sealed again.
ATTEMPTS = 5
#: Summaries, answer-stream entries or chat values per staging call, one kind a call (an
#: entry is at most six arguments, a value three: a call stays below the 3,999 a command may
#: carry).
CHUNK_ITEMS = 500
#: The keys whose values are sealed, staged under these names (and the chat hash's title and
#: metadata values, staged under "chat" and put in place by the publish).
STAGED = ("log", "summary", "stream")
#: What a publish says of a chat sealed already.
CURRENT = "current"


@dataclass
class _Snapshot:
    """What one read found of a chat in the clear: its hash, how many records its log held,
    the first of them, its summaries (member, score), its stream entries (id, fields) and its
    streams' records."""

    fields: dict[str, Any]
    length: int
    records: list[bytes]
    summaries: list[tuple[bytes, float]]
    entries: list[tuple[str, list[Any]]]
    #: The answer streams' records (stream id -> record).
    streams: dict[str, Any]

    @property
    def last_entry(self) -> str:
        return self.entries[-1][0] if self.entries else "-"


def seal_chat(state: StoreState, chat_id: str) -> Operation[bool]:
    """Seal ``chat_id`` if it is in the clear (see the module): True when this call sealed
    it, False when it was sealed already. A chat written during every attempt, or with an
    answer being streamed into it, is a ``ConflictError`` (run again later)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            sealed: bool = yield from _seal_once(state, chat_id)
        except ConflictError as error:
            if error.details.get("reason") != "changed" or attempt == ATTEMPTS:
                raise
            continue
        return sealed
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def _seal_once(state: StoreState, chat_id: str) -> Operation[bool]:
    chat = state.keyspace.chat(chat_id)
    found = yield from _read(chat)
    chat_key = chat.key("chat")
    if not found.fields:
        raise ChatNotFoundError(f"chat {chat_id!r} does not exist", chat_id=chat_id)
    fmt = text(found.fields.get("fmt", b""))
    if fmt == SEALED_FORMAT:
        return False
    if fmt != FORMAT:
        raise chat_format_error(fmt, chat_id=chat_id)
    owner = _field(found.fields, "user_id", chat_key)
    incarnation = _field(found.fields, "inc", chat_key)
    streaming = _live_stream(found.streams, state.clock())
    if streaming is not None:  # refused now, before a data key is made for it
        raise ConflictError(
            f"chat {chat_id!r} has an answer being streamed into it: nothing was sealed; run "
            "migrate --encrypt again",
            reason="streaming",
            stream=streaming,
            chat_id=chat_id,
        )
    keys = yield from owner_keys(state, owner)
    if keys.current is None:
        keys = yield from owner_keys(state, owner, create=True)
    namespace = state.keyspace.namespace
    seal = ChatSeal(keys, namespace, chat_id, incarnation)
    token = new_incarnation()
    staged = tuple(chat.staging(token, name) for name in (*STAGED, "chat"))
    try:
        yield from _stage(state, chat, staged, found, seal)
        reply: str = yield _publish_call(state, chat, staged, found, incarnation)
    except CtxStoreError:
        yield command_call(("DEL", *staged), keys=staged, writes=True)
        raise
    return reply != CURRENT


def _live_stream(streams: dict[str, Any], now: int) -> str | None:
    """The id of an answer stream being written now (its record live, its deadline ahead), if
    any; a record that does not parse is left for the publish to refuse."""
    for stream_id, raw in streams.items():
        parts = text(raw).split("\t")
        if len(parts) >= 4 and parts[2] == "live" and parts[3].isdigit() and int(parts[3]) >= now:
            return stream_id
    return None


def _field(fields: dict[str, Any], name: str, key: str) -> str:
    raw = fields.get(name)
    if not raw:
        raise corrupt(key, name, "missing")
    return field_text(raw, key, name)


def _read(chat: ChatKeys) -> Operation[_Snapshot]:
    """The chat hash first, then everything whose count the publish checks (a write after
    the hash was read moves a count, ``rgen`` or a value it compares)."""
    chat_key, log, summary, stream = (chat.key(name) for name in ("chat", *STAGED))
    stream_state = chat.key("stream_state")
    calls: tuple[Call[Any], ...] = (
        command_call(("HGETALL", chat_key), keys=(chat_key,)),
        command_call(("LLEN", log), keys=(log,)),
        command_call(("ZRANGE", summary, 0, -1, "WITHSCORES"), keys=(summary,)),
        command_call(("XRANGE", stream, "-", "+"), keys=(stream,)),
        command_call(("LRANGE", log, 0, CHUNK_RECORDS - 1), keys=(log,)),
        command_call(("HGETALL", stream_state), keys=(stream_state,)),
    )
    fields, length, summaries, entries, first, streams = yield calls
    scored = list(summaries or ())
    if scored and not isinstance(scored[0], tuple | list):  # a flat reply: member, score, ...
        scored = list(zip(scored[::2], scored[1::2], strict=True))
    return _Snapshot(
        pairs(fields or {}, chat_key),
        int(length),
        list(first or ())[: int(length)],
        [(bytes(member), float(score)) for member, score in scored],
        [(text(entry_id), _flat(values)) for entry_id, values in entries or ()],
        pairs(streams or {}, stream_state),
    )


def _flat(values: Any) -> list[Any]:
    """An entry's fields as a flat list (redis-py gives a dict, a raw reply a list)."""
    if isinstance(values, dict):
        return [item for pair in values.items() for item in pair]
    return list(values)


def _stage(
    state: StoreState,
    chat: ChatKeys,
    staged: tuple[str, ...],
    found: _Snapshot,
    seal: ChatSeal,
) -> Operation[None]:
    """Every value sealed and staged, in bounded chunks."""
    log_key = chat.key("log")
    script = load_script("seal_stage")
    context = chat_context(chat.chat_id)
    stored = 0
    position = 0
    records = found.records
    while position < found.length:
        if not records:
            records = yield command_call(
                ("LRANGE", log_key, position, min(position + CHUNK_RECORDS, found.length) - 1),
                keys=(log_key,),
            )
            if not records:  # the log shrank: only a chat deleted since shrinks it
                raise ConflictError(
                    f"chat {chat.chat_id!r} changed while it was sealed",
                    reason="changed",
                    chat_id=chat.chat_id,
                )
        chunk: list[Arg] = []
        size = 0
        for raw in records:
            sealed = _sealed_record(bytes(raw), position, seal, log_key)
            chunk.append(sealed)
            size += len(sealed)
            position += 1
            if size >= CHUNK_BYTES:
                stored = yield _stage_call(
                    script, staged, stored, f"{len(chunk)}\t0\t0\t0", chunk, context
                )
                chunk, size = [], 0
        if chunk:
            stored = yield _stage_call(
                script, staged, stored, f"{len(chunk)}\t0\t0\t0", chunk, context
            )
        records = []
    summary_key = chat.key("summary")
    members: list[list[Arg]] = [
        [int(score), _sealed_summary(member, int(score), seal, summary_key)]
        for member, score in found.summaries
    ]
    entries: list[list[Arg]] = [
        [entry_id, len(values) // 2, *values]
        for entry_id, values in _sealed_entries(found.entries, state, chat, seal)
    ]
    chat_values = _sealed_values(found, seal, chat.key("chat"))
    # Each kind in calls of its own, CHUNK_ITEMS items a call: at most 3,000 arguments.
    kinds: tuple[list[list[Arg]], ...] = (members, entries, chat_values)
    for kind, items in enumerate(kinds, start=1):
        for start in range(0, len(items), CHUNK_ITEMS):
            batch = items[start : start + CHUNK_ITEMS]
            shape = "\t".join(str(len(batch) if part == kind else 0) for part in range(4))
            args = [arg for item in batch for arg in item]
            yield _stage_call(script, staged, stored, shape, args, context)


def _stage_call(
    script: Any,
    staged: tuple[str, ...],
    first: int,
    counts: str,
    items: Sequence[Arg],
    context: dict[str, Any],
) -> Call[int]:
    return script_call(
        script,
        staged,
        [first, STAGING_TTL_MS, counts, *items],
        parse=int,
        context=context,
        writes=True,
    )


def _sealed_values(found: _Snapshot, seal: ChatSeal, chat_key: str) -> list[list[Arg]]:
    """The chat hash's title and metadata values: field, value as read, value sealed."""
    values: list[list[Arg]] = []
    title = found.fields.get("title")
    if title is not None:
        read = field_text(title, chat_key, "title")
        values.append(["title", read, seal.seal_title(read)])
    for name, value in found.fields.items():
        if name.startswith("m:"):
            raw = bytes(value)
            decode(raw, key=chat_key, field=name)  # a value that is no msgpack is not sealed
            values.append([name, raw, seal.seal_metadata(name[2:], raw)])
    return values


def _sealed_record(raw: bytes, position: int, seal: ChatSeal, key: str) -> bytes:
    """A record in the clear, sealed for its position and parent: the same parent field, time,
    chosen id and tag."""
    try:
        record = msgpack.unpackb(raw, raw=False, strict_map_key=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise corrupt(key, str(position), f"not valid msgpack ({exc})") from exc
    parent, created_at, payload, chosen, tag = record_fields(record, key, position)
    metadata = b""
    if len(record) == 6:
        if type(record[3]) is not dict:
            raise corrupt(key, str(position), "the record's metadata is not a map")
        packed = msgpack.packb(record[3], use_bin_type=True)
        metadata = seal.seal(METADATA, packed, position, parent)
    return encode_record(
        seal.seal(PAYLOAD, msgpack.packb(payload, use_bin_type=True), position, parent),
        created_at=msgpack.packb(created_at),
        tag=tag,
        chosen=chosen or "",
        metadata=metadata,
        parent=record[0],
    )


def _sealed_summary(member: bytes, position: int, seal: ChatSeal, key: str) -> bytes:
    """A summary in the clear, sealed for the message it covers."""
    found = parse_summary_member(member, key, position)
    return summary_member(
        message_id=found["message_id"],
        created_at=found["created_at"],
        content=found["content"],
        metadata=found["metadata"],
        tokens=found["tokens"],
        limit=2 * len(member) + 1024,  # what is there was within the writer's limit
        seal=seal,
    )


def _sealed_entries(
    entries: list[tuple[str, list[Any]]], state: StoreState, chat: ChatKeys, seal: ChatSeal
) -> list[tuple[str, list[Arg]]]:
    """The answer streams' entries with each piece of text (``d``) sealed for its stream and
    its number among the stream's pieces, as ``stream_write`` seals a write's (an empty
    write adds no entry: the numbers of the pieces there are increasing all the same, which
    is what a reader checks)."""
    streams = ChatSeal(seal.keys, state.keyspace.namespace, chat.chat_id, "")
    stream_key = chat.key("stream")
    numbers: dict[str, int] = {}
    sealed: list[tuple[str, list[Arg]]] = []
    for entry_id, values in entries:
        named = {text(values[index]): values[index + 1] for index in range(0, len(values), 2)}
        if "d" not in named:
            sealed.append((entry_id, list(values)))
            continue
        stream_id = text(named.get("s", b""))
        try:
            piece = bytes(named["d"]).decode("utf-8")
        except UnicodeDecodeError:
            raise corrupt(stream_key, entry_id, "a piece that is not UTF-8 text") from None
        number = numbers[stream_id] = numbers.get(stream_id, 0) + 1
        value = b"%d:" % number + streams.keys_current_seal(
            stream_kind(stream_id), piece.encode("utf-8"), number
        )
        sealed.append((entry_id, ["s", stream_id, "d", value]))
    return sealed


def _publish_call(
    state: StoreState,
    chat: ChatKeys,
    staged: tuple[str, ...],
    found: _Snapshot,
    incarnation: str,
) -> Call[str]:
    rgen = text(found.fields.get("rgen", b"0"))
    values = sum(1 for name in found.fields if name == "title" or name.startswith("m:"))
    read = (
        f"{found.length}\t{rgen}\t{len(found.summaries)}\t{len(found.entries)}\t"
        f"{found.last_entry}\t{values}"
    )
    keys = (*(chat.key(name) for name in ("chat", *STAGED, "stream_state")), *staged)
    return script_call(
        load_script("seal_publish"),
        keys,
        (incarnation, read, state.clock()),
        parse=text,
        context=chat_context(chat.chat_id),
        writes=lambda reply: reply != CURRENT,
    )
