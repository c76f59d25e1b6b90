"""Another worker that appends to a chat between two reads of the measured store.

A warm read is the common case of a multi-worker agent: this process read the chat before, and
since then another worker added a message. To be honest about caches, that worker must not
share this process's memory, so it is a separate process (spawned, with its own store) talking
over a pipe. The embedded store cannot be reached from another process; there the other worker
is a second store of this process on the same ``memory://name``.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any, Protocol

from stores import NAMESPACE, open_store
from workload import USER_ID, Chat, messages


class OtherWriter(Protocol):
    def append_one(self, chat: Chat) -> None: ...

    def close(self) -> None: ...


def _serve(url: str, namespace: str, pipe: Connection) -> None:
    """The child's loop: append one message per request, answer with the new head."""
    store = open_store(url, namespace=namespace)
    try:
        while True:
            request = pipe.recv()
            if request is None:
                return
            chat_id, head, index = request
            result = store.append(
                chat_id, "main", messages(1, index), expected_head=head, user_id=USER_ID
            )
            pipe.send(result.head_message_id)
    finally:
        store.close()


class ProcessWriter:
    """An appender in a spawned process (its own interpreter, store and cache)."""

    def __init__(self, url: str, namespace: str = NAMESPACE) -> None:
        context = multiprocessing.get_context("spawn")
        self._pipe, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(url, namespace, child), daemon=True)
        self._process.start()
        child.close()

    def append_one(self, chat: Chat) -> None:
        self._pipe.send((chat.chat_id, chat.head, chat.length))
        chat.head = self._pipe.recv()
        chat.length += 1

    def close(self) -> None:
        self._pipe.send(None)
        self._process.join(timeout=10)
        if self._process.is_alive():
            self._process.terminate()
            self._process.join()


class StoreWriter:
    """An appender that is a second store of this process (for ``memory://``)."""

    def __init__(self, url: str, namespace: str = NAMESPACE) -> None:
        self._store: Any = open_store(url, namespace=namespace)

    def append_one(self, chat: Chat) -> None:
        result = self._store.append(
            chat.chat_id, "main", messages(1, chat.length), expected_head=chat.head, user_id=USER_ID
        )
        chat.head = result.head_message_id
        chat.length += 1

    def close(self) -> None:
        self._store.close()


def other_writer(url: str, embedded: bool) -> OtherWriter:
    return StoreWriter(url) if embedded else ProcessWriter(url)
