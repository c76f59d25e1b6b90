"""Checks run once per process and server, before the first operation of a store.

An eviction policy other than ``noeviction`` lets Redis drop keys under memory pressure; one
dropped ``parent`` hash silently cuts every chain of a chat, so a server that can evict gets a
warning in the log. The check is skipped quietly where ``CONFIG`` is disabled (managed services).

A store connected with ``durability=`` first checks that the server has the wait command
(``WAITAOF`` needs Redis 7.2 and ``appendonly yes``; a replica refuses ``WAIT``): a
:class:`ConfigurationError` before anything is written, instead of writes that all fail after
they were applied. ``connect()`` makes no round trip on a single server (and ``connect_async``
none at all), so the check rides on the first operation, like the eviction check.

The keyspace's format marker (:mod:`ctxstore._core.format.versions`) is read in the same round
trip as the eviction check, and again every ``MARKER_RECHECK_SECONDS``: a keyspace marked with
a format this release does not write refuses every operation with a ``FormatError`` (a process
of an older release after ``migrate``), and is read again on the next one.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from ctxstore._core.durability import Durability
from ctxstore._core.format.fields import pairs, text
from ctxstore._core.format.versions import KeyspaceMarker, check_writable, marker_from
from ctxstore._core.protocol import Call, Operation, command_call
from ctxstore._core.state import REGISTRY, StoreState
from ctxstore.errors import (
    BackendBusyError,
    BackendUnavailableError,
    ConfigurationError,
    CtxStoreError,
)

log = logging.getLogger("ctxstore")
T = TypeVar("T")


def policy_of(reply: Any) -> str | None:
    """The policy a ``CONFIG GET maxmemory-policy`` reply names (None: it names none)."""
    if isinstance(reply, dict):
        values = list(reply.values())
        return text(values[0]) if values else None
    if isinstance(reply, (list, tuple)) and len(reply) >= 2:
        return text(reply[1])
    return None


def eviction_policy_call() -> Call[Any]:
    # "CONFIG GET" as one name: redis-py's Cluster clients route it by that name (to every
    # primary, in a pipeline too) and send it as two words like every client.
    return command_call(("CONFIG GET", "maxmemory-policy"), keys=())


def check_eviction_policy() -> Operation[str | None]:
    reply = yield eviction_policy_call()
    return warn_of_eviction(reply)


def warn_of_eviction(reply: Any) -> str | None:
    """The policy a ``CONFIG GET`` outcome names, warned about when it may evict; None (and
    the check skipped) where the server refused or could not route ``CONFIG``: a server that
    is down fails the operation's own call instead."""
    if isinstance(reply, CtxStoreError):
        log.debug("cannot read maxmemory-policy (%s); eviction check skipped", reply)
        return None
    policy = policy_of(reply)
    if policy is not None and policy != "noeviction":
        log.warning(
            "Redis maxmemory-policy is %r: under memory pressure Redis may evict chat keys, "
            "which silently breaks conversation graphs; use 'noeviction' for ctxstore data",
            policy,
        )
    return policy


def check_wait_command(durability: Durability) -> Operation[None]:
    """Refuse a server without the command that ``durability`` waits with."""
    try:
        yield command_call(durability.probe_command(), keys=())
    except (BackendUnavailableError, BackendBusyError):
        raise
    except CtxStoreError as error:
        needs = (
            "WAIT (it must be a primary)"
            if durability.mode == "replica"
            else "WAITAOF (Redis 7.2 or later, with appendonly yes)"
        )
        raise ConfigurationError(
            f"durability={durability.mode!r} needs {needs}; the server refused it: {error}",
            durability=durability.mode,
        ) from error


def durability_checked_key(state: StoreState) -> str | None:
    """What the process remembers a passed wait check under (None: a client passed in)."""
    if state.server is None or state.durability is None:
        return None
    return f"{state.server} {state.durability.command}"


def marker_call(state: StoreState) -> Call[Any]:
    """The read of the keyspace's format marker."""
    key = state.keyspace.format_marker
    return command_call(("HGETALL", key), keys=(key,))


def marker_of(reply: Any) -> KeyspaceMarker:
    """The marker the reply of :func:`marker_call` holds (unmarked when it holds nothing)."""
    return marker_from({name: text(value) for name, value in pairs(reply or ()).items()})


def keep_marker(state: StoreState, reply: Any) -> KeyspaceMarker | None:
    """The marker an ``HGETALL`` outcome holds, remembered by the process and checked: a
    format this release does not write is a ``FormatError``. A server that refuses the read
    (an ACL without ``HGETALL`` on it) counts as unmarked; one that did not answer leaves it
    to be read on the next operation (this one's own call meets the same fault)."""
    if isinstance(reply, BackendUnavailableError):
        log.debug("cannot read the keyspace's format marker (%s); read next time", reply)
        return None
    if isinstance(reply, CtxStoreError):
        log.debug("cannot read the keyspace's format marker (%s); taken as unmarked", reply)
        reply = {}
    marker = marker_of(reply)
    try:
        check_writable(marker, state.keyspace.base)
    except CtxStoreError:
        state.caches.remember_marker(None)
        raise
    state.caches.remember_marker(marker)
    return marker


def with_startup_checks(state: StoreState, operation: Operation[T]) -> Operation[T]:
    """``operation``, preceded the first time by the server checks (real servers only) and
    the read of the keyspace's marker, in one round trip; the marker alone every
    ``MARKER_RECHECK_SECONDS``."""
    evict, mark = state.check_server, state.caches.marker_due()
    state.check_server = False  # run once, whatever its outcome
    if evict or mark:
        outcomes = tuple((yield (eviction_policy_call(),) * evict + (marker_call(state),) * mark))
    else:
        outcomes = ()
    if evict:
        warn_of_eviction(outcomes[0])
        REGISTRY.mark_checked(state.server)
    if mark:
        keep_marker(state, outcomes[-1])
    if state.check_durability and state.durability is not None:
        yield from check_wait_command(state.durability)  # failing, it is checked again next time
        state.check_durability = False
        REGISTRY.mark_checked(durability_checked_key(state))
    result: T = yield from operation
    return result
