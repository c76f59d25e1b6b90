"""Reads of a branch at chain length N, cold and warm.

* Cold: a store that never read the chat (its process cache emptied before each call, when the
  code has one) runs ``load_branch``. Floor: ``LRANGE`` of the same N payloads plus
  ``msgpack.unpackb`` of each, the least a read that returns N decoded messages can cost. The
  server's own time per message comes from the ``INFO commandstats`` delta of the loop.
* Warm: the store read the chat before; then, before each timed read, another worker (another
  process) appends one message, the usual case of a multi-worker agent. Floor: ``PING``.
  ``engine.resolve()`` is measured the same way.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from sent import count_sent, top_level_usec

import ctxstore

from floors import PING, Floors, lrange_unpack_name
from other_writer import other_writer
from redis_info import CommandStats, command_stats
from results import Timed, timed
from stores import forget, open_store
from targets import Target
from timing import interleave
from workload import USER_ID, Chat, build_chat, build_pool

COLD = "cold_read"
WARM = "warm_read"


#: Cold reads run again, without floors, to read the server's time of the read alone.
SERVER_TIME_CALLS = 20


def _server_figures(
    delta: CommandStats, sent: Counter[str], calls: int, length: int
) -> dict[str, float]:
    usec = top_level_usec(delta, sent)
    return {
        "redis_us_per_call": usec / calls,
        "redis_us_per_message": usec / (calls * length),
        "scripts_per_call": delta.script_calls() / calls,
        "commands_per_call": sum(sent.values()) / calls,
    }


def _server_time_of_cold_reads(
    target: Target, reader: Any, chat_id: str, length: int
) -> dict[str, float]:
    """Cold reads alone (no floor commands mixed in), with what the client sent counted, so
    plain commands a read sends after its script (a long read's LRANGEs) count too."""
    with target.stats_client(chat_id) as stats:
        if stats is None:
            return {}
        before = command_stats(stats)
        with count_sent() as sent:
            for _ in range(SERVER_TIME_CALLS):
                forget(reader)
                reader.load_branch(chat_id, user_id=USER_ID)
        delta = command_stats(stats).minus(before)
    return _server_figures(delta, sent, SERVER_TIME_CALLS, length)


def cold_read(target: Target, store: Any, length: int, iterations: int, warmup: int) -> Timed:
    """``load_branch`` of an N-message branch by a store whose cache is empty."""
    chat = build_chat(store, f"cold-{length}", length)
    reader = open_store(target.url, cold=True)
    try:
        got = len(reader.load_branch(chat.chat_id, user_id=USER_ID).messages)
        if got != length:
            raise RuntimeError(f"cold read returned {got} messages, expected {length}")
        floors = Floors(reader.client, chat.chat_id)
        floor_calls = floors.for_read(length)  # fills the floor lists before the loop
        loop = interleave(
            lambda: reader.load_branch(chat.chat_id, user_id=USER_ID),
            floor_calls,
            iterations,
            warmup,
            before_each=lambda: forget(reader),
            settle=floors.ping,
        )
        extra = _server_time_of_cold_reads(target, reader, chat.chat_id, length)
        return timed(
            COLD,
            "store.load_branch",
            target.label,
            length,
            loop,
            lrange_unpack_name(length),
            extra,
        )
    finally:
        reader.close()


class _WarmChats:
    """The pool of a warm-read loop and the chat the other worker just appended to."""

    def __init__(self, store: Any, prefix: str, length: int, calls: int) -> None:
        self.pool = build_pool(store, prefix, length, calls)
        self.current: Chat = self.pool.chats[0]

    def advance(self, writer: Any) -> None:
        self.current = self.pool.take()
        writer.append_one(self.current)


def warm_read(
    target: Target, store: Any, length: int, iterations: int, warmup: int, writer: Any
) -> Timed:
    """``load_branch`` by a store that read the chat before, after another worker appended."""
    chats = _WarmChats(store, f"warm-{length}", length, iterations + warmup)
    reader = open_store(target.url)
    try:
        for chat in chats.pool.chats:
            reader.load_branch(chat.chat_id, user_id=USER_ID)
        floors = Floors(reader.client, chats.current.chat_id)
        loop = interleave(
            lambda: reader.load_branch(chats.current.chat_id, user_id=USER_ID),
            floors.for_warm_read(),
            iterations,
            warmup,
            before_each=lambda: chats.advance(writer),
            settle=floors.ping,
        )
        return timed(WARM, "store.load_branch", target.label, length, loop, PING)
    finally:
        reader.close()


def warm_resolve(
    target: Target, store: Any, length: int, iterations: int, warmup: int, writer: Any
) -> Timed:
    """``engine.resolve()`` of an engine that resolved before, after another worker appended."""
    chats = _WarmChats(store, f"resolve-{length}", length, iterations + warmup)
    reader = open_store(target.url)
    try:
        engines = {}
        for chat in chats.pool.chats:
            engine = ctxstore.ContextEngine(store=reader, chat_id=chat.chat_id, user_id=USER_ID)
            engine.resolve()
            engines[chat.chat_id] = engine
        floors = Floors(reader.client, chats.current.chat_id)
        loop = interleave(
            lambda: engines[chats.current.chat_id].resolve(),  # noqa: PLW0108 - chat moves
            floors.for_warm_read(),
            iterations,
            warmup,
            before_each=lambda: chats.advance(writer),
            settle=floors.ping,
        )
        return timed(WARM, "engine.resolve", target.label, length, loop, PING)
    finally:
        reader.close()


def read_rows(
    target: Target,
    store: Any,
    lengths: tuple[int, ...],
    iterations: dict[int, int],
    warmup: Callable[[int], int],
) -> tuple[list[Timed], list[Timed]]:
    """Cold rows and warm rows for every length (``warmup`` maps iterations to warm-up calls)."""
    cold: list[Timed] = []
    warm: list[Timed] = []
    writer = other_writer(target.url, target.is_embedded)
    try:
        for length in lengths:
            count = iterations[length]
            cold.append(cold_read(target, store, length, count, warmup(count)))
            warm.append(warm_read(target, store, length, count, warmup(count), writer))
            warm.append(warm_resolve(target, store, length, count, warmup(count), writer))
    finally:
        writer.close()
    return cold, warm
