"""Several operations in the same round trips: ``together(operations)``.

A page that shows fifty chats wants fifty small reads (each chat's branch size, its live
stream), and each is an operation of one or two steps. Run one after another they cost fifty
round trips; ``together`` runs them in lockstep instead: each round trip carries the current
step of every operation still running, so fifty one-step reads cost one round trip, and the
whole costs as many round trips as the longest operation has steps.

One operation's failure is its own: its outcome is the :class:`~ctxstore.errors.CtxStoreError`
it raised, in its place in the result, and the others run on (a page shows one unreadable chat
among the rest).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from ctxstore._core.protocol import Call, Operation, Step
from ctxstore.errors import CtxStoreError

T = TypeVar("T")


def together(operations: Sequence[Operation[T]]) -> Operation[list[T | CtxStoreError]]:
    """Run ``operations`` in lockstep (see the module); their results in order, an error in the
    place of an operation that raised one."""
    results: list[T | CtxStoreError | None] = [None] * len(operations)
    steps: dict[int, Step] = {}
    for index in range(len(operations)):
        _advance(operations, index, results, steps, next)
    while steps:
        order = list(steps)
        batch: list[Call[Any]] = []
        sizes: list[int] = []
        for index in order:
            calls = _calls(steps[index])
            batch.extend(calls)
            sizes.append(len(calls))
        replies = yield tuple(batch)
        start = 0
        for index, size in zip(order, sizes, strict=True):
            mine = list(replies[start : start + size])
            start += size
            step = steps.pop(index)
            if isinstance(step, Call):
                outcome = mine[0]
                if isinstance(outcome, CtxStoreError):
                    _advance(operations, index, results, steps, lambda op, e=outcome: op.throw(e))
                else:
                    _advance(operations, index, results, steps, lambda op, v=outcome: op.send(v))
            else:
                _advance(operations, index, results, steps, lambda op, v=mine: op.send(v))
    return results  # type: ignore[return-value]  # every place is filled once all ended


def _calls(step: Step) -> tuple[Call[Any], ...]:
    return (step,) if isinstance(step, Call) else tuple(step)


def _advance(
    operations: Sequence[Operation[T]],
    index: int,
    results: list[T | CtxStoreError | None],
    steps: dict[int, Step],
    resume: Any,
) -> None:
    """Resume one operation; note its next step, or its result (or its error) when it ends."""
    try:
        steps[index] = resume(operations[index])
    except StopIteration as stop:
        results[index] = stop.value
    except CtxStoreError as error:
        results[index] = error
