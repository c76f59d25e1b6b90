"""Checks run once per process and server, before the first operation of a store.

An eviction policy other than ``noeviction`` lets Redis drop keys under memory pressure; one
dropped ``parent`` hash silently cuts every chain of a chat, so a server that can evict gets a
warning in the log. The check is skipped quietly where ``CONFIG`` is disabled (managed services).
"""

from __future__ import annotations

import logging
from typing import Any, TypeVar

from ctxstore.core.protocol import Operation, command_call
from ctxstore.core.records import text
from ctxstore.core.state import StoreState, mark_server_checked
from ctxstore.errors import BackendUnavailableError, CtxStoreError

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


def with_startup_checks(state: StoreState, operation: Operation[T]) -> Operation[T]:
    """``operation``, preceded the first time by the server checks (real servers only)."""
    if state.check_server:
        state.check_server = False
        yield from check_eviction_policy()
        mark_server_checked(state.server)
    result: T = yield from operation
    return result
