"""Probes of the workers of a store: is one alive (``--check``), does Redis answer this pod
(``--ready``), which jobs died. A pod's own liveness (``--live``) asks no Redis:
:mod:`ctxstore.worker.liveness`."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from ctxstore.errors import CtxStoreError
from ctxstore.store.async_store import connect_async
from ctxstore.worker.streams import dead_letters, live_workers

#: A worker whose last heartbeat is older than this is not counted as alive.
DEFAULT_HEARTBEAT_MAX_AGE_MS = 30_000


def worker_alive(
    url: str | None = None,
    *,
    namespaces: Sequence[str | None] = (None,),
    max_age_ms: int = DEFAULT_HEARTBEAT_MAX_AGE_MS,
) -> bool:
    """Whether a live worker's heartbeat exists in any of ``namespaces`` (``--check``)."""

    async def check() -> bool:
        for namespace in namespaces:
            store = connect_async(url, namespace=namespace)
            try:
                now = int(time.time() * 1000)
                if await live_workers(store.client, store.state.keyspace, max_age_ms, now):
                    return True
            finally:
                await store.close()
        return False

    return asyncio.run(check())


#: How long ``--ready`` waits for Redis before it says no (seconds).
READY_TIMEOUT = 2.0


def worker_ready(
    url: str | None = None,
    *,
    namespaces: Sequence[str | None] = (None,),
    timeout: float = READY_TIMEOUT,
) -> tuple[bool, str]:
    """Whether Redis answers a ``ping`` of each of ``namespaces`` within ``timeout`` (and its
    keyspace is one this release writes), and why not (``--ready``)."""

    async def check() -> tuple[bool, str]:
        for namespace in namespaces:
            store = connect_async(
                url,
                namespace=namespace,
                redis_options={"socket_timeout": timeout, "socket_connect_timeout": timeout},
            )
            try:
                health = await asyncio.wait_for(store.ping(), timeout)
            except (CtxStoreError, asyncio.TimeoutError, OSError) as error:
                return False, f"namespace {namespace!r}: {error or type(error).__name__}"
            finally:
                await store.close()
        return True, f"Redis answered in {health.round_trip * 1000:.1f} ms"

    return asyncio.run(check())


def list_dead_letters(
    url: str | None = None, *, namespace: str | None = None, count: int = 100
) -> list[dict[str, Any]]:
    """The newest dead letters of a namespace (``--dead-letters``), newest first."""

    async def read() -> list[dict[str, Any]]:
        store = connect_async(url, namespace=namespace)
        try:
            return await dead_letters(store.client, store.state.keyspace, count)
        finally:
            await store.close()

    return asyncio.run(read())
