"""Erasing a user (GDPR art. 17): every chat they own in the namespace, and every place a chat's
id or data was copied to, in bounded steps that can be run again.

What it walks is the user's owner record (:mod:`ctxstore._core.ops.owner_records`), which names
every chat the user created, plus the user's listing index (best effort: it may name a chat of a
release that kept no record, which is first added to the record, so an interrupted run still
finds it). For those chats, in this order:

1. their keys, with ``delete_chat.lua`` as the user (a chat of the same id another user owns now
   is left alone; the keys a chat without a hash left, an answer stream for instance, go too),
   ``CHATS_PER_TRIP`` to a round trip;
2. their entries in the namespace's listing index, and the user's listing index;
3. their jobs in the compaction streams (acknowledged in the workers' group, then deleted), their
   dead letters, and the workers' last-job records that name them, each stream read
   ``ENTRIES_PER_READ`` entries at a time (no call holds the server for long);
4. the owner record itself, last: until then a run that stopped midway (a crash, a lost
   connection) is finished by running it again, and every step above is idempotent.

A chat the user creates while the erasure runs is found by the next round (at most ``ROUNDS``).
The receipt counts what this run removed and lists what no command reaches (files, replicas,
providers, logs): :class:`~ctxstore.models.ErasureReceipt`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ctxstore._base.ids import check_key_id
from ctxstore._core.format.fields import text
from ctxstore._core.format.jobs import JOB_GROUP
from ctxstore._core.keyring import subject_of
from ctxstore._core.ops.chats import DeletedChat, delete_call
from ctxstore._core.ops.owner_records import (
    field_pairs,
    missing_chats,
    owned_chat_ids,
    record_call,
)
from ctxstore._core.protocol import Call, Operation, command_call, raise_first_error
from ctxstore._core.state import StoreState
from ctxstore.errors import BackendPermissionError, CtxStoreError
from ctxstore.models import ERASED_KINDS, ErasureProgress, ErasureReceipt

#: Chats deleted in one round trip.
CHATS_PER_TRIP = 64
#: Stream entries (or hash fields, index members) read per call.
ENTRIES_PER_READ = 500
#: How often the user's records are read again for chats created while the erasure ran.
ROUNDS = 3
#: How long the erasure waits for the replicas of a single server to acknowledge it.
REPLICA_WAIT_MS = 2000
#: Where a run counts the data keys it deleted without destroying them (not a kind removed).
UNDESTROYED = "data keys not destroyed"
#: Imports stage their keys under a name no read looks at; they expire on their own (minutes).
_STAGING_NOTE = (
    "imports of the user's chats still in progress: their staging keys expire on their own "
    "within 15 minutes"
)

Progress = Callable[[ErasureProgress], None]


def erase_user(
    state: StoreState, user_id: str, *, progress: Progress | None = None
) -> Operation[ErasureReceipt]:
    """Erase every chat ``user_id`` owns in the namespace, and what derives from them."""
    check_key_id(user_id, "user_id")
    started = state.clock()
    removed = dict.fromkeys(ERASED_KINDS, 0)
    erased: dict[str, None] = {}
    tell = progress or _silent
    replicas: tuple[int, int] | None = None
    for _round in range(ROUNDS):
        found = yield from _gather(state, user_id)
        if not found and _round > 0:
            break
        mine = yield from _delete_chats(state, user_id, found, removed, tell)
        erased.update(dict.fromkeys(mine))
        yield from _remove_index_entries(state, user_id, mine, removed, tell)
        wanted = set(mine)
        shards = sorted({state.keyspace.job_stream(chat_id) for chat_id in wanted})
        for stream in shards:
            removed["compaction jobs"] += yield from _remove_stream_entries(
                stream, wanted, "jobs", tell, acknowledge=True
            )
        if wanted:
            removed["dead letters"] += yield from _remove_stream_entries(
                state.keyspace.dead_letters, wanted, "dead letters", tell
            )
            removed["worker records"] += yield from _remove_worker_records(state, wanted, tell)
        replicas = yield from _drop_record(state, user_id, removed, tell)
    undestroyed = removed.pop(UNDESTROYED, 0)
    return ErasureReceipt(
        user_id=user_id,
        chat_ids=tuple(erased),
        removed=removed,
        started_at=started,
        finished_at=state.clock(),
        unreachable=unreachable(state, replicas, undestroyed),
    )


def _silent(_progress: ErasureProgress) -> None:
    return None


# --- what the user owns ----------------------------------------------------------------------


def _gather(state: StoreState, user_id: str) -> Operation[list[str]]:
    """Every chat id the user's owner record and listing index name, the record's first; the
    ids only the index names are added to the record before anything is deleted."""
    recorded, extra = yield from owned_chat_ids(state, user_id)
    if extra:
        now = state.clock()
        outcomes = yield tuple(record_call(state, user_id, chat_id, "", now) for chat_id in extra)
        raise_first_error(outcomes)
    return [*recorded, *extra]


def _chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# --- the chats and their index entries -------------------------------------------------------


def _delete_chats(
    state: StoreState,
    user_id: str,
    chat_ids: Sequence[str],
    removed: dict[str, int],
    tell: Progress,
) -> Operation[list[str]]:
    """Delete the chats' keys as their owner; returns the ids that are the user's (deleted now
    or gone already), leaving out a chat of the same id another user owns."""
    mine: list[str] = []
    done = 0
    for batch in _chunks(chat_ids, CHATS_PER_TRIP):
        outcomes = yield tuple(
            delete_call(state, chat_id, user_id=user_id, leftovers=True) for chat_id in batch
        )
        raise_first_error(outcomes)
        kept = [
            chat_id for chat_id, deleted in zip(batch, outcomes, strict=True) if not deleted.deleted
        ]
        others: set[str] = set()
        if kept:  # not deleted: gone already, or another user's chat of the same id now
            others = set(kept) - (yield from missing_chats(state, kept))
        for chat_id, deleted in zip(batch, outcomes, strict=True):
            if chat_id in others:
                continue
            _count(removed, deleted)
            state.owners.forget(chat_id)
            state.cache.forget(chat_id)
            mine.append(chat_id)
        done += len(batch)
        tell(ErasureProgress("chats", done, len(chat_ids)))
    return mine


def _count(removed: dict[str, int], deleted: DeletedChat) -> None:
    if deleted.deleted:
        removed["chats"] += 1
    removed["chat keys"] += deleted.keys
    removed["messages"] += deleted.messages
    removed["answer stream entries"] += deleted.stream_entries


def _remove_index_entries(
    state: StoreState,
    user_id: str,
    chat_ids: Sequence[str],
    removed: dict[str, int],
    tell: Progress,
) -> Operation[None]:
    """The chats' entries in the namespace's listing index, then the user's whole index."""
    everyone = state.keyspace.all_chats_index
    for batch in _chunks(chat_ids, ENTRIES_PER_READ):
        count = yield command_call(("ZREM", everyone, *batch), keys=(everyone,), writes=True)
        removed["index entries"] += int(count)
    index = state.keyspace.user_index(user_id)
    listed, _gone = yield (
        command_call(("ZCARD", index), keys=(index,)),
        command_call(("UNLINK", index), keys=(index,), writes=True),
    )
    raise_first_error((listed, _gone))
    removed["index entries"] += int(listed)
    tell(ErasureProgress("indexes", len(chat_ids), len(chat_ids)))


