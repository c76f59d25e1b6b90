"""The web console's server time: the chats page over 10,000 chats, the chat page of a
10,000-message chat, and what each sends to Redis.

    python bench/web_pages.py [--chats 10000] [--messages 10000] [--rounds 7] [--per-round 20]

Starts its own redis-server (local_redis.py), creates the chats through the store, then, in
rounds that rotate which goes first, times each page through Starlette's test client (the whole
server side: routing, the reads, rendering; no network) against two floors measured in the same
rounds: a ``PING`` and an ``LRANGE`` of 50 records of the long chat's log, both through the same
redis-py client. Medians of the rounds, in milliseconds, and the page/floor ratios. Then one
request of each page with ``INFO commandstats`` reset before it: the commands Redis ran,
scripts' commands included, to show the graph window reads only what it draws.
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

from starlette.testclient import TestClient

import ctxstore
import ctxstore.web
from ctxstore.models import NewMessage

from local_redis import local_redis


def seed(store: ctxstore.Store, chats: int, messages: int) -> str:
    client = store.client
    started = time.perf_counter()
    for i in range(chats - 1):
        store.upsert_chat(f"chat-{i:06d}", f"user-{i % 100}")
    store.upsert_chat("long", "user-0")
    store.update_chat("long", title="A long chat")
    head = None
    for start in range(0, messages, 2_000):
        batch = [
            NewMessage({"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " * 20})
            for i in range(start, min(messages, start + 2_000))
        ]
        head = store.append("long", "main", batch, expected_head=head).head_message_id
    print(f"seeded {chats} chats and a {messages}-message chat in "
          f"{time.perf_counter() - started:.1f} s")  # fmt: skip
    client.ping()
    return "long"


def timed(run: Callable[[], Any], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        run()
    return (time.perf_counter() - started) / count * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chats", type=int, default=10_000)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--per-round", type=int, default=20)
    args = parser.parse_args()
    with local_redis() as server:
        store = ctxstore.connect(
            server.url, namespace="bench"
        ).admin()  # an operator's benchmark: every user's chats
        chat = seed(store, args.chats, args.messages)
        log = store.state.keyspace.chat(chat).key("log")
        raw = store.client
        with TestClient(ctxstore.web.app(store)) as client:

            def chats_page() -> None:
                assert client.get("/n/bench/").status_code == 200

            def chat_page() -> None:
                assert client.get("/n/bench/chat", params={"id": chat}).status_code == 200

            kinds: dict[str, Callable[[], Any]] = {
                "PING": raw.ping,
                "LRANGE 50": lambda: raw.lrange(log, 0, 49),
                "chats page": chats_page,
                "chat page": chat_page,
            }
            for run in kinds.values():
                run()  # warm: scripts loaded, templates compiled
            results: dict[str, list[float]] = {name: [] for name in kinds}
            names = list(kinds)
            for round_ in range(args.rounds):
                order = names[round_ % len(names) :] + names[: round_ % len(names)]
                for name in order:
                    results[name].append(timed(kinds[name], args.per_round))
            medians = {name: statistics.median(times) for name, times in results.items()}
            print(f"{'':<12} {'ms':>8} {'x PING':>8} {'x LRANGE 50':>12}")
            for name, value in medians.items():
                print(f"{name:<12} {value:8.2f} {value / medians['PING']:8.1f} "
                      f"{value / medians['LRANGE 50']:12.1f}")  # fmt: skip
            for name in ("chats page", "chat page"):
                raw.config_resetstat()
                kinds[name]()
                stats = raw.info("commandstats")
                ran = {key.removeprefix("cmdstat_"): value["calls"] for key, value in stats.items()}
                ran.pop("config|resetstat", None)
                print(f"{name}: " + ", ".join(f"{k} {v}" for k, v in sorted(ran.items())))


if __name__ == "__main__":
    main()
