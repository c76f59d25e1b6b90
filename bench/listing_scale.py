"""How a chat listing scales with the namespace: a whole listing, a deep offset, cursor pages.

    python bench/listing_scale.py                 # 100,000 chats (about a minute to create)
    python bench/listing_scale.py --chats 20000

Starts its own redis-server (see local_redis.py), creates the chats through the store
(``upsert_chat``), then times, each a few times (the median is printed, in seconds):

* ``list_chats()``: every chat, read in stretches of the index;
* ``list_chats(limit=50, offset=N - 50)``: the last page by offset;
* every page of ``list_chats_page(limit=200)``, cursor after cursor (when the store has it).

Only the public API is used, so the same script measures an older checkout
(``PYTHONPATH=<checkout>/src python bench/listing_scale.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import ctxstore

from local_redis import local_redis


def timed(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median wall time of ``repeat`` runs, and the last run's result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def all_pages(store: Any, limit: int) -> int:
    count, cursor = 0, None
    while True:
        page = store.list_chats_page(cursor=cursor, limit=limit)
        count += len(page.chats)
        cursor = page.next_cursor
        if cursor is None:
            return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--chats", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    with local_redis() as server:
        store = ctxstore.connect(
            server.url, namespace="bench"
        ).admin()  # an operator's benchmark: every user's chats
        started = time.perf_counter()
        for i in range(options.chats):
            store.upsert_chat(f"chat-{i:06d}", f"user-{i % 100}")
        print(
            f"ctxstore {ctxstore.__file__}\nredis {server.version}: "
            f"{options.chats} chats created in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        seconds, listed = timed(store.list_chats, options.repeat)
        assert len(listed) == options.chats
        print(f"list_chats()                          {seconds:8.3f} s  ({len(listed)} chats)")
        last = max(options.chats - 50, 0)
        seconds, page = timed(lambda: store.list_chats(limit=50, offset=last), options.repeat)
        assert len(page) == options.chats - last
        print(f"list_chats(limit=50, offset={last:<9}) {seconds:8.3f} s")
        if hasattr(store, "list_chats_page"):
            seconds, count = timed(lambda: all_pages(store, 200), options.repeat)
            assert count == options.chats
            print(f"list_chats_page(limit=200), all pages {seconds:8.3f} s")
        store.close()


if __name__ == "__main__":
    main()
