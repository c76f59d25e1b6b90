"""Checks run once per process and server, before the first operation of a store.

An eviction policy other than ``noeviction`` lets Redis drop keys under memory pressure; one
dropped ``parent`` hash silently cuts every chain of a chat, so a server that can evict gets a
warning in the log. The check is skipped quietly where ``CONFIG`` is disabled (managed services).

A store connected with ``durability=`` first checks that the server has the wait command
(``WAITAOF`` needs Redis 7.2 and ``appendonly yes``; a replica refuses ``WAIT``): a
:class:`ConfigurationError` before anything is written, instead of writes that all fail after
they were applied. ``connect()`` makes no round trip on a single server (and ``connect_async``
none at all), so the check rides on the first operation, like the eviction check.
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from ctxstore._core.durability import Durability
from ctxstore._core.format.fields import text
from ctxstore._core.protocol import Operation, command_call
from ctxstore._core.state import REGISTRY, StoreState
from ctxstore.errors import (
    BackendBusyError,
    BackendUnavailableError,
    ConfigurationError,
    CtxStoreError,
)

log = logging.getLogger("ctxstore")
T = TypeVar("T")


def _policy(reply: Any) -> str | None:
    if isinstance(reply, dict):
        values = list(reply.values())
        return text(values[0]) if values else None
    if isinstance(reply, (list, tuple)) and len(reply) >= 2:
        return text(reply[1])
    return None


def check_eviction_policy() -> Operation[str | None]:
    try:
        reply = yield command_call(("CONFIG", "GET", "maxmemory-policy"), keys=())
    except BackendUnavailableError:
        raise
    except CtxStoreError as error:
        log.debug("cannot read maxmemory-policy (%s); eviction check skipped", error)
        return None
    policy = _policy(reply)
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


def with_startup_checks(state: StoreState, operation: Operation[T]) -> Operation[T]:
    """``operation``, preceded the first time by the server checks (real servers only)."""
    if state.check_server:
        state.check_server = False
        yield from check_eviction_policy()
        REGISTRY.mark_checked(state.server)
    if state.check_durability and state.durability is not None:
        yield from check_wait_command(state.durability)  # failing, it is checked again next time
        state.check_durability = False
        REGISTRY.mark_checked(durability_checked_key(state))
    result: T = yield from operation
    return result
