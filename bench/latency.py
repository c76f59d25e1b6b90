"""The timed scenarios: the sync store, the async store and the embedded store.

Each scenario warms up, then times one call per sample. Appends go onto a growing chain with
``expected_head`` set to the head the previous append returned, which is how a worker uses the
store; reads re-read the same chain, which is what happens before every LLM call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ctxstore

from redis_info import CommandStats, command_stats
from timing import (
    AsyncCall,
    Latency,
    SyncCall,
    summarize,
    time_async_calls,
    time_calls,
    warm_up,
    warm_up_async,
)
from workload import USER_ID, Chain, build_chain, short_turns


@dataclass(frozen=True)
class Plan:
    """Timed iterations per scenario; warm-up is a tenth of that (at least three calls)."""

    ping: int
    append: int
    append_batch: int
    chain_1k: int
    chain_10k: int
    branch_100: int
    embedded_append: int
    embedded_chain_1k: int

    @staticmethod
    def warmup(iterations: int) -> int:
        return max(3, iterations // 10)


FULL = Plan(
    ping=10_000,
    append=5_000,
    append_batch=2_000,
    chain_1k=500,
    chain_10k=100,
    branch_100=3_000,
    embedded_append=1_000,
    embedded_chain_1k=100,
)
QUICK = Plan(
    ping=1_000,
    append=500,
    append_batch=200,
    chain_1k=50,
    chain_10k=10,
    branch_100=300,
    embedded_append=100,
    embedded_chain_1k=10,
)


@dataclass(frozen=True)
class Chains:
    """The read fixtures: chains of 100, 1,000 and 10,000 messages on one server."""

    hundred: Chain
    thousand: Chain
    ten_thousand: Chain


def build_chains(store: Any) -> Chains:
    return Chains(
        hundred=build_chain(store, "chain-100", 100, seed=100),
        thousand=build_chain(store, "chain-1k", 1_000, seed=1_000),
        ten_thousand=build_chain(store, "chain-10k", 10_000, seed=10_000),
    )


def _redis_us(stats_client: Any, before: CommandStats | None, iterations: int) -> float | None:
    """Mean server-side time per call since ``before`` (None when there is no server)."""
    if stats_client is None or before is None:
        return None
    return command_stats(stats_client).minus(before).top_level_usec() / iterations


def measure(
    name: str, store: str, call: SyncCall, iterations: int, stats_client: Any = None
) -> Latency:
    """Warm up, then time ``iterations`` calls; server time comes from the stats client."""
    warm_up(call, Plan.warmup(iterations))
    before = command_stats(stats_client) if stats_client is not None else None
    samples = time_calls(call, iterations)
    return summarize(name, store, samples, _redis_us(stats_client, before, iterations))


async def measure_async(
    name: str, store: str, call: AsyncCall, iterations: int, stats_client: Any
) -> Latency:
    """:func:`measure` for the async store (the stats client stays sync, outside the timing)."""
    await warm_up_async(call, Plan.warmup(iterations))
    before = command_stats(stats_client)
    samples = await time_async_calls(call, iterations)
    return summarize(name, store, samples, _redis_us(stats_client, before, iterations))


def appender(store: Any, chain: Chain, messages: list[dict[str, Any]]) -> SyncCall:
    """One append onto the tip of ``chain``; the new head is kept for the next call."""

    def call() -> None:
        result = store.append(chain.chat_id, "main", messages, expected_head=chain.head)
        chain.head = result.head_message_id
        chain.length += len(messages)

    return call


def async_appender(store: Any, chain: Chain, messages: list[dict[str, Any]]) -> AsyncCall:
    """:func:`appender` for the async store."""

    async def call() -> None:
        result = await store.append(chain.chat_id, "main", messages, expected_head=chain.head)
        chain.head = result.head_message_id
        chain.length += len(messages)

    return call


def uncached_appender(store: Any, chain: Chain, messages: list[dict[str, Any]]) -> SyncCall:
    """:func:`appender` on a store that does not know the chat's owner yet.

    That is every first write to a chat from a new store (a short-lived worker): the index
    commands then follow the script instead of riding in its round trip.
    """
    append = appender(store, chain, messages)

    def call() -> None:
        store.state.owners.forget(chain.chat_id)
        append()

    return call


def chain_reader(store: Any, chain: Chain) -> Callable[[], Any]:
    """Reads the whole chain by its head (sync or async: the caller awaits when needed)."""
    return lambda: store.get_chain(chain.chat_id, chain.head)


#: Branches in the chat of the "many branches" append. Edits (``on_existing="fork"``) and
#: conflict forks each add one; an append should cost the same whatever their number.
MANY_BRANCHES = 1_000


def with_branches(store: Any, chain: Chain, count: int) -> Chain:
    """Give ``chain``'s chat ``count`` branches in all (``main`` included), none active."""
    for index in range(count - 1):
        store.create_branch(chain.chat_id, chain.head, name=f"side-{index}", activate=False)
    return chain


