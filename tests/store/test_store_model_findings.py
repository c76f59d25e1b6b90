"""Minimal reproductions of what the model-based test (test_store_model.py) found where the
store departs from its documentation. Each is a strict xfail: it passes (and so fails the
suite) once the store is fixed, and must then become a plain test."""

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
    store = ctxstore.connect(redis_cluster.url, namespace=namespace, clock=clock)
    yield store
    store.close()


@pytest.mark.xfail(
    strict=True,
    reason=(
        "on a Cluster the listing index ZADD rides in the append's pipeline, so a refused "
        "append still moves its chat up: the next listing is not newest updated_at first, and "
        "verify_chat reports the entry until a listing repairs it"
    ),
)
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
