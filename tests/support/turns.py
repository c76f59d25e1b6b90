"""Turns through either engine shell: ``in_turn(engine, ...)`` is a sync context manager over
``engine.turn(...)`` whether the engine is sync or an async one behind the test facade."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.facade import SyncOverAsync


@contextmanager
def in_turn(engine: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
    """Enter ``engine.turn(*args, **kwargs)``; yields the turn (its ``extend()`` is sync)."""
    if not isinstance(engine, SyncOverAsync):
        with engine.turn(*args, **kwargs) as turn:
            yield turn
        return
    loop = engine._loop
    turn = engine.wrapped.turn(*args, **kwargs)
    loop.run(turn.__aenter__())
    try:
        yield SyncOverAsync(turn, loop)
    except BaseException as error:
        loop.run(turn.__aexit__(type(error), error, error.__traceback__))
        raise
    loop.run(turn.__aexit__(None, None, None))
