"""Benchmark ctxstore: ``python bench/run.py [--quick] [--json out.json]``.

Starts a private redis-server on a free loopback port, builds the fixtures, runs the timed
scenarios (sync, async, embedded), then the memory and command-count probes, and prints one
report. Progress goes to stderr so stdout holds only the report. See bench/README.md.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path
from typing import TypeVar

import redis

import ctxstore

from latency import (
    FULL,
    QUICK,
    Plan,
    async_redis,
    build_chains,
    embedded,
    engine_scenarios,
    sync_redis,
)
from local_redis import LocalRedis, local_redis
from probes import chain_memory, command_counts, storage_memory
from report import Results, render, write_json

NAMESPACE = "bench"
T = TypeVar("T")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="a tenth of the iterations (a smoke run, noisier)"
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write every figure here")
    parser.add_argument(
        "--unpinned",
        action="store_true",
        help="let the OS place client and server (default: both on the last CPU)",
    )
    return parser.parse_args(argv)


def pin_to_one_cpu() -> str:
    """Run this process, and the redis-server it starts (which inherits it), on one CPU.

    Left to the scheduler, client and server sometimes share a CPU and sometimes not, and on a
    virtual machine a wake-up on another vCPU adds tens of microseconds to every round trip:
    PING measured 31 us on one CPU and 56 us across two on the reference machine. One request
    is in flight at a time, so sharing a CPU costs the sequential caller nothing.
    """
    if not hasattr(os, "sched_setaffinity"):
        return "unpinned (no sched_setaffinity here)"
    cpu = max(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    return f"client and server pinned to CPU {cpu}"


def step(label: str, work: Callable[[], T]) -> T:
    """Run one stage with a progress line on stderr."""
    print(f"... {label}", file=sys.stderr, flush=True)
    return work()


def load_average() -> str:
    """The 1-minute load average: other work on the machine shows up in every figure."""
    return f"{os.getloadavg()[0]:.2f}"


def environment(
    server: LocalRedis, quick: bool, load_before: str, placement: str
) -> dict[str, str]:
    """Where the figures come from; without this a run cannot be compared with another."""
    parser = "hiredis" if redis.utils.HIREDIS_AVAILABLE else "python parser"
    return {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "quick" if quick else "full",
        "machine": f"{os.cpu_count()} CPUs, {platform.system()} {platform.machine()}, loopback",
        "placement": placement,
        "python": platform.python_version(),
        "redis_py": redis.__version__,
        "parser": parser,
        "redis_server": server.version,
        "fakeredis": metadata.version("fakeredis"),
        "load_average": f"{load_before} at start, {load_average()} at end",
    }


def measure_all(server: LocalRedis, plan: Plan, quick: bool, placement: str) -> Results:
    """Every scenario and probe against one server, in an order that keeps them independent."""
    load_before = load_average()
    stats = server.client()
    store = ctxstore.connect(server.url, namespace=NAMESPACE)
    try:
        chains = step(
            "building chains of 100, 1,000 and 10,000 messages", lambda: build_chains(store)
        )
        latencies = step("sync store", lambda: sync_redis(store, chains, plan, stats))
        latencies += step("context engine", lambda: engine_scenarios(store, plan, stats))
        latencies += step(
            "async store",
            lambda: asyncio.run(async_redis(server.url, NAMESPACE, chains, plan, stats)),
        )
        latencies += step("embedded store (memory://)", lambda: embedded(plan))
        chain = step(
            "Python memory of a chain read", lambda: chain_memory(store, chains.ten_thousand)
        )
        storage = step("Redis memory per message", lambda: storage_memory(store, stats))
        commands = step(
            "commands per operation", lambda: command_counts(server.url, NAMESPACE, chains, stats)
        )
    finally:
        store.close()
        stats.close()
    return Results(
        environment(server, quick, load_before, placement), latencies, chain, storage, commands
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = QUICK if args.quick else FULL
    placement = "unpinned" if args.unpinned else pin_to_one_cpu()
    with local_redis() as server:
        results = measure_all(server, plan, args.quick, placement)
    print(render(results))
    if args.json is not None:
        write_json(results, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
