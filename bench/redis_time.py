"""Redis time per save and per read: what one shard spends on each call, from ``INFO
commandstats``, against floors run in the same loop on the same server.

A save (``store.append`` of one 200-character message at chain length L) is set against:

* the **floor** script: the same writes with no checks (``HMGET`` chat, ``HGET`` branch,
  ``LLEN``, ``RPUSH``, three ``HSET``, two ``ZADD``), the 9-command script the issue names;
* the **command floor**: every command the append script runs for such a save (the reads its
  checks need: the head's record, the token entry before it; the ring slot of its request id)
  with none of its Lua: what the commands alone cost, so the difference is the script's logic.

A read (``store.load_branch`` of the chain, cold: the process cache cleared) is set against an
``LRANGE`` of the same log.

Blocks of K calls of each kind alternate (rotating which goes first); each block's time per
call is read through another connection, and the report gives the medians and their ratios.
Scripts are told apart by block, not by name (all run as EVALSHA).

``python bench/redis_time.py [--blocks N] [--per-block K] [--length L]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxstore

from redis_info import command_stats

SCENARIO = "redis_time"

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

#: The commands lua/append.lua runs for a one-message save onto the head (no title, no
#: compaction threshold, no retention), in its order, with no checks.
COMMAND_FLOOR = """
local chat = redis.call('HMGET', KEYS[1], 'user_id', 'fmt', 'inc', 'updated_at',
                        'message_count', 'req_slot', 'cjob', 'ttl', 'active_branch', 'title')
