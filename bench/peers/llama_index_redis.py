"""llama-index's ``RedisChatStore`` (llama-index-storage-chat-store-redis): a Redis list.

``add_message`` is an ``RPUSH`` of the message as JSON; ``get_messages`` an ``LRANGE`` of the
whole list, each validated into a pydantic ``ChatMessage``. It needs no Redis module.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers import PeerUnavailableError

NAME = "llama-index RedisChatStore"
PACKAGE = "llama-index-storage-chat-store-redis"
_KEY = "bench-peer:llama"


class LlamaPeer:
    name = NAME

    def __init__(self, url: str) -> None:
        try:
            from llama_index.core.llms import ChatMessage
            from llama_index.storage.chat_store.redis import RedisChatStore
        except ImportError as error:
            raise PeerUnavailableError(f"{PACKAGE} is not installed ({error.name})") from error
        self._message = ChatMessage
        self._store = RedisChatStore(redis_url=url)
        self._store.delete_messages(_KEY)

    def append(self, message: dict[str, str]) -> object:
        self._store.add_message(
            _KEY, self._message(role=message["role"], content=message["content"])
        )
        return None

    def load(self) -> list[Any]:
        return self._store.get_messages(_KEY)

    def floors(self) -> dict[str, Callable[[], object]]:
        return {}

    def close(self) -> None:
        self._store.delete_messages(_KEY)


def open_peer(url: str, directory: Path) -> LlamaPeer:  # noqa: ARG001 - server only
    return LlamaPeer(url)
