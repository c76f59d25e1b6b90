"""Minimal reproductions of what the model-based test (test_store_model.py) found where the
store departed from its documentation, kept as plain tests once fixed."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

import ctxstore
from ctxstore import errors
from tests.support import servers


@pytest.fixture
def cluster_store(
    redis_cluster: servers.Cluster, namespace: str, clock: Callable[[], int]
) -> Iterator[ctxstore.Store]:
    store = ctxstore.connect(redis_cluster.url, namespace=namespace, clock=clock).admin()
    yield store
    store.close()


def test_a_refused_append_on_a_cluster_leaves_the_listings_as_they_were(
    cluster_store: ctxstore.Store,
) -> None:
    cluster_store.upsert_chat("older", "alice")
    cluster_store.upsert_chat("newer", "alice")
    with pytest.raises(errors.HeadConflictError):
        cluster_store.append(
            "older", "main", [{"role": "user", "content": "x"}], expected_head="seen-before"
        )
    listed = cluster_store.list_chats(user_id="alice")
    assert [chat.id for chat in listed] == ["newer", "older"]
    assert cluster_store.verify_chat("older").ok
