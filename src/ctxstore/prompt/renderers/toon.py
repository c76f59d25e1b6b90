"""TOON (Token-Oriented Object Notation): compact, indentation-based, tables for uniform lists.

TOON (https://github.com/toon-format/spec) encodes the JSON data model in few tokens, which makes
it a good fit for data-heavy prompts::

    context:
      task: Our favorite hikes together
      location: Boulder
    friends[3]: ana,luis,sam
    hikes[2]{id,name,distanceKm}:
      1,Blue Lake Trail,7.5
      2,Ridge Overlook,9.2

A fragment is a key (``name: data``) and a list of fragments is a list of one-key objects. The
encoder follows the spec: list lengths in ``[N]``, lists of flat dicts with the same keys as
tables, other lists as ``- `` items, objects in lists with their first field on the ``- `` line,
numbers in canonical decimal form (no exponent, ``-0`` as ``0``, NaN and infinities as ``null``),
keys and strings quoted only when they must be. Output never has trailing spaces.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.renderers.base import Entry, FragmentGroup, Renderer, hang, is_primitive, pad

__all__ = ["ToonRenderer", "encode_key", "encode_scalar"]

_BARE_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_NUMERIC_LIKE = re.compile(r"[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
# Characters that end or split an unquoted value: structure, the comma delimiter, escapes and
# control characters (newlines included).
_UNSAFE_CHARS = re.compile(r'[:,"\[\]{}\\\x00-\x1f]')
_LITERALS = frozenset({"true", "false", "null"})
_ESCAPES = str.maketrans({"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def encode_key(key: str) -> str:
    """``key`` bare when it is an identifier (``[A-Za-z_][A-Za-z0-9_.]*``), else quoted."""
    return key if _BARE_KEY.fullmatch(key) else _quote(key)


def encode_scalar(value: str | int | float) -> str:
    """A leaf value: ``true``/``false``, a canonical number, or a string quoted when needed."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _canonical_number(value)
    return _quote(value) if _needs_quotes(value) else value


def _needs_quotes(text: str) -> bool:
    """True when ``text`` unquoted would read as something else (a number, a key, a list item)."""
    return (
        not text
        or text != text.strip()
        or text in _LITERALS
        or text.startswith("-")
        or _NUMERIC_LIKE.fullmatch(text) is not None
        or _UNSAFE_CHARS.search(text) is not None
    )


def _quote(text: str) -> str:
    return f'"{text.translate(_ESCAPES)}"'


def _canonical_number(value: float) -> str:
    """Decimal form without exponent or trailing zeros: ``1e16`` -> ``10000000000000000``."""
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"
    text = format(Decimal(repr(value)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


class ToonRenderer(Renderer):
    """Renders fragments as TOON, one top-level key per fragment, joined by a newline.

    With ``group_fragments=True``, sibling fragments become one key, the plural of their name,
    whose value is the list of their data: ``hints[2]: First,Second``.
    """

    separator = "\n"

    def render_blocks(self, entries: Sequence[Entry]) -> Iterable[str]:
        return (self._entry(entry, 0) for entry in entries)

    def _entry(self, entry: Entry, depth: int) -> str:
        if isinstance(entry, FragmentGroup):
            return self._field(entry.name, [member.data for member in entry.members], depth)
        return self._field(entry.name, entry.data, depth)

    def _field(self, key: str, value: Any, depth: int) -> str:
        head = pad(depth) + encode_key(key)
        if isinstance(value, Fragment):
            return f"{head}:\n{self._entry(value, depth + 1)}"
        if isinstance(value, dict):
            return "\n".join([f"{head}:", *self._fields(value, depth + 1)])
        if isinstance(value, list):
            return self._array(head, value, depth, tables=True)
        return f"{head}: {encode_scalar(value)}"

    def _fields(self, data: dict[str, Any], depth: int) -> Iterable[str]:
        return (self._field(key, value, depth) for key, value in data.items())

    def _array(self, head: str, values: list[Any], depth: int, *, tables: bool) -> str:
        """A list under ``head`` (the indented key, or ``- `` for a list inside a list).

        ``tables`` allows the tabular form; a list directly inside a list uses ``- `` items
        instead, as the spec keeps keyless table headers for the document root.
        """
        items = self.arrange(values)
        size = f"{head}[{len(items)}]"
        if all(is_primitive(item) for item in items):
            inline = ",".join(encode_scalar(item) for item in items)
            return f"{size}: {inline}" if items else f"{size}:"
        fields = _table_fields(items) if tables else None
        if fields is not None:
            header = f"{size}{{{','.join(encode_key(field) for field in fields)}}}:"
            rows = (
                pad(depth + 1) + ",".join(encode_scalar(row[field]) for field in fields)
                for row in items
            )
            return "\n".join([header, *rows])
        return "\n".join([f"{size}:", *(self._item(item, depth + 1) for item in items)])

    def _item(self, item: Any, depth: int) -> str:
        if is_primitive(item):
            return f"{pad(depth)}- {encode_scalar(item)}"
        if isinstance(item, list):
            return self._array(f"{pad(depth)}- ", item, depth, tables=False)
        if isinstance(item, dict):
            if not item:
                return f"{pad(depth)}-"
            return hang("\n".join(self._fields(item, depth + 1)), depth)
        return hang(self._entry(item, depth + 1), depth)


def _table_fields(items: list[Any]) -> list[str] | None:
    """The columns of ``items`` when they can be a table: non-empty dicts of primitives that all
    have the same keys (in any order); the first dict's key order is the column order."""
    if not items or not all(isinstance(item, dict) and item for item in items):
        return None
    fields = list(items[0])
    if any(set(item) != set(fields) for item in items):
        return None
    if not all(is_primitive(value) for item in items for value in item.values()):
        return None
    return fields
