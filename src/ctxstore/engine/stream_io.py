"""What every streamed answer shares, whoever drives it (``engine.stream_turn`` and
``ctxstore.chat``): the buffer that batches the answer's text into writes of its Redis stream,
the effects such a plan asks its shell for, and the two shells' handlers of those effects.

A plan of a streamed answer yields :class:`~ctxstore._base.plans.Effect` steps whose requests
are defined here: call the model (:class:`OpenModel`), pull its next chunk (:data:`NEXT_CHUNK`),
write a batch (:class:`Write`), wait for the writes in flight (:data:`SETTLE`), start and collect
a title (:class:`StartTitle`, :data:`TITLE`), drop what is in flight (:data:`ABANDON`).
:class:`SyncStreamIO` answers them with a sync store and ``litellm.completion``;
:class:`AsyncStreamIO` with an async store and ``litellm.acompletion``, sending the writes in the
background (one at a time, in order) so the chunks never wait for Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Generic, Protocol, TypeVar

from typing_extensions import Self

from ctxstore._base.litellm import aimport_litellm, import_litellm
from ctxstore._base.plans import Plan
from ctxstore._core.ops import streams as answer_stream
from ctxstore._core.protocol import Operation
from ctxstore.engine.titles import agenerate_chat_title, generate_chat_title
from ctxstore.prompt.fragment import Fragment

if TYPE_CHECKING:
    from ctxstore.engine.core import EngineCore
    from ctxstore.store.async_store import AsyncStore
    from ctxstore.store.sync_store import Store

#: A write of text at most this long after the previous one (seconds)...
FLUSH_SECONDS: Final = 0.05
#: ... or once this many pieces are waiting...
FLUSH_CHUNKS: Final = 64
#: ... or this many characters.
FLUSH_CHARS: Final = 16_384


@dataclass(frozen=True)
class OpenModel:
    """Call the model (``completion`` / ``acompletion``) with ``request``; keep its stream."""

    request: dict[str, Any]


@dataclass(frozen=True)
class Write:
    """Send this write of the stream's text: at once (sync) or in the background, after the
    write before it (async). Its error comes back at the next Write or Settle."""

    operation: Operation[Any]


@dataclass(frozen=True)
class StartTitle:
    """Start writing the chat's title from ``question`` (a thread, or a task)."""

    question: Fragment
    model: str
    options: dict[str, Any]


class _Marker:
    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


#: Pull the model's next chunk (:data:`END` after the last).
NEXT_CHUNK: Final = _Marker("NEXT_CHUNK")
#: What NEXT_CHUNK gives after the last chunk.
END: Final = _Marker("END")
#: Wait for the writes sent in the background (their error is raised here).
SETTLE: Final = _Marker("SETTLE")
#: The title written meanwhile (None when none was started).
TITLE: Final = _Marker("TITLE")
#: Drop what is in flight: the model's stream, the title, a write in the background.
ABANDON: Final = _Marker("ABANDON")
#: What a handler returns for a request that is not one of these.
NOT_MINE: Final = _Marker("NOT_MINE")

#: What a streamed answer asks its shell for (each as an Effect).
StreamRequest = OpenModel | Write | StartTitle | _Marker


