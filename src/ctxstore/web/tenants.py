"""The namespaces a console serves, one store each, and nothing else.

A console is started with its namespaces; a chat id or namespace outside them is not found
(404), never another tenant's data: every read goes through the store of a namespace the
console was started with, whose keys are that namespace's only. The stores share one client
(one connection pool), made from the URL, or the client of the store passed in: a tenant's ACL
user in the URL reads its own namespace and nothing more.

A sync :class:`~ctxstore.store.Store` passed in runs each operation in a worker thread, so the
console serves an embedded ``memory://`` store a program already uses. A console is an
operator's tool: it reads every user's chats of its namespaces, through each store's
``admin()`` handle (a user's handle, which could show one user only, is refused).

A console with a key provider (``encryption=``, ``ctxstore web --keys``) shows sealed chats as
any; one without shows a sealed chat closed: its graph, ids, times and token counts, no title,
metadata or text (its export is refused), rather than refusing the page.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TypeVar

from ctxstore._core.protocol import Operation
from ctxstore.crypto.provider import KeyProvider
from ctxstore.errors import ConfigurationError
from ctxstore.store.async_store import AsyncStore, connect_async
from ctxstore.store.sync_store import Store, connect

T = TypeVar("T")


class UnknownNamespaceError(LookupError):
    """A namespace the console was not started with (served as a 404)."""


class Tenants:
    """One store per namespace served (see the module)."""

    def __init__(
        self,
        store_or_url: Store | AsyncStore | str | None,
        namespaces: Sequence[str | None] | None = None,
        *,
        encryption: KeyProvider | None = None,
    ) -> None:
        if isinstance(store_or_url, (Store, AsyncStore)):
            if encryption is not None:
                raise ConfigurationError(
                    "the web console takes encryption= with a URL; a store passed in brings "
                    "its own (connect it with encryption=)"
                )
            base: Store | AsyncStore = store_or_url
            self._owned = False
        elif store_or_url is None or isinstance(store_or_url, str):
            base = connect_async(store_or_url, encryption=encryption)
            self._owned = True
        else:
            raise ConfigurationError(
                "the web console takes a ctxstore Store, an AsyncStore or a URL, got "
                f"{type(store_or_url).__name__}"
            )
        chosen = tuple(namespaces) if namespaces else (base.state.settings.namespace,)
        if len(set(chosen)) != len(chosen):
            raise ConfigurationError(f"a namespace is named twice: {list(chosen)}")
        self._base = base
        self._stores: dict[str, Store | AsyncStore] = {}
        for namespace in chosen:
            self._stores[_label(namespace)] = self._view(base, namespace).admin()

    @staticmethod
    def _view(base: Store | AsyncStore, namespace: str | None) -> Store | AsyncStore:
        """The store of one namespace: on ``base``'s client, a store of its own (the one
        passed in is left as its program uses it). Without encryption it shows a sealed chat
        closed: its graph, ids and counts, no text."""
        settings = dataclasses.replace(base.state.settings, namespace=namespace)
        view: Store | AsyncStore
        if isinstance(base, AsyncStore):
            view = connect_async(base.client, settings=settings)
        else:
            view = connect(base.client, settings=settings)
        view.state.show_closed = settings.encryption is None
        return view

    @property
    def labels(self) -> list[str]:
        """The namespaces served, as they appear in URLs ("-" for the default one)."""
        return list(self._stores)

    def store(self, label: str) -> Store | AsyncStore:
        """The store of a namespace served; UnknownNamespaceError for any other."""
        try:
            return self._stores[label]
        except KeyError:
            raise UnknownNamespaceError(label) from None

    async def run(self, label: str, operation: Operation[T]) -> T:
        """Run one operation on a namespace's store (in a thread for a sync store)."""
        store = self.store(label)
        if isinstance(store, AsyncStore):
            return await store.run(operation)
        return await asyncio.to_thread(store.run, operation)

    async def close(self) -> None:
        """Close the store this console opened (a store passed in stays open; the other
        namespaces' stores share its client)."""
        if self._owned and isinstance(self._base, AsyncStore):
            await self._base.close()


def _label(namespace: str | None) -> str:
    return namespace if namespace else "-"
