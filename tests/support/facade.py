"""Run the one store suite through the async store too.

``SyncOverAsync`` wraps an AsyncStore and runs each coroutine on a background event loop, so
every test written against the sync API also exercises the async shell end to end.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Coroutine, Iterator
from typing import Any


class LoopThread:
    """One event loop running in a daemon thread for the whole test session."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self._thread.start()

    def run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=120)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)


def _is_async_handle(value: Any) -> bool:
    from ctxstore.store import AsyncStore, AsyncUserStore

    return isinstance(value, (AsyncStore, AsyncUserStore))


class SyncOverAsync:
    """A sync surface over an async object (a store or an engine), run on a LoopThread."""

    def __init__(self, store: Any, loop: LoopThread) -> None:
        self._store = store
        self._loop = loop

    @property
    def wrapped(self) -> Any:
        return self._store

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._store, name)
        if inspect.isasyncgenfunction(attribute):

            @functools.wraps(attribute)
            def iterate(*args: Any, **kwargs: Any) -> Iterator[Any]:
                items = attribute(*args, **kwargs)
                while True:
                    try:
                        yield self._loop.run(items.__anext__())
                    except StopAsyncIteration:
                        return

            return iterate
        if inspect.iscoroutinefunction(attribute):

            @functools.wraps(attribute)
            def call(*args: Any, **kwargs: Any) -> Any:
                return self._loop.run(attribute(*args, **kwargs))

            return call
        if callable(attribute):

            @functools.wraps(attribute)
            def plain(*args: Any, **kwargs: Any) -> Any:
                result = attribute(*args, **kwargs)
                if hasattr(result, "__anext__"):  # a method that returns an async iterator
                    return self._iterate(result)
                if result is self._store:
                    return self  # keep chaining on the facade
                if _is_async_handle(result):  # store.admin(), store.for_user(): wrapped too
                    return SyncOverAsync(result, self._loop)
                return result

            return plain
        return attribute

    def _iterate(self, items: Any) -> Iterator[Any]:
        while True:
            try:
                yield self._loop.run(items.__anext__())
            except StopAsyncIteration:
                return