local head = redis.call('HGET', KEYS[2], 'main')
local record = redis.call('LINDEX', KEYS[3], -1)
local length = redis.call('LLEN', KEYS[3])
local tokens = redis.call('STRLEN', KEYS[7])
local entry = redis.call('GETRANGE', KEYS[7], tokens - 6, tokens - 1)
redis.call('APPEND', KEYS[7], ARGV[5])
redis.call('RPUSH', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[2], 'main', ARGV[2])
redis.call('HSET', KEYS[8], ARGV[6], ARGV[4])
redis.call('HSET', KEYS[1], 'message_count', length + 1, 'updated_at', ARGV[3], 'req_slot',
           ARGV[6])
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[4])
redis.call('ZADD', KEYS[6], ARGV[3], ARGV[4])
return {'main', length, {}, 0, '', {}, ARGV[3], 'alice', 1, 'inc', -1, '', 0, length}
"""


@dataclass(frozen=True)
class RedisTime:
    """Medians of the per-block Redis time per call, in microseconds, and their ratios."""

    length: int
    blocks: int
    per_block: int
    append_us: float
    floor_us: float
    command_floor_us: float
    read_us: float
    lrange_us: float

    @property
    def append_x_floor(self) -> float:
        return self.append_us / self.floor_us

    @property
    def append_x_command_floor(self) -> float:
        return self.append_us / self.command_floor_us

    @property
    def read_x_lrange(self) -> float:
        return self.read_us / self.lrange_us

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "append_x_floor": self.append_x_floor,
            "append_x_command_floor": self.append_x_command_floor,
            "read_x_lrange": self.read_x_lrange,
        }


def _per_call(stats: Any, block: Callable[[], None]) -> float:
    """Redis time per script or command of what ``block`` sends, from commandstats."""
    before = command_stats(stats)
    block()
    spent = command_stats(stats).minus(before)
    calls = spent.script_calls() or sum(spent.calls.values())
    return spent.server_usec() / max(1, calls)


def redis_time(url: str, length: int, blocks: int, per_block: int) -> RedisTime:
    """Run the A/B on the server at ``url`` (a private one: commandstats are server-wide)."""
    store = ctxstore.connect(url, namespace="rt")
    plain = redis.Redis.from_url(url)
    stats = redis.Redis.from_url(url)
    text = "x" * 200
    store.upsert_chat("c", "alice")
    head = None
    for start in range(0, length, 500):
        batch = [{"role": "user", "content": text}] * min(500, length - start)
        head = store.append("c", "main", batch, expected_head=head).head_message_id
    store.upsert_chat("r", "alice")
    reader_head = None
    for _ in range(2):
        batch = [{"role": "user", "content": text}] * 500
        reader_head = store.append("r", "main", batch, expected_head=reader_head).head_message_id
    read_log = store.state.keyspace.chat("r").key("log")
    floor = plain.register_script(FLOOR)
    command_floor = plain.register_script(COMMAND_FLOOR)
    keys = ["{f}chat", "{f}branch", "{f}log", "{f}req", "{f}idx1", "{f}idx2", "{f}tok", "{f}reqs"]
    record = b"r" * 230
    plain.rpush("{f}log", *([record] * length))
    plain.set("{f}tok", b"\x00" * (6 * length))
    plain.hset("{f}chat", mapping={"user_id": "alice", "fmt": "2", "inc": "i", "updated_at": 1})
    serial = iter(range(10**9))

    def appends() -> None:
        nonlocal head
        for _ in range(per_block):
            head = store.append(
                "c", "main", [{"role": "user", "content": text}], expected_head=head
            ).head_message_id

    def floors(script: Any) -> Callable[[], None]:
        def run() -> None:
            for _ in range(per_block):
                n = next(serial)
                script(
                    keys=keys,
                    args=[record, f"{n}", 1_800_000_000_000 + n, f"r{n}", b"\x00" * 6, n % 32],
                )

        return run

    def reads() -> None:
        for _ in range(per_block // 10):
            store.clear_cache()
            store.load_branch("r")

    def lranges() -> None:
        for _ in range(per_block // 10):
            plain.lrange(read_log, 0, -1)

    kinds: list[tuple[str, Callable[[], None]]] = [
        ("append", appends),
        ("floor", floors(floor)),
        ("command_floor", floors(command_floor)),
        ("read", reads),
        ("lrange", lranges),
    ]
    appends()  # scripts loaded, caches warm
    floors(floor)()
    floors(command_floor)()
    samples: dict[str, list[float]] = {name: [] for name, _ in kinds}
    for block in range(blocks):
        rotated = kinds[block % len(kinds) :] + kinds[: block % len(kinds)]
        for name, run in rotated:
            samples[name].append(_per_call(stats, run))
    store.close()
    plain.close()
    stats.close()
    median = {name: statistics.median(values) for name, values in samples.items()}
    return RedisTime(
        length=length,
        blocks=blocks,
        per_block=per_block,
        append_us=median["append"],
        floor_us=median["floor"],
        command_floor_us=median["command_floor"],
        read_us=median["read"],
        lrange_us=median["lrange"],
    )


def describe(result: RedisTime) -> str:
    return "\n".join(
        [
            f"Redis time per call, medians of {result.blocks} blocks of {result.per_block}"
            f" (chain of {result.length:,}):",
            f"  store.append of one message: {result.append_us:.1f} us",
            f"  floor script (same writes, no checks): {result.floor_us:.1f} us"
            f" -> {result.append_x_floor:.2f}x",
            f"  command floor (the script's commands, no Lua): {result.command_floor_us:.1f} us"
            f" -> {result.append_x_command_floor:.2f}x",
            f"  cold load_branch of 1,000: {result.read_us:.1f} us;"
            f" LRANGE of the same log {result.lrange_us:.1f} us -> {result.read_x_lrange:.2f}x",
        ]
    )


def main() -> None:
    from local_redis import local_redis
    from pinning import pin_to_one_cpu

    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--blocks", type=int, default=15)
    parser.add_argument("--per-block", type=int, default=200)
    parser.add_argument("--length", type=int, default=1000)
    args = parser.parse_args()
    pin_to_one_cpu()
    with local_redis() as server:
        print(describe(redis_time(server.url, args.length, args.blocks, args.per_block)))


if __name__ == "__main__":
    main()
