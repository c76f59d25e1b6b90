"""Single-shot measurements: memory (Python and Redis) and what one operation sends.

These are counts and sizes, not timings, so each is taken once on a warmed-up store.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import redis

import ctxstore
from ctxstore.core.keys import CHAT_KEY_NAMES

from latency import Chains, appender, engine_on, engine_saver
from redis_info import command_stats, used_memory
from workload import Chain, build_chain, extend, short_turns

#: Messages the Redis storage probe writes; sized like the largest read fixture.
STORAGE_MESSAGES = 10_000
#: A small batch keeps Redis's per-client query buffer (which holds the last request, and
#: counts in used_memory) from inflating the storage figure.
STORAGE_BATCH = 100


@dataclass(frozen=True)
class ChainMemory:
    """Python allocations while reading one chain (tracemalloc, so pure-Python and C objects)."""

    messages: int
    content_bytes: int
    peak_bytes: int
    retained_bytes: int


@dataclass(frozen=True)
class StorageMemory:
    """Redis memory taken by stored messages, two ways: server total and the chat's own keys."""

    messages: int
    content_bytes: int
    used_memory_delta: int
    key_bytes: int

    @property
    def per_1k(self) -> float:
        return self.used_memory_delta * 1_000 / self.messages


@dataclass(frozen=True)
class CommandCount:
    """What one operation cost on the wire and on the server.

    ``sent``: commands the client sent (by name); ``round_trips``: socket writes, each followed
    by one wait for replies; ``evalsha_calls``: the server's ``cmdstat_evalsha`` count;
    ``in_scripts``: the commands those scripts ran inside Redis (server count minus ``sent``);
    ``redis_us``: server time of the sent commands.
    """

    operation: str
    round_trips: int
    sent: dict[str, int]
    evalsha_calls: int
    in_scripts: dict[str, int]
    redis_us: int


def chain_memory(store: Any, chain: Chain) -> ChainMemory:
    """Peak and retained Python allocation of one ``get_chain`` (the call warmed up first)."""
    store.get_chain(chain.chat_id, chain.head)
    gc.collect()
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        messages = store.get_chain(chain.chat_id, chain.head)
        current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return ChainMemory(
        messages=len(messages),
        content_bytes=chain.content_bytes,
        peak_bytes=peak - baseline,
        retained_bytes=current - baseline,
    )


def _key_bytes(stats_client: Any, store: Any, chat_id: str) -> int:
    """MEMORY USAGE (exact: SAMPLES 0) summed over the chat's keys."""
    chat = store.state.keyspace.chat(chat_id)
    total = 0
    for name in CHAT_KEY_NAMES:
        total += int(stats_client.memory_usage(chat.key(name), samples=0) or 0)
    return total


def storage_memory(store: Any, stats_client: Any) -> StorageMemory:
    """used_memory before and after storing messages of 200-500 characters in a new chat."""
    chain = build_chain(store, "storage", 0)
    before = used_memory(stats_client)
    extend(store, chain, random.Random(11), STORAGE_MESSAGES, batch_size=STORAGE_BATCH)
    store.client.ping()
    after = used_memory(stats_client)
    return StorageMemory(
        messages=chain.length,
        content_bytes=chain.content_bytes,
        used_memory_delta=after - before,
        key_bytes=_key_bytes(stats_client, store, chain.chat_id),
    )


class CountingConnection(redis.Connection):
    """A redis-py connection that records what it sends.

    Every request reaches the socket through ``send_packed_command`` once, whether it is one
    command or a whole pipeline, so its calls count round trips.
    """

    round_trips: ClassVar[int] = 0
    sent: ClassVar[Counter[str]] = Counter()

    @classmethod
    def reset(cls) -> None:
        cls.round_trips = 0
        cls.sent = Counter()

    @staticmethod
    def _name(command: tuple[Any, ...]) -> str:
        first = command[0]
        return (first.decode() if isinstance(first, bytes) else str(first)).lower()

    def send_command(self, *args: Any, **kwargs: Any) -> None:
        CountingConnection.sent[self._name(args)] += 1
        super().send_command(*args, **kwargs)

    def pack_commands(self, commands: Any) -> Any:
        for command in commands:
            CountingConnection.sent[self._name(command)] += 1
        return super().pack_commands(commands)

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        CountingConnection.round_trips += 1
        super().send_packed_command(command, check_health)


