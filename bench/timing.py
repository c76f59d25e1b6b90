"""Timing loops that interleave the measured call with its floors, and their summary.

This machine is shared and noisy: a figure taken a minute apart from its floor can differ by
tens of percent for reasons outside the code. So each iteration times the measured call *and*
every floor, back to back, rotating their order (the call goes first, then second, ...), and the
report quotes ratios of medians. Noise that lands on one iteration lands on both sides.

Every call is timed on its own with ``time.perf_counter_ns`` so the tail is visible. Python's
garbage collector stays on (users have it on), after one collection before the loop.

Before each timed call an untimed *settle* call runs (a ``PING``). On this shared machine the
first round trip after a few milliseconds of CPU work is slow: the scheduler lets the other
tenants run first (PING measured 40 µs normally, 255 µs right after 5 ms of CPU work, 400 µs
after 50 ms, and back to 40 µs on the next one). Without the settle call, the floor measured
right after a long read would carry that penalty and flatter the ratio.
"""

from __future__ import annotations

import gc
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter_ns

Call = Callable[[], object]


@dataclass(frozen=True)
class Stat:
    """Per-call latency of one timed loop, in microseconds (nearest-rank percentiles)."""

    n: int
    median_us: float
    p90_us: float
    p99_us: float
    max_us: float


def nearest_rank(ordered: Sequence[int], fraction: float) -> int:
    """The nearest-rank percentile of sorted samples: always a value that was measured."""
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def summarize(samples_ns: Sequence[int]) -> Stat:
    ordered = sorted(samples_ns)
    return Stat(
        n=len(ordered),
        median_us=statistics.median(ordered) / 1_000,
        p90_us=nearest_rank(ordered, 0.90) / 1_000,
        p99_us=nearest_rank(ordered, 0.99) / 1_000,
        max_us=ordered[-1] / 1_000,
    )


@dataclass(frozen=True)
class Interleaved:
    """The measured call's samples and each floor's, from the same iterations."""

    call: Stat
    floors: dict[str, Stat]


def _time(call: Call) -> int:
    start = perf_counter_ns()
    call()
    return perf_counter_ns() - start


def interleave(
    call: Call,
    floors: Mapping[str, Call],
    iterations: int,
    warmup: int,
    before_each: Call | None = None,
    settle: Call | None = None,
) -> Interleaved:
    """Time ``call`` and every floor once per iteration, in a rotating order.

    ``before_each`` runs untimed at the start of each iteration (emptying a cache, or another
    worker's append): it sets up the state the call is meant to see. ``settle`` runs untimed
    before each timed call (see the module's docstring). The warm-up iterations run the same
    sequence untimed (connections, script loading, first-use checks).
    """
    names = ["", *floors]
    timed = {"": call, **floors}
    samples: dict[str, list[int]] = {name: [] for name in names}
    for index in range(warmup + iterations):
        if index == warmup:
            gc.collect()
        if before_each is not None:
            before_each()
        shift = index % len(names)
        for name in names[shift:] + names[:shift]:
            if settle is not None:
                settle()
            elapsed = _time(timed[name])
            if index >= warmup:
                samples[name].append(elapsed)
    return Interleaved(
        call=summarize(samples[""]),
        floors={name: summarize(samples[name]) for name in floors},
    )


def time_each(call: Call, iterations: int, warmup: int = 0) -> Stat:
    """A loop without floors, for calls whose floor is measured elsewhere in the same loop."""
    for _ in range(warmup):
        call()
    gc.collect()
    return summarize([_time(call) for _ in range(iterations)])
