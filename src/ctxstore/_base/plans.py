"""Plans: multi-step work written once, as a generator, and driven by a sync or an async shell.

A store *operation* (:mod:`ctxstore._core.protocol`) yields Redis calls only. Work that needs
more (a compaction calls a summarizer, a turn waits for a busy chat, an export hands records
out, a streamed turn pulls a model's chunks) is a *plan*: a generator that yields steps from one
closed set and receives each step's result.

* :class:`Run` - a store operation; its result (or its error) comes back.
* :class:`Emit` - a value for whoever iterates the plan; None comes back when they ask for the
  next one.
* :class:`Pause` - wait this long; None comes back.
* :class:`Effect` - what only a shell can do: call a model, summarize, write a title, await a
  lazy value, take the next record of an import. The shell's handler gets the effect's
  ``request`` and its result comes back.

:func:`drive` and :func:`adrive` are the only loops: every multi-step flow of the library runs
through them. Whatever a step raises, and a caller that stops reading (``close()``, a cancelled
task), is thrown into the plan at the step, so its ``finally`` blocks and failure handling run
(a compaction gives its lease back, an import removes what it staged, a streamed turn marks its
stream failed) before the error goes on. :func:`run_plan` and :func:`arun_plan` drive a plan
that emits nothing to its result; :func:`performer` and :func:`aperformer` build the step
handler a shell passes them.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ctxstore.errors import ConfigurationError

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Run:
    """A store operation for the shell to run (a generator of calls; see ``_core.protocol``)."""

    operation: Generator[Any, Any, Any]


@dataclass(frozen=True, slots=True)
class Emit:
    """A value for whoever iterates the plan."""

    value: Any


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds`` before the next step."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Effect:
    """Something only a shell can do; ``request`` says what (each plan defines its requests)."""

    request: Any


Step = Run | Emit | Pause | Effect
#: A plan: yields steps, receives their results, returns its own.
Plan = Generator[Step, Any, T]
#: What a shell does with a step other than :class:`Emit` (sync, or awaitable for adrive).
Perform = Callable[[Step], Any]
AsyncPerform = Callable[[Step], Awaitable[Any]]


def _resume(plan: Generator[Step, Any, Any], value: Any, error: BaseException | None) -> Any:
    """(True, the plan's result) when it ended, else (False, its next step), after sending
    ``value`` or throwing ``error`` into it."""
    try:
        return False, plan.send(value) if error is None else plan.throw(error)
    except StopIteration as stop:
        return True, stop.value


def drive(plan: Plan[T], perform: Perform) -> Generator[Any, None, T]:
    """The sync driver: hands each :class:`Emit` out (yields it), asks ``perform`` for every
    other step's result, and returns the plan's result. A step's error, and a ``close()`` /
    ``throw()`` of this generator while it hands a value out, is thrown into the plan."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, step = _resume(plan, value, error)
        if done:
            return step  # type: ignore[no-any-return]
        try:
            value = (yield step.value) if isinstance(step, Emit) else perform(step)
            error = None
        except BaseException as caught:  # handed to the plan, which re-raises what it cannot end
            value, error = None, caught


@dataclass
class Outcome(Generic[T]):
    """Where :func:`adrive` leaves the plan's result (an async generator cannot return one)."""

    value: T | None = None
    done: bool = False


async def adrive(
    plan: Plan[Any], perform: AsyncPerform, outcome: Outcome[Any] | None = None
) -> AsyncIterator[Any]:
    """The async driver: as :func:`drive`, with an awaited ``perform`` (a cancelled task's
    ``CancelledError`` is thrown into the plan too). The plan's result goes to ``outcome``."""
    value: Any = None
    error: BaseException | None = None
    while True:
        done, step = _resume(plan, value, error)
        if done:
            if outcome is not None:
                outcome.value, outcome.done = step, True
            return
        try:
            value = (yield step.value) if isinstance(step, Emit) else await perform(step)
            error = None
        except BaseException as caught:  # handed to the plan, which re-raises what it cannot end
            value, error = None, caught


def run_plan(plan: Plan[T], perform: Perform) -> T:
    """A plan that emits nothing, driven to its result."""
    driving = drive(plan, perform)
    try:
        next(driving)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    driving.close()
    raise ConfigurationError("this plan hands values out: iterate it (drive) instead")


async def arun_plan(plan: Plan[T], perform: AsyncPerform) -> T:
    """The async form of :func:`run_plan`."""
    outcome: Outcome[T] = Outcome()
    driving = adrive(plan, perform, outcome)
    async for _value in driving:
        await driving.aclose()  # type: ignore[attr-defined]
        raise ConfigurationError("this plan hands values out: iterate it (adrive) instead")
    return outcome.value  # type: ignore[return-value]


def _unhandled(request: Any) -> Any:
    raise ConfigurationError(f"this plan asked for {request!r}, which nothing here provides")


def _no_store(_operation: Any) -> Any:
    raise ConfigurationError("this plan runs a store operation, and no store was given")


def performer(
    run: Callable[[Any], Any] = _no_store, handle: Callable[[Any], Any] = _unhandled
) -> Perform:
    """The sync shell's step handler: :class:`Run` through ``run`` (a store's), :class:`Pause`
    with ``time.sleep``, :class:`Effect` through ``handle`` (given the request)."""

    def perform(step: Step) -> Any:
        if isinstance(step, Run):
            return run(step.operation)
        if isinstance(step, Pause):
            time.sleep(max(step.seconds, 0.0))
            return None
        if isinstance(step, Effect):
            result = handle(step.request)
            if inspect.isawaitable(result):
                if inspect.iscoroutine(result):
                    result.close()  # never awaited: closed rather than leaked with a warning
                raise ConfigurationError(
                    f"{step.request!r} needs an event loop: use the async store or engine"
                )
            return result
        raise TypeError(f"not a step of a plan: {step!r}")

    return perform


def aperformer(
    run: Callable[[Any], Awaitable[Any]] = _no_store, handle: Callable[[Any], Any] = _unhandled
) -> AsyncPerform:
    """The async shell's step handler: :class:`Run` awaited through ``run``, :class:`Pause` with
    ``asyncio.sleep`` (the event loop keeps serving other tasks), :class:`Effect` through
    ``handle`` (awaited when it returns an awaitable)."""

    async def perform(step: Step) -> Any:
        if isinstance(step, Run):
            return await run(step.operation)
        if isinstance(step, Pause):
            await asyncio.sleep(max(step.seconds, 0.0))
            return None
        if isinstance(step, Effect):
            result = handle(step.request)
            return await result if inspect.isawaitable(result) else result
        raise TypeError(f"not a step of a plan: {step!r}")

    return perform
