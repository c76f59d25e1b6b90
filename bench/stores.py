"""Opening stores through the public API, with the process cache detected, not assumed.

The storage core is being rewritten: the new one keeps a process cache of message records
(``connect(..., cache_bytes=N)``, ``store.clear_cache()``), the old one has none. The benchmark
runs on both: a "cold" read empties the cache first when there is one, and on the old code it is
simply a read (so is a "warm" one: the second read of a chat).
"""

from __future__ import annotations

import inspect
from typing import Any

import ctxstore

NAMESPACE = "bench"


def has_cache_option() -> bool:
    """Whether ``connect`` takes ``cache_bytes`` (other keywords would go to redis-py)."""
    return "cache_bytes" in inspect.signature(ctxstore.connect).parameters


def has_clear_cache() -> bool:
    return hasattr(ctxstore.Store, "clear_cache")


def cache_support() -> str:
    """One line for the environment block: which cache controls this code has."""
    if has_clear_cache():
        return "process cache: clear_cache() before each cold read"
    if has_cache_option():
        return "process cache: cold reads use a store with cache_bytes=0"
    return "no process cache (cold and warm reads are the same kind of read)"


def open_store(url: str, *, cold: bool = False, namespace: str = NAMESPACE) -> Any:
    """A sync store; ``cold`` asks for one without a cache when only the option exists."""
    if cold and not has_clear_cache() and has_cache_option():
        return ctxstore.connect(url, namespace=namespace, cache_bytes=0)
    return ctxstore.connect(url, namespace=namespace)


def forget(store: Any) -> None:
    """Empty ``store``'s process cache, as in a process that never read the chat."""
    clear = getattr(store, "clear_cache", None)
    if clear is not None:
        clear()


def chat_key_pattern(chat_id: str, namespace: str = NAMESPACE) -> str:
    """SCAN pattern of one chat's keys (documented key layout, default prefix ``ctx``)."""
    return f"ctx:{namespace}:{{{chat_id}}}:*"
