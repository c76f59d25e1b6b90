"""The fragment: one named piece of context (a role, a hint, a message...).

A :class:`Fragment` is a name and its data. Data is a plain tree: strings, numbers, booleans,
None, nested fragments, lists and dicts, to any depth. Message fragments (``kind="message"``)
carry a chat-message dict and are stored in the chat graph; every other fragment renders into
the system prompt.

Data may also be *lazy*: a sync or async callable, an awaitable, or a (sync or async) iterator.
Lazy values are materialized once, by :func:`materialize` / :func:`amaterialize`, which the
context engine calls on the first ``resolve()`` and caches. Both share one walker
(:func:`walk`), a plan (:mod:`ctxstore._base.plans`) that asks for each awaitable it meets with
an :class:`Await` effect: the sync shell runs it on a private event loop
(:func:`await_on_private_loop`), the async shell awaits it (:func:`awaited`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as _dt
import enum
import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Iterator, Mapping
from decimal import Decimal
from pathlib import PurePath
from typing import Any, Literal, TypeGuard, TypeVar

from ctxstore._base.plans import Effect, Plan, aperformer, arun_plan, performer, run_plan
from ctxstore.errors import ValidationError

T = TypeVar("T")
FragmentKind = Literal["fragment", "message"]
FRAGMENT_KINDS: tuple[FragmentKind, ...] = ("fragment", "message")

#: Data a fragment may hold. Recursive in practice (lists and dicts of the same), plus lazy values.
FragmentData = Any


@dataclasses.dataclass(eq=True)
class Fragment:
    """A named piece of context.

    ``name`` is the tag (XML), section title (Markdown), table (TOML) or key (TOON) it renders
    under. ``id`` identifies message fragments in the chat graph. ``metadata`` is never rendered;
    it carries operational flags (for example that a message replaces the last assistant one).
    """

    name: str
    data: FragmentData = None
    id: str | None = None
    kind: FragmentKind = "fragment"
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ValidationError(f"a fragment needs a non-empty string name, got {self.name!r}")
        if self.kind not in FRAGMENT_KINDS:
            raise ValidationError(
                f"fragment kind must be one of {FRAGMENT_KINDS}, got {self.kind!r}"
            )
        if self.id is not None and (not isinstance(self.id, str) or not self.id):
            raise ValidationError(f"a fragment id must be a non-empty string, got {self.id!r}")

    @property
    def is_message(self) -> bool:
        """True for message fragments, which go to the chat graph instead of the prompt."""
        return self.kind == "message"


def fragment(name: str, *children: FragmentData) -> Fragment:
    """A fragment whose data is the list of ``children`` (fragments or values)."""
    return Fragment(name, list(children))


def is_lazy(value: object) -> bool:
    """True for values materialized on first resolve: callables, awaitables and iterators."""
    if isinstance(value, (str, bytes, type, Fragment)):
        return False
    return (
        callable(value)
        or inspect.isawaitable(value)
        or isinstance(value, (Iterator, AsyncIterator))
    )


def is_fragment(value: object) -> TypeGuard[Fragment]:
    """True for a :class:`Fragment` (the seed's ``isFragment``)."""
    return isinstance(value, Fragment)


def is_fragment_object(value: object) -> bool:
    """True for a plain mapping that is not a fragment: data a fragment renders as nested
    named values (the seed's ``isFragmentObject``)."""
    return isinstance(value, Mapping) and not isinstance(value, Fragment)


def is_lazy_fragment(value: object) -> bool:
    """True for a fragment whose data holds a lazy value anywhere (a callable, an awaitable, an
    iterator), which the engine materializes on its first resolve (the seed's
    ``isLazyFragment``)."""
    return isinstance(value, Fragment) and _holds_lazy(value.data)


def _holds_lazy(value: object) -> bool:
    if is_lazy(value):
        return True
    if isinstance(value, Fragment):
        return _holds_lazy(value.data)
    if isinstance(value, Mapping):
        return any(_holds_lazy(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(_holds_lazy(item) for item in value)
    return False


def copy_fragment(source: Fragment) -> Fragment:
    """A deep copy of the plain parts of a fragment; lazy values are shared, not copied.

    The engine copies what callers hand to ``set()`` so that later changes to their dicts and
    lists do not leak into the context. Lazy values cannot be copied (a generator runs once) and
    are materialized into fresh values anyway.
    """
    return Fragment(
        source.name,
        _copy_data(source.data),
        id=source.id,
        kind=source.kind,
        metadata=_copy_data(source.metadata),
    )


def _copy_data(value: Any) -> Any:
    if isinstance(value, Fragment):
        return copy_fragment(value)
    if isinstance(value, Mapping):
        return {key: _copy_data(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_copy_data(item) for item in value]
    return value


def materialize(source: Fragment) -> Fragment:
    """Resolve every lazy value in ``source`` and return a plain fragment tree.

    Async lazy values are run on a private event loop, which is impossible from inside a running
    loop: there, use :func:`amaterialize` (the async engine does).
    """
    result: Fragment = run_plan(walk(source, source.name), performer(handle=await_on_private_loop))
    return result


async def amaterialize(source: Fragment) -> Fragment:
    """Async twin of :func:`materialize`: awaits async lazy values on the running loop."""
    result: Fragment = await arun_plan(walk(source, source.name), aperformer(handle=awaited))
    return result


@dataclasses.dataclass(frozen=True, slots=True)
class Await:
    """What materializing lazy data asks its shell for (an
    :class:`~ctxstore._base.plans.Effect`): the value of ``awaitable``."""

    awaitable: Awaitable[Any]


def await_on_private_loop(request: Any) -> Any:
    """The sync shell's answer to :class:`Await`: the awaitable run to its end on an event loop
    of its own. Impossible from inside a running loop (a sync engine called from async code):
    there the async engine awaits instead, and this raises a ValidationError saying so."""
    if not isinstance(request, Await):
        raise ValidationError(f"materializing a fragment does not ask for {request!r}")
    pending = request.awaitable
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        if inspect.iscoroutine(pending):
            pending.close()
        raise ValidationError(
            "a fragment holds async data that cannot be awaited here (an event loop is running): "
            "use AsyncContextEngine and await resolve() before render()"
        )

    async def wait() -> Any:
        return await pending

    return asyncio.run(wait())


def awaited(request: Any) -> Awaitable[Any]:
    """The async shell's answer to :class:`Await`: the awaitable itself, for the driver to
    await on the running loop."""
    if not isinstance(request, Await):
        raise ValidationError(f"materializing a fragment does not ask for {request!r}")
    return request.awaitable


async def _collect_async(iterator: AsyncIterator[Any]) -> list[Any]:
    return [item async for item in iterator]


_MAX_LAZY_CHAIN = 32


def _unwrap(value: Any, path: str) -> Plan[Any]:
    """Call, await or drain lazy values until a plain value remains (a bounded number of times)."""
    for _ in range(_MAX_LAZY_CHAIN):
        if not is_lazy(value):
            return value
        if isinstance(value, AsyncIterator):
            value = yield Effect(Await(_collect_async(value)))
        elif isinstance(value, Iterator):
            value = list(value)
        elif inspect.isawaitable(value):
            value = yield Effect(Await(value))
        else:
            value = value()
    raise ValidationError(f"{path}: lazy data kept returning lazy data")


def walk(value: Any, path: str) -> Plan[Any]:
    """Materialize and normalize ``value``: a plan whose only effects are :class:`Await`
    (lazy async data for the shell to await)."""
    value = yield from _unwrap(value, path)
    if isinstance(value, Fragment):
        data = yield from walk(value.data, f"{path}.{value.name}")
        return Fragment(
            value.name, data, id=value.id, kind=value.kind, metadata=_copy_data(value.metadata)
        )
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValidationError(f"{path}: dict keys must be strings, got {key!r}")
            result[key] = yield from walk(item, f"{path}.{key}")
        return result
    if isinstance(value, (list, tuple)):
        items = []
        for index, item in enumerate(value):
            items.append((yield from walk(item, f"{path}[{index}]")))
        return items
    return _scalar(value, path)


def _scalar(value: object, path: str) -> Any:
    """Common value types that have one obvious text form; anything else is an error."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, (_dt.datetime, _dt.date, _dt.time)):
        return value.isoformat()
    if isinstance(value, (Decimal, uuid.UUID, PurePath)):
        return str(value)
    raise ValidationError(
        f"{path}: fragment data of type {type(value).__name__} is not supported "
        "(use str, int, float, bool, None, Fragment, list or dict)"
    )
