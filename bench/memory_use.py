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
#: The same probe with one message per append: a burst of saves, each a write the resend
#: ledger (the chat's request ring, its ``reqs`` key) remembers.
SCENARIO_BURST = "memory_burst"
#: The chat key that holds the resend ledger.
LEDGER_KEY = "reqs"


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
    #: MEMORY USAGE per chat key (by its last name part: log, tok, reqs, ...).
    bytes_by_key: dict[str, int]

    @property
    def ledger_bytes(self) -> int:
        return self.bytes_by_key.get(LEDGER_KEY, 0)

    @property
    def ratio_keys_without_ledger(self) -> float:
        return (self.key_bytes - self.ledger_bytes) / self.messages / self.payload_bytes


def _key_bytes(stats: Any, chat_id: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for key in stats.scan_iter(match=chat_key_pattern(chat_id), count=1_000):
        name = (key.decode() if isinstance(key, bytes) else str(key)).rsplit(":", 1)[-1]
        found[name] = found.get(name, 0) + int(stats.memory_usage(key, samples=0) or 0)
    return found


def memory_per_message(target: Target, store: Any, count: int, batch: int) -> MemoryUse:
    """Store ``count`` 200-character messages in a new chat, ``batch`` per append."""
    chat_id = f"memory-probe-{batch}"
    with target.stats_client(chat_id) as stats:
        if stats is None:
            raise RuntimeError("the memory probe needs a Redis server")
        store.client.ping()
        before = used_memory(stats)
        store.upsert_chat(chat_id, USER_ID)
        head = None
        for part in batches(count, batch):
            head = store.append(
                chat_id, "main", part, expected_head=head, user_id=USER_ID
            ).head_message_id
        # A small request after the last append shrinks the client's query buffer, which
        # counts in used_memory and still held the last large request.
        store.client.ping()
        after = used_memory(stats)
        by_key = _key_bytes(stats, chat_id)
        keys, key_bytes = len(by_key), sum(by_key.values())
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
        bytes_by_key=by_key,
    )
