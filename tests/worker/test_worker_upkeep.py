"""Workers leave no trace: a worker that died is forgotten by the others once its jobs are
claimed; jobs a stream's bound trimmed before a worker took them are counted, logged and shown;
the worker sweeps in the background."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker
from ctxstore.worker.streams import GROUP
from tests.support.keyspace import raw_client
from tests.worker.support import grow, running


@pytest.fixture
def wstore(backend: str, namespace: str) -> Iterator[Any]:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=len).admin()
    store.url = backend
    yield store
    store.close()


def quick_worker(store: Any, namespace: str, **options: Any) -> Worker:
    options.setdefault("poll_ms", 20)
    options.setdefault("heartbeat_ms", 50)
    options.setdefault("claim_idle_ms", 200)
    options.setdefault("forget_after_ms", 400)
    options.setdefault("sweep_every_ms", 0)
    return Worker(
        store.url,
        namespaces=[namespace],
        compactify=lambda _messages: "summary",
        estimate_tokens=len,
        **options,
    )


def test_a_dead_worker_is_forgotten_once_its_job_is_claimed(wstore: Any, namespace: str) -> None:
    grow(wstore, "g1", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=1))
    keyspace = wstore.state.keyspace
    raw = raw_client(wstore.url)
    stream = keyspace.job_stream("g1")
    raw.xgroup_create(stream, GROUP, id="0", mkstream=True)
    taken = raw.xreadgroup(GROUP, "ghost", {stream: ">"}, count=1)  # it took a job, then died
    assert taken
    raw.zadd(keyspace.workers, {"ghost": 1})
    raw.hset(keyspace.worker_last_jobs, "ghost", "1\tsummarized\tg1")

    def forgotten() -> bool:
        consumers = {c["name"] for c in raw.xinfo_consumers(stream, GROUP)}
        return b"ghost" not in consumers and "ghost" not in consumers

    live = quick_worker(wstore, namespace)
    with running(live, until=forgotten):
        pass
    assert raw.zscore(keyspace.workers, "ghost") is None
    assert raw.hget(keyspace.worker_last_jobs, "ghost") is None
    assert live.stats.summarized >= 1  # the ghost's job was claimed and done first
    assert wstore.load_branch("g1", after_summary=True).summary is not None
    raw.close()


def test_a_worker_holding_a_job_is_not_forgotten(wstore: Any, namespace: str) -> None:
    """Silent but still holding a job another worker could not claim yet: left for later."""
    grow(wstore, "g2", 6, CompactionTrigger(soft_tokens=1, min_recent_messages=1))
    keyspace = wstore.state.keyspace
    raw = raw_client(wstore.url)
    stream = keyspace.job_stream("g2")
    raw.xgroup_create(stream, GROUP, id="0", mkstream=True)
    raw.xreadgroup(GROUP, "slow", {stream: ">"}, count=1)
    raw.zadd(keyspace.workers, {"slow": 1})
    live = quick_worker(wstore, namespace, claim_idle_ms=60_000, forget_after_ms=60_001)
    with running(live):
        time.sleep(0.5)
    assert raw.zscore(keyspace.workers, "slow") == 1
    consumers = {c["name"] for c in raw.xinfo_consumers(stream, GROUP)}
    assert consumers & {"slow", b"slow"}
    raw.close()


def test_jobs_the_bound_trimmed_are_logged_with_their_count(
    wstore: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    keyspace = wstore.state.keyspace
    raw = raw_client(wstore.url)
    raw.set(keyspace.trimmed_counter(keyspace.job_streams()[3]), 5)
    live = quick_worker(wstore, namespace)
    with (
        caplog.at_level(logging.WARNING, logger="ctxstore.worker"),
        running(live, until=lambda: "jobs_trimmed" in caplog.text),
    ):
        raw.incrby(keyspace.trimmed_counter(keyspace.job_streams()[5]), 2)
        deadline = time.monotonic() + 10
        while caplog.text.count("jobs_trimmed") < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    warnings = [
        json.loads(record.getMessage())
        for record in caplog.records
        if "jobs_trimmed" in record.getMessage()
    ]
    assert [(item["count"], item["total"]) for item in warnings[:2]] == [(5, 5), (2, 7)]
    raw.close()


def test_a_full_stream_counts_what_its_bound_trims(server_backend: str, namespace: str) -> None:
    """Past 100,000 jobs waiting (no worker took them), the next trims the oldest: counted.
    (The bound is approximate: a stream is trimmed a whole node of 100 entries at a time.)"""
    store = ctxstore.connect(server_backend, namespace=namespace, estimate_tokens=len).admin()
    keyspace = store.state.keyspace
    stream = keyspace.job_stream("full")
    raw = raw_client(server_backend)
    for _batch in range(10):
        pipe = raw.pipeline(transaction=False)
        for _job in range(10_010):
            pipe.xadd(stream, {"chat": "other", "branch": "main", "job": "x"})
        pipe.execute()
    grow(store, "full", 3, CompactionTrigger(soft_tokens=1, min_recent_messages=1))
    trimmed = int(raw.get(keyspace.trimmed_counter(stream)) or 0)
    assert trimmed >= 100
    assert raw.xlen(stream) == 100_100 + 1 - trimmed
    raw.close()
    store.close()


def test_the_worker_sweeps_in_the_background(wstore: Any, namespace: str) -> None:
    wstore.upsert_chat("gone", "alice")
    keys = wstore.state.keyspace.chat("gone")
    raw = raw_client(wstore.url)
    raw.delete(keys.key("chat"), keys.key("branch"))  # expired: its entries stay behind
    index = wstore.state.keyspace.user_index("alice")
    assert raw.zscore(index, "gone") is not None
    live = quick_worker(wstore, namespace, sweep_every_ms=50, sweep_pause_ms=0)
    with running(live, until=lambda: raw.zscore(index, "gone") is None):
        pass
    assert raw.zscore(wstore.state.keyspace.all_chats_index, "gone") is None
    raw.close()


def test_bad_upkeep_settings_are_configuration_errors() -> None:
    for options in ({"sweep_every_ms": -1}, {"sweep_pause_ms": "1"}, {"forget_after_ms": 10}):
        with pytest.raises(ctxstore.errors.ConfigurationError):
            Worker("memory://x", compactify=lambda _m: "x", **options)
