"""``engine.stream_turn(model, ...)``: an answer streamed to its caller, mirrored into Redis so a
reader that lost its connection resumes it, and saved with its question when it ends.

:class:`StreamedTurnPlan` is the whole logic, without I/O: a plan (:mod:`ctxstore._base.plans`)
that runs store operations, hands chunks to the caller, and asks its shell for the rest as
effects (pull the model's next chunk, write a batch of text, start or collect the title, drop
what is in flight). :class:`StreamedTurn` drives it with a sync store
and ``litellm.completion``; :class:`AsyncStreamedTurn` with an async store and
``litellm.acompletion``, sending the writes in the background (one at a time, in order) so the
chunks never wait for Redis. Neither decides anything.

What a turn does, in order:

1. (``stream_turn()``) resolve the context like ``engine.resolve()`` (the pending messages last),
   start the answer's stream (its id is :attr:`StreamedTurn.stream_id` from now on), call the
   model with ``stream=True`` and ``stream_options={"include_usage": True}``, and, on the chat's
   first turn, start writing its title from the question (in a thread, or a task), so the title
   costs no time after the answer.
2. (iterating) hand every chunk of the model on as it comes; its text goes to Redis in batches:
   the first text at once, then a write every :data:`FLUSH_SECONDS`, or every
   :data:`FLUSH_CHUNKS` chunks or :data:`FLUSH_CHARS` characters, whichever comes first (a
   write also keeps the stream live when no text comes for a third of ``writer_ttl``).
3. (after the last chunk) write the rest, save the pending messages and the answer in one
   append (``engine.save()``: turns, fences and the anchor rule apply), mark the stream done
   with the answer's id, add the usage (``track_usage``), and set the title when there is one.
   A title that cannot be written is logged, never raised: the answer is saved by then.

An error from the model or the store, the caller's ``break`` / ``close()``, or a cancelled task
ends the turn: nothing is saved, the stream is marked failed (its readers get
:class:`~ctxstore.errors.StreamFailedError`) and the pending messages stay pending. A save that
fails keeps the answer pending too (``engine.save()`` stores it later, on a side branch after a
lost lease). A turn dropped without being read ends when its ``writer_ttl`` passes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Generator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from ctxstore._base.litellm import import_litellm
from ctxstore._base.plans import Effect, Emit, Plan, Run, adrive, aperformer, drive, performer
from ctxstore._base.twins import documented_by
from ctxstore._core.ops import streams as answer_stream
from ctxstore.engine.core import EngineCore
from ctxstore.engine.stream_io import (  # the FLUSH_* names and Write: 0.3 read them here
    ABANDON,
    END,
    FLUSH_CHARS,
    FLUSH_CHUNKS,
    FLUSH_SECONDS,
    NEXT_CHUNK,
    NOT_MINE,
    SETTLE,
    TITLE,
    AsyncPlanReader,
    AsyncStreamIO,
    OpenModel,
    StartTitle,
    StreamBuffer,
    StreamRequest,
    SyncPlanReader,
    SyncStreamIO,
    Write,
)
from ctxstore.errors import CtxStoreError, ValidationError
from ctxstore.models import ResolveResult, SavedHead
from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.messages import message, message_payload
from ctxstore.settings import ttl_ms
from ctxstore.ui.to_ui import to_ui_messages

if TYPE_CHECKING:
    from ctxstore.store.async_store import AsyncStore
    from ctxstore.store.sync_store import Store

__all__ = [
    "FLUSH_CHARS",
    "FLUSH_CHUNKS",
    "FLUSH_SECONDS",
    "AsyncStreamedTurn",
    "StreamOptions",
    "StreamedTurn",
    "StreamedTurnPlan",
    "Write",
    "delta_text",
]

log = logging.getLogger("ctxstore")

#: Keyword arguments of the model call the turn sends itself.
_OWN_ARGUMENTS = ("messages", "stream")

Steps = Plan[None]


# --- the logic -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamOptions:
    """A turn's settings, checked (durations in milliseconds)."""

    stream_ttl_ms: int
    writer_ttl_ms: int
    title: bool
    title_model: str | None
    title_options: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        *,
        stream_ttl: float | timedelta,
        writer_ttl: float | timedelta,
        title: bool,
        title_model: str | None,
        title_options: Mapping[str, Any] | None,
    ) -> StreamOptions:
        if not isinstance(title, bool):
            raise ValidationError(f"title must be True or False, got {title!r}")
        if title_model is not None and (not isinstance(title_model, str) or not title_model):
            raise ValidationError(f"title_model must be a model name, got {title_model!r}")
        if title_options is not None and not isinstance(title_options, Mapping):
            raise ValidationError(f"title_options must be a mapping, got {title_options!r}")
        return cls(
            _duration_ms(stream_ttl, "stream_ttl"),
            _duration_ms(writer_ttl, "writer_ttl"),
            title,
            title_model,
            dict(title_options or {}),
        )


