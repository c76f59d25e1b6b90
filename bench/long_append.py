"""A long append, packed or one argument per record: Redis time and the caller's wall time.

From ``ctxstore._core.ops.append.PACKED_FROM`` messages on (3,900), an append sends its records
packed into two arguments (their lengths and their bytes), which the script cuts apart, so that no
command carries more than the 3,999 arguments a managed service takes. This measures what the
packing costs against the same append with one argument per record (what ctxstore sent before;
plain Redis takes it), and against the floor: an ``RPUSH`` of the same records to a list.

Blocks of each kind alternate on a private redis-server, rotating which goes first; each call
appends N new messages to a fresh chat (one chat per call, so every call does the same work).
Redis time per call comes from ``INFO commandstats`` (EVALSHA, RPUSH), the wall time from the
caller's clock around ``store.append``.

``python bench/long_append.py [--blocks N] [--per-block K] [--sizes 1000,3900,10000]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxstore
from ctxstore._core.ops import append as append_op

from redis_info import command_stats

NEVER = 10**9


def messages(count: int, salt: int) -> list[dict[str, Any]]:
    """``count`` user messages of about 200 characters each."""
    text = "lorem ipsum dolor sit amet " * 7
    return [{"role": "user", "content": f"{salt}-{i} {text}"} for i in range(count)]


def main() -> None:
    from local_redis import local_redis

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--per-block", type=int, default=4)
    parser.add_argument("--sizes", default="1000,3900,10000")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    with local_redis() as server:
        store = ctxstore.connect(
            server.url, namespace="long-append"
        ).admin()  # an operator's benchmark: every user's chats
        info = server.client()
        print(f"server {server.version}; {args.blocks} blocks of {args.per_block} per kind")
        print(f"{'N':>6} {'kind':<22} {'Redis ms':>9} {'x RPUSH':>8} {'wall ms':>8}")
        for size in sizes:
            report(store, info, size, args.blocks, args.per_block)


def report(store: ctxstore.Store, info: Any, size: int, blocks: int, per_block: int) -> None:
    packed_from = append_op.PACKED_FROM
    serial = iter(range(NEVER))
    records = [msg["content"].encode() for msg in messages(size, 0)]

    def appends(packed_from: int) -> Callable[[], list[Callable[[], float]]]:
        """The block's calls, made ready (chats created, messages built) before it is timed."""

        def prepare() -> list[Callable[[], float]]:
            ready = []
            for _ in range(per_block):
                chat = f"c{size}-{next(serial)}"
                store.upsert_chat(chat, "u")
                ready.append(one_append(chat, messages(size, next(serial)), packed_from))
            return ready

        return prepare

    def one_append(chat: str, batch: list[dict[str, Any]], packed_from: int) -> Callable[[], float]:
        def call() -> float:
            append_op.PACKED_FROM = packed_from
            started = time.perf_counter()
            store.append(chat, "main", batch, expected_head=None)
            return time.perf_counter() - started

        return call

    def rpushes() -> list[Callable[[], float]]:
        def call() -> float:
            started = time.perf_counter()
            info.rpush(f"floor:{size}:{next(serial)}", *records)
            return time.perf_counter() - started

        return [call] * per_block

    kinds: dict[str, tuple[Callable[[], list[Callable[[], float]]], str]] = {
        "packed": (appends(1), "evalsha"),
        "one argument each": (appends(NEVER), "evalsha"),
        "RPUSH floor": (rpushes, "rpush"),
    }
    redis_ms: dict[str, list[float]] = {name: [] for name in kinds}
    wall_ms: dict[str, list[float]] = {name: [] for name in kinds}
    names = list(kinds)
    for block in range(blocks):
        for name in names[block % len(names) :] + names[: block % len(names)]:
            prepare, command = kinds[name]
            calls = prepare()
            before = command_stats(info)
            walls = [call() for call in calls]
            after = command_stats(info)
            redis_ms[name].append((after.usec[command] - before.usec[command]) / per_block / 1000)
            wall_ms[name].append(statistics.median(walls) * 1000)
    floor = statistics.median(redis_ms["RPUSH floor"])
    for name in names:
        spent = statistics.median(redis_ms[name])
        wall = statistics.median(wall_ms[name])
        print(f"{size:>6} {name:<22} {spent:>9.2f} {spent / floor:>8.2f} {wall:>8.1f}")
    append_op.PACKED_FROM = packed_from


if __name__ == "__main__":
    main()
