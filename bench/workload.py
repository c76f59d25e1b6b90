"""The data the benchmark stores: 200-character chat turns and chains built from them.

Content is word-like text (not one repeated byte) so msgpack and Redis see realistic strings,
and it comes from a fixed seed so every run, and every peer, stores the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import msgpack

_VOCABULARY = (
    "the context window holds every message the model sees so a branch must load fast "
    "agent tool call result summary user assistant system reply request answer question "
    "redis script chain head parent graph store append read write latency worker queue"
)
_WORDS = tuple(_VOCABULARY.split())

USER_ID = "bench-user"
#: Characters of content per message.
CONTENT_CHARS = 200
#: Messages per append while building chains (well under the store's 10,000 per append).
BUILD_BATCH = 1_000
#: Distinct messages generated; longer chains repeat them (each stored message gets its own id).
_DISTINCT = 10_000


def text_of_length(rng: random.Random, length: int = CONTENT_CHARS) -> str:
    """Words drawn from a small vocabulary, cut to exactly ``length`` characters."""
    parts: list[str] = []
    size = 0
    while size < length:
        word = rng.choice(_WORDS)
        parts.append(word)
        size += len(word) + 1
    return " ".join(parts)[:length]


@lru_cache(maxsize=1)
def _corpus() -> tuple[dict[str, str], ...]:
    rng = random.Random(200)
    return tuple(
        {"role": "user" if index % 2 == 0 else "assistant", "content": text_of_length(rng)}
        for index in range(_DISTINCT)
    )


def messages(count: int, start: int = 0) -> list[dict[str, str]]:
    """``count`` messages of the fixed corpus from position ``start`` (fresh dicts)."""
    corpus = _corpus()
    return [dict(corpus[(start + index) % _DISTINCT]) for index in range(count)]


def payload(message: dict[str, Any]) -> bytes:
    """The message as msgpack: what the floors push and read, and the memory probe's unit."""
    return bytes(msgpack.packb(message))


def mean_payload_bytes(sample: Sequence[dict[str, Any]]) -> float:
    return sum(len(payload(item)) for item in sample) / len(sample)


def batches(count: int, size: int, start: int = 0) -> Iterator[list[dict[str, str]]]:
    """The corpus from ``start`` in lists of at most ``size`` messages, ``count`` in all."""
    done = 0
    while done < count:
        step = min(size, count - done)
        yield messages(step, start + done)
        done += step


@dataclass
class Chat:
    """A chat whose ``main`` branch holds ``length`` messages ending at ``head``."""

    chat_id: str
    head: str | None = None
    length: int = 0


def build_chat(store: Any, chat_id: str, length: int, batch: int = BUILD_BATCH) -> Chat:
    """A new chat holding one ``length``-message chain on ``main``, built in large appends."""
    store.upsert_chat(chat_id, USER_ID)
    chat = Chat(chat_id)
    for part in batches(length, batch):
        result = store.append(chat_id, "main", part, expected_head=chat.head, user_id=USER_ID)
        chat.head = result.head_message_id
        chat.length += len(part)
    return chat


@dataclass
class ChatPool:
    """Chats of one length, handed out round-robin so none grows much past that length.

    A timed loop that appends grows its chat by one message per iteration: 1,000 saves on a
    10-message chat would measure a 500-message chat on average. Each chat here takes at most
    ``per_chat`` appends (a tenth of its length, at least one), so "length N" stays within 10 %.
    """

    chats: list[Chat]
    per_chat: int
    _next: int = field(default=0)

    def take(self) -> Chat:
        chat = self.chats[self._next % len(self.chats)]
        self._next += 1
        return chat


def appends_per_chat(length: int) -> int:
    return max(1, length // 10)


def build_pool(store: Any, prefix: str, length: int, calls: int) -> ChatPool:
    """Enough chats of ``length`` messages for ``calls`` appends within the 10 % bound."""
    per_chat = appends_per_chat(length)
    count = -(-calls // per_chat)
    return ChatPool(
        [build_chat(store, f"{prefix}-{index}", length) for index in range(count)], per_chat
    )
