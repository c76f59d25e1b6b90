"""openai-agents' ``RedisSession`` (async): a Redis list of JSON items plus a counter.

Its API is async only, so each call runs to completion on one event loop kept for the whole
scenario (``loop.run_until_complete``); the extra floor ``PING (asyncio)`` is a ping through a
``redis.asyncio`` client on that same loop, so the loop's own cost is on both sides.
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from peers import PeerUnavailableError

NAME = "openai-agents RedisSession"
PACKAGE = "openai-agents[redis]"
#: Where RedisSession lives, newest first (it moved between releases).
_MODULES = ("agents.extensions.memory.redis_session", "agents.extensions.memory")


def _session_class() -> Any:
    reasons = []
    for module in _MODULES:
        try:
            return importlib.import_module(module).RedisSession
        except ModuleNotFoundError as error:
            if error.name in {"agents", "redis"}:
                raise PeerUnavailableError(f"{PACKAGE} is not installed ({error.name})") from error
            reasons.append(f"{module}: {error}")
        except (ImportError, AttributeError) as error:
            reasons.append(f"{module}: {error}")
    raise PeerUnavailableError(f"{PACKAGE}: no RedisSession here ({'; '.join(reasons)})")


class AgentsPeer:
    name = NAME

    def __init__(self, url: str) -> None:
        session_class = _session_class()
        import redis.asyncio

        self._loop = asyncio.new_event_loop()
        self._session = session_class.from_url("peer-chat", url=url, key_prefix="bench-peer")
        self._ping_client = redis.asyncio.Redis.from_url(url)
        self._run(self._session.clear_session())

    def _run(self, work: Any) -> Any:
        return self._loop.run_until_complete(work)

    def append(self, message: dict[str, str]) -> object:
        return self._run(self._session.add_items([message]))

    def load(self) -> list[Any]:
        return list(self._run(self._session.get_items()))

    def floors(self) -> dict[str, Callable[[], object]]:
        return {"PING (asyncio)": lambda: self._run(self._ping_client.ping())}

    def close(self) -> None:
        self._run(self._session.clear_session())
        self._run(self._ping_client.aclose())
        close = getattr(self._session, "close", None)
        if close is not None:
            self._run(close())
        self._loop.close()


def open_peer(url: str, directory: Path) -> AgentsPeer:  # noqa: ARG001 - server only
    return AgentsPeer(url)
