"""Markdown: one ``##`` section per top-level fragment, nested data as bullet lists.

Output shape, for models and people who read prompts as documents::

    ## Style Guide
    - **prefer**: CTEs
    - **never**: subqueries

A primitive is the section body as it is; dict entries are ``- **key**: value`` bullets and list
items ``- item`` bullets, two more spaces per nesting level. A list item that is itself a dict
or a list starts its nested bullets on the item's own line (``- - **id**: 1``). Text is not
escaped: the prompt shows what the data says. Lines after the first of a multi-line value are
indented under their bullet so they stay part of it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.renderers.base import (
    Entry,
    FragmentGroup,
    Renderer,
    hang,
    indent_lines,
    pad,
    plain_text,
    text_lines,
    title_case,
)

__all__ = ["MarkdownRenderer"]


class MarkdownRenderer(Renderer):
    """Renders fragments as ``## Title Case`` sections joined by a blank line.

    With ``group_fragments=True``, sibling fragments are listed under a bullet (or, at the top
    level, a section) titled with the plural of their name: ``- **Hints**:``.
    """

    separator = "\n\n"

    def render_blocks(self, entries: Sequence[Entry]) -> Iterable[str]:
        return (self._section(entry) for entry in entries)

    def _section(self, entry: Entry) -> str:
        heading = f"## {title_case(entry.name)}"
        if isinstance(entry, FragmentGroup):
            body = "\n".join(self._entry(member, 0) for member in entry.members)
        else:
            body = self._body(entry.data)
        return f"{heading}\n{body}" if body else heading

    def _body(self, data: Any) -> str:
        if isinstance(data, Fragment):
            return self._entry(data, 0)
        if isinstance(data, dict):
            return self._entries(data, 0)
        if isinstance(data, list):
            return self._items(data, 0)
        return plain_text(data)

    def _entry(self, entry: Entry, depth: int) -> str:
        """A nested fragment as a ``- **name**`` bullet; a group under its title-cased plural."""
        if isinstance(entry, FragmentGroup):
            members = (self._entry(member, depth + 1) for member in entry.members)
            return "\n".join([_label(title_case(entry.name), depth), *members])
        return self._field(entry.name, entry.data, depth)

    def _field(self, name: str, value: Any, depth: int) -> str:
        if isinstance(value, Fragment):
            nested = self._entry(value, depth + 1)
        elif isinstance(value, dict):
            nested = self._entries(value, depth + 1)
        elif isinstance(value, list):
            nested = self._items(value, depth + 1)
        else:
            return _bullet(_label(name, depth), plain_text(value), depth)
        return "\n".join(part for part in (_label(name, depth), nested) if part)

    def _entries(self, data: dict[str, Any], depth: int) -> str:
        return "\n".join(self._field(key, value, depth) for key, value in data.items())

    def _items(self, items: list[Any], depth: int) -> str:
        return "\n".join(self._item(item, depth) for item in self.arrange(items))

    def _item(self, item: Any, depth: int) -> str:
        if isinstance(item, (Fragment, FragmentGroup)):
            return self._entry(item, depth)
        if isinstance(item, dict):
            nested = self._entries(item, depth + 1)
        elif isinstance(item, list):
            nested = self._items(item, depth + 1)
        else:
            return _bullet(f"{pad(depth)}-", plain_text(item), depth)
        return hang(nested, depth) if nested else f"{pad(depth)}-"


def _label(name: str, depth: int) -> str:
    return f"{pad(depth)}- **{name}**:"


def _bullet(marker: str, text: str, depth: int) -> str:
    """``marker`` followed by ``text``, whose later lines are indented under the bullet."""
    first, *rest = text_lines(text)
    head = f"{marker} {first}" if first else marker
    return "\n".join([head, indent_lines(rest, depth + 1)]) if rest else head
