"""Concurrent writer processes: each on its own chat, or all on one chat.

The store's answer to concurrent writers on one chat is the head compare-and-set with
``on_conflict="rebase"``: a writer whose head moved is chained onto the current head, nothing
is lost. This scenario measures what that costs in throughput (appends per second, all writers
together) against the same number of writers on separate chats, and then checks that every
acknowledged message is on the chain exactly once (:mod:`integrity`).

The writers are spawned once and reused for every configuration (spawning eight interpreters
costs seconds). They get every CPU back (see :mod:`pinning`); each starts at the same instant,
waits for the others, and appends a fixed count of one-message appends.
"""

from __future__ import annotations

import multiprocessing
import random
import statistics
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import redis

from integrity import EMPTY, Integrity, check_chat
from pinning import original_cpus, unpin
from stores import forget, open_store
from workload import CONTENT_CHARS, USER_ID, text_of_length

SCENARIO = "writers"
#: Time between sending the jobs and the common start, so every writer is waiting by then.
START_DELAY_NS = 50_000_000


@dataclass(frozen=True)
class Job:
    chat_id: str
    writer: int
    count: int
    start_ns: int


@dataclass(frozen=True)
class Done:
    acknowledged: list[str]
    rebased: int
    end_ns: int


_FILLER = text_of_length(random.Random(3), CONTENT_CHARS)


def content(writer: int, index: int) -> str:
    """A payload unique to (writer, index), padded to the benchmark's message size."""
    tag = f"writer {writer} append {index} "
    return (tag + _FILLER)[:CONTENT_CHARS]


def _append_all(store: Any, job: Job) -> Done:
    head = None
    acknowledged: list[str] = []
    rebased = 0
    while time.monotonic_ns() < job.start_ns:
        time.sleep(0.0005)
    for index in range(job.count):
        message = {"role": "user", "content": content(job.writer, index)}
        result = store.append(
            job.chat_id,
            "main",
            [message],
            expected_head=head,
            on_conflict="rebase",
            user_id=USER_ID,
        )
        head = result.head_message_id
        acknowledged.extend(result.message_ids)
        rebased += bool(result.rebased)
    return Done(acknowledged, rebased, time.monotonic_ns())


def _serve(url: str, cpus: frozenset[int], pipe: Connection) -> None:
    unpin(cpus)
    store = open_store(url)
    try:
        while (job := pipe.recv()) is not None:
            pipe.send(_append_all(store, job))
    finally:
        store.close()


class WriterPool:
    """``size`` spawned writer processes, each with its own store, fed jobs over pipes."""

    def __init__(self, url: str, size: int) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipes: list[Connection] = []
        self._processes = []
        for _ in range(size):
            parent, child = context.Pipe()
            process = context.Process(
                target=_serve, args=(url, original_cpus(), child), daemon=True
            )
            process.start()
            child.close()
            self._pipes.append(parent)
            self._processes.append(process)

    def run(self, jobs: list[Job]) -> list[Done]:
        for pipe, job in zip(self._pipes, jobs, strict=False):
            pipe.send(job)
        return [pipe.recv() for pipe in self._pipes[: len(jobs)]]

    def close(self) -> None:
        for pipe in self._pipes:
            pipe.send(None)
        for process in self._processes:
            process.join(timeout=10)
            if process.is_alive():
                process.terminate()
                process.join()


@dataclass(frozen=True)
class Run:
    """One run of one configuration."""

    appends: int
    seconds: float
    appends_per_s: float
    rebased: int
    integrity: Integrity
    #: The server's CPU time (user + system, INFO cpu) over the run, per acknowledged append:
    #: what one save costs the shard every worker shares.
    redis_cpu_us_per_append: float


@dataclass(frozen=True)
class Throughput:
    """One configuration (``writers`` processes, on one shared chat or one chat each) over
    its runs: the median rate, and the integrity counts summed over every run."""

    writers: int
    shared_chat: bool
    runs: list[Run]
    appends_per_s: float
    rebased: int
    integrity: Integrity
    redis_cpu_us_per_append: float


