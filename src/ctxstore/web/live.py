"""The live page's events: an answer being streamed now, as server-sent events.

``answer_events`` waits for the chat's active branch to stream an answer (checking once a
second, with a comment line as keep-alive), then sends each piece as it arrives
(``event: piece``, ``id: <stream id> <piece id>``, the text as JSON in ``data``) and
``event: done`` (or ``event: failed``) at its end, and waits for the next. A browser that
reconnects sends the last id it saw (``Last-Event-ID``) and the stream goes on after that
piece; a page loaded anew reads the answer from its first piece, so it shows the text so far
and then what follows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from ctxstore.errors import CtxStoreError, StreamFailedError
from ctxstore.models import StreamPiece
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.sync_store import Store

#: Seconds between two looks for an answer being streamed.
POLL_S = 1.0


async def answer_events(
    store: Store | AsyncStore, chat_id: str, stream_id: str | None, after: str | None
) -> AsyncIterator[bytes]:
    """The event stream (see the module)."""
    if after and " " in after:
        stream_id, after = after.split(" ", 1)
    while True:
        current = stream_id or await _active(store, chat_id)
        if current is None:
            yield b": waiting for an answer\n\n"
            await asyncio.sleep(POLL_S)
            continue
        yield _event("stream", current, None)
        try:
            async for piece in _pieces(store, chat_id, current, after):
                yield _event("piece", piece.text, f"{current} {piece.id}")
        except StreamFailedError as error:
            yield _event("failed", str(error), None)
        except CtxStoreError as error:
            yield _event("failed", str(error), None)
            return
        else:
            yield _event("done", current, None)
        stream_id, after = None, None
        while await _active(store, chat_id) == current:  # the writer ends it any moment now
            await asyncio.sleep(POLL_S)


def _event(kind: str, data: str, event_id: str | None) -> bytes:
    lines = [f"event: {kind}", f"data: {json.dumps(data)}"]
    if event_id is not None:
        lines.insert(0, f"id: {event_id}")
    return ("\n".join(lines) + "\n\n").encode()


async def _active(store: Store | AsyncStore, chat_id: str) -> str | None:
    if isinstance(store, AsyncStore):
        return await store.active_stream(chat_id)
    return await asyncio.to_thread(store.active_stream, chat_id)


async def _pieces(
    store: Store | AsyncStore, chat_id: str, stream_id: str, after: str | None
) -> AsyncIterator[Any]:
    if isinstance(store, AsyncStore):
        async for piece in store.read_stream(chat_id, stream_id, after=after):
            yield piece
        return
    pieces = store.read_stream(chat_id, stream_id, after=after)

    def following() -> list[StreamPiece]:
        return [piece for piece in (next(pieces, None),) if piece is not None]

    while found := await asyncio.to_thread(following):
        yield found[0]
