"""Redis time per save and per read: what one shard spends on each call, from ``INFO
commandstats``, against floors run in the same loop on the same server.

A save (``store.append`` of one 200-character message at chain length L) is set against:

* the **floor** script: the same writes with no checks (``HMGET`` chat, ``HGET`` branch,
  ``LLEN``, ``RPUSH``, three ``HSET``, two ``ZADD``), the 9-command script the issue names;
* the **command floor**: every command the append script runs for such a save (the reads its
  checks need: the head's record, the token entry before it) with none of its Lua, called with
  arguments of the append's shape (12 keys, 5 arguments, new bytes each call): what the
  commands alone cost;
* the **function floor**: the command floor as a Redis function of a library of its own, called
  with ``FCALL`` as the append is (a library is loaded once; a call runs only its function, where
  an ``EVALSHA`` runs its script's whole text, helpers included): what the append's commands
  cost in a function before any of its logic, so the difference is the logic. (Before the
  library, this floor was the command floor after the append script's library definitions.)

The same save through a store that sends its Lua as ``EVALSHA`` scripts (``scripting="scripts"``,
what a server without Redis Functions gets) runs in the same loop: the difference is what the
library saves per call.

A read (``store.load_branch`` of the chain, cold: the process cache cleared) is set against an
``LRANGE`` of the same log.

Blocks of K calls of each kind alternate (rotating which goes first); each block's time per
call is read through another connection, and the report gives the medians and their ratios.
Scripts are told apart by block, not by name.

``python bench/redis_time.py [--blocks N] [--per-block K] [--length L]``
"""

from __future__ import annotations

import argparse
import secrets
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ctxstore

from redis_info import command_stats
from workload import build_chat

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
#: compaction threshold, no retention), in its order, with no checks. Its KEYS and ARGV have
#: the append's shape: chat, log, alias, runs, branch, reqs, tok, summary, checkpoint, the two
#: indexes, the job stream; the call fields, the chosen ids, the token entry, the title, the
#: record.
COMMAND_FLOOR = """
local chat = redis.call('HMGET', KEYS[1], 'user_id', 'fmt', 'inc', 'updated_at',
                        'message_count', 'req_slot', 'cjob', 'ttl', 'active_branch', 'title')
local head = redis.call('HGET', KEYS[5], 'main')
local record = redis.call('LINDEX', KEYS[2], -1)
local length = redis.call('LLEN', KEYS[2])
local tokens = redis.call('STRLEN', KEYS[7])
local entry = redis.call('GETRANGE', KEYS[7], tokens - 6, tokens - 1)
redis.call('APPEND', KEYS[7], ARGV[3])
redis.call('RPUSH', KEYS[2], ARGV[5])
redis.call('HSET', KEYS[5], 'main', ARGV[1])
redis.call('HSET', KEYS[6], length % 32, ARGV[1])
redis.call('HSET', KEYS[1], 'message_count', length + 1, 'updated_at', length, 'req_slot',
           length % 32)
redis.call('ZADD', KEYS[10], length, 'c')
redis.call('ZADD', KEYS[11], length, 'c')
return {'main', length, {}, 0, '', {}, length, 'alice', 1, 'inc', -1, '', 0, length}
"""


@dataclass(frozen=True)
class RedisTime:
    """Medians of the per-block Redis time per call, in microseconds, and their ratios."""

    length: int
    blocks: int
    per_block: int
    append_us: float
    append_scripts_us: float
    floor_us: float
    command_floor_us: float
    script_floor_us: float
    read_us: float
    lrange_us: float

    @property
    def functions_x_scripts(self) -> float:
        return self.append_us / self.append_scripts_us

    @property
    def append_x_floor(self) -> float:
        return self.append_us / self.floor_us

    @property
    def append_x_command_floor(self) -> float:
        return self.append_us / self.command_floor_us

    @property
    def append_x_script_floor(self) -> float:
        return self.append_us / self.script_floor_us

    @property
    def script_floor_x_floor(self) -> float:
        return self.script_floor_us / self.floor_us

    @property
    def read_x_lrange(self) -> float:
        return self.read_us / self.lrange_us

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "append_x_floor": self.append_x_floor,
            "functions_x_scripts": self.functions_x_scripts,
            "append_x_command_floor": self.append_x_command_floor,
            "append_x_script_floor": self.append_x_script_floor,
            "script_floor_x_floor": self.script_floor_x_floor,
            "read_x_lrange": self.read_x_lrange,
        }


def _per_call(stats: Any, block: Callable[[], None]) -> float:
    """Redis time per script or command of what ``block`` sends, from commandstats."""
    before = command_stats(stats)
    block()
    spent = command_stats(stats).minus(before)
    calls = spent.script_calls() or sum(spent.calls.values())
    return spent.server_usec() / max(1, calls)


#: The floor script's keys, and keys of the append's shape for the command and script floors
#: (all in one slot; none is a chat's).
FLOOR_KEYS = ["{f}chat", "{f}branch", "{f}log", "{f}req", "{f}idx1", "{f}idx2"]
SHAPED_KEYS = [
    f"{{f}}{name}" for name in ("chat", "log", "alias", "runs", "branch", "reqs", "tok", "summary")
] + ["{f}checkpoint", "{f}idx1", "{f}idx2", "{f}jobs"]
RECORD = b"r" * 230


