"""The saver's operations, one round trip each, shared by the sync and the async saver.

Each is an operation (:mod:`ctxstore._core.protocol`): a generator that yields the calls it
needs and returns what the saver returns; :class:`~.savers.CtxStoreSaver` runs it with
``Store.run``, :class:`~.savers.AsyncCtxStoreSaver` with ``await AsyncStore.run``. Values go
through the saver's serializer (LangGraph's ``serde``: typed ``(type, bytes)`` pairs) and are
stored as ``<type>\\x1f<bytes>``; the scripts read only the record headers (parent, run id,
channel versions) and the member names, never a value.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgpack

from ctxstore._base.ids import check_key_id
from ctxstore._core.format.fields import corrupt
from ctxstore._core.protocol import (
    MAX_COMMAND_ARGUMENTS,
    Arg,
    Call,
    Operation,
    command_call,
    script_call,
)
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import LimitExceededError
from ctxstore.integrations.langgraph.layout import (
    GS,
    RS,
    US,
    ThreadKeys,
    part,
    run_index,
    thread_keys,
    threads_index,
)

#: A write's index in its member, shifted so the special channels' (-1 to -4) sort first.
INDEX_SHIFT = 100
#: How many ancestors a delta-history walk visits at most (LangGraph snapshots far sooner).
HISTORY_BOUND = 10_000
#: Checkpoints a page of ``list`` holds.
PAGE = 10

Typed = tuple[str, bytes]


@dataclass(frozen=True)
class Stored:
    """One checkpoint as a read returns it, its values still serialized."""

    thread_id: str
    ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Typed
    metadata: Typed
    #: channel -> its value at the checkpoint's version
    blobs: dict[str, Typed]
    #: (task id, channel, value) in writes_sort_key order
    writes: list[tuple[str, str, Typed]]
    #: the channel versions the record's header names (text)
    versions: dict[str, str]


def typed_bytes(value: Typed) -> bytes:
    kind, data = value
    return kind.encode("utf-8") + US.encode() + bytes(data)


def typed_of(raw: bytes, key: str, field: str) -> Typed:
    kind, separator, data = bytes(raw).partition(US.encode())
    if not separator:
        raise corrupt(key, field, "not a serialized value")
    return kind.decode("utf-8", "replace"), data


def checkpoint_record(
    parent: str | None,
    run_id: str,
    versions: Mapping[str, Any],
    checkpoint: Typed,
    metadata: Typed,
) -> bytes:
    """The record the scripts read the header of: parent, run id, channel versions."""
    listed = GS.join(
        f"{part(channel, 'a channel')}{US}{part(version, 'a channel version')}"
        for channel, version in versions.items()
    )
    header = f"{parent or ''}{RS}{run_id}{RS}{listed}{RS}".encode()
    payload: bytes = msgpack.packb(
        [checkpoint[0], checkpoint[1], metadata[0], metadata[1]], use_bin_type=True
    )
    return header + payload


def _scripted(name: str, keys: ThreadKeys) -> tuple[Any, tuple[str, ...]]:
    script = load_script(name)
    return script, keys.select(script.key_names)


def _ttl(state: StoreState) -> str:
    return "" if state.default_ttl_ms is None else str(state.default_ttl_ms)


def _capped(args: Sequence[Arg], what: str) -> None:
    if len(args) + 1 > MAX_COMMAND_ARGUMENTS:
        raise LimitExceededError(
            f"{what} is over the {MAX_COMMAND_ARGUMENTS} arguments a command may carry",
            what=what,
            limit=MAX_COMMAND_ARGUMENTS,
        )


def put(
    state: StoreState,
    thread_id: str,
    ns: str,
    checkpoint_id: str,
    record: bytes,
    blobs: Iterable[tuple[str, str, Typed | None]],
    run_id: str = "",
) -> Operation[None]:
    """Store a checkpoint record and its new blobs (channel, version, value or None for an
    empty channel), and touch the thread index (and its run's): one round trip."""
    keys = thread_keys(state.keyspace.base, thread_id)
    script, names = _scripted("lg_put", keys)
    args: list[Arg] = [part(ns, "checkpoint_ns"), part(checkpoint_id, "a checkpoint id"), record]
    args.append(_ttl(state))
    for channel, version, value in blobs:
        field = f"{ns}{US}{part(channel, 'a channel')}{US}{part(version, 'a channel version')}"
        args += [field, b"" if value is None else typed_bytes(value)]
    _capped(args, "a checkpoint's new channel values")
    index = threads_index(state.keyspace.base)
    calls: list[Call[Any]] = [
        script_call(script, names, args, parse=int, context={"thread_id": thread_id}, writes=True),
        command_call(("ZADD", index, state.clock(), keys.thread_id), keys=(index,), writes=True),
    ]
    if run_id:
        calls += _run_index_calls(state, check_key_id(run_id, "run_id"), keys.thread_id)
    _raise_any((yield tuple(calls)))


def _raise_any(outcomes: Sequence[Any]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, Exception):
            raise outcome


def _run_index_calls(state: StoreState, run_id: str, thread_id: str) -> list[Call[Any]]:
    """The run's index of threads (what ``delete_for_runs`` reads), kept as long as a thread."""
    key = run_index(state.keyspace.base, run_id)
    calls: list[Call[Any]] = [
        command_call(("ZADD", key, state.clock(), thread_id), keys=(key,), writes=True)
    ]
    if state.default_ttl_ms is not None:
        calls.append(command_call(("PEXPIRE", key, state.default_ttl_ms), keys=(key,), writes=True))
    return calls


def _per_thread(
    state: StoreState, name: str, thread_ids: Sequence[str], args: Sequence[Arg] = ()
) -> list[Call[int]]:
    """One call of script ``name`` per thread (each on its own slot; sent together)."""
    script = load_script(name)
    calls: list[Call[int]] = []
    for thread in thread_ids:
        keys = thread_keys(state.keyspace.base, thread)
        calls.append(
            script_call(
                script,
                keys.select(script.key_names),
                args,
                parse=int,
                context={"thread_id": keys.thread_id},
                writes=True,
            )
        )
    return calls


def delete_for_runs(state: StoreState, run_ids: Sequence[str]) -> Operation[int]:
    """Every checkpoint of the runs, in every thread they wrote to, with its writes: one round
    trip to read the runs' threads, one for the threads, one to drop the runs' indexes."""
    runs = [check_key_id(run_id, "run_id") for run_id in run_ids]
    if not runs:
        return 0
    base = state.keyspace.base
    listed = yield tuple(
        command_call(("ZRANGE", run_index(base, run), 0, -1), keys=(run_index(base, run),))
        for run in runs
    )
    _raise_any(listed)
    threads = sorted({bytes(thread).decode("utf-8") for found in listed for thread in found})
    dropped = 0
    if threads:
        outcomes = yield tuple(_per_thread(state, "lg_delete_runs", threads, runs))
        _raise_any(outcomes)
        dropped = sum(int(outcome) for outcome in outcomes)
    _raise_any(
        (
            yield tuple(
                command_call(
                    ("DEL", run_index(base, run)), keys=(run_index(base, run),), writes=True
                )
                for run in runs
            )
        )
    )
    return dropped


def prune(state: StoreState, thread_ids: Sequence[str]) -> Operation[int]:
    """Each thread's latest checkpoint of each namespace kept (with the ancestors its delta
    channels need), the rest removed: one round trip for all the threads."""
    if not thread_ids:
        return 0
    outcomes = yield tuple(_per_thread(state, "lg_prune", thread_ids))
    _raise_any(outcomes)
    return sum(int(outcome) for outcome in outcomes)


#: Fields (pairs) a chunk of ``copy_thread``'s load carries: far below 3,999 arguments.
COPY_CHUNK = 1_500


def copy_thread(state: StoreState, source: str, target: str) -> Operation[None]:
    """Every checkpoint, blob and write of ``source`` added to ``target``: one round trip to
    read the source, one per chunk of :data:`COPY_CHUNK` entries to write the target."""
    base = state.keyspace.base
    source_keys, target_keys = thread_keys(base, source), thread_keys(base, target)
    dump = load_script("lg_dump")
    cps, blobs, values = yield script_call(
        dump,
        source_keys.select(dump.key_names),
        (),
        parse=lambda reply: reply,
        context={"thread_id": source_keys.thread_id},
    )
    if not cps:
        return
    load = load_script("lg_load")
    names = target_keys.select(load.key_names)
    items = [
        *(("c", cps[i], cps[i + 1]) for i in range(0, len(cps), 2)),
        *(("b", blobs[i], blobs[i + 1]) for i in range(0, len(blobs), 2)),
        *(("w", values[i], values[i + 1]) for i in range(0, len(values), 2)),
    ]
    for start in range(0, len(items), COPY_CHUNK):
        chunk = items[start : start + COPY_CHUNK]
        counts = "\t".join(str(sum(1 for item in chunk if item[0] == kind)) for kind in "cbw")
        args: list[Arg] = [_ttl(state), counts]
        for _kind, field, value in chunk:
            args += [field, value]
        yield script_call(
            load, names, args, parse=int, context={"thread_id": target_keys.thread_id},
            writes=True,
        )  # fmt: skip
    index = threads_index(base)
    yield command_call(
        ("ZADD", index, state.clock(), target_keys.thread_id), keys=(index,), writes=True
    )


def write_member(ns: str, checkpoint_id: str, task_path: str, task_id: str, index: int,
                 channel: str) -> str:  # fmt: skip
    return US.join(
        (
            ns,
            checkpoint_id,
            part(task_path, "a task path"),
            part(task_id, "a task id"),
            f"{index + INDEX_SHIFT:09d}",
            part(channel, "a channel"),
        )
    )


def put_writes(
    state: StoreState, thread_id: str, writes: Iterable[tuple[str, Typed, bool]]
) -> Operation[int]:
    """Store a task's writes (member, value, whether a later write replaces it): one round
    trip; how many were stored."""
    keys = thread_keys(state.keyspace.base, thread_id)
    script, names = _scripted("lg_put_writes", keys)
    args: list[Arg] = [_ttl(state)]  # each member names its checkpoint (write_member checks)
    for member, value, replace in writes:
        args += [member, typed_bytes(value), "1" if replace else "0"]
    _capped(args, "a task's writes")
    stored: int = yield script_call(
        script, names, args, parse=int, context={"thread_id": thread_id}, writes=True
    )
    return stored


def get(
    state: StoreState, thread_id: str, ns: str, checkpoint_id: str | None
) -> Operation[Stored | None]:
    """The checkpoint named (or the namespace's latest), with its blobs and writes."""
    keys = thread_keys(state.keyspace.base, thread_id)
    script, names = _scripted("lg_get", keys)
    args = (part(ns, "checkpoint_ns"), part(checkpoint_id or "", "a checkpoint id"))
    reply = yield script_call(
        script, names, args, parse=lambda found: found, context={"thread_id": thread_id}
    )
    return _stored(keys, reply) if reply else None


def page(
    state: StoreState, thread_id: str, ns: str | None, before: str, count: int
) -> Operation[list[Stored]]:
    """A page of the thread's checkpoints newest first, of ``ns`` (None: every namespace),
    before the member ``before`` ("" for the newest)."""
    keys = thread_keys(state.keyspace.base, thread_id)
    script, names = _scripted("lg_list", keys)
    scope = "*" if ns is None else "=" + part(ns, "checkpoint_ns")
    reply = yield script_call(
        script,
        names,
        (scope, before, count),
        parse=lambda found: found,
        context={"thread_id": thread_id},
    )
    return [_stored(keys, item) for item in reply]


def history(
    state: StoreState, thread_id: str, ns: str, checkpoint_id: str | None, channels: Sequence[str]
) -> Operation[dict[str, tuple[Typed | None, list[tuple[str, str, Typed]]]]]:
    """Each channel's seed (None: none found) and writes, oldest ancestor first."""
    keys = thread_keys(state.keyspace.base, thread_id)
    script, names = _scripted("lg_history", keys)
    args: list[Arg] = [part(ns, "checkpoint_ns"), part(checkpoint_id or "", "a checkpoint id")]
    args.append(HISTORY_BOUND)
    args += [part(channel, "a channel") for channel in channels]
    _capped(args, "a delta history's channels")
    reply = yield script_call(
        script, names, args, parse=lambda found: found, context={"thread_id": thread_id}
    )
    blob_key, values_key = keys.key("lg_blob"), keys.key("lg_values")
    out: dict[str, tuple[Typed | None, list[tuple[str, str, Typed]]]] = {}
    for channel, (seed, found, flat) in zip(channels, reply, strict=True):
        groups: list[list[tuple[str, str, Typed]]] = []
        last = None
        for index in range(0, len(flat), 2):
            member = bytes(flat[index]).decode("utf-8")
            fields = member.split(US)
            if fields[1] != last:
                groups.append([])
                last = fields[1]
            groups[-1].append((fields[3], fields[5], typed_of(flat[index + 1], values_key, member)))
        writes = [write for group in reversed(groups) for write in group]
        out[channel] = (typed_of(seed, blob_key, channel) if found else None, writes)
    return out


def delete_thread(state: StoreState, thread_id: str) -> Operation[None]:
    """Every key of the thread removed, and its index entry: one round trip."""
    yield from delete_threads(state, [thread_id])


def delete_threads(state: StoreState, thread_ids: Sequence[str]) -> Operation[None]:
    """Every key of each thread removed, and their index entries: one round trip."""
    if not thread_ids:
        return
    index = threads_index(state.keyspace.base)
    calls: list[Call[Any]] = list(_per_thread(state, "lg_delete", thread_ids))
    for thread in thread_ids:
        calls.append(command_call(("ZREM", index, thread), keys=(index,), writes=True))
    _raise_any((yield tuple(calls)))


def thread_ids(state: StoreState, after: str, count: int) -> Operation[list[str]]:
    """Thread ids of the namespace's index, after ``after`` (lexical), ``count`` at most."""
    index = threads_index(state.keyspace.base)
    low = "(" + after if after else "-"
    reply = yield command_call(("ZRANGEBYLEX", index, low, "+", "LIMIT", 0, count), keys=(index,))
    return [bytes(item).decode("utf-8") for item in reply]


def _stored(keys: ThreadKeys, item: Sequence[Any]) -> Stored:
    ns, checkpoint_id, record, flat_blobs, flat_writes = item
    ns_text, id_text = bytes(ns).decode("utf-8"), bytes(checkpoint_id).decode("utf-8")
    cp_key = keys.key("lg_cp")
    field = f"{ns_text}{US}{id_text}"
    parts = bytes(record).split(RS.encode(), 3)  # the header's three parts, then the payload
    if len(parts) != 4:
        raise corrupt(cp_key, field, "not a checkpoint record")
    parent, _run, listed = (part.decode("utf-8") for part in parts[:3])
    versions = dict(item.split(US, 1) for item in listed.split(GS) if item)
    try:
        ctype, cbytes, mtype, mbytes = msgpack.unpackb(parts[3], raw=False)
    except Exception as exc:  # msgpack raises several unrelated types for bad input
        raise corrupt(cp_key, field, f"not a checkpoint record ({exc})") from exc
    blob_key, values_key = keys.key("lg_blob"), keys.key("lg_values")
    blobs = {
        bytes(flat_blobs[index]).decode("utf-8"): typed_of(flat_blobs[index + 2], blob_key, field)
        for index in range(0, len(flat_blobs), 3)
    }
    writes = []
    for index in range(0, len(flat_writes), 2):
        member = bytes(flat_writes[index]).decode("utf-8")
        fields = member.split(US)
        if len(fields) != 6:
            raise corrupt(keys.key("lg_writes"), member, "not a write member")
        writes.append((fields[3], fields[5], typed_of(flat_writes[index + 1], values_key, member)))
    return Stored(
        keys.thread_id,
        ns_text,
        id_text,
        parent or None,
        (ctype, cbytes),
        (mtype, mbytes),
        blobs,
        writes,
        versions,
    )
