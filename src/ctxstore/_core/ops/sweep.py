"""Retention that cleans up: the sweep of entries that name chats no longer there, and the purge
of a whole namespace.

A chat that expires (its retention) or is deleted elsewhere leaves its entries in the listing
indexes (the namespace's and its owner's) and in its owner's record; a listing repairs the
entries it reads, but an index nobody lists would grow for ever. :func:`sweep` walks them all in
bounded steps: the namespace index (``ZSCAN``), then every user index and owner record (found
with a scan of every primary, :mod:`ctxstore._core.ops.scanning`), checking each chat with
``EXISTS`` (no payload is read) and removing what names a chat that is gone, only while the
entry is what the sweep read (a chat written again meanwhile keeps its entry). An owner-record
entry younger than ``grace_ms`` is left: on a Cluster a chat is recorded a moment before it is
created. Each call touches at most ``ENTRIES_PER_STEP`` entries, and a step's removals go 32 to
a script, so no call holds the server for long (well under a millisecond); ``pause`` seconds
pass between steps, so a worker sweeping in the background never competes with the requests.

:func:`purge_namespace` removes every key of a namespace (a tenant offboarded), a scan step of
keys at a time, on every primary.
"""

from __future__ import annotations

import re
from typing import Any

from ctxstore._base.plans import Pause, Plan, Run
from ctxstore._core.format.fields import text
from ctxstore._core.ops.indexes import repair_call
from ctxstore._core.ops.owner_records import field_pairs, forget_calls, missing_chats
from ctxstore._core.ops.scanning import each_key_batch, node_routes, scan_call
from ctxstore._core.protocol import Call, Operation, command_call, raise_first_error
from ctxstore._core.state import StoreState
from ctxstore.errors import (
    BackendPermissionError,
    ConfigurationError,
    CtxStoreError,
    ValidationError,
)
from ctxstore.models import SweepReport

#: Entries one step reads and checks.
ENTRIES_PER_STEP = 200
#: Entries one removal script takes: a script's guarded removal costs some microseconds an
#: entry, so a step's removals go as several scripts (in one round trip), each well under 1 ms.
REMOVALS_PER_CALL = 32
#: An owner-record entry this young may stand for a chat being created (Cluster): left alone.
DEFAULT_GRACE_MS = 10 * 60 * 1000


def check_sweep_options(grace_ms: object, pause: object) -> None:
    """The sweep's options: a whole number of milliseconds, a number of seconds, neither
    negative (checked before anything is read)."""
    if isinstance(grace_ms, bool) or not isinstance(grace_ms, int) or grace_ms < 0:
        raise ValidationError(f"grace_ms must be a non-negative integer, got {grace_ms!r}")
    if isinstance(pause, bool) or not isinstance(pause, int | float) or not 0 <= pause < 3600:
        raise ValidationError(f"pause must be a number of seconds from 0 to 3600, got {pause!r}")


def sweep(
    state: StoreState, *, grace_ms: int = DEFAULT_GRACE_MS, pause: float = 0.0
) -> Plan[SweepReport]:
    """One pass over the namespace's listing indexes and owner records (see the module)."""
    report = SweepReport()
    base = glob_escaped(state.keyspace.base)
    yield from _walk_index(state, state.keyspace.all_chats_index, report, pause)
    try:
        yield from _walk_keys(state, base, grace_ms, report, pause)
    except BackendPermissionError as refused:
        # A tenant's Redis user may not list key names (SCAN): the namespace index is swept,
        # the user indexes and owner records wait for an operator's sweep.
        report.skipped = f"user indexes and owner records: {refused}"
    return report


def _walk_keys(
    state: StoreState, base: str, grace_ms: int, report: SweepReport, pause: float
) -> Plan[None]:
    """Every user index and owner record of the namespace, found on every primary."""
    routes = yield Run(node_routes(state))
    for pattern, walk in (
        (f"{base}:idx:user:*", _walk_index),
        (f"{base}:owned:*", _walk_record_with_grace(grace_ms)),
    ):
        for route in routes:
            cursor = 0
            while True:
                cursor, keys = yield Run(_single(scan_call(route, cursor, pattern)))
                for key in keys:
                    report.keys_walked += 1
                    yield from walk(state, key, report, pause)
                if cursor == 0:
                    break


def _single(call: Call[Any]) -> Operation[Any]:
    result = yield call
    return result


def _walk_index(state: StoreState, index: str, report: SweepReport, pause: float) -> Plan[None]:
    """Remove the entries of a listing index whose chat is gone."""
    cursor = 0
    while True:
        cursor, checked, removed = yield Run(_index_step(state, index, cursor))
        report.index_entries_checked += checked
        report.index_entries_removed += removed
        yield Pause(pause)  # even of 0 s: where a caller may end the sweep
        if cursor == 0:
            return


