"""What erasure and redaction cost, next to the least Redis can do for the same writes.

``python bench/lifecycle.py [--iterations N]`` starts its own redis-server (persistence off)
and prints, per scenario, the medians and the ratio to the floor measured in the same loop:

* erasing a user of ``CHATS`` chats of ``MESSAGES`` messages (``erase_user``), against a
  pipeline that ``UNLINK``s the same number of chat keys of another user built the same way and
  removes their index entries (the floor has no owner check, no job scan, no receipt);
* erasing a user whose one chat holds 10,000 messages, against the same floor;
* redacting a message near the root of a 10,000-message chat (every position after it has its
  chain total moved) and one near its head, against a script that does the same writes
  (``LSET`` of the record, the token entries read and written back whole) without the checks,
  the descendants' walk or the per-entry arithmetic.

Every iteration builds its data untimed (erasure is destructive), then times the call and its
floor back to back, in alternating order.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import ctxstore  # noqa: I001
from local_redis import local_redis

CHATS, MESSAGES, LONG = 100, 100, 10_000
CONTENT = "x" * 200

FLOOR_SCRIPT = """
redis.call('LSET', KEYS[1], ARGV[1], ARGV[2])
local start = tonumber(ARGV[1]) * 6
local s = redis.call('GETRANGE', KEYS[2], start, -1)
redis.call('SETRANGE', KEYS[2], start, s)
return #s
"""


def build(store: Any, user: str, chats: int, messages: int) -> list[str]:
    ids = []
    for index in range(chats):
        chat_id = f"{user}-{index}"
        store.upsert_chat(chat_id, user)
        head = None
        batch = [{"role": "user", "content": CONTENT}] * min(messages, 1000)
        for _start in range(0, messages, len(batch)):
            head = store.append(chat_id, None, batch, expected_head=head).head_message_id
        ids.append(chat_id)
    return ids


def floor_erase(store: Any, user: str, chat_ids: list[str]) -> Callable[[], object]:
    keyspace = store.state.keyspace
    client = store.client

    def unlink() -> object:
        pipe = client.pipeline(transaction=False)
        for chat_id in chat_ids:
            keys = keyspace.chat(chat_id)
            pipe.unlink(*(keys.key(name) for name in ctxstore._core.keys.CHAT_KEY_NAMES))
        pipe.zrem(keyspace.all_chats_index, *chat_ids)
        pipe.unlink(keyspace.user_index(user), keyspace.owner_record(user))
        return pipe.execute()

    return unlink


def timed(call: Callable[[], object]) -> float:
    started = time.perf_counter_ns()
    call()
    return (time.perf_counter_ns() - started) / 1e6


def erasure(store: Any, chats: int, messages: int, iterations: int) -> dict[str, float]:
    ours, floors, keys = [], [], 0
    for iteration in range(iterations):
        build(store, f"e{iteration}", chats, messages)
        other = build(store, f"f{iteration}", chats, messages)
        floor = floor_erase(store, f"f{iteration}", other)
        receipt: list[Any] = []

        def ours_call(user: str = f"e{iteration}", sink: list[Any] = receipt) -> object:
            sink.append(store.erase_user(user))
            return None

        calls = [(ours, ours_call), (floors, floor)]
        if iteration % 2:
            calls.reverse()
        for sink, call in calls:
            store.client.ping()
            sink.append(timed(call))
        keys = receipt[0].total
    ours_ms, floor_ms = statistics.median(ours), statistics.median(floors)
    return {
        "erase_ms": ours_ms,
        "floor_ms": floor_ms,
        "ratio": ours_ms / floor_ms,
        "keys_and_entries": keys,
        "per_second": keys / (ours_ms / 1000),
    }


def redaction(store: Any, iterations: int, near_root: bool) -> dict[str, float]:
    [chat_id] = build(store, "r-root" if near_root else "r-head", 1, LONG)
    ids = [item["id"] for item in store.load_branch(chat_id).messages]
    floor = store.client.register_script(FLOOR_SCRIPT)
    keys = store.state.keyspace.chat(chat_id)
    tok_keys = [keys.key("log"), keys.key("tok")]
    ours, floors = [], []
    for iteration in range(iterations):
        position = 1 + iteration if near_root else LONG - 2 - iteration
        # The floor writes back a record of the same size as the redaction's, at a position the
        # redaction will not touch (its own record, so nothing read later changes).
        spare = position + iterations + 1 if near_root else position - iterations - 1
        record = store.client.lindex(keys.key("log"), spare)

        def ours_call(message: str = ids[position]) -> object:
            return store.redact_message(chat_id, message)

        def floor_call(args: list[Any] = [spare, record]) -> object:  # noqa: B006
            return floor(keys=tok_keys, args=args)

        calls = [(ours, ours_call), (floors, floor_call)]
        if iteration % 2:
            calls.reverse()
        for sink, call in calls:
            store.client.ping()
            sink.append(timed(call))
    ours_ms, floor_ms = statistics.median(ours), statistics.median(floors)
    return {"redact_ms": ours_ms, "floor_ms": floor_ms, "ratio": ours_ms / floor_ms}


def longest_command(server: Any, call: Callable[[], object]) -> dict[str, Any]:
    """What the server spent on each kind of command ``call`` sent (SLOWLOG, every command:
    the inner commands of scripts are logged too, and every duration carries the logging): the
    kind with the highest 99th percentile, its median, and the longest single one (on this
    shared machine a few take milliseconds whatever they are: the scheduler)."""
    admin = server.client()
    admin.config_set("slowlog-log-slower-than", 0)
    admin.config_set("slowlog-max-len", 1_000_000)
    admin.slowlog_reset()
    call()
    entries = admin.slowlog_get(1_000_000)
    admin.config_set("slowlog-log-slower-than", 10_000)
    admin.close()
    kinds: dict[str, list[int]] = {}
    for entry in entries:
        if _name(entry) not in ("SLOWLOG", "CONFIG"):
            kinds.setdefault(_kind(entry), []).append(int(entry["duration"]))
    for durations in kinds.values():
        durations.sort()
    worst = max(kinds, key=lambda kind: kinds[kind][(len(kinds[kind]) * 99) // 100 - 1])
    durations = kinds[worst]
    return {
        "commands": sum(len(found) for found in kinds.values()),
        "slowest_kind": worst,
        "its_median_us": float(statistics.median(durations)),
        "its_p99_us": float(durations[(len(durations) * 99) // 100 - 1]),
        "longest_us": float(max(max(found) for found in kinds.values())),
    }


def _kind(entry: Any) -> str:
    """A command's name, and for a script the start of its SHA (each script its own kind)."""
    command = entry["command"]
    shown = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
    parts = shown.split(" ")
    return f"{parts[0].upper()} {parts[1][:8]}" if parts[0].upper() == "EVALSHA" else parts[0]


