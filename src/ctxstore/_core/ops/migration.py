"""``migrate``: mark a keyspace with this release's storage format and bring every chat of it
to that format, online, while writers run (docs/compatibility.md).

The walk finds every chat hash of the namespace with a scan of every primary
(:mod:`ctxstore._core.ops.scanning`: a chat in no index is found too) and sends one
``migrate_chat.lua`` per chat, a scan step's chats in one round trip. Each script checks the
chat and upgrades it in place, or answers that it is current already, so a run is idempotent
and a chat written meanwhile is never half-migrated. A chat that cannot be migrated (another
release's format, a broken identity) is reported, left as it was, and the walk goes on.

The keyspace is marked before the walk, so from then on every process of this release creates
chats in its format. Where the walk stands is kept in ``<base>:migrating`` after each step: a
run started after an interrupted one goes on from there (the same primaries: a resharded
Cluster starts over, which is only slower). ``dry_run`` reads the marker and every chat's
format, and writes nothing.

With ``encrypt`` (a store with encryption), every chat found in the clear is sealed after its
format check, one chat at a time (:mod:`ctxstore._core.ops.sealing`); one that cannot be
sealed now (written throughout, an answer being streamed into it) is reported in ``failed``
and sealed by the next run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from ctxstore._base.plans import Pause, Plan, Run
from ctxstore._core.format.fields import pairs, text
from ctxstore._core.format.versions import (
    FORMAT,
    SEALED_FORMAT,
    KeyspaceMarker,
    keyspace_format_error,
    release,
)
from ctxstore._core.ops.data_keys import provider_of
from ctxstore._core.ops.scanning import node_routes, scan_call
from ctxstore._core.ops.sealing import seal_chat
from ctxstore._core.ops.sweep import glob_escaped
from ctxstore._core.protocol import Call, Operation, command_call, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.server_checks import marker_call, marker_of
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatNotFoundError, CtxStoreError, ValidationError
from ctxstore.models import MigrationFailure, MigrationProgress, MigrationReport

Progress = Callable[[MigrationProgress], None]


def check_migrate_options(pause: object) -> None:
    if isinstance(pause, bool) or not isinstance(pause, int | float) or not 0 <= pause < 3600:
        raise ValidationError(f"pause must be a number of seconds from 0 to 3600, got {pause!r}")


def migrate(
    state: StoreState,
    *,
    dry_run: bool = False,
    pause: float = 0.0,
    progress: Progress | None = None,
    encrypt: bool = False,
) -> Plan[MigrationReport]:
    """Mark the keyspace and walk its chats (see the module); with ``encrypt``, every chat in
    the clear is sealed too (:mod:`ctxstore._core.ops.sealing`)."""
    if encrypt:
        provider_of(state)  # a store without encryption has nothing to seal with
    started = time.monotonic()
    marker = yield Run(_read_marker(state))
    if marker.format != FORMAT and not dry_run:
        # A keyspace of a newer release (or of a format this release cannot read) stays as it is.
        raise keyspace_format_error(marker, state.keyspace.base)
    report = MigrationReport(
        format=FORMAT, previous_format=marker.format, dry_run=dry_run, encrypt=encrypt
    )
    if not dry_run and not marker.marked:
        yield Run(_mark(state))
        report.marked = True
    routes = yield Run(node_routes(state))
    total = yield Run(_estimate(state))
    first, cursor = (0, 0) if dry_run else (yield Run(_resume_point(state, routes)))
    report.resumed = (first, cursor) != (0, 0)
    pattern = f"{glob_escaped(state.keyspace.base)}:{{*}}:chat"
    for number in range(first, len(routes)):
        while True:
            cursor, keys = yield Run(_single(scan_call(routes[number], cursor, pattern)))
            chats = [chat for chat in (_chat_id(state, key) for key in keys) if chat is not None]
            if chats:
                yield Run(_step(state, chats, report))
            if not dry_run:
                yield Run(_keep_place(state, routes, number, cursor))
            if progress is not None:
                progress(
                    MigrationProgress(
                        report.chats, total, len(report.failed), time.monotonic() - started
                    )
                )
            yield Pause(pause)
            if cursor == 0:
                break
    if not dry_run:
        yield Run(_single(_forget_place(state)))
    report.elapsed_ms = int((time.monotonic() - started) * 1000)
    return report


def _single(call: Call[Any]) -> Operation[Any]:
    result = yield call
    return result


def _read_marker(state: StoreState) -> Operation[KeyspaceMarker]:
    return marker_of((yield marker_call(state)))


def _mark(state: StoreState) -> Operation[None]:
    key = state.keyspace.format_marker
    yield command_call(
        ("HSET", key, "format", FORMAT, "release", release(), "marked_at", state.clock()),
        keys=(key,),
        writes=True,
    )
    state.caches.remember_marker(KeyspaceMarker(FORMAT, release(), state.clock()))


def _estimate(state: StoreState) -> Operation[int | None]:
    index = state.keyspace.all_chats_index
    try:
        count = yield command_call(("ZCARD", index), keys=(index,))
    except CtxStoreError:
        return None
    return int(count)


def _place_key(state: StoreState) -> str:
    return f"{state.keyspace.base}:migrating"


def _routes_text(routes: Sequence[str | None]) -> str:
    return " ".join(route or "-" for route in routes)


def _resume_point(state: StoreState, routes: Sequence[str | None]) -> Operation[tuple[int, int]]:
    """Where an interrupted run of this format stopped: (route number, scan cursor)."""
    key = _place_key(state)
    reply = yield command_call(("HGETALL", key), keys=(key,))
    place = {name: text(value) for name, value in pairs(reply or ()).items()}
    if place.get("format") != FORMAT or place.get("routes") != _routes_text(routes):
        return 0, 0
    number, cursor = place.get("route", ""), place.get("cursor", "")
    if not (number.isdigit() and cursor.isdigit()) or int(number) >= len(routes):
        return 0, 0
    if cursor == "0":  # that route was done: the next one, from its start
        return int(number) + 1, 0
    return int(number), int(cursor)


def _keep_place(
    state: StoreState, routes: Sequence[str | None], number: int, cursor: int
) -> Operation[None]:
    key = _place_key(state)
    yield command_call(
        (
            "HSET",
            key,
            "format",
            FORMAT,
            "routes",
            _routes_text(routes),
            "route",
            number,
            "cursor",
            cursor,
            "at",
            state.clock(),
        ),
        keys=(key,),
        writes=True,
    )


def _forget_place(state: StoreState) -> Call[Any]:
    key = _place_key(state)
    return command_call(("DEL", key), keys=(key,), writes=True)


def _chat_id(state: StoreState, key: str) -> str | None:
    """The chat a scanned ``<base>:{<chat>}:chat`` key is the hash of (None: not a chat key
    of this namespace, or an id ctxstore would not accept)."""
    head = f"{state.keyspace.base}:{{"
    if not (key.startswith(head) and key.endswith("}:chat")):
        return None
    chat_id = key[len(head) : -len("}:chat")]
    try:
        return state.keyspace.chat(chat_id).chat_id
    except CtxStoreError:
        return None


def _step(state: StoreState, chats: list[str], report: MigrationReport) -> Operation[None]:
    """One scan step's chats: their formats read (a dry run) or each one migrated."""
    calls: tuple[Call[Any], ...]
    if report.dry_run:
        calls = tuple(_format_call(state, chat) for chat in chats)
    else:
        calls = tuple(_migrate_call(state, chat) for chat in chats)
    outcomes = yield calls
    for chat, outcome in zip(chats, outcomes, strict=True):
        if isinstance(outcome, CtxStoreError):
            if isinstance(outcome, ChatNotFoundError):  # deleted since the scan saw it
                continue
            report.chats += 1
            report.failed.append(MigrationFailure(chat, str(outcome)))
            found = outcome.details.get("found")
            label = str(found) if found is not None else "unreadable"
            report.by_format[label] = report.by_format.get(label, 0) + 1
            continue
        if outcome is None:  # a dry run's chat deleted since the scan
            continue
        found, upgraded = outcome
        report.chats += 1
        report.upgraded += upgraded
        report.by_format[found] = report.by_format.get(found, 0) + 1
        if report.encrypt and not report.dry_run and found != SEALED_FORMAT:
            try:
                report.sealed += yield from seal_chat(state, chat)
            except ChatNotFoundError:  # deleted since
                continue
            except CtxStoreError as error:
                report.failed.append(MigrationFailure(chat, str(error)))


def _format_call(state: StoreState, chat: str) -> Call[tuple[str, bool] | None]:
    key = state.keyspace.chat(chat).key("chat")

    def parse(reply: Any) -> tuple[str, bool] | None:
        owner, found = reply
        if owner is None and found is None:  # deleted since the scan saw it
            return None
        return (text(found) if found is not None else "none"), False

    return command_call(("HMGET", key, "user_id", "fmt"), keys=(key,), parse=parse)


def _migrate_call(state: StoreState, chat: str) -> Call[tuple[str, bool]]:
    key = state.keyspace.chat(chat).key("chat")

    def parse(reply: Any) -> tuple[str, bool]:
        return text(reply[0]), text(reply[1]) == "upgraded"

    return script_call(
        load_script("migrate_chat"),
        (key,),
        (FORMAT,),
        parse=parse,
        context={"chat_id": chat},
        writes=lambda result: result[1],
    )
