"""Redis memory per stored message, against the size of the message itself.

A graph store keeps more per message than a list does (parent, depth, ids, timestamps), so the
figure to watch is bytes per message over the message's own msgpack size. It is measured two
ways: ``MEMORY USAGE key SAMPLES 0`` (exact) summed over the chat's keys, found with ``SCAN``
on the documented key pattern, and the server's ``used_memory`` delta (which also sees index
entries, allocator overhead and buffers).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from redis_info import used_memory
from stores import chat_key_pattern
from targets import Target
from workload import USER_ID, batches, mean_payload_bytes, messages

SCENARIO = "memory_per_message"


@dataclass(frozen=True)
class MemoryUse:
    messages: int
    batch: int
    keys: int
    key_bytes: int
    used_memory_delta: int
    payload_bytes: float
    bytes_per_message_keys: float
    bytes_per_message_used_memory: float
    ratio_keys_to_payload: float
    ratio_used_memory_to_payload: float


def _key_bytes(stats: Any, chat_id: str) -> tuple[int, int]:
    total = 0
    keys = 0
    for key in stats.scan_iter(match=chat_key_pattern(chat_id), count=1_000):
        total += int(stats.memory_usage(key, samples=0) or 0)
        keys += 1
    return keys, total


def memory_per_message(target: Target, store: Any, count: int, batch: int) -> MemoryUse:
    """Store ``count`` 200-character messages in a new chat, ``batch`` per append."""
    chat_id = "memory-probe"
    with target.stats_client(chat_id) as stats:
        if stats is None:
            raise RuntimeError("the memory probe needs a Redis server")
        store.client.ping()
        before = used_memory(stats)
        store.upsert_chat(chat_id, USER_ID)
        head = None
        for part in batches(count, batch):
            head = store.append(chat_id, "main", part, expected_head=head).head_message_id
        # A small request after the last append shrinks the client's query buffer, which
        # counts in used_memory and still held the last large request.
        store.client.ping()
        after = used_memory(stats)
        keys, key_bytes = _key_bytes(stats, chat_id)
    payload = mean_payload_bytes(messages(count))
    delta = after - before
    return MemoryUse(
        messages=count,
        batch=batch,
        keys=keys,
        key_bytes=key_bytes,
        used_memory_delta=delta,
        payload_bytes=payload,
        bytes_per_message_keys=key_bytes / count,
        bytes_per_message_used_memory=delta / count,
        ratio_keys_to_payload=key_bytes / count / payload,
        ratio_used_memory_to_payload=delta / count / payload,
    )
