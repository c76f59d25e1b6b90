"""Running ``chat()`` through either shell in a test: the sync engine, or the async one (on the
session's loop thread, through its SyncOverAsync facade)."""

from __future__ import annotations

import asyncio
from typing import Any

import ctxstore
from tests.support.facade import SyncOverAsync


def start_chat(engine: Any, messages: Any, **options: Any) -> Any:
    """``chat()`` on a sync engine, ``achat()`` on a wrapped async one (the stream comes back
    wrapped, so ``collect`` reads both alike)."""
    options.setdefault("model", "gpt-4o-mini")
    if isinstance(engine, SyncOverAsync):
        stream = engine._loop.run(ctxstore.achat(engine.wrapped, messages, **options))
        return AsyncChat(stream, engine._loop)
    return ctxstore.chat(engine, messages, **options)


class AsyncChat:
    """An AsyncChatStream read from sync test code."""

    def __init__(self, stream: Any, loop: Any) -> None:
        self.stream = stream
        self._loop = loop

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)

    def collect(self, limit: int | None = None) -> list[dict[str, Any]]:
        async def run() -> list[dict[str, Any]]:
            chunks: list[dict[str, Any]] = []
            iterator = self.stream.__aiter__()
            try:
                async for chunk in iterator:
                    chunks.append(chunk)
                    if limit is not None and len(chunks) >= limit:
                        break
            finally:
                await iterator.aclose()
            return chunks

        result: list[dict[str, Any]] = self._loop.run(run())
        return result

    def sse(self) -> list[str]:
        async def run() -> list[str]:
            return [event async for event in self.stream.sse()]

        result: list[str] = self._loop.run(run())
        return result

    def close(self) -> None:
        self._loop.run(self.stream.aclose())

    def __enter__(self) -> AsyncChat:
        return self

    def __exit__(self, *_exc: object) -> None:
        async def leave() -> None:
            await self.stream.__aexit__(None, None, None)

        self._loop.run(leave())


def collect(stream: Any, limit: int | None = None) -> list[dict[str, Any]]:
    """The chunks of a chat stream (at most ``limit``: then the reader stops, as a client that
    goes away does)."""
    if isinstance(stream, AsyncChat):
        return stream.collect(limit)
    chunks: list[dict[str, Any]] = []
    iterator = iter(stream)
    try:
        for chunk in iterator:
            chunks.append(chunk)
            if limit is not None and len(chunks) >= limit:
                break
    finally:
        iterator.close()  # type: ignore[attr-defined]
    return chunks


def sse(stream: Any) -> list[str]:
    if isinstance(stream, AsyncChat):
        return stream.sse()
    return list(stream.sse())


def resume_events(store: Any, stream_id: str | None, *, after: str | None = None) -> list[str]:
    """``resume_sse`` (or ``aresume_sse`` on a wrapped async store), read whole; [] when
    nothing is being streamed."""
    if isinstance(store, SyncOverAsync):

        async def run() -> list[str]:
            events = await ctxstore.frontend.aresume_sse(
                store.wrapped, "c1", stream_id, after=after
            )
            return [] if events is None else [event async for event in events]

        result: list[str] = store._loop.run(run())
        return result
    events = ctxstore.resume_sse(store, "c1", stream_id, after=after)
    return [] if events is None else list(events)


def cancel_reading(stream: Any, loop: Any, *, after: int, repeat: bool = False) -> None:
    """Read an AsyncChatStream in a task on ``loop`` and cancel the task after ``after``
    chunks: once, or (``repeat``) again at every turn of the loop until it ends, as anyio's
    cancel scopes do; the task ends cancelled."""
    seen: list[dict[str, Any]] = []

    async def read() -> None:
        async for chunk in stream:
            seen.append(chunk)

    async def run() -> None:
        task = asyncio.ensure_future(read())
        while len(seen) < after:
            await asyncio.sleep(0.002)
        task.cancel()
        while repeat and not task.done():
            task.cancel()
            await asyncio.sleep(0)
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the reading task was not cancelled")

    loop.run(run())
