"""Chats that cross a compaction threshold, for the worker tests."""

from __future__ import annotations

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
