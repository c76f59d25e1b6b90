"""The compaction worker: a chat past the soft threshold gets exactly one job, a worker
summarizes it, the next resolve is within budget with the recent messages verbatim; failures
end in the dead-letter stream; two workers share fifty chats; on every backend."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import ctxstore
from ctxstore.models import CompactionTrigger
from ctxstore.worker import Worker, list_dead_letters, worker_alive
from ctxstore.worker.streams import GROUP
from tests.support.keyspace import raw_client
from tests.worker.support import grow, running

PER_MESSAGE = 3 + 4 + 10  # overhead, "user", ten characters


def letters(text: str) -> int:
    return len(text)


@pytest.fixture
def wstore(backend: str, namespace: str) -> Iterator[Any]:
    store = ctxstore.connect(backend, namespace=namespace, estimate_tokens=letters).admin()
    yield store
    store.close()


def worker(backend: str, namespace: str, compactify: Any, **options: Any) -> Worker:
    options.setdefault("poll_ms", 20)
    options.setdefault("backoff_ms", 0)
    return Worker(
        backend, namespaces=[namespace], compactify=compactify, estimate_tokens=letters, **options
    )


def test_one_job_one_summary_and_a_resolve_within_budget(
    wstore: Any, backend: str, namespace: str
) -> None:
    trigger = CompactionTrigger(soft_tokens=10 * PER_MESSAGE, min_recent_messages=4)
    results = grow(wstore, "w1", 14, trigger)
    assert sum(r.compaction_job is not None for r in results) == 1
    calls: list[int] = []

    def summarize(messages: list[dict[str, Any]]) -> str:
        calls.append(len(messages))
        return "the early numbers"

    stats = worker(backend, namespace, summarize).run(burst=True)
    assert (stats.summarized, stats.skipped, stats.dead_lettered) == (1, 0, 0)
    assert calls == [10]  # all but the newest four, which stay verbatim
    engine = ctxstore.ContextEngine(
        store=wstore, chat_id="w1", user_id="alice", estimate_tokens=letters
    )
    resolved = engine.resolve()
    assert [m["content"] for m in resolved.messages] == [f"{i:010d}" for i in range(10, 14)]
    assert "the early numbers" in resolved.system_prompt
    assert wstore.branch_size("w1").context_tokens < 10 * PER_MESSAGE
    # The job is settled: nothing more to do, and a second run finds nothing.
    assert worker(backend, namespace, summarize).run(burst=True).summarized == 0
    assert calls == [10]


def test_a_failing_summarizer_ends_in_the_dead_letter_stream(
    wstore: Any, backend: str, namespace: str
) -> None:
    grow(wstore, "w2", 6, CompactionTrigger(soft_tokens=PER_MESSAGE, min_recent_messages=2))
    attempts: list[int] = []

    def broken(_messages: list[dict[str, Any]]) -> str:
        attempts.append(1)
        raise RuntimeError("the model is down")

    stats = worker(backend, namespace, broken, max_attempts=3).run(burst=True)
    assert stats.dead_lettered == 1
    assert len(attempts) == 3
    letters_found = list_dead_letters(backend, namespace=namespace)
    assert len(letters_found) == 1
    assert letters_found[0]["chat"] == "w2"
    assert "the model is down" in letters_found[0]["error"]
    assert wstore.load_branch("w2", after_summary=True).summary is None


def test_two_workers_compact_fifty_chats_exactly_once_each(
    wstore: Any, backend: str, namespace: str
) -> None:
    trigger = CompactionTrigger(soft_tokens=5 * PER_MESSAGE, min_recent_messages=2)
    for index in range(50):
        grow(wstore, f"c{index}", 6, trigger)
    seen: list[str] = []
    lock = threading.Lock()

    async def summarize(messages: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0.001)
        with lock:
            seen.append(messages[0]["content"])
        return "summary"

    async def both() -> list[Any]:
        first = worker(backend, namespace, summarize, concurrency=3)
        second = worker(backend, namespace, summarize, concurrency=3)
        return list(await asyncio.gather(first.arun(burst=True), second.arun(burst=True)))

    stats = asyncio.run(both())
    assert sum(s.summarized for s in stats) == 50
    assert len(seen) == 50
    for index in range(50):
        assert wstore.load_branch(f"c{index}", after_summary=True).summary is not None


def test_check_sees_a_live_worker_and_a_stopped_one_leaves_no_trace(
    wstore: Any, backend: str, namespace: str
) -> None:
    assert not worker_alive(backend, namespaces=[namespace])
    grow(wstore, "w3", 1, CompactionTrigger(soft_tokens=10_000))
    alive = worker(backend, namespace, lambda _m: "x")
    with running(alive, until=lambda: worker_alive(backend, namespaces=[namespace])):
        pass
    assert not worker_alive(backend, namespaces=[namespace])
    raw = raw_client(backend)
    keyspace = wstore.state.keyspace
    assert raw.zcard(keyspace.workers) == 0
    assert raw.hlen(keyspace.worker_last_jobs) == 0
    for stream in keyspace.job_streams():
        assert raw.xinfo_consumers(stream, GROUP) == []
    raw.close()


def test_bad_worker_settings_are_configuration_errors() -> None:
    with pytest.raises(ctxstore.errors.ConfigurationError, match="summarizer"):
        Worker("memory://x")
    with pytest.raises(ctxstore.errors.ConfigurationError, match="concurrency"):
        Worker("memory://x", compactify=lambda _m: "x", concurrency=0)
    with pytest.raises(ctxstore.errors.ConfigurationError, match="namespace"):
        Worker("memory://x", compactify=lambda _m: "x", namespaces=[])


def test_a_context_manager_gives_the_worker_its_summarizer_and_counter(
    wstore: Any, backend: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    grow(wstore, "w4", 8, CompactionTrigger(soft_tokens=PER_MESSAGE, min_recent_messages=3))
    manager = ctxstore.ContextManager(
        max_tokens=10_000,
        response_reserve=10,
        estimate_tokens=letters,
        compactify=lambda messages: f"{len(messages)} summarized",
    )
    caplog.set_level("INFO", logger="ctxstore.worker")
    stats = Worker(backend, namespaces=[namespace], context_manager=manager, poll_ms=20).run(
        burst=True
    )
    assert stats.summarized == 1
    summary = wstore.load_branch("w4", after_summary=True).summary
    assert summary is not None
    assert summary["content"] == "5 summarized"
    assert summary["metadata"]["tokens_before"] == 5 * PER_MESSAGE  # counted with letters
    lines = [  # the worker's own lines: another test's garbage may log meanwhile (asyncio's)
        json.loads(record.getMessage())
        for record in caplog.records
        if record.name == "ctxstore.worker"
    ]
    job = next(line for line in lines if line.get("event") == "job")
    assert job["chat"] == "w4"
    assert job["outcome"] == "summarized"
    assert job["tokens_before"] == 5 * PER_MESSAGE
    assert job["tokens_after"] == summary["tokens"]
    assert job["latency_ms"] >= 0
    with pytest.raises(ctxstore.errors.ConfigurationError, match="summarizer"):
        Worker(backend, context_manager=ctxstore.ContextManager(max_tokens=100, response_reserve=1))
