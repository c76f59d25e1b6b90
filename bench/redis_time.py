"""Redis time per save: what one shard spends on each ``store.append`` of one message, against
a floor script doing the same writes with no checks (``HMGET`` chat, ``HGET`` branch, ``LLEN``,
``RPUSH``, three ``HSET``, two ``ZADD``), on a private redis-server.

``python bench/redis_time.py [--blocks N] [--per-block K] [--length L]``: blocks of K appends
and K floor calls alternate; each block's script time per call comes from ``INFO
commandstats`` (read through another connection), and the report gives the medians and their
ratio. Both run as EVALSHA, so they are told apart by block, not by name.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import redis

from local_redis import local_redis
from redis_info import command_stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxstore

FLOOR = """
local chat = redis.call('HMGET', KEYS[1], 'user_id', 'fmt', 'inc', 'updated_at', 'message_count')
local head = redis.call('HGET', KEYS[2], 'main')
local length = redis.call('LLEN', KEYS[3])
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[2], 'main', ARGV[2])
redis.call('HSET', KEYS[1], 'message_count', length + 1, 'updated_at', ARGV[3])
redis.call('HSET', KEYS[4], ARGV[4], ARGV[3])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[4])
return length
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--per-block", type=int, default=200)
    parser.add_argument("--length", type=int, default=1000)
    args = parser.parse_args()
    text = "x" * 200
    with local_redis() as server:
        store = ctxstore.connect(server.url, namespace="rt")
        plain = redis.Redis(host="127.0.0.1", port=server.port)
        store.upsert_chat("c", "alice")
        head = None
        for start in range(0, args.length, 500):
            batch = [{"role": "user", "content": text}] * min(500, args.length - start)
            head = store.append("c", "main", batch, expected_head=head).head_message_id
        floor = plain.register_script(FLOOR)
        keys = ["f:chat", "f:branch", "f:log", "f:req", "f:idx1", "f:idx2"]
        plain.rpush("f:log", *([b"r" * 230] * args.length))
        record = b"r" * 230
        appends: list[float] = []
        floors: list[float] = []
        for block in range(args.blocks):
            before = command_stats(plain)
            for _ in range(args.per_block):
                head = store.append(
                    "c", "main", [{"role": "user", "content": text}], expected_head=head
                ).head_message_id
            middle = command_stats(plain)
            for index in range(args.per_block):
                floor(
                    keys=keys,
                    args=[
                        record,
                        f"{block}.{index}",
                        1_800_000_000_000 + index,
                        f"r{block}.{index}",
                    ],
                )
            after = command_stats(plain)
            spent = middle.minus(before)
            appends.append(spent.usec["evalsha"] / max(1, spent.calls["evalsha"]))
            spent = after.minus(middle)
            floors.append(spent.usec["evalsha"] / max(1, spent.calls["evalsha"]))
        append_us, floor_us = statistics.median(appends), statistics.median(floors)
        print(f"store.append of one message: {append_us:.1f} us of Redis time a call")
        print(f"the floor script (same writes, no checks): {floor_us:.1f} us a call")
        print(f"ratio: {append_us / floor_us:.2f}x ({args.blocks} blocks of {args.per_block})")
        store.close()


if __name__ == "__main__":
    main()