def _duration_ms(value: float | timedelta, name: str) -> int:
    milliseconds = ttl_ms(value, name) if value is not None else None
    if milliseconds is None:
        raise ValidationError(f"{name} must be a positive duration, got None")
    return milliseconds


def delta_text(chunk: Any) -> str:
    """The text a stream chunk adds (litellm's chunk objects, or chunk dicts); "" for none."""
    choices = (
        chunk.get("choices") if isinstance(chunk, Mapping) else getattr(chunk, "choices", None)
    )
    if not choices:
        return ""
    first = choices[0]
    delta = first.get("delta") if isinstance(first, Mapping) else getattr(first, "delta", None)
    content = (
        delta.get("content") if isinstance(delta, Mapping) else getattr(delta, "content", None)
    )
    return content if isinstance(content, str) else ""


def _stopped_reason(error: BaseException) -> str:
    """Why a turn ended without its answer, as its readers are told."""
    if isinstance(error, GeneratorExit):
        return "cancelled: the caller stopped reading the answer"
    if isinstance(error, asyncio.CancelledError):
        return "cancelled: the task reading the answer was cancelled"
    return answer_stream.failure_reason(error)


class StreamedTurnPlan:
    """The steps of one streamed turn of an engine (see the module's docstring). Not reusable:
    one plan, one answer."""

    def __init__(
        self,
        engine: EngineCore,
        model: str,
        options: StreamOptions,
        arguments: Mapping[str, Any],
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValidationError(f"model must be a model name, got {model!r}")
        for name in _OWN_ARGUMENTS:
            if name in arguments:
                raise ValidationError(f"stream_turn() sends {name}= itself; do not pass it")
        stream_options = arguments.get("stream_options")
        if stream_options is not None and not isinstance(stream_options, Mapping):
            raise ValidationError(f"stream_options must be a mapping, got {stream_options!r}")
        self._engine = engine
        self._model = model
        self._options = options
        self._arguments = dict(arguments)
        self._monotonic = monotonic
        #: The stream's id, once started (before the model is called).
        self.stream_id: str | None = None
        #: Where the answer was saved, once it was.
        self.saved: SavedHead | None = None
        #: "new", then "streaming", then "done" or "failed".
        self.state = "new"
        self._messages: list[dict[str, Any]] = []
        self._chunks: list[Any] = []
        self._buffer = StreamBuffer(engine, options.writer_ttl_ms, monotonic)
        #: Whether reading began (the iteration, or a cancel, started the steps after start).
        self.read = False

    # --- starting ----------------------------------------------------------------------------

    def start(self, context: ResolveResult) -> Steps:
        """Start the stream and call the model (``context``: what ``resolve()`` returned)."""
        engine = self._engine
        question = self._first_question()
        self._messages = context.with_system()
        self.stream_id = yield Run(
            answer_stream.begin_stream(
                engine.store_state,
                engine.chat_id,
                engine.session.branch,
                writer_ttl_ms=self._options.writer_ttl_ms,
                **engine.stream_scope(fenced=True),
            )
        )
        self.state = "streaming"
        self._buffer.started(self.stream_id)
        try:
            yield Effect(OpenModel(self._request()))
        except BaseException as error:
            yield from self._failed(error)
            raise
        if question is not None:
            options = self._options
            yield Effect(
                StartTitle(question, options.title_model or self._model, options.title_options)
            )

    def _request(self) -> dict[str, Any]:
        stream_options = dict(self._arguments.get("stream_options") or {})
        return {
            **self._arguments,
            "model": self._model,
            "messages": self._messages,
            "stream": True,
            "stream_options": {**stream_options, "include_usage": True},
        }

    def _first_question(self) -> Fragment | None:
        """The question to title the chat from: while the chat has no title (whatever its
        branch holds already), the first pending user message; None otherwise."""
        engine = self._engine
        if not self._options.title or not engine.session.untitled():
            return None
        pending = engine.prompt.pending
        return next((item for item in pending if item.data.get("role") == "user"), None)

    # --- streaming ---------------------------------------------------------------------------

    def steps(self) -> Steps:
        """Hand the chunks on, write their text, then save the answer (see the module)."""
        if self.read or self.state != "streaming":
            raise RuntimeError("a streamed turn is read once, after it started")
        self.read = True
        try:
            while True:
                chunk = yield Effect(NEXT_CHUNK)
                if chunk is END:
                    break
                self._chunks.append(chunk)
                self._buffer.add(delta_text(chunk))
                yield Emit(chunk)
                if self._buffer.due():
                    yield Effect(self._buffer.write())
            if self._buffer.waiting:
                yield Effect(self._buffer.write())
            yield Effect(SETTLE)
            answer, usage = self._answer()
            self._engine.set([self._answer_fragment(answer)])
            saved: SavedHead | None = yield Run(self._engine.save_op(title=self._options.title))
        except BaseException as error:
            yield from self._failed(error)
            raise
        assert saved is not None  # the answer was pending
        self.saved, self.state = saved, "done"
        yield from self._close(saved.message_ids[-1])
        if usage is not None:
            yield Run(self._engine.track_usage_op(usage))
        yield from self._set_title()

    def cancel(self) -> Steps:
        """End a started turn that nobody read: its stream is marked failed, nothing saved."""
        if self.read or self.state != "streaming":
            return
        self.read = True
        yield from self._failed(GeneratorExit())

    def _answer(self) -> tuple[Any, Any]:
        """The answer message the chunks make (tool calls included) and its usage."""
        built = import_litellm().stream_chunk_builder(self._chunks, messages=self._messages)
        if built is None:
            return {"role": "assistant", "content": ""}, None
        return built.choices[0].message, getattr(built, "usage", None)

    def _answer_fragment(self, answer: Any) -> Fragment:
        """The answer to save, in the engine's message format (a UI message for a chat whose
        messages are UI messages, so the chat stays one format)."""
        built = message(answer)
        if self._engine.message_format != "ui":
            return built
        (ui,) = to_ui_messages([message_payload(built)])
        del ui["id"]  # the store gives the answer its id
        return message(ui)

    # --- ending ------------------------------------------------------------------------------

    def _close(self, message_id: str) -> Steps:
        engine = self._engine
        assert self.stream_id is not None
        closed = yield Run(
            answer_stream.end_stream(
                engine.store_state,
                engine.chat_id,
                self.stream_id,
                done=True,
                detail=message_id,
                keep_ms=self._options.stream_ttl_ms,
                **engine.stream_scope(fenced=False),
            )
        )
        if not closed:
            log.warning(
                "answer stream %s of chat %r was no longer live when its answer was saved (its "
                "writer paused past writer_ttl): its readers were told it stopped",
                self.stream_id,
                engine.chat_id,
            )

    def _set_title(self) -> Steps:
        title = yield Effect(TITLE)
        if title is None:
            return
        try:
            yield Run(self._engine.update_chat_op(title, None))
        except CtxStoreError as error:
            log.warning("could not set the title of chat %r: %s", self._engine.chat_id, error)

    def _failed(self, error: BaseException) -> Steps:
        """Drop what is in flight and mark the stream failed (a failure to mark it is logged:
        its deadline ends it anyway); the caller raises ``error`` next."""
        self.state = "failed"
        yield Effect(ABANDON)
        engine = self._engine
        assert self.stream_id is not None
        try:
            yield Run(
                answer_stream.end_stream(
                    engine.store_state,
                    engine.chat_id,
                    self.stream_id,
                    done=False,
                    detail=_stopped_reason(error),
                    keep_ms=self._options.stream_ttl_ms,
                    **engine.stream_scope(fenced=False),
                )
            )
        except CtxStoreError as marking:
            log.warning(
                "could not mark answer stream %s of chat %r failed (it stops at its deadline): %s",
                self.stream_id,
                engine.chat_id,
                marking,
            )


# --- the drivers ---------------------------------------------------------------------------------


class _StreamedTurnBase:
    """What both drivers show: the stream's id and, once saved, where the answer went."""

    _plan: StreamedTurnPlan

    @property
    def stream_id(self) -> str:
        """The id of the answer's stream (``store.read_stream(chat_id, stream_id)``)."""
        assert self._plan.stream_id is not None
        return self._plan.stream_id

    @property
    def saved(self) -> SavedHead | None:
        """Where the question and the answer were saved (None until then)."""
        return self._plan.saved

    @property
    def message_id(self) -> str | None:
        """The saved answer's message id (None until it is saved)."""
        saved = self._plan.saved
        return saved.message_ids[-1] if saved is not None else None

    @property
    def state(self) -> str:
        """``"streaming"``, then ``"done"`` (the answer is saved) or ``"failed"``."""
        return self._plan.state


class StreamedTurn(SyncPlanReader[StreamedTurnPlan], _StreamedTurnBase):
    """A streamed turn on a sync engine: iterate it for the model's chunks (once). ``close()``
    (or leaving ``with``) before the end stops it: nothing is saved, the stream is marked
    failed."""

    def __init__(self, store: Store, plan: StreamedTurnPlan) -> None:
        self._store = store
        self._plan = plan
        self._io = SyncStreamIO(store)

    @classmethod
    def start(cls, store: Store, plan: StreamedTurnPlan, context: ResolveResult) -> StreamedTurn:
        """Start the stream and call the model; the turn is then ready to iterate (the engine's
        ``stream_turn`` calls this)."""
        turn = cls(store, plan)
        for _ in turn._drive(plan.start(context)):
            raise AssertionError("a turn hands nothing out before it is read")
        return turn

    def _drive(self, steps: Steps) -> Generator[Any, None, None]:
        """The plan's chunks; a failure or a caller that stops reading is thrown into the plan,
        which marks the stream failed, then re-raises."""
        return drive(steps, performer(self._store.run, self._effect))

    def _effect(self, step: StreamRequest) -> Any:
        handled = self._io.handle(step)
        if handled is NOT_MINE:
            raise AssertionError(f"unknown step {step!r}")
        return handled


@documented_by(StreamedTurn)
class AsyncStreamedTurn(AsyncPlanReader[StreamedTurnPlan], _StreamedTurnBase):
    """A streamed turn on an async engine: ``async for`` it for the model's chunks (once).
    ``aclose()`` (or leaving ``async with``) before the end stops it: nothing is saved."""

    def __init__(self, store: AsyncStore, plan: StreamedTurnPlan) -> None:
        self._store = store
        self._plan = plan
        self._io = AsyncStreamIO(store)

    @classmethod
    async def start(
        cls, store: AsyncStore, plan: StreamedTurnPlan, context: ResolveResult
    ) -> AsyncStreamedTurn:
        """The async form of :meth:`StreamedTurn.start`."""
        turn = cls(store, plan)
        async for _ in turn._drive(plan.start(context)):
            raise AssertionError("a turn hands nothing out before it is read")
        return turn

    def _drive(self, steps: Steps) -> AsyncIterator[Any]:
        """The plan's chunks; a failure, a cancel or a caller that stops reading is thrown into
        the plan, which marks the stream failed, then re-raises."""
        return adrive(steps, aperformer(self._store.run, self._effect))

    async def _effect(self, step: StreamRequest) -> Any:
        handled = await self._io.handle(step)
        if handled is NOT_MINE:
            raise AssertionError(f"unknown step {step!r}")
        return handled