@dataclass(frozen=True)
class WriterResults:
    """Every configuration, and writers-on-one-chat over writers-on-own-chats per count: the
    median over rounds of the ratio within each round (the two ran back to back, under the
    same load), which is steadier on a shared machine than a ratio of two medians."""

    appends_per_writer: int
    repeats: int
    configurations: list[Throughput]
    ratio_one_chat_to_own: dict[int, float]
    all_intact: bool


def _server_cpu_us(stats: Any) -> float:
    """The server's CPU time so far (user and system, its main thread and the rest)."""
    cpu = stats.info("cpu")
    return (float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])) * 1e6


def _round(
    store: Any, stats: Any, pool: WriterPool, writers: int, shared: bool, count: int, label: str
) -> Run:
    chats = [f"{label}-{index}" for index in range(1 if shared else writers)]
    for chat_id in chats:
        store.upsert_chat(chat_id, USER_ID)
    start = time.monotonic_ns() + START_DELAY_NS
    jobs = [Job(chats[0 if shared else index], index, count, start) for index in range(writers)]
    cpu_before = _server_cpu_us(stats)
    done = pool.run(jobs)
    cpu_spent = _server_cpu_us(stats) - cpu_before
    seconds = (max(item.end_ns for item in done) - start) / 1e9
    appends = sum(len(item.acknowledged) for item in done)
    integrity = EMPTY
    for chat_index, chat_id in enumerate(chats):
        acked = [
            message_id
            for job, item in zip(jobs, done, strict=True)
            if shared or job.writer == chat_index
            for message_id in item.acknowledged
        ]
        forget(store)  # read back what Redis holds, not what this process cached
        integrity = integrity + check_chat(store, chat_id, acked)
    return Run(
        appends=appends,
        seconds=seconds,
        appends_per_s=appends / seconds,
        rebased=sum(item.rebased for item in done),
        integrity=integrity,
        redis_cpu_us_per_append=cpu_spent / max(1, appends),
    )


def _summary(writers: int, shared: bool, runs: list[Run]) -> Throughput:
    integrity = EMPTY
    for run in runs:
        integrity = integrity + run.integrity
    return Throughput(
        writers=writers,
        shared_chat=shared,
        runs=runs,
        appends_per_s=statistics.median(run.appends_per_s for run in runs),
        rebased=sum(run.rebased for run in runs),
        integrity=integrity,
        redis_cpu_us_per_append=statistics.median(run.redis_cpu_us_per_append for run in runs),
    )


def throughput(url: str, counts: tuple[int, ...], per_writer: int, repeats: int) -> WriterResults:
    """Every writer count, own chats and one shared chat, ``repeats`` rounds, after a warm-up.

    The rounds go through every configuration before repeating any, so a burst of load on the
    machine lands on one run of each rather than on every run of one; within a round the two
    layouts of a writer count run back to back, in alternating order.
    """
    store = open_store(url, cold=True)
    stats = redis.Redis.from_url(url)
    pool = WriterPool(url, max(counts))
    runs: dict[tuple[int, bool], list[Run]] = {}
    try:
        _round(store, stats, pool, max(counts), shared=False, count=3, label="writers-warmup")
        for repeat in range(repeats):
            for writers in counts:
                for shared in (False, True) if repeat % 2 == 0 else (True, False):
                    label = f"writers-{writers}-{'shared' if shared else 'own'}-{repeat}"
                    runs.setdefault((writers, shared), []).append(
                        _round(store, stats, pool, writers, shared, per_writer, label)
                    )
    finally:
        pool.close()
        store.close()
        stats.close()
    found = [_summary(writers, shared, items) for (writers, shared), items in runs.items()]
    paired = {
        n: statistics.median(
            one.appends_per_s / own.appends_per_s
            for one, own in zip(runs[(n, True)], runs[(n, False)], strict=True)
        )
        for n in counts
    }
    return WriterResults(
        appends_per_writer=per_writer,
        repeats=repeats,
        configurations=found,
        ratio_one_chat_to_own=paired,
        all_intact=all(item.integrity.ok for item in found),
    )
