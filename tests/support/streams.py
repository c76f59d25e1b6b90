"""Helpers for answer streams: read them and consume streamed turns through either shell, and
model streams that misbehave on purpose (slow, failing midway)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import ctxstore
from tests.support.facade import SyncOverAsync


def read_pieces(
    store: Any,
    chat_id: str,
    stream_id: str,
    *,
    after: str | None = None,
    user_id: str | None = None,
    limit: int | None = None,
) -> list[ctxstore.models.StreamPiece]:
    """The pieces ``read_stream`` yields (at most ``limit``, then the reader stops), through
    the sync store or a SyncOverAsync-wrapped async one. Errors propagate."""
    if isinstance(store, SyncOverAsync):

        async def collect() -> list[ctxstore.models.StreamPiece]:
            pieces: list[ctxstore.models.StreamPiece] = []
            reading = store.wrapped.read_stream(chat_id, stream_id, after=after, user_id=user_id)
            try:
                async for piece in reading:
                    pieces.append(piece)
                    if limit is not None and len(pieces) >= limit:
                        break
            finally:
                await reading.aclose()
            return pieces

        result: list[ctxstore.models.StreamPiece] = store._loop.run(collect())
        return result
    pieces = []
    reading = store.read_stream(chat_id, stream_id, after=after, user_id=user_id)
    try:
        for piece in reading:
            pieces.append(piece)
            if limit is not None and len(pieces) >= limit:
                break
    finally:
        reading.close()
    return pieces


def chunk_text(chunk: Any) -> str:
    """The text of a litellm stream chunk ("" for none)."""
    if not chunk.choices:
        return ""
    return chunk.choices[0].delta.content or ""


def consume(
    turn: Any,
    engine: Any,
    *,
    stop_after: int | None = None,
    each: Callable[[int], None] | None = None,
) -> str:
    """Iterate a streamed turn (sync, or async through the engine's SyncOverAsync facade) and
    return the text of its chunks; with ``stop_after``, break out after that many chunks (the
    async iterator is closed explicitly then, as asyncio would on its own a moment later).
    ``each(index)`` runs after each chunk."""
    if isinstance(engine, SyncOverAsync):

        async def run() -> str:
            text = ""
            iterator = turn.__aiter__()
            try:
                index = 0
                async for chunk in iterator:
                    text += chunk_text(chunk)
                    if each is not None:
                        each(index)
                    index += 1
                    if stop_after is not None and index >= stop_after:
                        break
            finally:
                await iterator.aclose()
            return text

        result: str = engine._loop.run(run())
        return result
    text = ""
    for index, chunk in enumerate(turn):
        text += chunk_text(chunk)
        if each is not None:
            each(index)
        if stop_after is not None and index + 1 >= stop_after:
            break
    return text


class ModelStreams:
    """Wraps litellm's completion / acompletion so their streams misbehave: ``delay`` seconds
    before each chunk, ``fail_after`` chunks then an error, ``on_chunk(index)`` before each.
    Records each request sent."""

    def __init__(self) -> None:
        self.delay = 0.0
        self.fail_after: int | None = None
        self.on_chunk: Callable[[int], None] | None = None
        self.requests: list[dict[str, Any]] = []

    def install(self, monkeypatch: Any) -> ModelStreams:
        import litellm

        original, original_async = litellm.completion, litellm.acompletion

        def completion(**kwargs: Any) -> Any:
            self.requests.append(kwargs)
            response = original(**kwargs)
            return self._sync(response) if kwargs.get("stream") else response

        async def acompletion(**kwargs: Any) -> Any:
            self.requests.append(kwargs)
            response = await original_async(**kwargs)
            return self._async(response) if kwargs.get("stream") else response

        monkeypatch.setattr(litellm, "completion", completion)
        monkeypatch.setattr(litellm, "acompletion", acompletion)
        return self

    def _before(self, index: int) -> None:
        if self.fail_after is not None and index >= self.fail_after:
            raise RuntimeError(f"the model failed after {index} chunks")
        if self.on_chunk is not None:
            self.on_chunk(index)

    def _sync(self, stream: Any) -> Iterator[Any]:
        for index, chunk in enumerate(stream):
            time.sleep(self.delay)
            self._before(index)
            yield chunk

    async def _async(self, stream: Any) -> AsyncIterator[Any]:
        import asyncio

        index = 0
        async for chunk in stream:
            await asyncio.sleep(self.delay)
            self._before(index)
            index += 1
            yield chunk
