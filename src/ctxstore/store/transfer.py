"""The loops that run an export or an import with a sync or an async store.

The work itself is I/O-free and shared (:mod:`ctxstore.core.exports`,
:mod:`ctxstore.core.imports`); these drivers only run the operations it hands out, with the
store's ``run``, and move records between it and the caller: an iterator of records out of an
export, an iterable (or, async, an async iterable) of records into an import. A failed import
removes what it staged before the error goes on.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ctxstore._core.ops.transfer.exports import ExportStep
from ctxstore._core.ops.transfer.imports import ChatImport
from ctxstore._core.plans import RunOperation
from ctxstore._core.protocol import Operation

if TYPE_CHECKING:
    from collections.abc import Generator

    from ctxstore.models import ChatMeta

log = logging.getLogger("ctxstore")

Run = Callable[[Operation[Any]], Any]
AsyncRun = Callable[[Operation[Any]], Awaitable[Any]]


def iterate_export(run: Run, steps: Generator[ExportStep, Any, None]) -> Iterator[dict[str, Any]]:
    """The records of an export, each read when the caller asks for it."""
    value: Any = None
    while True:
        try:
            step = steps.send(value)
        except StopIteration:
            return
        if isinstance(step, RunOperation):
            value = run(step.operation)
        else:
            value = None
            yield step


async def aiterate_export(
    run: AsyncRun, steps: Generator[ExportStep, Any, None]
) -> AsyncIterator[dict[str, Any]]:
    """The same over an async store."""
    value: Any = None
    while True:
        try:
            step = steps.send(value)
        except StopIteration:
            return
        if isinstance(step, RunOperation):
            value = await run(step.operation)
        else:
            value = None
            yield step


def run_import(run: Run, importer: ChatImport, records: Iterable[Any]) -> ChatMeta:
    """Feed every record, run each staging chunk and the publish; on any failure remove the
    staging keys and raise."""
    try:
        for record in records:
            chunk = importer.feed(record)
            if chunk is not None:
                run(chunk)
        meta: ChatMeta = run(importer.finish())
        return meta
    except BaseException:
        cleanup = importer.discard()
        if cleanup is not None:
            try:
                run(cleanup)
            except Exception as error:  # the staging keys expire on their own
                log.warning("an import's staging keys were not removed: %s", error)
        raise


async def arun_import(
    run: AsyncRun, importer: ChatImport, records: Iterable[Any] | AsyncIterable[Any]
) -> ChatMeta:
    """The same over an async store, from an iterable or an async iterable."""
    try:
        if isinstance(records, AsyncIterable):
            async for record in records:
                await _afeed(run, importer, record)
        else:
            for record in records:
                await _afeed(run, importer, record)
        meta: ChatMeta = await run(importer.finish())
        return meta
    except BaseException:
        cleanup = importer.discard()
        if cleanup is not None:
            try:
                await run(cleanup)
            except Exception as error:  # the staging keys expire on their own
                log.warning("an import's staging keys were not removed: %s", error)
        raise


async def _afeed(run: AsyncRun, importer: ChatImport, record: Any) -> None:
    chunk = importer.feed(record)
    if chunk is not None:
        await run(chunk)
