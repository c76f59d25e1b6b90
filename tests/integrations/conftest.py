"""Fixtures of the adapter tests: the store an adapter is given, on every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

import ctxstore


@pytest.fixture(params=["sync", "async"])
async def any_store(
    request: pytest.FixtureRequest, backend: str, namespace: str
) -> AsyncIterator[ctxstore.Store | ctxstore.AsyncStore]:
    """A sync Store (an adapter runs it in a worker thread) or an AsyncStore, per backend."""
    if request.param == "sync":
        store = ctxstore.connect(backend, namespace=namespace)
        yield store
        store.close()
    else:
        async_store = ctxstore.connect_async(backend, namespace=namespace)
        yield async_store
        await async_store.close()


@pytest.fixture
def sync_store(backend: str, namespace: str) -> Iterator[ctxstore.store.AdminStore]:
    """A sync store per backend (what several writers in threads or processes share), as its
    admin handle: the tests read back what any session wrote."""
    store = ctxstore.connect(backend, namespace=namespace)
    yield store.admin()
    store.close()
