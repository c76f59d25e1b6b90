"""What the sync and the async store share besides their operations: the client, the state,
the process cache, and the routing of pipelined commands (see :mod:`ctxstore.store.sync_store`
for the shells themselves)."""

from __future__ import annotations

from typing import Any

from ctxstore._core.state import StoreState
from ctxstore.store.connection import pipeline_router


class StoreShell:
    """The members of :class:`~ctxstore.store.Store` and :class:`~ctxstore.store.AsyncStore`
    that do no I/O."""

    def __init__(self, client: Any, state: StoreState, *, owns_client: bool) -> None:
        self._client = client
        self._state = state
        self._owns_client = owns_client
        self._route = pipeline_router(client)

    @property
    def client(self) -> Any:
        """The redis-py (or fakeredis) client underneath."""
        return self._client

    @property
    def state(self) -> StoreState:
        """The store's internal state (settings, key names, caches) for code that runs the
        operations of ``ctxstore._core`` itself: an internal, unstable API."""
        return self._state

    def clear_cache(self) -> None:
        """Forget the chains this process read through stores of this URL (the next read of each
        chat reads its whole chain). Messages are immutable, so this is never needed for
        correctness; it frees memory, and benchmarks use it to measure a cold read."""
        self._state.cache.clear()