class StreamBuffer:
    """Text waiting for the answer's stream, and when to write it: the first text at once,
    then a write every :data:`FLUSH_SECONDS`, or every :data:`FLUSH_CHUNKS` pieces or
    :data:`FLUSH_CHARS` characters, whichever comes first; with nothing waiting, an empty write
    keeps the stream live once a third of ``writer_ttl`` passed."""

    def __init__(
        self,
        engine: EngineCore,
        writer_ttl_ms: int,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._engine = engine
        self._writer_ttl_ms = writer_ttl_ms
        self._monotonic = monotonic
        self._pieces: list[str] = []
        self._chars = 0
        #: Writes sent so far (a write's number is its rank, from 1).
        self.writes = 0
        self._last = monotonic()
        #: The stream's id, once it started.
        self.stream_id: str | None = None

    def started(self, stream_id: str) -> None:
        self.stream_id = stream_id
        self._last = self._monotonic()

    @property
    def waiting(self) -> bool:
        return bool(self._pieces)

    def add(self, piece: str) -> None:
        if piece:
            self._pieces.append(piece)
            self._chars += len(piece)

    def due(self) -> bool:
        elapsed = self._monotonic() - self._last
        if not self._pieces:  # keep the stream live while the model sends nothing
            return elapsed * 3000 >= self._writer_ttl_ms
        return (
            self.writes == 0
            or elapsed >= FLUSH_SECONDS
            or len(self._pieces) >= FLUSH_CHUNKS
            or self._chars >= FLUSH_CHARS
        )

    def write(self, separator: str = "") -> Write:
        """The write of what is waiting (joined with ``separator``)."""
        piece = separator.join(self._pieces)
        self._pieces.clear()
        self._chars = 0
        self.writes += 1
        self._last = self._monotonic()
        engine = self._engine
        assert self.stream_id is not None
        return Write(
            answer_stream.write_stream(
                engine.store_state,
                engine.chat_id,
                self.stream_id,
                self.writes,
                piece,
                writer_ttl_ms=self._writer_ttl_ms,
                **engine.stream_scope(fenced=True),
            )
        )


class SyncStreamIO:
    """A sync shell's answers to a streamed answer's effects."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._model_stream: Any = None
        self._title: Future[str] | None = None

    def handle(self, step: Any) -> Any:
        if isinstance(step, Write):
            return self._store.run(step.operation)
        if step is NEXT_CHUNK:
            return next(self._model_stream, END)
        if isinstance(step, OpenModel):
            self._model_stream = import_litellm().completion(**step.request)
            return None
        if isinstance(step, StartTitle):
            executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxstore-title")
            self._title = executor.submit(
                generate_chat_title, step.question, step.model, **step.options
            )
            executor.shutdown(wait=False)
            return None
        if step is TITLE:
            return self._title.result() if self._title is not None else None
        if step is ABANDON:
            close = getattr(self._model_stream, "close", None)
            if callable(close):
                with contextlib.suppress(Exception):
                    close()
            return None
        if step is SETTLE:
            return None
        return NOT_MINE


class AsyncStreamIO:
    """An async shell's answers to a streamed answer's effects (writes in the background)."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self._model_stream: Any = None
        self._title: asyncio.Future[str] | None = None
        self._writing: asyncio.Future[Any] | None = None

    async def handle(self, step: Any) -> Any:
        if step is NEXT_CHUNK:
            try:
                return await self._model_stream.__anext__()
            except StopAsyncIteration:
                return END
        if isinstance(step, Write):
            await self._settle()
            self._writing = asyncio.ensure_future(self._store.run(step.operation))
            return None
        if step is SETTLE:
            await self._settle()
            return None
        if isinstance(step, OpenModel):
            litellm = await aimport_litellm(step.request.get("model"))
            self._model_stream = await litellm.acompletion(**step.request)
            return None
        if isinstance(step, StartTitle):
            self._title = asyncio.ensure_future(
                agenerate_chat_title(step.question, step.model, **step.options)
            )
            return None
        if step is TITLE:
            return await self._title if self._title is not None else None
        if step is ABANDON:
            await self._abandon()
            return None
        return NOT_MINE

    async def _settle(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            await writing

    async def _abandon(self) -> None:
        writing, self._writing = self._writing, None
        if writing is not None:
            with contextlib.suppress(Exception):
                await writing
        if self._title is not None:
            self._title.cancel()
        close = getattr(self._model_stream, "aclose", None)
        if callable(close):
            with contextlib.suppress(Exception):
                await close()


class StreamPlan(Protocol):
    """What the readers below need of a streamed answer's plan."""

    read: bool

    def steps(self) -> Plan[None]: ...

    def cancel(self) -> Plan[None]: ...


PlanT = TypeVar("PlanT", bound=StreamPlan)


class SyncPlanReader(Generic[PlanT]):
    """A streamed answer read once by a sync caller: ``for`` it, and ``close()`` it (or leave
    ``with``) to stop it before its end. The iterator is held weakly: a caller that breaks out of
    its loop drops it, which closes it, which stops the answer."""

    _plan: PlanT
    _iterator: weakref.ref[Generator[Any, None, None]] | None = None

    def _drive(self, steps: Plan[None]) -> Generator[Any, None, None]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[Any]:
        iterator = self._drive(self._plan.steps())
        self._iterator = weakref.ref(iterator)
        return iterator

    def close(self) -> None:
        """Stop the answer unless it ended (what stopping means: see the class)."""
        iterator = self._iterator() if self._iterator is not None else None
        if iterator is not None and self._plan.read:
            iterator.close()
            return
        for _ in self._drive(self._plan.cancel()):
            raise AssertionError("cancelling hands nothing out")

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class AsyncPlanReader(Generic[PlanT]):
    """The async form of :class:`SyncPlanReader`: ``async for``, ``aclose()``, ``async with``."""

    _plan: PlanT
    _iterator: weakref.ref[AsyncIterator[Any]] | None = None

    def _drive(self, steps: Plan[None]) -> AsyncIterator[Any]:
        raise NotImplementedError

    def __aiter__(self) -> AsyncIterator[Any]:
        iterator = self._drive(self._plan.steps())
        self._iterator = weakref.ref(iterator)
        return iterator

    async def aclose(self) -> None:
        """The async form of :meth:`SyncPlanReader.close`."""
        iterator = self._iterator() if self._iterator is not None else None
        if iterator is not None and self._plan.read:
            await iterator.aclose()  # type: ignore[attr-defined]
            return
        async for _ in self._drive(self._plan.cancel()):
            raise AssertionError("cancelling hands nothing out")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()
