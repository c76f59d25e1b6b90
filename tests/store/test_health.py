"""``ping``: the server answers, how fast, the keyspace's format marker and the eviction
policy, in one pipeline. On the embedded store, a redis-server and a
Cluster, sync and async."""

from __future__ import annotations

from typing import Any

import pytest

import ctxstore
from ctxstore.errors import BackendUnavailableError, FormatError
from tests.support.keyspace import raw_client
from tests.support.wire import trace_wire


def test_ping_says_the_round_trip_the_format_and_the_eviction_policy(
    store: Any, backend: str
) -> None:
    store.upsert_chat("c1", "alice")  # the process's first checks are behind it
    with trace_wire() as wire:
        health = store.ping()
    assert wire.round_trips <= (3 if "cluster" in backend else 1)  # one pipeline
    assert 0 < health.round_trip < 5
    assert (health.format, health.format_release) == ("2", None)  # unmarked: format 2
    if backend.startswith("memory"):
        assert health.eviction_policy is None
    else:
        assert health.eviction_policy == "noeviction"
    assert not health.may_evict
    store.migrate()
    assert store.ping().format_release == ctxstore.__version__


def test_ping_names_a_policy_that_may_evict(server_backend: str, namespace: str) -> None:
    raw = raw_client(server_backend)
    if "cluster" in server_backend:
        pytest.skip("CONFIG SET reaches one node of a Cluster")
    raw.config_set("maxmemory-policy", "allkeys-lru")
    try:
        with ctxstore.connect(server_backend, namespace=namespace) as store:
            health = store.ping()
        assert health.eviction_policy == "allkeys-lru"
        assert health.may_evict
    finally:
        raw.config_set("maxmemory-policy", "noeviction")
        raw.close()


def test_ping_of_a_server_that_is_down_is_a_backend_unavailable_error() -> None:
    down = ctxstore.connect("redis://127.0.0.1:1", redis_options={"socket_timeout": 0.5})
    with down as store, pytest.raises(BackendUnavailableError):
        store.ping()


def test_ping_of_a_keyspace_a_newer_release_marked_is_a_format_error(
    backend: str, namespace: str
) -> None:
    raw = raw_client(backend)
    raw.hset(f"ctx:{namespace}:format", mapping={"format": "3", "release": "9.0.0"})
    raw.close()
    with ctxstore.connect(backend, namespace=namespace) as store:
        store.state.caches.remember_marker(None)  # as a process that starts now
        with pytest.raises(FormatError):
            store.ping()
