"""The chat-graph store on Redis, Valkey or the embedded store: :func:`connect` (sync) and
:func:`connect_async` (async) give a :class:`Store` / :class:`AsyncStore` with the same methods.

Every chat call names its owner: ``user_id=`` on the store, or the handles it makes:
``store.for_user(user_id)`` (:class:`UserStore`, a request handler's: no ``user_id`` to pass)
and ``store.admin()`` (:class:`AdminStore`, an operator's: no owner means any owner).

Names load on first use: a sync process never loads the async shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore._base.exports import lazy_exports

__all__ = [
    "AdminStore",
    "AsyncAdminStore",
    "AsyncStore",
    "AsyncUserStore",
    "Store",
    "UserStore",
    "connect",
    "connect_async",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncStore": "ctxstore.store.async_store",
        "AsyncAdminStore": "ctxstore.store.async_store",
        "AdminStore": "ctxstore.store.sync_store",
        "UserStore": "ctxstore.store.scoped",
        "AsyncUserStore": "ctxstore.store.scoped",
        "connect_async": "ctxstore.store.async_store",
        "Store": "ctxstore.store.sync_store",
        "connect": "ctxstore.store.sync_store",
    },
)

if TYPE_CHECKING:
    from ctxstore.store.async_store import AsyncAdminStore, AsyncStore, connect_async
    from ctxstore.store.scoped import AsyncUserStore, UserStore
    from ctxstore.store.sync_store import AdminStore, Store, connect
