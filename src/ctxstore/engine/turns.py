"""``engine.turn(...)``: a turn of a conversation held together across workers.

A turn takes the chat's lease on entry and gives it back on exit; while it runs, every write of
the engine carries the turn's fencing token, and a write whose token another turn has made stale
raises :class:`~ctxstore.errors.LeaseLostError` and writes nothing (see
:mod:`ctxstore._core.ops.turns`).
:class:`Turn` is the sync context manager, :class:`AsyncTurn` the async one; the logic is the
engine core's (``begin_turn``, ``extend_turn_op``, ``end_turn_op``), so the two only drive it.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Generic, TypeVar

from ctxstore._base.plans import aperformer, arun_plan, performer, run_plan
from ctxstore._base.twins import documented_by
from ctxstore._core.ops import turns
from ctxstore.errors import CtxStoreError

if TYPE_CHECKING:
    from ctxstore.engine.core import EngineCore
    from ctxstore.store.async_store import AsyncStore
    from ctxstore.store.sync_store import Store

log = logging.getLogger("ctxstore")


StoreT = TypeVar("StoreT", "Store", "AsyncStore")


class _TurnBase(Generic[StoreT]):
    """What both context managers share: the settings, the grant, and its fields."""

    def __init__(
        self,
        store: StoreT,
        core: EngineCore,
        strategy: turns.TurnStrategy,
        lease: float | timedelta,
        wait: float | timedelta,
    ) -> None:
        self._store: StoreT = store
        self._core = core
        self.strategy = turns.check_strategy(strategy)
        #: Seconds the lease lasts from the take (and from each ``extend()``).
        self.lease = turns.seconds(lease, "lease", allow_zero=False)
        #: Seconds an ``"enqueue"`` turn waits for a busy chat before ``ChatBusyError``.
        self.wait = turns.seconds(wait, "wait", allow_zero=True)
        self._grant: turns.TurnGrant | None = None

    @property
    def fence(self) -> int:
        """The turn's fencing token (every write of the turn carries it)."""
        return self._granted().fence

    @property
    def expires_at(self) -> int:
        """When the lease runs out, epoch milliseconds (writes still pass after that until
        another turn takes the chat)."""
        return self._granted().expires_at

    @property
    def interrupted(self) -> bool:
        """True when this turn took the chat from another turn's live lease (``"interrupt"``)."""
        return self._granted().interrupted

    def _granted(self) -> turns.TurnGrant:
        if self._grant is None:
            raise RuntimeError("the turn has not started: use it as a context manager")
        return self._grant

    def _lease_for(self, lease: float | timedelta | None) -> float:
        return self.lease if lease is None else turns.seconds(lease, "lease", allow_zero=False)

    @staticmethod
    def _released(error: CtxStoreError, body_failed: bool) -> None:
        """Giving the lease back failed (Redis unreachable...): the lease expires on its own.
        Raise it unless the turn's body already failed (its error is the one that matters)."""
        if not body_failed:
            raise error
        log.warning("could not give a turn lease back (it expires on its own): %s", error)


class Turn(_TurnBase["Store"]):
    """A turn on a sync engine: ``with engine.turn("enqueue"): ...``."""

    def __enter__(self) -> Turn:
        steps = self._core.begin_turn(self.strategy, self.lease, self.wait)
        self._grant = run_plan(steps, performer(self._store.run))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            self._store.run(self._core.end_turn_op())
        except CtxStoreError as error:
            self._released(error, exc is not None)

    def extend(self, lease: float | timedelta | None = None) -> int:
        """Run the lease ``lease`` seconds (default: the turn's) from now; returns the new
        expiry (epoch ms). ``LeaseLostError`` when another turn has taken the chat."""
        self._grant = self._store.run(self._core.extend_turn_op(self._lease_for(lease)))
        return self._grant.expires_at


@documented_by(Turn)
class AsyncTurn(_TurnBase["AsyncStore"]):
    """A turn on an async engine: ``async with engine.turn("enqueue"): ...``."""

    async def __aenter__(self) -> AsyncTurn:
        steps = self._core.begin_turn(self.strategy, self.lease, self.wait)
        self._grant = await arun_plan(steps, aperformer(self._store.run))
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self._store.run(self._core.end_turn_op())
        except CtxStoreError as error:
            self._released(error, exc is not None)

    async def extend(self, lease: float | timedelta | None = None) -> int:
        """The async form of :meth:`Turn.extend`."""
        self._grant = await self._store.run(self._core.extend_turn_op(self._lease_for(lease)))
        return self._grant.expires_at
