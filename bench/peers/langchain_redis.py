"""langchain-community's ``RedisChatMessageHistory``: one Redis list of JSON messages.

``add_message`` is an ``LPUSH`` of the message as JSON; ``messages`` is an ``LRANGE`` of the
whole list, reversed and turned into LangChain message objects. No branches, no parent links.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers import PeerUnavailableError

NAME = "langchain RedisChatMessageHistory"
PACKAGE = "langchain-community"


class LangchainPeer:
    name = NAME

    def __init__(self, url: str) -> None:
        try:
            from langchain_community.chat_message_histories import RedisChatMessageHistory
            from langchain_core.messages import AIMessage, HumanMessage
        except ImportError as error:
            raise PeerUnavailableError(f"{PACKAGE} is not installed ({error.name})") from error
        self._history = RedisChatMessageHistory("peer-chat", url=url, key_prefix="bench-peer:")
        self._history.clear()
        self._types = {"user": HumanMessage, "assistant": AIMessage}

    def append(self, message: dict[str, str]) -> object:
        self._history.add_message(self._types[message["role"]](content=message["content"]))
        return None

    def load(self) -> list[Any]:
        return list(self._history.messages)

    def floors(self) -> dict[str, Callable[[], object]]:
        return {}

    def close(self) -> None:
        self._history.clear()
        self._history.redis_client.close()


def open_peer(url: str, directory: Path) -> LangchainPeer:  # noqa: ARG001 - server only
    return LangchainPeer(url)
