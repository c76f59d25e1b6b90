"""Timing loops and their summary: per-call samples in nanoseconds, reported in microseconds.

Every call is timed on its own with ``time.perf_counter_ns`` so the tail (p90, p99) is visible,
not only the mean. The loops do nothing but call and record, which keeps the harness cost
(under 0.1 µs per sample) far below the smallest figure measured (a loopback PING).
"""

from __future__ import annotations

import gc
import math
import statistics
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from time import perf_counter_ns

SyncCall = Callable[[], object]
AsyncCall = Callable[[], Awaitable[object]]


@dataclass(frozen=True)
class Latency:
    """One row of the latency table.

    ``ops_per_s`` is what one sequential caller achieves (calls / total time), not a concurrent
    throughput. ``redis_us`` is the server-side execution time per call (None without a server).
    ``gc_gen2`` counts Python's full garbage collections during the timed calls: each one pauses
    the caller, so they explain much of the p99 of calls that build many objects.
    """

    name: str
    store: str
    iterations: int
    median_us: float
    p90_us: float
    p99_us: float
    ops_per_s: float
    gc_gen2: int
    redis_us: float | None = None


@dataclass(frozen=True)
class Samples:
    """Nanoseconds per timed call, and the full collections Python ran meanwhile."""

    ns: list[int]
    gc_gen2: int


def gen2_collections() -> int:
    return int(gc.get_stats()[2]["collections"])


def nearest_rank(ordered: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted samples: always a value that was measured."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarize(name: str, store: str, samples: Samples, redis_us: float | None = None) -> Latency:
    """Reduce raw samples to the reported figures."""
    ordered = sorted(samples.ns)
    return Latency(
        name=name,
        store=store,
        iterations=len(ordered),
        median_us=statistics.median(ordered) / 1_000,
        p90_us=nearest_rank(ordered, 0.90) / 1_000,
        p99_us=nearest_rank(ordered, 0.99) / 1_000,
        ops_per_s=len(ordered) * 1e9 / sum(ordered),
        gc_gen2=samples.gc_gen2,
        redis_us=redis_us,
    )


def warm_up(call: SyncCall, rounds: int) -> None:
    """Run the call untimed: connects, loads scripts (NOSCRIPT -> EVAL), fills caches."""
    for _ in range(rounds):
        call()


def time_calls(call: SyncCall, iterations: int) -> Samples:
    """Time each call. Garbage left by earlier work is collected first, outside the timing."""
    gc.collect()
    collections = gen2_collections()
    samples = [0] * iterations
    for index in range(iterations):
        start = perf_counter_ns()
        call()
        samples[index] = perf_counter_ns() - start
    return Samples(samples, gen2_collections() - collections)


async def warm_up_async(call: AsyncCall, rounds: int) -> None:
    """:func:`warm_up` for coroutines."""
    for _ in range(rounds):
        await call()


async def time_async_calls(call: AsyncCall, iterations: int) -> Samples:
    """:func:`time_calls` for coroutines; each sample includes the event loop's scheduling."""
    gc.collect()
    collections = gen2_collections()
    samples = [0] * iterations
    for index in range(iterations):
        start = perf_counter_ns()
        await call()
        samples[index] = perf_counter_ns() - start
    return Samples(samples, gen2_collections() - collections)
