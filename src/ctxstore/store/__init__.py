"""The chat-graph store on Redis, Valkey or the embedded store: :func:`connect` (sync) and
:func:`connect_async` (async) give a :class:`Store` / :class:`AsyncStore` with the same methods.

Names load on first use: a sync process never loads the async shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore._base.exports import lazy_exports

__all__ = ["AsyncStore", "Store", "connect", "connect_async"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncStore": "ctxstore.store.async_store",
        "connect_async": "ctxstore.store.async_store",
        "Store": "ctxstore.store.sync_store",
        "connect": "ctxstore.store.sync_store",
    },
)

if TYPE_CHECKING:
    from ctxstore.store.async_store import AsyncStore, connect_async
    from ctxstore.store.sync_store import Store, connect