def _index_step(state: StoreState, index: str, cursor: int) -> Operation[tuple[int, int, int]]:
    reply = yield command_call(("ZSCAN", index, cursor, "COUNT", ENTRIES_PER_STEP), keys=(index,))
    cursor = int(text(reply[0]) if isinstance(reply[0], bytes) else reply[0])
    entries = [(text(member), float(score)) for member, score in field_pairs(reply[1])]
    gone = yield from missing_chats(state, [chat_id for chat_id, _score in entries])
    removed = 0
    repairs = [(chat_id, score, None) for chat_id, score in entries if chat_id in gone]
    if repairs:
        outcomes = yield tuple(
            repair_call(index, repairs[start : start + REMOVALS_PER_CALL], writes=True)
            for start in range(0, len(repairs), REMOVALS_PER_CALL)
        )
        removed = _counted(outcomes)
    return cursor, len(entries), removed


def _counted(outcomes: Any) -> int:
    """The entries a batch of removal scripts removed (a failed one raises its error)."""
    raise_first_error(outcomes)
    return sum(int(outcome) for outcome in outcomes)


def _walk_record_with_grace(grace_ms: int) -> Any:
    def walk(state: StoreState, record: str, report: SweepReport, pause: float) -> Plan[None]:
        cursor = 0
        while True:
            cursor, checked, removed = yield Run(_record_step(state, record, cursor, grace_ms))
            report.record_entries_checked += checked
            report.record_entries_removed += removed
            yield Pause(pause)
            if cursor == 0:
                return

    return walk


def _record_step(
    state: StoreState, record: str, cursor: int, grace_ms: int
) -> Operation[tuple[int, int, int]]:
    """Remove the entries of an owner record whose chat is gone and that are older than
    ``grace_ms`` (the same incarnation as read: ``forget_owned.lua``)."""
    reply = yield command_call(("HSCAN", record, cursor, "COUNT", ENTRIES_PER_STEP), keys=(record,))
    cursor = int(text(reply[0]) if isinstance(reply[0], bytes) else reply[0])
    entries = [(text(chat_id), text(value)) for chat_id, value in field_pairs(reply[1])]
    horizon = state.clock() - grace_ms
    old = [(chat_id, value) for chat_id, value in entries if _recorded_at(value) < horizon]
    gone = yield from missing_chats(state, [chat_id for chat_id, _value in old])
    doomed = [(chat_id, value.partition("\t")[2]) for chat_id, value in old if chat_id in gone]
    removed = 0
    user = _user_of(state, record)
    if doomed and user is not None:
        outcomes = yield tuple(
            call
            for start in range(0, len(doomed), REMOVALS_PER_CALL)
            for call in forget_calls(state, user, doomed[start : start + REMOVALS_PER_CALL])
        )
        removed = _counted(outcomes)
    return cursor, len(entries), removed


def _recorded_at(value: str) -> int:
    head = value.partition("\t")[0]
    return int(head) if head.isdigit() else 0


def _user_of(state: StoreState, record: str) -> str | None:
    prefix = f"{state.keyspace.base}:owned:{{"
    if not (record.startswith(prefix) and record.endswith("}")):
        return None
    user = record[len(prefix) : -1]
    try:
        state.keyspace.owner_record(user)  # a key of no valid user is left alone
    except CtxStoreError:
        return None
    return user


def glob_escaped(text_: str) -> str:
    """``text_`` as a literal in a SCAN ``MATCH`` pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text_)


# --- purging a namespace ---------------------------------------------------------------------


def purge_namespace(state: StoreState, confirm: object) -> Operation[int]:
    """Remove every key of the store's namespace, a scan step at a time on every primary;
    refused (nothing removed) without a namespace or when ``confirm`` is not its name. Returns
    how many keys were removed."""
    namespace = state.keyspace.namespace
    if namespace is None:
        raise ConfigurationError(
            "purge_namespace removes one tenant's namespace, and this store has none (it would "
            "remove every key of the prefix): nothing was removed"
        )
    if confirm != namespace:
        raise ConfigurationError(
            f"purge_namespace(confirm=...) must repeat the namespace's name, {namespace!r}: "
            "nothing was removed"
        )
    removed = 0

    def unlink(keys: list[str]) -> Operation[None]:
        nonlocal removed
        outcomes = yield tuple(
            command_call(("UNLINK", key), keys=(key,), writes=True) for key in keys
        )
        removed += _counted(outcomes)

    yield from each_key_batch(state, f"{glob_escaped(state.keyspace.base)}:*", unlink)
    state.cache.clear()
    return removed