def _floor_calls(script: Any, per_block: int, serial: Iterator[int]) -> Callable[[], None]:
    def run() -> None:
        for _ in range(per_block):
            n = next(serial)
            script(keys=FLOOR_KEYS, args=[RECORD, f"{n}", 1_800_000_000_000 + n, f"r{n}"])

    return run


def _shaped_calls(script: Any, per_block: int, serial: Iterator[int]) -> Callable[[], None]:
    """Calls with arguments of an append's shape and sizes, new bytes each call (as a save
    sends: new tags, a new request id)."""

    def run() -> None:
        for _ in range(per_block):
            n = next(serial)
            fields = "\t".join(
                [
                    *("alice", "", "main", f"{n}.abcdefghijklm.abcdef", "raise", "raise"),
                    *(str(1_800_000_000_000 + n), secrets.token_urlsafe(12), "c", "alice"),
                    *("", "", "", str(n)),
                ]
            )
            args = [fields, "", b"\x00" * 6, "", secrets.token_bytes(8) + RECORD]
            script(keys=SHAPED_KEYS, args=args)

    return run


def _floors(plain: Any, length: int, per_block: int) -> list[tuple[str, Callable[[], None]]]:
    """The three floors' blocks, their keys filled like a chat of ``length`` messages."""
    plain.rpush("{f}log", *([RECORD] * length))
    plain.set("{f}tok", b"\x00" * (6 * length))
    plain.hset("{f}chat", mapping={"user_id": "alice", "fmt": "2", "inc": "i", "updated_at": 1})
    plain.function_load(
        "#!lua name=bench_floor\nredis.register_function('bench_command_floor', "
        f"function(KEYS, ARGV)\n{COMMAND_FLOOR}\nend)",
        replace=True,
    )

    def function_floor(keys: list[str], args: list[Any]) -> Any:
        return plain.fcall("bench_command_floor", len(keys), *keys, *args)

    serial = iter(range(10**9))
    return [
        ("floor", _floor_calls(plain.register_script(FLOOR), per_block, serial)),
        ("command_floor", _shaped_calls(plain.register_script(COMMAND_FLOOR), per_block, serial)),
        ("script_floor", _shaped_calls(function_floor, per_block, serial)),
    ]


def redis_time(url: str, length: int, blocks: int, per_block: int) -> RedisTime:
    """Run the A/B on the server at ``url`` (a private one: commandstats are server-wide)."""
    store = ctxstore.connect(
        url, namespace="rt"
    ).admin()  # an operator's benchmark: every user's chats
    plain = redis.Redis.from_url(url)
    stats = redis.Redis.from_url(url)
    text = "x" * 200
    head = build_chat(store, "c", length).head
    scripted = ctxstore.connect(url, namespace="rt", scripting="scripts").admin()
    scripted_head = build_chat(scripted, "s", length).head
    build_chat(store, "r", 1000)
    read_log = store.state.keyspace.chat("r").key("log")

    def appends() -> None:
        nonlocal head
        for _ in range(per_block):
            head = store.append(
                "c", "main", [{"role": "user", "content": text}], expected_head=head
            ).head_message_id

    def scripted_appends() -> None:
        nonlocal scripted_head
        for _ in range(per_block):
            scripted_head = scripted.append(
                "s", "main", [{"role": "user", "content": text}], expected_head=scripted_head
            ).head_message_id

    def reads() -> None:
        for _ in range(per_block // 10):
            store.clear_cache()
            store.load_branch("r")

    def lranges() -> None:
        for _ in range(per_block // 10):
            plain.lrange(read_log, 0, -1)

    kinds = [("append", appends), ("append_scripts", scripted_appends)]
    kinds += [*_floors(plain, length, per_block), ("read", reads), ("lrange", lranges)]
    for _, run in kinds[:5]:
        run()  # scripts loaded, caches warm
    samples: dict[str, list[float]] = {name: [] for name, _ in kinds}
    for block in range(blocks):
        rotated = kinds[block % len(kinds) :] + kinds[: block % len(kinds)]
        for name, run in rotated:
            samples[name].append(_per_call(stats, run))
    store.close()
    scripted.close()
    plain.close()
    stats.close()
    median = {name: statistics.median(values) for name, values in samples.items()}
    return RedisTime(
        length=length,
        blocks=blocks,
        per_block=per_block,
        append_us=median["append"],
        append_scripts_us=median["append_scripts"],
        floor_us=median["floor"],
        command_floor_us=median["command_floor"],
        script_floor_us=median["script_floor"],
        read_us=median["read"],
        lrange_us=median["lrange"],
    )


def describe(result: RedisTime) -> str:
    return "\n".join(
        [
            f"Redis time per call, medians of {result.blocks} blocks of {result.per_block}"
            f" (chain of {result.length:,}):",
            f"  store.append of one message: {result.append_us:.1f} us",
            f"  the same as EVALSHA scripts: {result.append_scripts_us:.1f} us"
            f" -> functions {result.functions_x_scripts:.2f}x scripts",
            f"  floor script (same writes, no checks): {result.floor_us:.1f} us"
            f" -> {result.append_x_floor:.2f}x",
            f"  command floor (the script's commands, no Lua): {result.command_floor_us:.1f} us"
            f" -> {result.append_x_command_floor:.2f}x",
            f"  function floor (the same commands as a function, FCALL):"
            f" {result.script_floor_us:.1f} us -> {result.append_x_script_floor:.2f}x;"
            f" itself {result.script_floor_x_floor:.2f}x the floor",
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
