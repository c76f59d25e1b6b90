"""Save one message at chain length N: ``store.append`` and ``engine.save()``.

Both append onto the head the previous save returned, as a worker does, and are interleaved
with ``PING`` (the headline ratio) and ``RPUSH`` of one payload. The chats come from a pool so
that "length N" stays within 10 % however many saves are timed (see ``ChatPool``).
"""

from __future__ import annotations

import itertools
from typing import Any

import ctxstore

from floors import PING, Floors
from results import Timed, timed
from targets import Target
from timing import interleave
from workload import USER_ID, ChatPool, build_pool, messages

SCENARIO = "save"


def store_append(target: Target, store: Any, length: int, iterations: int, warmup: int) -> Timed:
    """``store.append`` of one message with ``expected_head`` = the previous head."""
    pool = build_pool(store, f"save-append-{length}", length, iterations + warmup)

    def call() -> None:
        chat = pool.take()
        result = store.append(
            chat.chat_id, "main", messages(1, chat.length), expected_head=chat.head, user_id=USER_ID
        )
        chat.head = result.head_message_id
        chat.length += 1

    floors = Floors(store.client, pool.chats[0].chat_id)
    loop = interleave(call, floors.for_write(), iterations, warmup, settle=floors.ping)
    floors.cleanup()
    return timed(SCENARIO, "store.append", target.label, length, loop, PING)


def _engines(store: Any, pool: ChatPool) -> list[ctxstore.ContextEngine]:
    """One engine per chat, opened (its first call opens the chat, which is not a save)."""
    engines = []
    for chat in pool.chats:
        engine = ctxstore.ContextEngine(store=store, chat_id=chat.chat_id, user_id=USER_ID)
        engine.resolve()
        engines.append(engine)
    return engines


def engine_save(target: Target, store: Any, length: int, iterations: int, warmup: int) -> Timed:
    """``engine.set(user(text))`` then ``engine.save()``: one turn's save through the engine."""
    pool = build_pool(store, f"save-engine-{length}", length, iterations + warmup)
    engines = _engines(store, pool)
    turn = itertools.count(length)
    rotation = itertools.cycle(engines)

    def call() -> None:
        engine = next(rotation)
        engine.set(ctxstore.user(messages(1, next(turn))[0]["content"]))
        engine.save()

    floors = Floors(store.client, pool.chats[0].chat_id)
    loop = interleave(call, floors.for_write(), iterations, warmup, settle=floors.ping)
    floors.cleanup()
    return timed(SCENARIO, "engine.save", target.label, length, loop, PING)


def save_rows(
    target: Target, store: Any, lengths: tuple[int, ...], iterations: int, warmup: int
) -> list[Timed]:
    rows = []
    for length in lengths:
        rows.append(store_append(target, store, length, iterations, warmup))
        rows.append(engine_save(target, store, length, iterations, warmup))
    return rows
