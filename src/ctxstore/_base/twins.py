"""Sync and async twins: one API written twice as thin shells over one core (a store, an engine,
a turn), documented once.

The sync class holds the docs. Each method of the async twin carries a one-line pointer
(``The async form of :meth:`Store.append`.``: what an editor shows on hover), and
:func:`documented_by` appends the sync method's docstring to it at import time, so ``help()``
and the API reference show the whole text while the source keeps one copy.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

C = TypeVar("C", bound=type)

#: Async-only names and the sync names they stand for.
_SYNC_NAMES = {"__aenter__": "__enter__", "__aexit__": "__exit__", "aclose": "close"}


def pointer(sync_cls: type, name: str, form: str = "async form") -> str:
    """The docstring an async twin's method carries in the source (another ``form``: a user's
    handle, ``"user-scoped form"``, points at the store's method the same way)."""
    return f"The {form} of :meth:`{sync_cls.__name__}.{name}`."


def documented_by(sync_cls: type, form: str = "async form") -> Callable[[C], C]:
    """Class decorator of an async twin: every method that points at ``sync_cls`` (see the
    module docstring) gets the sync method's docstring after its pointer. A method whose
    docstring is anything else keeps it: it documents what only the async twin does."""

    def decorate(cls: C) -> C:
        for name, member in vars(cls).items():
            function: Any = getattr(member, "__func__", member)  # a classmethod's function
            if not inspect.isfunction(function):
                continue
            sync_name = _SYNC_NAMES.get(name, name)
            sync = getattr(sync_cls, sync_name, None)
            own = (function.__doc__ or "").strip()
            if sync is None or own != pointer(sync_cls, sync_name, form):
                continue
            function.__doc__ = f"{own}\n\n{inspect.getdoc(sync) or ''}".rstrip()
        return cls

    return decorate
