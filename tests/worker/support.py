"""Chats that cross a compaction threshold, for the worker tests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ctxstore.models import CompactionTrigger


def grow(
    store: Any, chat: str, count: int, trigger: CompactionTrigger | None, text: str = "{i:010d}"
) -> list[Any]:
    """``count`` one-message saves of ``text`` (formatted with ``i``) on ``chat``'s main branch,
    each with ``trigger``; returns the append results."""
    store.upsert_chat(chat, "alice")
    head, results = None, []
    for i in range(count):
        result = store.append(
            chat,
            "main",
            [{"role": "user", "content": text.format(i=i)}],
            expected_head=head,
            compaction=trigger,
        )
        head = result.head_message_id
        results.append(result)
    return results


@contextlib.contextmanager
def running(worker: Any, *, until: Callable[[], bool] | None = None) -> Iterator[Any]:
    """``worker`` working in a thread of its own (no burst) for the block; ``until``: wait for
    it first (its first heartbeat, a job done). Stopped and joined after the block, as a
    deployment stops it."""
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while until is not None and not until():
            assert thread.is_alive(), "the worker stopped"
            assert time.monotonic() < deadline, "the worker never got there"
            time.sleep(0.02)
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=30)
        assert not thread.is_alive(), "the worker did not stop within 30 s"