def _observe(name: str, stats_client: Any, action: Callable[[], object]) -> CommandCount:
    """Run ``action`` once and compare what the client sent with what the server ran."""
    CountingConnection.reset()
    before = command_stats(stats_client)
    action()
    delta = command_stats(stats_client).minus(before)
    sent = dict(CountingConnection.sent)
    served = Counter({command.split("|")[0]: calls for command, calls in delta.calls.items()})
    served.subtract(sent)
    return CommandCount(
        operation=name,
        round_trips=CountingConnection.round_trips,
        sent=sent,
        evalsha_calls=delta.calls["evalsha"],
        in_scripts=dict(+served),
        redis_us=delta.top_level_usec(),
    )


def _counting_store(url: str, namespace: str) -> Any:
    return ctxstore.connect(url, namespace=namespace, connection_class=CountingConnection)


def command_counts(
    url: str, namespace: str, chains: Chains, stats_client: Any
) -> list[CommandCount]:
    """Commands and round trips of the measured operations, and of the first calls of a store.

    A store learns a chat's owner from its replies and checks the server's eviction policy
    before its first operation, so a store that has not seen the chat, and a brand-new store,
    are observed too: that is the cost a short-lived worker pays.
    """
    warm = _counting_store(url, namespace)
    tip = build_chain(warm, "probe", 0)
    append = appender(warm, tip, short_turns(1))
    append()
    warm.get_chain(chains.thousand.chat_id, chains.thousand.head)
    counts = [
        _observe("append 1 msg", stats_client, append),
        _observe(
            "get_chain 1k msgs",
            stats_client,
            lambda: warm.get_chain(chains.thousand.chat_id, chains.thousand.head),
        ),
        _observe(
            "load_branch 100 msgs",
            stats_client,
            lambda: warm.load_branch(chains.hundred.chat_id),
        ),
    ]
    read = build_chain(warm, "probe-engine-100", 100)
    engine = engine_on(warm, read)
    counts.append(_observe("engine.resolve 100 msgs", stats_client, engine.resolve))
    counts.append(_observe("engine.save 1 msg", stats_client, engine_saver(engine, short_turns(1))))
    counts.append(
        _observe(
            "engine.resolve, new engine",
            stats_client,
            lambda: ctxstore.ContextEngine(
                store=warm, chat_id=read.chat_id, user_id="bench-user"
            ).resolve(),
        )
    )
    unseen = _counting_store(url, namespace)
    unseen.state.owners.forget(tip.chat_id)
    unseen.get_chain(chains.hundred.chat_id, chains.hundred.head)
    counts.append(
        _observe(
            "append 1 msg, chat new to the store",
            stats_client,
            appender(unseen, tip, short_turns(1)),
        )
    )
    fresh = _counting_store(url, namespace)
    fresh.client.ping()
    counts.append(
        _observe(
            "append 1 msg, new store, warm process",
            stats_client,
            appender(fresh, tip, short_turns(1)),
        )
    )
    forget_process_caches()
    first = _counting_store(url, namespace)
    first.client.ping()
    counts.append(
        _observe(
            "append 1 msg, first store of a process",
            stats_client,
            appender(first, tip, short_turns(1)),
        )
    )
    for store in (warm, unseen, fresh, first):
        store.close()
    return counts


def forget_process_caches() -> None:
    """Make the next store behave like the first one of a new process (a cold start)."""
    from ctxstore.core import state

    state._checked_servers.clear()
    state._owner_caches.clear()