# --- streams and worker records --------------------------------------------------------------


def _remove_stream_entries(
    stream: str,
    chat_ids: set[str],
    stage: str,
    tell: Progress,
    *,
    acknowledge: bool = False,
) -> Operation[int]:
    """Delete the entries of ``stream`` whose ``chat`` field names one of ``chat_ids``, reading
    it ``ENTRIES_PER_READ`` entries a call; with ``acknowledge``, first take them out of the
    workers' group (so no worker claims a job that is gone)."""
    removed = 0
    start = "-"
    read = 0
    while True:
        entries = yield command_call(
            ("XRANGE", stream, start, "+", "COUNT", ENTRIES_PER_READ), keys=(stream,)
        )
        matching = [
            text(entry_id) for entry_id, fields in entries if _named_chat(fields) in chat_ids
        ]
        if matching:
            calls: list[Call[Any]] = []
            if acknowledge:
                calls.append(command_call(("XACK", stream, JOB_GROUP, *matching), keys=(stream,)))
            calls.append(command_call(("XDEL", stream, *matching), keys=(stream,), writes=True))
            outcomes = yield tuple(calls)
            deleted = outcomes[-1]
            if isinstance(deleted, CtxStoreError):
                raise deleted  # an XACK refused (no group yet: no worker ever ran) is no matter
            removed += int(deleted)
        read += len(entries)
        tell(ErasureProgress(stage, read, None))
        if len(entries) < ENTRIES_PER_READ:
            return removed
        start = "(" + text(entries[-1][0])


def _named_chat(fields: Any) -> str | None:
    if isinstance(fields, Mapping):
        value = fields.get(b"chat", fields.get("chat"))
    else:  # a flat list of field, value
        flat = list(fields)
        named = dict(zip(flat[::2], flat[1::2], strict=False))
        value = named.get(b"chat", named.get("chat"))
    return None if value is None else text(value)


def _remove_worker_records(state: StoreState, chat_ids: set[str], tell: Progress) -> Operation[int]:
    """The workers' last-job records (``<ms>\\t<outcome>\\t<chat>``) that name one of the chats."""
    records = state.keyspace.worker_last_jobs
    removed = 0
    cursor: Any = 0
    while True:
        reply = yield command_call(
            ("HSCAN", records, cursor, "COUNT", ENTRIES_PER_READ), keys=(records,)
        )
        cursor, items = reply[0], reply[1]
        naming = [
            text(worker)
            for worker, value in field_pairs(items)
            if text(value).rsplit("\t", 1)[-1] in chat_ids
        ]
        if naming:
            count = yield command_call(("HDEL", records, *naming), keys=(records,), writes=True)
            removed += int(count)
        if int(cursor) == 0:
            tell(ErasureProgress("workers", removed, None))
            return removed