def _name(entry: Any) -> str:
    command = entry["command"]
    shown = command.decode("utf-8", "replace") if isinstance(command, bytes) else str(command)
    return shown.split(" ")[0].upper()


def sweep_of_gone(store: Any, server: Any, gone: int) -> dict[str, Any]:
    """The longest command of a sweep that removes ``gone`` index entries of chats that are no
    longer there (and as many owner-record entries)."""
    keyspace = store.state.keyspace
    client = store.client
    for start in range(0, gone, 1000):
        members = {f"gone-{i}": i for i in range(start, min(start + 1000, gone))}
        client.zadd(keyspace.all_chats_index, members)
        client.zadd(keyspace.user_index("sweepme"), members)
        client.hset(keyspace.owner_record("sweepme"), mapping=dict.fromkeys(members, "1\tx"))
    report: list[Any] = []
    figures = longest_command(server, lambda: report.append(store.sweep(grace_ms=0)))
    figures["removed"] = report[0].index_entries_removed + report[0].record_entries_removed
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=9)
    args = parser.parse_args()
    with local_redis() as server:
        store = ctxstore.connect(server.url, namespace="bench").admin()
        results = {
            f"erase a user of {CHATS} chats x {MESSAGES} messages": erasure(
                store, CHATS, MESSAGES, args.iterations
            ),
            f"erase a user of 1 chat x {LONG} messages": erasure(store, 1, LONG, args.iterations),
            f"redact near the root of {LONG} messages": redaction(store, args.iterations, True),
            f"redact near the head of {LONG} messages": redaction(store, args.iterations, False),
            "sweep of 10,000 gone chats (SLOWLOG)": sweep_of_gone(store, server, 10_000),
        }
        build(store, "slow", CHATS, MESSAGES)
        results[f"erase a user of {CHATS} chats (SLOWLOG)"] = longest_command(
            server, lambda: store.erase_user("slow")
        )
        store.close()
    print(f"Redis {server.version}, {args.iterations} iterations, medians")
    for name, figures in results.items():
        shown = ", ".join(
            f"{key} {value:,.1f}" if isinstance(value, float) else f"{key} {value}"
            for key, value in figures.items()
        )
        print(f"{name}: {shown}")


if __name__ == "__main__":
    main()
