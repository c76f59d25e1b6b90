"""One operation as a shell drives it: its :class:`~ctxstore._core.protocol.Exchange` (after
the start-up checks when they are due) and its trace. The sync and async stores only send
what :meth:`Driven.request` gives and feed back the replies; everything else about running an
operation is here, once for both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

from ctxstore._core import telemetry
from ctxstore._core.protocol import Exchange, Operation, Outcome, WireCommand
from ctxstore._core.server_checks import with_startup_checks
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError

T = TypeVar("T")


class Driven(Generic[T]):
    """``operation`` on ``state``'s store, being driven. Use::

    driven = Driven(state, operation)
    try:
        while not driven.done:
            driven.respond(send(driven.request()))  # a transport error: driven.fail(it)
        return driven.result()
    except BaseException as error:
        driven.failed(error)
        raise
    """

    def __init__(self, state: StoreState, operation: Operation[T]) -> None:
        # Watched before the start-up checks wrap it: the span is named after the operation.
        self._watch = telemetry.watch(state, operation)
        if state.checks_due:
            operation = with_startup_checks(state, operation)
        self._exchange = Exchange(operation, state.durability, state.lua)
        self._over = False
        self._state = state

    @property
    def done(self) -> bool:
        return self._exchange.done

    def request(self) -> list[WireCommand]:
        """The commands of the next round trip (counted on the operation's span)."""
        if self._watch is not None:
            self._watch.step(self._exchange.scripts)
        return self._exchange.request()

    def respond(self, replies: Sequence[Outcome]) -> None:
        self._exchange.respond(replies)

    def fail(self, error: BaseException) -> CtxStoreError:
        """The ctxstore error a transport error of this round trip is (to raise)."""
        return self._exchange.fail(error)

    def result(self) -> T:
        """The operation's result (its span ends with it)."""
        result = self._exchange.result
        self._over = True
        # The call has its reply: the tokenizer opens in the background now, if the counts
        # came from the compact table (a cold start's first save does not wait for it).
        self._state.message_tokens.warm()
        if self._watch is not None:
            self._watch.finish(result)
        return result

    def failed(self, error: BaseException) -> None:
        """The operation ended with ``error`` (its span records it)."""
        if self._watch is not None and not self._over:
            self._over = True
            self._watch.fail(error)
