"""``chat()`` and ``achat()``: a ``useChat`` frontend's turn, answered as the AI SDK's UI message
stream. The logic is :class:`~ctxstore.frontend.plan.ChatPlan`; :class:`ChatStream` drives it
with a sync engine (``litellm.completion``, tools in threads), :class:`AsyncChatStream` with an
async one (``litellm.acompletion``, the writes in the background, tools as tasks). Neither
decides anything.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

from ctxstore._base.plans import Plan, adrive, aperformer, arun_plan, drive, performer, run_plan
from ctxstore._base.twins import documented_by
from ctxstore._core.ops.streams import DEFAULT_STREAM_TTL, DEFAULT_WRITER_TTL
from ctxstore._core.telemetry import Opened, made_current
from ctxstore.engine.core import EngineCore
from ctxstore.engine.engines import AsyncContextEngine, ContextEngine
from ctxstore.engine.stream_io import (
    NOT_MINE,
    AsyncPlanReader,
    AsyncStreamIO,
    SyncPlanReader,
    SyncStreamIO,
)
from ctxstore.errors import ConfigurationError
from ctxstore.frontend.plan import ChatPlan, RunTools, ToolRun
from ctxstore.frontend.protocol import SSE_DONE, UI_MESSAGE_STREAM_HEADERS, sse_event
from ctxstore.frontend.request import ChatRequest, Trigger
from ctxstore.frontend.tracing import atraced_steps, ended, traced_steps, turn_span
from ctxstore.models import SavedHead

__all__ = ["AsyncChatStream", "ChatStream", "achat", "chat"]


def chat(
    engine: ContextEngine,
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: Any = None,
    max_steps: int = 8,
    generate_title: bool = False,
    title_model: str | None = None,
    context_variables: Any = None,
    transform: Callable[[dict[str, Any]], Any] | None = None,
    on_error: Callable[[BaseException], str] | None = None,
    message_metadata: Mapping[str, Any] | Callable[[dict[str, Any]], Any] | None = None,
    final_assistant_metadata: Mapping[str, Any] | None = None,
    trigger: Trigger = "submit-message",
    message_id: str | None = None,
    stream_ttl: float | timedelta = DEFAULT_STREAM_TTL,
    writer_ttl: float | timedelta = DEFAULT_WRITER_TTL,
    **litellm_kwargs: Any,
) -> ChatStream:
    """Answer a ``useChat`` turn: returns a :class:`ChatStream` to iterate (UI message stream
    chunks) or serve (``sse()``, ``headers``).

    ``messages`` is what the client sent; only the new message is taken from it (the last, a
    user message; the store holds the rest). ``trigger="regenerate-message"`` answers again
    the answer ``message_id`` (default: the branch's head) on a new branch from its parent.
    ``tools``: Python callables (schema from type hints and docstring) or ``{"name",
    "description", "parameters", "execute"}`` dicts, run here, up to ``max_steps`` model calls.
    ``generate_title``: a model-made title (``title_model``, default ``model``) replaces the
    static one an untitled chat gets. ``transform(chunk)`` may change, drop (None) or split (a
    list) each chunk; ``on_error(exc)`` gives an error's text for the client;
    ``message_metadata`` (a mapping, or a function of ``{"type": "start" | "finish", ...}``)
    and ``final_assistant_metadata`` go into the answer's metadata. The rest goes to
    ``litellm.completion``. Everything is checked before anything is written; by the time this
    returns, the answer's stream is started (``stream_id``) and the chat is open.
    """
    if not isinstance(engine, ContextEngine):
        raise ConfigurationError(
            f"chat() takes a ContextEngine (use achat() with an AsyncContextEngine), got "
            f"{type(engine).__name__}"
        )
    plan = _plan(engine._core, locals())
    turn = turn_span(engine._core, plan)
    try:
        with made_current(turn):
            context = run_plan(plan.prepare(), engine._perform)
        stream = ChatStream(engine, plan, turn)
        for _ in stream._drive(plan.start(context)):
            raise AssertionError("a chat stream hands nothing out before it is read")
    except BaseException as error:
        ended(turn, plan, error)
        raise
    return stream


async def achat(
    engine: AsyncContextEngine,
    messages: list[dict[str, Any]],
    *,
    model: str,
    tools: Any = None,
    max_steps: int = 8,
    generate_title: bool = False,
    title_model: str | None = None,
    context_variables: Any = None,
    transform: Callable[[dict[str, Any]], Any] | None = None,
    on_error: Callable[[BaseException], str] | None = None,
    message_metadata: Mapping[str, Any] | Callable[[dict[str, Any]], Any] | None = None,
    final_assistant_metadata: Mapping[str, Any] | None = None,
    trigger: Trigger = "submit-message",
    message_id: str | None = None,
    stream_ttl: float | timedelta = DEFAULT_STREAM_TTL,
    writer_ttl: float | timedelta = DEFAULT_WRITER_TTL,
    **litellm_kwargs: Any,
) -> AsyncChatStream:
    """The async form of :func:`chat`: awaited, it returns an :class:`AsyncChatStream` (tools
    may be coroutine functions; sync ones run in threads)."""
    if not isinstance(engine, AsyncContextEngine):
        raise ConfigurationError(
            f"achat() takes an AsyncContextEngine (use chat() with a ContextEngine), got "
            f"{type(engine).__name__}"
        )
    plan = _plan(engine._core, locals())
    turn = turn_span(engine._core, plan)
    try:
        with made_current(turn):
            context = await arun_plan(plan.prepare(), engine._perform)
        stream = AsyncChatStream(engine, plan, turn)
        async for _ in stream._drive(plan.start(context)):
            raise AssertionError("a chat stream hands nothing out before it is read")
    except BaseException as error:
        ended(turn, plan, error)
        raise
    return stream


def _plan(core: EngineCore, arguments: dict[str, Any]) -> ChatPlan:
    """The plan of a chat()'s or achat()'s call, from its arguments (checked)."""
    options = {key: value for key, value in arguments.items() if key != "engine"}
    messages = options.pop("messages")
    litellm_kwargs = options.pop("litellm_kwargs")
    return ChatPlan(core, ChatRequest.of(messages, arguments=litellm_kwargs, **options))


class _ChatStreamBase:
    """What both streams show."""

    _plan: ChatPlan
    #: The response headers of a UI message stream (``x-vercel-ai-ui-message-stream: v1``).
    headers: Mapping[str, str] = UI_MESSAGE_STREAM_HEADERS

    @property
    def message_id(self) -> str:
        """The answer's id: announced in the ``start`` chunk, stored with the answer."""
        return self._plan.answer_id

    @property
    def stream_id(self) -> str:
        """The answer's Redis stream (``resume_sse(store, chat_id, stream_id)``)."""
        assert self._plan.stream_id is not None
        return self._plan.stream_id

    @property
    def saved(self) -> SavedHead | None:
        """Where the user message and the answer were saved (None until then)."""
        return self._plan.saved

    @property
    def state(self) -> str:
        """``"streaming"``, then ``"done"``, ``"stopped"`` or ``"failed"``."""
        return self._plan.state

    @property
    def error(self) -> BaseException | None:
        """The error that ended the answer (the client got an ``error`` chunk), if one did."""
        return self._plan.error

    def stop(self) -> None:
        """End the answer at its next chunk, as a client's stop button would: what was
        streamed is saved as the answer, marked aborted. Safe from another thread."""
        self._plan.stop_requested = True


class ChatStream(SyncPlanReader[ChatPlan], _ChatStreamBase):
    """A ``chat()`` answer: iterate it once for the UI message stream chunks (dicts), or
    ``sse()`` for the server-sent events a ``useChat`` client reads. Stopping early
    (``break``, ``close()``, leaving ``with``) saves what was streamed as the answer, marked
    aborted."""

    def __init__(self, engine: ContextEngine, plan: ChatPlan, turn: Opened | None) -> None:
        self._engine = engine
        self._plan = plan
        self._turn = turn
        self._io = SyncStreamIO(engine._store)

    def sse(self) -> Iterator[str]:
        """The answer as server-sent events: ``data: {chunk}`` each, ``data: [DONE]`` last."""
        iterator = iter(self)
        try:
            for chunk in iterator:
                yield sse_event(chunk)
            yield SSE_DONE
        finally:
            close = getattr(iterator, "close", None)
            if close is not None:
                close()

    def _drive(self, steps: Plan[None]) -> Generator[Any, None, None]:
        io = self._io

        def effect(request: Any) -> Any:
            if isinstance(request, RunTools):
                return _run_tools(request.runs)
            handled = io.handle(request)
            if handled is NOT_MINE:
                raise AssertionError(f"unknown step {request!r}")
            return handled

        driven = drive(steps, performer(self._engine._store.run, effect))
        return traced_steps(self._turn, self._plan, driven)


@documented_by(ChatStream)
class AsyncChatStream(AsyncPlanReader[ChatPlan], _ChatStreamBase):
    """An ``achat()`` answer: ``async for`` it once, or ``sse()``. Stopping early (``break``,
    ``aclose()``, a cancelled task) saves what was streamed as the answer, marked aborted."""

    def __init__(self, engine: AsyncContextEngine, plan: ChatPlan, turn: Opened | None) -> None:
        self._engine = engine
        self._plan = plan
        self._turn = turn
        self._io = AsyncStreamIO(engine._store)

    async def sse(self) -> AsyncIterator[str]:
        """The async form of :meth:`ChatStream.sse`."""
        iterator = self.__aiter__()
        try:
            async for chunk in iterator:
                yield sse_event(chunk)
            yield SSE_DONE
        finally:
            await iterator.aclose()  # type: ignore[attr-defined]

    def _drive(self, steps: Plan[None]) -> AsyncIterator[Any]:
        io, plan = self._io, self._plan

        async def effect(request: Any) -> Any:
            if isinstance(request, RunTools):
                return await _arun_tools(request.runs)
            handled = await io.handle(request)
            if handled is NOT_MINE:
                raise AssertionError(f"unknown step {request!r}")
            return handled

        perform = aperformer(self._engine._run, effect)

        async def guarded(step: Any) -> Any:
            if not plan.cleaning:
                return await perform(step)
            return await _to_the_end(perform(step))

        return atraced_steps(self._turn, plan, adrive(steps, guarded))


async def _to_the_end(step: Awaitable[Any]) -> Any:
    """A step of an answer's cleanup (saving what was streamed, closing its stream), run to its
    end even while the task is being cancelled: a framework that cancels again at every await
    (anyio's cancel scopes, behind Starlette) would otherwise cut it short. The cancel that
    ended the answer is re-raised by the plan once the cleanup is done."""
    task = asyncio.ensure_future(step)
    while True:
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            if task.done():
                return task.result()


def _call(run: ToolRun) -> Any:
    """One tool call in this thread (a coroutine function on a loop of its own)."""
    result = run.spec.execute(*run.args, **run.kwargs)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result))
    return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _outcome(run: ToolRun) -> tuple[bool, Any]:
    try:
        return True, _call(run)
    except Exception as error:  # a tool's failure is an output, not the answer's end
        return False, error


def _run_tools(runs: tuple[ToolRun, ...]) -> list[tuple[bool, Any]]:
    """The calls in parallel threads (a single one in this thread)."""
    if len(runs) == 1:
        return [_outcome(runs[0])]
    with ThreadPoolExecutor(max_workers=len(runs), thread_name_prefix="ctxstore-tool") as pool:
        return list(pool.map(_outcome, runs))


async def _arun_tools(runs: tuple[ToolRun, ...]) -> list[tuple[bool, Any]]:
    """The calls concurrently: coroutine functions as tasks, the others in threads."""

    async def one(run: ToolRun) -> tuple[bool, Any]:
        try:
            if run.spec.is_async:
                return True, await run.spec.execute(*run.args, **run.kwargs)
            result = await asyncio.to_thread(run.spec.execute, *run.args, **run.kwargs)
            if inspect.isawaitable(result):
                result = await result
            return True, result
        except Exception as error:  # a tool's failure is an output, not the answer's end
            return False, error

    return list(await asyncio.gather(*(one(run) for run in runs)))
