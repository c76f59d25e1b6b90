"""A chat in its portable form (:mod:`ctxstore._core.format.portable`), read in bounded chunks.

One script (``lua/export_chat.lua``) reads, at one instant, the chat hash, its branches,
checkpoints and summaries and the length of its log; the records up to that length are then read
``limits.read_chunk_messages`` at a time with plain ``LRANGE`` and ``GETRANGE`` commands, one
round trip per chunk, each checking the chat's incarnation (a chat deleted or re-created
meanwhile is a :class:`~ctxstore.errors.ChatReplacedError`, never a mixed export). Records never
change, so the export is the chat as it was at that instant, and the client holds one chunk of
records at a time (plus each message's id and chain tokens, to name parents).

:func:`export_chat` is a plan (:mod:`ctxstore._base.plans`): it runs the reads and emits each
record; the shells drive it with ``drive`` / ``adrive``, so a caller's iteration reads a chunk
only when it needs one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore._base.plans import Emit, Plan, Run
from ctxstore._core.format.chat import ChatValues, chat_meta, metadata_and_usage
from ctxstore._core.format.fields import corrupt, field_count, pairs
from ctxstore._core.format.pointers import BranchRecord, branch_record, checkpoint_record
from ctxstore._core.format.portable import FORMAT_VERSION, put_value
from ctxstore._core.format.records import Slice, decode_records, derived_id, record_fields
from ctxstore._core.format.sealed import ChatSeal, sealed_chat_error
from ctxstore._core.format.sealed_exports import (
    CHAT_KIND,
    MESSAGE_KIND,
    SEALED,
    export_place,
    seal_record,
    summary_record_kind,
)
from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.format.tokens import TOK_WIDTH, entry_at
from ctxstore._core.format.versions import SEALED_FORMAT
from ctxstore._core.ids import new_incarnation
from ctxstore._core.keys import ChatKeys
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import (
    made_keys,
    opened,
    opened_chat,
    owner_keys,
    provider_of,
)
from ctxstore._core.ops.owner_records import owned_chat_ids
from ctxstore._core.protocol import Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatNotFoundError, ChatReplacedError, CtxStoreError
from ctxstore.models import StoredSummary


@dataclass(frozen=True)
class Snapshot:
    """What ``export_chat.lua`` read at one instant, checked."""

    chat: dict[str, Any]
    incarnation: str
    active_branch: str
    branches: list[tuple[str, BranchRecord]]
    checkpoints: list[tuple[str, int, str, int]]
    #: (position, member as stored): opened (a sealed chat's) with the owner's keys when the
    #: export reaches them (:func:`open_summaries`).
    summaries: list[tuple[int, bytes]]
    length: int


def export_chat(
    state: StoreState, chat_id: str, *, user_id: str | None = None, sealed: bool = False
) -> Plan[None]:
    """The chat's records: the chat, every message in write order, then its branches,
    checkpoints and summaries (see :mod:`ctxstore._core.format.portable`); with ``sealed``,
    their text sealed under the owner's data key
    (:mod:`ctxstore._core.format.sealed_exports`)."""
    if sealed:
        provider_of(state)  # only a store with encryption seals
    keys = state.keyspace.chat(chat_id)
    snapshot: Snapshot = yield Run(read_snapshot(state, keys, user_id))
    yield from export_snapshot(state, keys, snapshot, sealed=sealed)


def export_user(state: StoreState, user_id: str) -> Plan[None]:
    """Every chat ``user_id`` owns, one whole export after another (data portability, GDPR
    art. 20): the chats its owner record names, then those only its listing index names. A
    chat named there that is gone (or another user's since) is skipped; one deleted while its
    own export runs is a :class:`~ctxstore.errors.ChatReplacedError`, never half an export
    taken for a whole one."""
    recorded, listed = yield Run(owned_chat_ids(state, user_id))
    for chat_id in (*recorded, *listed):
        keys = state.keyspace.chat(chat_id)
        try:
            snapshot: Snapshot = yield Run(read_snapshot(state, keys, user_id))
        except ChatNotFoundError:
            continue
        yield from export_snapshot(state, keys, snapshot)


def export_snapshot(
    state: StoreState, keys: ChatKeys, snapshot: Snapshot, *, sealed: bool = False
) -> Plan[None]:
    """The records of the chat ``snapshot`` was read from, its messages read in chunks (with
    ``sealed``, each record's text sealed for its place in the export)."""
    seal: ChatSeal | None = None
    export = new_incarnation()
    if sealed:
        seal = yield Run(_export_seal(state, keys.chat_id, snapshot, export))
    yield Emit(snapshot.chat if seal is None else _sealed_chat(state, seal, snapshot, export))
    ids: list[str] = []
    totals: list[int] = []
    positions: dict[str, int] = {}
    chunk = state.limits.read_chunk_messages
    for first in range(0, snapshot.length, chunk):
        last = min(first + chunk, snapshot.length) - 1
        items = yield Run(message_chunk(state, keys, snapshot, first, last, ids, totals))
        for record in items:
            yield Emit(record if seal is None else _sealed_message(seal, record, positions))
    summaries = yield Run(open_summaries(state, keys, snapshot))
    for record in pointer_records(keys, snapshot, ids, summaries):
        if seal is not None and record["type"] == "summary":
            kind = summary_record_kind(record["message_id"])
            yield Emit(seal_record(seal, record, kind, positions[record["message_id"]], 0))
        else:
            yield Emit(record)


def _sealed_message(
    seal: ChatSeal, record: dict[str, Any], positions: dict[str, int]
) -> dict[str, Any]:
    """A message record of a sealed export, sealed for its place: its position in write order
    and its parent's (``positions``: every earlier message's, grown by this one)."""
    position = positions[record["id"]] = len(positions)
    parent = record["parent_id"]
    return seal_record(
        seal, record, MESSAGE_KIND, position, -1 if parent is None else positions[parent]
    )


def _export_seal(
    state: StoreState, chat_id: str, snapshot: Snapshot, export: str
) -> Operation[ChatSeal]:
    """What seals a sealed export: the owner's current data key, bound to the chat and to
    this export."""
    owner = str(snapshot.chat["user_id"])
    keys = yield from owner_keys(state, owner)
    if keys.current is None:  # a sealed chat whose owner's key is not made yet
        keys = yield from made_keys(state, chat_id, owner, owner)
    place = export_place(snapshot.incarnation, export)
    return ChatSeal(keys, state.keyspace.namespace, chat_id, place)


def _sealed_chat(
    state: StoreState, seal: ChatSeal, snapshot: Snapshot, export: str
) -> dict[str, Any]:
    """The chat record of a sealed export: its title, metadata and counts sealed, and what
    binds every sealed value of the export."""
    record = seal_record(seal, dict(snapshot.chat), CHAT_KIND, 0, 0)
    record[SEALED] = {
        "namespace": state.keyspace.namespace,
        "incarnation": snapshot.incarnation,
        "export": export,
        "values": record[SEALED],
    }
    return record


def open_summaries(
    state: StoreState, keys: ChatKeys, snapshot: Snapshot
) -> Operation[list[tuple[int, StoredSummary]]]:
    """The snapshot's summaries decoded, a sealed chat's opened with its owner's keys."""
    key = keys.key("summary")

    def decode(seal: ChatSeal | None) -> list[tuple[int, StoredSummary]]:
        return [
            (position, parse_summary_member(member, key, position, seal))
            for position, member in snapshot.summaries
        ]

    owner = str(snapshot.chat["user_id"])
    opened_summaries: list[tuple[int, StoredSummary]] = yield from opened(
        state, keys.chat_id, owner, snapshot.incarnation, decode
    )
    return opened_summaries


def read_snapshot(state: StoreState, keys: ChatKeys, user_id: str | None) -> Operation[Snapshot]:
    """The chat hash, branches, checkpoints and summaries, and the log's length, at once (a
    sealed chat's title and metadata opened)."""
    script = load_script("export_chat")
    reply = yield script_call(
        script,
        keys_for(script, keys),
        scope_args(user_id, None),
        parse=lambda reply: reply,
        context=chat_context(keys.chat_id),
    )
    if state.show_closed and pairs(reply[0]).get("fmt") == SEALED_FORMAT.encode():
        raise sealed_chat_error(keys.chat_id)  # an export is never of values left closed
    snapshot: Snapshot = yield from opened_chat(
        state,
        keys.chat_id,
        keys.key("chat"),
        reply[0],
        lambda _chat_id, _key, fields, values: _snapshot(keys, reply, fields, values),
    )
    return snapshot


def _snapshot(
    keys: ChatKeys, reply: Sequence[Any], fields: Mapping[str, Any], values: ChatValues
) -> Snapshot:
    _flat_chat, flat_branches, flat_checkpoints, flat_summaries, length = reply
    chat_key = keys.key("chat")
    meta = chat_meta(keys.chat_id, chat_key, fields, values)
    branch_key, checkpoint_key = keys.key("branch"), keys.key("checkpoint")
    branches = sorted(
        (
            (name, branch_record(name, raw, branch_key))
            for name, raw in pairs(flat_branches, branch_key).items()
        ),
        key=lambda item: item[1].seq,
    )
    if meta.active_branch not in {name for name, _ in branches}:
        raise corrupt(chat_key, "active_branch", "names no branch of the chat")
    checkpoints = sorted(
        (
            (name, *checkpoint_record(name, raw, checkpoint_key))
            for name, raw in pairs(flat_checkpoints, checkpoint_key).items()
        ),
        key=lambda item: item[4],
    )
    summary_key = keys.key("summary")
    summaries = []
    for index in range(0, len(flat_summaries), 2):
        score = float(flat_summaries[index + 1])
        if score != int(score) or not 0 <= score < int(length):
            raise corrupt(summary_key, str(score), "scored with no position of the log")
        position = int(score)
        summaries.append((position, bytes(flat_summaries[index])))
    metadata, usage = metadata_and_usage(chat_key, fields, values)
    ttl = fields.get("ttl")
    chat: dict[str, Any] = {
        "type": "chat",
        "version": FORMAT_VERSION,
        "id": meta.id,
        "user_id": meta.user_id,
        "title": meta.title,
        "created_at": meta.created_at,
        "updated_at": meta.updated_at,
        "ttl_ms": None if ttl is None else field_count(ttl, chat_key, "ttl"),
        "usage": usage,
    }
    put_value(chat, "metadata", metadata)
    chat["counts"] = {
        "messages": int(length),
        "branches": len(branches),
        "checkpoints": len(checkpoints),
        "summaries": len(summaries),
    }
    return Snapshot(
        chat=chat,
        incarnation=meta.incarnation,
        active_branch=meta.active_branch,
        branches=branches,
        checkpoints=[(name, pos, mid, created) for name, pos, mid, created, _seq in checkpoints],
        summaries=sorted(summaries, key=lambda item: item[0]),
        length=int(length),
    )


def read_chunk(
    keys: ChatKeys, incarnation: str, first: int, last: int
) -> Operation[tuple[list[bytes], bytes]]:
    """The records and token entries of positions ``first..last``, in one round trip; the
    chat's incarnation is read last, so a chat deleted or re-created before any of the reads
    is seen."""
    log_key, tok_key, chat_key = keys.key("log"), keys.key("tok"), keys.key("chat")
    outcomes = yield (
        command_call(("LRANGE", log_key, first, last), keys=(log_key,)),
        command_call(
            ("GETRANGE", tok_key, first * TOK_WIDTH, (last + 1) * TOK_WIDTH - 1), keys=(tok_key,)
        ),
        command_call(("HGET", chat_key, "inc"), keys=(chat_key,)),
    )
    for outcome in outcomes:
        if isinstance(outcome, CtxStoreError):
            raise outcome
    records, tok, inc = outcomes
    if inc is None or inc != incarnation.encode():
        raise ChatReplacedError(
            f"chat {keys.chat_id!r} was deleted or re-created while it was being exported",
            **chat_context(keys.chat_id),
        )
    if len(records) != last - first + 1:
        raise corrupt(log_key, str(last), f"the log ends before position {last}")
    if len(tok) != (last - first + 1) * TOK_WIDTH:
        raise corrupt(tok_key, str(last), f"no token entry for position {last}")
    return list(records), bytes(tok)


def message_chunk(
    state: StoreState,
    keys: ChatKeys,
    snapshot: Snapshot,
    first: int,
    last: int,
    ids: list[str],
    totals: list[int],
) -> Operation[list[dict[str, Any]]]:
    """The message records of positions ``first..last``, read and opened (a sealed chat's
    with its owner's keys); ``ids`` and ``totals`` grow by the chunk's."""
    records, tok = yield from read_chunk(keys, snapshot.incarnation, first, last)

    def decode(seal: ChatSeal | None) -> list[dict[str, Any]]:
        known = len(ids)
        try:
            return message_records(
                keys, snapshot.incarnation, first, records, tok, ids, totals, seal
            )
        except BaseException:  # opened() may decode again with other keys: as it was
            del ids[known:], totals[known:]
            raise

    owner = str(snapshot.chat["user_id"])
    items: list[dict[str, Any]] = yield from opened(
        state, keys.chat_id, owner, snapshot.incarnation, decode
    )
    return items


def message_records(
    keys: ChatKeys,
    incarnation: str,
    first: int,
    records: Sequence[bytes],
    tok: bytes,
    ids: list[str],
    totals: list[int],
    seal: ChatSeal | None = None,
) -> list[dict[str, Any]]:
    """The message records of one chunk starting at position ``first`` (opened with
    ``seal``, a sealed chat's); ``ids`` and ``totals`` (every earlier position's id and chain
    tokens) grow by the chunk's."""
    log_key, tok_key = keys.key("log"), keys.key("tok")
    decoded = decode_records([Slice(first, first + len(records) - 1, records)], log_key, seal)
    out = []
    for offset, record in enumerate(decoded):
        position = first + offset
        parent, created_at, payload, chosen, tag = record_fields(record, log_key, position)
        if not -1 <= parent < position:
            raise corrupt(
                log_key, str(position), f"the record names a parent ({parent}) that is not older"
            )
        _flags, total = entry_at(tok, offset)
        own = total - (totals[parent] if parent >= 0 else 0)
        if own < 0:
            raise corrupt(
                tok_key, str(position), "a chain total below the one of the message's parent"
            )
        message_id = chosen if chosen is not None else derived_id(position, incarnation, tag)
        ids.append(message_id)
        totals.append(total)
        item: dict[str, Any] = {
            "type": "message",
            "id": message_id,
            "parent_id": ids[parent] if parent >= 0 else None,
            "created_at": created_at,
            "tokens": own,
        }
        put_value(item, "message", payload)
        if len(record) == 6:
            if type(record[3]) is not dict:
                raise corrupt(log_key, str(position), "message metadata that is not a map")
            put_value(item, "metadata", record[3])
        out.append(item)
    return out


def pointer_records(
    keys: ChatKeys,
    snapshot: Snapshot,
    ids: Sequence[str],
    summaries: Sequence[tuple[int, StoredSummary]],
) -> list[dict[str, Any]]:
    """Branches, checkpoints and summaries, each checked to name the message at its position."""
    out: list[dict[str, Any]] = []
    for name, branch in snapshot.branches:
        _check_pointer(keys.key("branch"), name, branch.position, branch.head, ids)
        out.append(
            {
                "type": "branch",
                "name": name,
                "head": branch.head,
                "created_at": branch.created_at,
                "active": name == snapshot.active_branch,
            }
        )
    for name, position, message_id, created_at in snapshot.checkpoints:
        _check_pointer(keys.key("checkpoint"), name, position, message_id, ids)
        out.append(
            {
                "type": "checkpoint",
                "name": name,
                "message_id": message_id,
                "created_at": created_at,
            }
        )
    for position, summary in summaries:
        field = str(position)
        _check_pointer(keys.key("summary"), field, position, summary["message_id"], ids)
        item: dict[str, Any] = {
            "type": "summary",
            "message_id": summary["message_id"],
            "created_at": summary["created_at"],
            "tokens": summary["tokens"],
            "content": summary["content"],
        }
        put_value(item, "metadata", summary["metadata"])
        out.append(item)
    return out


def _check_pointer(
    key: str, name: str, position: int, message_id: str | None, ids: Sequence[str]
) -> None:
    if position == -1 and message_id is None:
        return
    if not 0 <= position < len(ids) or ids[position] != message_id:
        raise corrupt(
            key, name, f"names message {message_id!r} at position {position}, which holds another"
        )
