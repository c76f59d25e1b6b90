"""The data the benchmark stores: chat turns sized like real ones, and chains built from them.

Content is word-like text (not one repeated byte) so msgpack and Redis see realistic strings,
and it is generated from a fixed seed so every run stores the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

_VOCABULARY = (
    "the context window holds every message the model sees so a branch must load fast "
    "agent tool call result summary user assistant system reply request answer question "
    "redis script chain head parent graph store append read write latency worker queue"
)
_WORDS = tuple(_VOCABULARY.split())

USER_ID = "bench-user"
#: Messages per append while building long chains (well under the store's max_batch).
BUILD_BATCH = 500


@dataclass
class Chain:
    """A chat whose ``main`` branch holds ``length`` messages, ending at ``head``."""

    chat_id: str
    head: str | None
    length: int
    content_bytes: int = 0


def text_of_length(rng: random.Random, length: int) -> str:
    """Words drawn from a small vocabulary, cut to exactly ``length`` characters."""
    parts: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:length]


def turn(rng: random.Random, index: int, low: int, high: int) -> dict[str, Any]:
    """One chat message; roles alternate as in a real conversation."""
    role = "user" if index % 2 == 0 else "assistant"
    return {"role": role, "content": text_of_length(rng, rng.randint(low, high))}


def turns(rng: random.Random, count: int, low: int = 200, high: int = 500) -> list[dict[str, Any]]:
    return [turn(rng, index, low, high) for index in range(count)]


def short_turns(count: int) -> list[dict[str, Any]]:
    """``count`` messages of exactly 200 characters, for the append benchmarks."""
    return turns(random.Random(200), count, low=200, high=200)


def extend(
    store: Any, chain: Chain, rng: random.Random, count: int, batch_size: int = BUILD_BATCH
) -> Chain:
    """Append ``count`` messages of 200-500 characters to ``chain`` in a few large appends."""
    remaining = count
    while remaining:
        batch = turns(rng, min(batch_size, remaining))
        result = store.append(chain.chat_id, "main", batch, expected_head=chain.head)
        chain.head = result.head_message_id
        chain.length += len(batch)
        chain.content_bytes += sum(len(message["content"]) for message in batch)
        remaining -= len(batch)
    return chain


def build_chain(store: Any, chat_id: str, length: int, seed: int = 7) -> Chain:
    """A new chat holding one ``length``-message chain on ``main``."""
    store.upsert_chat(chat_id, USER_ID)
    return extend(store, Chain(chat_id, None, 0), random.Random(seed), length)
