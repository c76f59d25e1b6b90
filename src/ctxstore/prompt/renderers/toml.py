"""TOML: fragments as keys and tables of one valid TOML document.

Output shape::

    hint = "Use CTEs"

    [term]
    name = "LTV"
    definition = "Lifetime Value"

The output always parses as TOML 1.0 and reads back as the data it came from, which decides
what the format leaves to us:

* Fragments become keys. A list of fragments becomes a table (``[container]`` holding ``hint =
  ...``); when names repeat, the key holds the list of their data, since TOML forbids a key
  twice: two ``hint`` fragments give ``hint = ["a", "b"]``, two ``term`` fragments with dict data
  give two ``[[term]]`` tables.
* Dicts and nested fragments become ``[dotted.sections]``; a list of dicts becomes an array of
  tables (``[[section]]``); other lists are inline arrays, with dicts in them as inline tables.
* A table's plain ``key = value`` lines come before its sub-tables, because TOML reads every
  line after a ``[header]`` as part of that table. Within each of the two groups, order is kept.
  The same holds at the top: plain top-level fragments come before the sections.
* Keys that are not bare keys (``A-Za-z0-9_-``) are quoted; strings are basic strings with
  backslashes, quotes and control characters escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.renderers.base import Entry, FragmentGroup, Renderer

__all__ = ["TomlRenderer", "encode_key", "encode_value"]

_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPES = str.maketrans(
    {
        '"': '\\"',
        "\\": "\\\\",
        **{chr(code): f"\\u{code:04X}" for code in (*range(0x20), 0x7F)},
        **_SHORT_ESCAPES,
    }
)
_BARE_KEY_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def encode_key(key: str) -> str:
    """``key`` bare when TOML allows it (``A-Za-z0-9_-``), else as a quoted string."""
    return key if key and _BARE_KEY_CHARS.issuperset(key) else _string(key)


def encode_value(value: Any) -> str:
    """A value in inline form: strings, numbers, booleans, ``[arrays]`` and ``{inline tables}``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ", ".join(encode_value(item) for item in value) + "]"
    pairs = (f"{encode_key(key)} = {encode_value(item)}" for key, item in value.items())
    return "{" + ", ".join(pairs) + "}"


def _string(text: str) -> str:
    return f'"{text.translate(_ESCAPES)}"'


class TomlRenderer(Renderer):
    """Renders fragments as one TOML document, top-level entries separated by a blank line.

    With ``group_fragments=True``, sibling fragments become one key, the plural of their name,
    holding the list of their data: ``hints = ["First", "Second"]``, or ``[[terms]]`` tables.
    """

    separator = "\n\n"

    def render_blocks(self, entries: Sequence[Entry]) -> Iterable[str]:
        document = self._table(entries)
        yield from _plain_lines(document)
        yield from _sections((), document)

    def _table(self, entries: Iterable[Entry]) -> dict[str, Any]:
        """Fragments (and groups) as the keys of one table; repeated names collect a list."""
        collected: dict[str, list[Any]] = {}
        for entry in entries:
            if isinstance(entry, FragmentGroup):
                value: Any = [self._value(member.data) for member in entry.members]
            else:
                value = self._value(entry.data)
            collected.setdefault(entry.name, []).append(value)
        return {
            name: values[0] if len(values) == 1 else values for name, values in collected.items()
        }

    def _value(self, data: Any) -> Any:
        """Fragment data as plain TOML values: fragments become tables (one key each)."""
        if isinstance(data, Fragment):
            return self._table([data])
        if isinstance(data, dict):
            return {key: self._value(item) for key, item in data.items()}
        if not isinstance(data, list):
            return data
        items = self.arrange(data)
        if items and all(isinstance(item, (Fragment, FragmentGroup)) for item in items):
            return self._table(items)
        return [
            self._table([item])
            if isinstance(item, (Fragment, FragmentGroup))
            else self._value(item)
            for item in items
        ]


def _is_section(value: Any) -> bool:
    """True for values written under a header: tables and non-empty lists of tables."""
    if isinstance(value, dict):
        return True
    return isinstance(value, list) and bool(value) and all(isinstance(item, dict) for item in value)


def _plain_lines(table: dict[str, Any]) -> Iterator[str]:
    for key, value in table.items():
        if not _is_section(value):
            yield f"{encode_key(key)} = {encode_value(value)}"


def _sections(path: tuple[str, ...], table: dict[str, Any]) -> Iterator[str]:
    """The sub-tables of ``table`` (at ``path``), each with its own sub-tables, in order."""
    for key, value in table.items():
        if isinstance(value, dict):
            yield _section((*path, key), value, "[{}]")
        elif _is_section(value):
            for item in value:
                yield _section((*path, key), item, "[[{}]]")


def _section(path: tuple[str, ...], table: dict[str, Any], brackets: str) -> str:
    header = brackets.format(".".join(encode_key(part) for part in path))
    body = "\n".join([header, *_plain_lines(table)])
    return "\n\n".join([body, *_sections(path, table)])