def engine_on(store: Any, chain: Chain) -> ctxstore.ContextEngine:
    """A context engine on ``chain``'s chat with a small system prompt, opened and warm."""
    engine = ctxstore.ContextEngine(store=store, chat_id=chain.chat_id, user_id=USER_ID)
    engine.set(ctxstore.role("You are a concise assistant."), ctxstore.hint("Answer briefly."))
    engine.resolve()
    return engine


def engine_saver(engine: ctxstore.ContextEngine, messages: list[dict[str, Any]]) -> SyncCall:
    """One turn's save: the pending messages set, then saved in one append."""

    def call() -> None:
        engine.set(*(ctxstore.message(item) for item in messages))
        engine.save()

    return call


def engine_scenarios(store: Any, plan: Plan, stats_client: Any) -> list[Latency]:
    """resolve() and save() of the context engine on a 100-message chat (the issue's figures).

    "new engine" is a request handler that makes an engine per request: its resolve() opens
    the chat (upsert and owner check) in the same script that reads it.
    """
    read = build_chain(store, "engine-resolve-100", 100, seed=100)
    written = build_chain(store, "engine-save-100", 100, seed=101)
    warm = engine_on(store, read)
    saver = engine_on(store, written)
    return [
        measure("engine.resolve 100 msgs", "redis", warm.resolve, plan.branch_100, stats_client),
        measure(
            "engine.resolve, new engine",
            "redis",
            lambda: ctxstore.ContextEngine(
                store=store, chat_id=read.chat_id, user_id=USER_ID
            ).resolve(),
            plan.branch_100,
            stats_client,
        ),
        measure(
            "engine.save 1 msg, 100+ msgs",
            "redis",
            engine_saver(saver, short_turns(1)),
            plan.append,
            stats_client,
        ),
        measure(
            "engine.save 2 msgs, 100+ msgs",
            "redis",
            engine_saver(saver, short_turns(2)),
            plan.append_batch,
            stats_client,
        ),
    ]


def sync_redis(store: Any, chains: Chains, plan: Plan, stats_client: Any) -> list[Latency]:
    """PING, appends, chain reads and load_branch through the sync store."""
    one = build_chain(store, "append-1", 0)
    uncached = build_chain(store, "append-1-uncached", 0)
    ten = build_chain(store, "append-10", 0)
    branched = with_branches(store, build_chain(store, "append-1-branched", 1), MANY_BRANCHES)
    return [
        measure("PING (baseline)", "redis", store.client.ping, plan.ping, stats_client),
        measure(
            "append 1 msg", "redis", appender(store, one, short_turns(1)), plan.append, stats_client
        ),
        measure(
            "append 1 msg, owner not cached",
            "redis",
            uncached_appender(store, uncached, short_turns(1)),
            plan.append,
            stats_client,
        ),
        measure(
            f"append 1 msg, {MANY_BRANCHES:,} branches",
            "redis",
            appender(store, branched, short_turns(1)),
            plan.append,
            stats_client,
        ),
        measure(
            "append 10 msgs",
            "redis",
            appender(store, ten, short_turns(10)),
            plan.append_batch,
            stats_client,
        ),
        measure(
            "get_chain 1k msgs",
            "redis",
            chain_reader(store, chains.thousand),
            plan.chain_1k,
            stats_client,
        ),
        measure(
            "get_chain 10k msgs",
            "redis",
            chain_reader(store, chains.ten_thousand),
            plan.chain_10k,
            stats_client,
        ),
        measure(
            "load_branch 100 msgs",
            "redis",
            lambda: store.load_branch(chains.hundred.chat_id),
            plan.branch_100,
            stats_client,
        ),
    ]


async def async_redis(
    url: str, namespace: str, chains: Chains, plan: Plan, stats_client: Any
) -> list[Latency]:
    """PING, append and the 1,000-message read through the async store (run in asyncio.run)."""
    store = ctxstore.connect_async(url, namespace=namespace)
    try:
        one = Chain("async-append-1", None, 0)
        await store.upsert_chat(one.chat_id, USER_ID)
        return [
            await measure_async(
                "PING (baseline)", "redis async", store.client.ping, plan.ping, stats_client
            ),
            await measure_async(
                "append 1 msg",
                "redis async",
                async_appender(store, one, short_turns(1)),
                plan.append,
                stats_client,
            ),
            await measure_async(
                "get_chain 1k msgs",
                "redis async",
                chain_reader(store, chains.thousand),
                plan.chain_1k,
                stats_client,
            ),
        ]
    finally:
        await store.close()


def embedded(plan: Plan) -> list[Latency]:
    """Append and the 1,000-message read on ``memory://`` (fakeredis running the same Lua)."""
    store = ctxstore.connect("memory://")
    try:
        one = build_chain(store, "append-1", 0)
        thousand = build_chain(store, "chain-1k", 1_000, seed=1_000)
        return [
            measure(
                "append 1 msg", "memory", appender(store, one, short_turns(1)), plan.embedded_append
            ),
            measure(
                "get_chain 1k msgs", "memory", chain_reader(store, thousand), plan.embedded_chain_1k
            ),
        ]
    finally:
        store.close()