# --- the record, and what stays out of reach -------------------------------------------------


def _drop_record(
    state: StoreState, user_id: str, removed: dict[str, int], tell: Progress
) -> Operation[tuple[int, int] | None]:
    """Remove the owner record, the erasure's last write; on a single server, wait for its
    replicas to acknowledge everything up to it. Returns (acknowledged, connected) replicas, or
    None where that is not asked (the embedded store, a Cluster)."""
    record = state.keyspace.owner_record(user_id)
    data_keys = state.keyspace.data_keys(user_id)
    asks = not (state.embedded or state.cluster or state.durability is not None)
    connected = (yield from _connected_replicas()) if asks else 0
    provider = state.settings.encryption
    if provider is not None:
        # After the chats, before the record: a run stopped here is finished by running it
        # again (destroying twice is destroying once), and from now on no copy of the user's
        # sealed records, backups included, opens with anything the provider holds.
        provider.destroy(subject_of(state.keyspace.namespace, user_id))
        state.caches.data_keys.forget(user_id)
    calls: list[Call[Any]] = [
        command_call(("HLEN", record), keys=(record,)),
        command_call(("HLEN", data_keys), keys=(data_keys,)),
        command_call(("UNLINK", data_keys), keys=(data_keys,), writes=True),
        command_call(("UNLINK", record), keys=(record,), writes=True),
    ]
    if connected > 0:
        # The wait rides on the connection of the erasure's last write (one pipeline): a replica
        # that acknowledges it holds every earlier write too (one ordered replication stream).
        calls.append(command_call(("WAIT", connected, REPLICA_WAIT_MS), keys=()))
    outcomes = yield tuple(calls)
    raise_first_error(outcomes[:4])
    removed["owner record entries"] += int(outcomes[0])
    stored_keys = max(int(outcomes[1]) - 1, 0)  # besides the field naming the current one
    removed["data keys"] += stored_keys
    if stored_keys and provider is None:
        removed[UNDESTROYED] = removed.get(UNDESTROYED, 0) + stored_keys
    tell(ErasureProgress("record", 1, 1))
    if not asks:
        return None  # a store with durability= waited after every write already
    if connected <= 0:
        return (0, connected)
    acknowledged = outcomes[4]
    return (0 if isinstance(acknowledged, BaseException) else int(acknowledged), connected)


def _connected_replicas() -> Operation[int]:
    """How many replicas the server has (``INFO replication``); -1 when it will not say (an
    ACL that does not grant INFO)."""
    try:
        reply = yield command_call(("INFO", "replication"), keys=())
    except BackendPermissionError:
        return -1
    if isinstance(reply, Mapping):
        return int(reply.get("connected_slaves", 0))
    info = text(reply) if isinstance(reply, bytes | str) else ""
    for line in info.splitlines():
        if line.startswith("connected_slaves:"):
            return int(line.split(":", 1)[1])
    return 0


def unreachable(
    state: StoreState, replicas: tuple[int, int] | None, undestroyed: int = 0
) -> tuple[str, ...]:
    """The places an erased user's data may still be, which no command of ctxstore removes;
    ``undestroyed``: data keys deleted from Redis by a store without the key provider, which
    therefore could not destroy them."""
    places: list[str] = []
    if undestroyed:
        places.append(
            f"the key provider: {undestroyed} data key(s) of the user were deleted from Redis "
            "but not destroyed (this store has no encryption=): copies of the user's sealed "
            "records taken before still open; erase with a store that has the key provider"
        )
    if not state.embedded:  # the embedded store keeps nothing outside this process
        places.append(
            "AOF/RDB files until rewritten: the server's append-only file and snapshots hold "
            "the erased data until BGREWRITEAOF and the next snapshot replace them (and backups "
            "of them until they expire)"
            + (
                "; the messages of sealed chats there no longer open (the user's data key was "
                "destroyed at the key provider), their ids, counts, titles and chat metadata "
                "are in the clear"
                if state.settings.encryption is not None
                else ""
            )
        )
    if state.cluster:
        places.append(
            "replicas that did not acknowledge: not asked on a Cluster (each primary's replicas "
            "apply the erasure asynchronously)"
        )
    elif replicas is not None and replicas[1] < 0:
        places.append(
            "replicas that did not acknowledge: not known (the server's ACL does not grant "
            "INFO, so the erasure could not ask how many replicas there are)"
        )
    elif replicas is not None and replicas[0] < replicas[1]:
        places.append(
            f"replicas that did not acknowledge: {replicas[1] - replicas[0]} of "
            f"{replicas[1]} within {REPLICA_WAIT_MS} ms"
        )
    places += [
        "the LLM provider that summarized the chats (and the one that answered them): their "
        "own retention applies",
        "logs: the ctxstore and ctxstore.worker loggers name chat ids, and so may the server's "
        "slow log and any MONITOR output",
        "other processes' memory: chains they read stay in their caches until evicted (no read "
        "returns them again: every read checks the chat in Redis)",
        "copies made outside ctxstore: exports, backups, the callers' own stores",
        _STAGING_NOTE,
    ]
    return tuple(places)
