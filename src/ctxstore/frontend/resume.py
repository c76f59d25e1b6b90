"""A ``chat()`` answer for a client that reconnects (``useChat({resume: true})``), and the stop
that another request (another worker) can give it.

The answer's chunks are mirrored into its Redis stream as JSON lines; :func:`resume_sse`
replays them as server-sent events, from the start or after the last event id a client saw
(each piece's last event carries the piece's id), following the answer live until it ends.
A stopped answer ends with an ``abort`` chunk, a failed one with the ``error`` chunk its writer
wrote; ``data: [DONE]`` comes last either way. :func:`stop_stream` closes the answer's stream:
its writer finds it closed at its next write and saves what it streamed, marked aborted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from ctxstore._core.ops import streams as answer_stream
from ctxstore.errors import ChatNotFoundError, StreamFailedError
from ctxstore.frontend.protocol import SSE_DONE, chunk_json
from ctxstore.models import StreamPiece
from ctxstore.store.async_store import AsyncStore
from ctxstore.store.scoped import AsyncUserStore, UserStore, acting_as
from ctxstore.store.sync_store import Store

__all__ = ["STOPPED_REASON", "aresume_sse", "astop_stream", "resume_sse", "stop_stream"]

#: Why a stopped answer's stream ended, as its readers are told.
STOPPED_REASON = "stopped by the user"
#: How the reasons of a stopped (not failed) answer begin: its readers get an ``abort`` chunk.
#: A failed answer's readers got its ``error`` chunk from the stream itself.
_STOPPED_REASONS = ("stopped", "cancelled")


def resume_sse(
    store: Store | UserStore,
    chat_id: str,
    stream_id: str | None = None,
    *,
    after: str | None = None,
    user_id: str | None = None,
) -> Iterator[str] | None:
    """The server-sent events of an answer's stream (``stream_id``, default: the answer being
    streamed on the chat's active branch) after the event id ``after`` (default: from the
    start); None when no answer is being streamed (or the chat does not exist). ``store``: a
    user's handle (``store.for_user(user_id)``), or a store with ``user_id``, or an admin
    handle (any owner)."""
    runs_on, user_id = acting_as("resume_sse()", store, user_id, Store, any_owner=True)
    if stream_id is None:
        try:
            stream_id = runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return None  # a chat that does not exist streams nothing
        if stream_id is None:
            return None
    return _replay(runs_on.read_stream(chat_id, stream_id, after=after, user_id=user_id))


def _replay(pieces: Iterator[StreamPiece]) -> Iterator[str]:
    try:
        for piece in pieces:
            yield from events(piece)
    except StreamFailedError as failed:
        if failed.reason.startswith(_STOPPED_REASONS):
            yield abort_event(failed.reason)
    finally:
        close = getattr(pieces, "close", None)
        if close is not None:
            close()
    yield SSE_DONE


async def aresume_sse(
    store: AsyncStore | AsyncUserStore,
    chat_id: str,
    stream_id: str | None = None,
    *,
    after: str | None = None,
    user_id: str | None = None,
) -> AsyncIterator[str] | None:
    """The async form of :func:`resume_sse` (awaited: None when nothing is being streamed)."""
    runs_on, user_id = acting_as("aresume_sse()", store, user_id, AsyncStore, any_owner=True)
    if stream_id is None:
        try:
            stream_id = await runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return None
        if stream_id is None:
            return None
    return _areplay(runs_on.read_stream(chat_id, stream_id, after=after, user_id=user_id))


async def _areplay(pieces: AsyncIterator[StreamPiece]) -> AsyncIterator[str]:
    try:
        async for piece in pieces:
            for event in events(piece):
                yield event
    except StreamFailedError as failed:
        if failed.reason.startswith(_STOPPED_REASONS):
            yield abort_event(failed.reason)
    finally:
        await pieces.aclose()  # type: ignore[attr-defined]
    yield SSE_DONE


def events(piece: StreamPiece) -> list[str]:
    """The events of one piece: a chunk per line, the piece's id on its last event."""
    lines = [line for line in piece.text.split("\n") if line]
    out = [f"data: {line}\n\n" for line in lines]
    if out:
        out[-1] = f"id: {piece.id}\n{out[-1]}"
    return out


def abort_event(reason: str) -> str:
    return f"data: {chunk_json({'type': 'abort', 'reason': reason})}\n\n"


def stop_stream(
    store: Store | UserStore,
    chat_id: str,
    stream_id: str | None = None,
    *,
    user_id: str | None = None,
) -> bool:
    """Stop the answer being streamed (``stream_id``, default: the one on the chat's active
    branch), from any worker: its writer saves what it streamed, marked aborted. False when
    no such answer is live. ``store`` as for :func:`resume_sse`."""
    runs_on, user_id = acting_as("stop_stream()", store, user_id, Store, any_owner=True)
    if stream_id is None:
        try:
            stream_id = runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return False
        if stream_id is None:
            return False
    return bool(runs_on.run(_stop_op(runs_on, chat_id, stream_id, user_id)))


async def astop_stream(
    store: AsyncStore | AsyncUserStore,
    chat_id: str,
    stream_id: str | None = None,
    *,
    user_id: str | None = None,
) -> bool:
    """The async form of :func:`stop_stream`."""
    runs_on, user_id = acting_as("astop_stream()", store, user_id, AsyncStore, any_owner=True)
    if stream_id is None:
        try:
            stream_id = await runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return False
        if stream_id is None:
            return False
    return bool(await runs_on.run(_stop_op(runs_on, chat_id, stream_id, user_id)))


def _stop_op(store: Store | AsyncStore, chat_id: str, stream_id: str, user_id: str | None) -> Any:
    return answer_stream.end_stream(
        store.state,
        chat_id,
        stream_id,
        done=False,
        detail=STOPPED_REASON,
        keep_ms=int(answer_stream.DEFAULT_STREAM_TTL * 1000),
        user_id=user_id,
    )
