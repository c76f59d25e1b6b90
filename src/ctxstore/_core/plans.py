"""Plans: multi-step work written once as a generator, driven by a sync or an async shell.

A store *operation* (:mod:`ctxstore.core.protocol`) yields Redis calls only. Some work also needs
things that are not Redis calls: a summarizer call in a compaction, a pause while a turn waits for
a busy chat. Such work is a *plan*, a generator that yields steps:

* :class:`RunOperation`: a store operation to run (the result, or the error, is sent back);
* :class:`SummarizeRequest`: messages to summarize (the summary text is sent back);
* :class:`Pause`: wait this long before the next step.

:func:`run_plan` drives a plan with a sync store, :func:`arun_plan` with an async one (awaiting
``asyncio.sleep`` for a pause, so the event loop keeps serving other tasks). An error raised by a
step is thrown into the plan, so its ``finally`` blocks (giving a lease back) run.

A plan that hands values out as it goes (an answer stream's reader) also yields :class:`Emit`;
:func:`iterate_plan` and :func:`aiterate_plan` drive it as a generator / an async generator.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from ctxstore._core.protocol import Operation
from ctxstore.errors import ConfigurationError

T = TypeVar("T")


@dataclass(frozen=True)
class RunOperation:
    """A store operation for the driver to run."""

    operation: Operation[Any]


@dataclass(frozen=True)
class SummarizeRequest:
    """The messages to summarize (the previous summary first, as a marked message)."""

    messages: list[dict[str, Any]]


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` before the next step (the driver sends back None)."""

    seconds: float


Step = RunOperation | SummarizeRequest | Pause

#: A summarizer: the messages to summarize -> the summary text (sync, or async for the async
#: driver).
Summarize = Callable[[list[dict[str, Any]]], str]
AsyncSummarize = Callable[[list[dict[str, Any]]], "Awaitable[str] | str"]


def _no_summarizer(_messages: list[dict[str, Any]]) -> str:
    raise ConfigurationError("this plan asked for a summary, and no summarizer was given")


def _resume(steps: Generator[Step, Any, T], value: Any, error: BaseException | None) -> Any:
    """(done, the plan's result) or (not done, its next step), after ``value`` or ``error``
    (thrown into the plan, so its ``finally`` blocks run)."""
    try:
        return False, steps.send(value) if error is None else steps.throw(error)
    except StopIteration as stop:
        return True, stop.value


def run_plan(
    run: Callable[[Operation[Any]], Any],
    steps: Generator[Step, Any, T],
    summarize: Summarize = _no_summarizer,
) -> T:
    """Drive a plan with a sync store's ``run``, a sync summarizer and ``time.sleep``."""
    emitting = drive(steps, lambda step: _step(run, step, summarize))
    try:
        next(emitting)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    emitting.close()
    raise ConfigurationError("this plan hands values out: iterate it with iterate_plan")


async def arun_plan(
    run: Callable[[Operation[Any]], Awaitable[Any]],
    steps: Generator[Step, Any, T],
    summarize: AsyncSummarize = _no_summarizer,
) -> T:
    """The same with an async store's ``run``, a sync or async summarizer and ``asyncio.sleep``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, step = _resume(steps, value, error)
        if done:
            return step  # type: ignore[no-any-return]
        try:
            value, error = await _astep(run, step, summarize), None
        except Exception as caught:  # handed to the plan (a compaction gives its lease back)
            value, error = None, caught


def _step(run: Callable[[Operation[Any]], Any], step: Step, summarize: Summarize) -> Any:
    """One step of a sync plan: its value."""
    if isinstance(step, RunOperation):
        return run(step.operation)
    if isinstance(step, Pause):
        time.sleep(max(step.seconds, 0.0))
        return None
    value = summarize(step.messages)
    if inspect.isawaitable(value):
        raise ConfigurationError("the summarizer is async: compact with the async store and driver")
    return value


async def _astep(
    run: Callable[[Operation[Any]], Awaitable[Any]], step: Step, summarize: AsyncSummarize
) -> Any:
    """One step of an async plan: its value."""
    if isinstance(step, RunOperation):
        return await run(step.operation)
    if isinstance(step, Pause):
        await asyncio.sleep(max(step.seconds, 0.0))
        return None
    if inspect.iscoroutinefunction(summarize):
        return await summarize(step.messages)
    # A sync summarizer (litellm.completion, a plain function) runs in a thread so the event
    # loop keeps serving other jobs and signals meanwhile.
    value = await asyncio.to_thread(summarize, step.messages)
    return await value if inspect.isawaitable(value) else value


@dataclass(frozen=True)
class Emit:
    """A value for whoever iterates the plan (:func:`iterate_plan`); the driver sends back
    None once the caller asks for the next one."""

    value: Any


def drive(steps: Generator[Any, Any, T], perform: Callable[[Any], Any]) -> Generator[Any, None, T]:
    """The one loop that drives a plan synchronously: each :class:`Emit` is handed out (yielded),
    every other step's value comes from ``perform``, and the plan's result is returned.

    Whatever a step raises, and a ``close()`` or ``throw()`` of this generator while it hands a
    value out (a caller that stopped reading), is thrown into the plan, so its ``finally`` blocks
    and failure handling run (a compaction gives its lease back, a streamed turn marks its
    stream failed) before the error goes on."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, step = _resume(steps, value, error)
        if done:
            return step  # type: ignore[no-any-return]
        try:
            value = (yield step.value) if isinstance(step, Emit) else perform(step)
            error = None
        except BaseException as caught:  # handed to the plan, which re-raises what it cannot end
            value, error = None, caught


async def adrive(
    steps: Generator[Any, Any, Any], perform: Callable[[Any], Awaitable[Any]]
) -> AsyncIterator[Any]:
    """:func:`drive` as an async generator, with an awaited ``perform`` (a cancelled task's
    ``CancelledError`` is thrown into the plan too). The plan's result is dropped: an async
    generator has none."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, step = _resume(steps, value, error)
        if done:
            return
        try:
            value = (yield step.value) if isinstance(step, Emit) else await perform(step)
            error = None
        except BaseException as caught:  # handed to the plan, which re-raises what it cannot end
            value, error = None, caught


def iterate_plan(
    run: Callable[[Operation[Any]], Any], steps: Generator[Step | Emit, Any, None]
) -> Iterator[Any]:
    """Drive a plan that hands out values (:class:`Emit`) as a sync generator: each emitted
    value is yielded to the caller, every other step runs as in :func:`run_plan`. Closing the
    generator closes the plan."""
    return drive(steps, lambda step: _step(run, step, _no_summarizer))


def aiterate_plan(
    run: Callable[[Operation[Any]], Awaitable[Any]], steps: Generator[Step | Emit, Any, None]
) -> AsyncIterator[Any]:
    """The same as an async generator, with an async store's ``run``."""
    return adrive(steps, lambda step: _astep(run, step, _no_summarizer))
