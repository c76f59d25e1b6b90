"""A ``chat()`` answer for a client that reconnects (``useChat({resume: true})``), and the stop
that another request (another worker) can give it.

The answer's chunks are mirrored into its Redis stream as JSON lines; :func:`resume_sse`
replays them as server-sent events, from the start or after the last event id a client saw,
following the answer live until it ends. Every event carries its own id: a piece's last event
the piece's (``<ms>-<seq>``), each event before it ``<piece id>:<k>`` (its index in the piece),
so a client that resumes after any event (``after=``, its ``Last-Event-ID``) gets exactly the
events that followed it, none twice.
A stopped answer ends with an ``abort`` chunk, a failed one with the ``error`` chunk its writer
wrote; ``data: [DONE]`` comes last either way. :func:`stop_stream` closes the answer's stream:
its writer finds it closed at its next write and saves what it streamed, marked aborted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from ctxstore._core.ops import streams as answer_stream
from ctxstore.errors import ChatNotFoundError, StreamFailedError, ValidationError
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
    cursor, skip = resume_point(after)
    if stream_id is None:
        try:
            stream_id = runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return None  # a chat that does not exist streams nothing
        if stream_id is None:
            return None
    return _replay(runs_on.read_stream(chat_id, stream_id, after=cursor, user_id=user_id), skip)


#: The greatest sequence number of an entry id (Redis's, 2^64 - 1).
_LAST_SEQUENCE = 2**64 - 1


def resume_point(after: str | None) -> tuple[str | None, tuple[str, int] | None]:
    """Where a read resumes for ``after``, an event id: the piece id to read after, and, for an
    event inside a piece (``<piece id>:<k>``), that piece and how many of its events the
    client has, so the read starts at that piece and its first ``k + 1`` events are skipped."""
    if after is None or ":" not in after:
        return after, None
    piece, _, index = after.rpartition(":")
    milliseconds, sequence = answer_stream.check_entry_id(piece, "after")
    if not index.isdigit() or len(index) > 6:
        raise ValidationError(f"after must be an event id of an answer, got {after!r}")
    if sequence > 0:
        before: str | None = f"{milliseconds}-{sequence - 1}"
    elif milliseconds > 0:
        before = f"{milliseconds - 1}-{_LAST_SEQUENCE}"
    else:
        before = None  # the very first entry id there is: read from the start
    return before, (piece, int(index) + 1)


def _skipped(piece: StreamPiece, skip: tuple[str, int] | None) -> list[str]:
    """The events of ``piece`` a resumed client has not seen."""
    out = events(piece)
    if skip is not None and piece.id == skip[0]:
        return out[skip[1] :]
    return out


def _replay(pieces: Iterator[StreamPiece], skip: tuple[str, int] | None) -> Iterator[str]:
    try:
        for piece in pieces:
            yield from _skipped(piece, skip)
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
    cursor, skip = resume_point(after)
    if stream_id is None:
        try:
            stream_id = await runs_on.active_stream(chat_id, user_id=user_id)
        except ChatNotFoundError:
            return None
        if stream_id is None:
            return None
    return _areplay(runs_on.read_stream(chat_id, stream_id, after=cursor, user_id=user_id), skip)


async def _areplay(
    pieces: AsyncIterator[StreamPiece], skip: tuple[str, int] | None
) -> AsyncIterator[str]:
    try:
        async for piece in pieces:
            for event in _skipped(piece, skip):
                yield event
    except StreamFailedError as failed:
        if failed.reason.startswith(_STOPPED_REASONS):
            yield abort_event(failed.reason)
    finally:
        await pieces.aclose()  # type: ignore[attr-defined]
    yield SSE_DONE


def events(piece: StreamPiece) -> list[str]:
    """The events of one piece: a chunk per line, each with its id (see the module)."""
    lines = [line for line in piece.text.split("\n") if line]
    last = len(lines) - 1
    return [
        f"id: {piece.id if index == last else f'{piece.id}:{index}'}\ndata: {line}\n\n"
        for index, line in enumerate(lines)
    ]


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
