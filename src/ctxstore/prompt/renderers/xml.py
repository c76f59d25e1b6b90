"""XML: every fragment, dict key and list item becomes a tag.

Output shape, for prompts that models read as nested, clearly delimited sections::

    <workflow>
      <task>Analysis</task>
      <steps>
        <step>step1</step>
        <step>step2</step>
      </steps>
    </workflow>

Leaf values sit inline between their tags, or on their own indented lines when they span several
lines. Text is escaped (``& < > " '``). Empty lists and dicts, and elements whose content is all
empty, render nothing. Tag names come from fragment names and dict keys; one that is not a valid
XML name (``date format``, ``1st``) has its invalid characters replaced by ``_`` so the markup
stays well formed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.renderers.base import (
    Entry,
    FragmentGroup,
    Renderer,
    indent_lines,
    pad,
    plain_text,
    text_lines,
)
from ctxstore.prompt.renderers.inflect import singular

__all__ = ["XmlRenderer", "escape_text", "tag_name"]

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})
_NAME = re.compile(r"[^\W\d][\w.-]*")
_NOT_NAME_CHARS = re.compile(r"[^\w.-]+")


def escape_text(text: str) -> str:
    """``text`` with the five XML special characters replaced by entities."""
    return text.translate(_ESCAPES)


def tag_name(name: str) -> str:
    """``name`` as a valid XML tag name: unchanged when it already is one.

    Runs of characters that may not appear in a name become one ``_``, and a name that would
    start with a digit, ``.`` or ``-`` gets a leading ``_``: ``date format`` -> ``date_format``,
    ``1st`` -> ``_1st``.
    """
    if _NAME.fullmatch(name):
        return name
    cleaned = "_".join(part for part in _NOT_NAME_CHARS.split(name) if part)
    return cleaned if _NAME.fullmatch(cleaned) else f"_{cleaned}"


class XmlRenderer(Renderer):
    """Renders fragments as nested XML elements, top-level ones joined by a newline.

    With ``group_fragments=True``, sibling fragments are wrapped in an element named after the
    plural of their name: ``hint`` fragments go inside ``<hints>``.
    """

    separator = "\n"

    def render_blocks(self, entries: Sequence[Entry]) -> Iterable[str]:
        return (self._entry(entry, 0) for entry in entries)

    def _entry(self, entry: Entry, depth: int) -> str:
        if isinstance(entry, FragmentGroup):
            members = [self._entry(member, depth + 1) for member in entry.members]
            return _element(tag_name(entry.name), members, depth)
        return self._field(entry.name, entry.data, depth)

    def _field(self, name: str, value: Any, depth: int) -> str:
        """``value`` in an element named ``name``; empty when there is nothing to show."""
        tag = tag_name(name)
        if isinstance(value, Fragment):
            return _element(tag, [self._entry(value, depth + 1)], depth)
        if isinstance(value, dict):
            children = [self._field(key, item, depth + 1) for key, item in value.items()]
            return _element(tag, children, depth)
        if isinstance(value, list):
            return _element(tag, self._items(name, value, depth + 1), depth)
        return _leaf(tag, escape_text(plain_text(value)), depth)

    def _items(self, name: str, items: list[Any], depth: int) -> list[str]:
        """List items: fragments as their own elements, other values tagged ``singular(name)``."""
        item_name = singular(name)
        return [
            self._entry(item, depth)
            if isinstance(item, (Fragment, FragmentGroup))
            else self._field(item_name, item, depth)
            for item in self.arrange(items, within=name)
        ]


def _element(tag: str, children: list[str], depth: int) -> str:
    body = "\n".join(child for child in children if child)
    if not body:
        return ""
    return f"{pad(depth)}<{tag}>\n{body}\n{pad(depth)}</{tag}>"


def _leaf(tag: str, text: str, depth: int) -> str:
    """``<tag>text</tag>``, or the text's lines indented one level between the tags."""
    if "\n" not in text and "\r" not in text:
        return f"{pad(depth)}<{tag}>{text}</{tag}>"
    body = indent_lines(text_lines(text), depth + 1)
    return f"{pad(depth)}<{tag}>\n{body}\n{pad(depth)}</{tag}>"
