"""A store shared by more concurrent calls than its pool has connections: the calls wait for a
free connection instead of failing (redis-py's own pool raises "Too many connections" past its
100), and the pool never opens more than its ``max_connections``."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import redis

import ctxstore
from ctxstore.store.connection import DEFAULT_MAX_CONNECTIONS


def clients_of(url: str, name: str) -> int:
    probe = redis.Redis.from_url(url)
    try:
        return sum(1 for client in probe.client_list() if client.get("name") == name)
    finally:
        probe.close()


def test_an_async_store_runs_more_concurrent_calls_than_connections(
    redis_server: Any, namespace: str
) -> None:
    calls = DEFAULT_MAX_CONNECTIONS * 3

    async def main() -> int:
        async with ctxstore.connect_async(redis_server.url, namespace=namespace) as store:
            alice = store.for_user("alice")

            async def one(number: int) -> None:
                await alice.upsert_chat(f"c{number}")
                await alice.append(
                    f"c{number}", "main", [{"role": "user", "content": "hi"}], expected_head=None
                )

            await asyncio.gather(*(one(number) for number in range(calls)))
            return len(await alice.list_chats(limit=calls + 10))

    assert asyncio.run(main()) == calls


def test_a_store_never_opens_more_connections_than_its_max(
    redis_server: Any, namespace: str
) -> None:
    name = f"pool-{namespace}"
    store = ctxstore.connect(
        redis_server.url,
        namespace=namespace,
        redis_options={"max_connections": 2, "client_name": name},
    )
    alice = store.for_user("alice")
    alice.upsert_chat("c1")
    seen: list[int] = []

    def one(number: int) -> None:
        alice.get_chat("c1")
        if number % 10 == 0:
            seen.append(clients_of(redis_server.url, name))

    with ThreadPoolExecutor(max_workers=16) as threads:
        list(threads.map(one, range(200)))
    store.close()
    assert seen
    assert max(seen) <= 2
