"""Values a read hands out are the caller's: :class:`OwnedList` and :func:`owned`.

A stored message never changes, so a process keeps the chains it read (the process cache) and
the next read of a chat pays only for what is new. What a read returns must still be the
caller's to change: a caller that adds ``cache_control`` to a message, redacts a field or edits
the list a model is given must not change what the next read of that chat returns, in this
process or any other.

Copying every message of every read would cost a warm read of 10,000 messages about 14 ms
(``owned`` of each: 1.4 µs a message), where the read itself costs about 0.2 ms: the cache
would be worth nothing. So the copy is made where the caller touches a message: an
:class:`OwnedList` is a plain ``list`` (``isinstance(x, list)``, mutable, JSON- and
msgpack-serializable) over the cache's items whose every way of handing out an item
(``x[i]``, iteration, slices, ``copy()``, ``pop()``, ``+``) first replaces that item, in the
list, by a deep copy of it, made once. A read costs what the list of references costs (the
slice the cache always made) plus a byte per message; a caller that looks at the newest 20
messages pays for 20 copies, one that iterates them all pays for all, once. Code that only
reads the list in C without handing items to Python code (``json.dumps``, ``msgpack.packb``,
``repr``, ``==``, ``in``) reads the shared items, which is safe: it changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any, SupportsIndex, TypeVar, overload

T = TypeVar("T")

_CONTAINERS = (dict, list, tuple)


def owned(value: T) -> T:
    """A deep copy of ``value``, for the values a read decodes (dicts, lists, tuples of
    strings, numbers, bytes, None, booleans): new containers all the way down, the immutable
    leaves shared. 1.4 µs for a stored message, a tenth of ``copy.deepcopy``."""
    kind = type(value)
    if kind is dict:
        return {  # type: ignore[return-value]
            key: owned(item) if type(item) in _CONTAINERS else item
            for key, item in value.items()  # type: ignore[attr-defined]
        }
    if kind is list:
        return [owned(item) if type(item) in _CONTAINERS else item for item in value]  # type: ignore[attr-defined,return-value]
    if kind is tuple:
        return tuple(owned(item) if type(item) in _CONTAINERS else item for item in value)  # type: ignore[attr-defined,return-value]
    if isinstance(value, (dict, list)):  # a subclass (an OwnedList among them): a plain copy
        return owned(dict(value) if isinstance(value, dict) else list(value))  # type: ignore[return-value]
    return value


class OwnedList(list[T]):
    """A read's list whose items become the caller's own copies as they are handed out (see
    the module). Changing the list itself (``append``, ``sort``, ``del``...) first makes every
    item the caller's."""

    __slots__ = ("_left", "_shared")

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        #: 1 where the item is still the cache's; None once none is.
        self._shared: bytearray | None = None
        self._left = 0

    @classmethod
    def over(cls, shared: list[T], length: int, own: Iterable[T] = ()) -> OwnedList[T]:
        """The first ``length`` items of ``shared`` (a cache's, never changed through this
        list), then ``own`` (the caller's already: new values)."""
        out: OwnedList[T] = cls.__new__(cls)
        # One copy of the references, as the slice the cache made before: extending an empty
        # list from a list is a copy in C, where list(...) through __init__ costs four times it.
        list.extend(out, shared)
        if len(shared) > length:
            list.__delitem__(out, slice(length, None))
        out._shared = bytearray(b"\x01") * length if length else None
        out._left = length
        list.extend(out, own)
        return out

    # --- handing items out ---------------------------------------------------------------

    def _own(self, index: int) -> T:
        """Item ``index`` (in range, not negative), the caller's copy."""
        item = list.__getitem__(self, index)
        shared = self._shared
        if shared is not None and index < len(shared) and shared[index]:
            item = owned(item)
            list.__setitem__(self, index, item)
            shared[index] = 0
            self._left -= 1
            if not self._left:
                self._shared = None
        return item

    def _own_all(self) -> None:
        if self._shared is not None:
            for index in range(len(self._shared)):
                self._own(index)
            self._shared = None

    @overload
    def __getitem__(self, index: SupportsIndex) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> T | list[T]:
        if isinstance(index, slice):
            if self._shared is not None:
                for position in range(*index.indices(len(self))):
                    self._own(position)
            return list.__getitem__(self, index)
        position = index.__index__()
        if position < 0:
            position += len(self)
        if self._shared is None or not 0 <= position < len(self):
            return list.__getitem__(self, index)
        return self._own(position)

    def __iter__(self) -> Iterator[T]:
        if self._shared is None:
            return list.__iter__(self)
        return self._owned_items()

    def _owned_items(self) -> Iterator[T]:
        position = 0
        item_at = list.__getitem__
        while position < len(self):
            shared = self._shared
            if shared is not None and position < len(shared) and shared[position]:
                yield self._own(position)
            else:
                yield item_at(self, position)
            position += 1

    def __reversed__(self) -> Iterator[T]:
        self._own_all()
        return list.__reversed__(self)

    def copy(self) -> list[T]:
        self._own_all()
        return list.copy(self)

    def __copy__(self) -> list[T]:
        return self.copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> list[T]:
        import copy

        return [copy.deepcopy(item, memo) for item in self]

    def __reduce_ex__(self, protocol: SupportsIndex) -> tuple[Any, ...]:
        return (list, (self.copy(),))

    def pop(self, index: SupportsIndex = -1) -> T:
        self._own_all()
        return list.pop(self, index)

    def __add__(self, other: list[T]) -> list[T]:  # type: ignore[override]
        self._own_all()
        return list.__add__(self, other)

    def __radd__(self, other: list[T]) -> list[T]:
        self._own_all()
        return list.__add__(list(other), self)

    def __mul__(self, times: SupportsIndex) -> list[T]:
        self._own_all()
        return list.__mul__(self, times)

    __rmul__ = __mul__

    # --- changing the list: every item becomes the caller's first --------------------------

    def __setitem__(self, index: Any, value: Any) -> None:
        self._own_all()
        list.__setitem__(self, index, value)

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self._own_all()
        list.__delitem__(self, index)

    def __iadd__(self, other: Iterable[T]) -> OwnedList[T]:  # type: ignore[override]
        self._own_all()
        list.extend(self, other)
        return self

    def __imul__(self, times: SupportsIndex) -> OwnedList[T]:
        self._own_all()
        list.__imul__(self, times)
        return self

    def append(self, item: T) -> None:
        self._own_all()
        list.append(self, item)

    def extend(self, items: Iterable[T]) -> None:
        self._own_all()
        list.extend(self, items)

    def insert(self, index: SupportsIndex, item: T) -> None:
        self._own_all()
        list.insert(self, index, item)

    def remove(self, item: T) -> None:
        self._own_all()
        list.remove(self, item)

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._own_all()
        list.sort(self, *args, **kwargs)

    def reverse(self) -> None:
        self._own_all()
        list.reverse(self)

    def clear(self) -> None:
        self._shared = None
        list.clear(self)
