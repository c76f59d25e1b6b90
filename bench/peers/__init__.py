"""Other designs for the same job, driven through their public APIs on the same server.

Each module defines one peer: a class with ``append(message)`` (one chat message dict), ``load()``
(every message of the conversation, decoded, root first where the design keeps an order),
``close()``, and optionally ``floors()`` (extra floor calls that share its client's overhead).
``open_peer(url, directory)`` builds it, and raises ``PeerUnavailableError`` with a one-line reason
when its package is missing or does not work here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol


class PeerUnavailableError(Exception):
    """The peer cannot run here; the message says why, in one line."""


class Peer(Protocol):
    name: str

    def append(self, message: dict[str, str]) -> object: ...

    def load(self) -> list[Any]: ...

    def floors(self) -> dict[str, Callable[[], object]]: ...

    def close(self) -> None: ...
