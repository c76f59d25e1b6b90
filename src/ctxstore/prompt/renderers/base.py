"""The renderer base class and the pre-processing every output format shares.

A renderer turns fragments into the text of a system prompt. Whatever the format, the same
things happen first, and they happen here so that the four renderers cannot drift apart:

* the input is checked: renderers take materialized fragments, whose data is a plain tree of
  str, int, float, bool, None, Fragment, list and dict; anything else (a lazy callable that was
  never materialized, a set, a cycle) is a :class:`~ctxstore.errors.ValidationError`;
* message fragments are skipped wherever they are, since messages go to the chat, not the prompt;
* None is removed from lists and dicts, and a fragment whose data is None is dropped;
* with ``group_fragments=True``, sibling fragments are gathered under the plural of their name
  (:meth:`Renderer.arrange`), at the place where the first of them stood.

Subclasses then only walk the cleaned tree and format it.
"""

from __future__ import annotations

import dataclasses
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.renderers.inflect import plural

__all__ = [
    "PAD",
    "Entry",
    "FragmentGroup",
    "Renderer",
    "hang",
    "indent_lines",
    "is_primitive",
    "pad",
    "plain_text",
    "text_lines",
    "title_case",
]

#: One level of indentation, in every format.
PAD = "  "


@dataclasses.dataclass(frozen=True)
class FragmentGroup:
    """Sibling fragments gathered under the plural of their name (``group_fragments=True``).

    ``name`` is the plural (``hints``); ``members`` are the fragments, in their original order.
    """

    name: str
    members: tuple[Fragment, ...]


#: What a renderer renders at the top level or meets in a list: a fragment or a group of them.
Entry = Fragment | FragmentGroup


class Renderer(ABC):
    """Renders fragments as the text of a system prompt.

    ``render`` checks and cleans the fragments (see the module docstring), groups them when
    ``group_fragments`` is set, renders each top-level entry and joins the results with
    :attr:`separator`. Subclasses implement :meth:`render_blocks`; while walking nested lists they
    call :meth:`arrange`, so that grouping applies at every level.
    """

    #: What joins the rendered top-level entries.
    separator: ClassVar[str] = "\n"

    def __init__(self, *, group_fragments: bool = False) -> None:
        self.group_fragments = group_fragments

    def render(self, fragments: Iterable[Fragment]) -> str:
        """The prompt text for ``fragments``; empty when nothing in them renders."""
        entries = self.arrange(self.prepare(fragments))
        return self.separator.join(block for block in self.render_blocks(entries) if block)

    @abstractmethod
    def render_blocks(self, entries: Sequence[Entry]) -> Iterable[str]:
        """The text of each top-level entry; empty strings are left out of the result."""

    def prepare(self, fragments: Iterable[Fragment]) -> list[Fragment]:
        """Checked and cleaned copies of the fragments that belong in the prompt."""
        if isinstance(fragments, Fragment):
            raise ValidationError("render() takes an iterable of fragments, not one fragment")
        prepared: list[Fragment] = []
        for index, item in enumerate(fragments):
            if not isinstance(item, Fragment):
                raise ValidationError(
                    f"render() takes fragments, got {type(item).__name__} at position {index}"
                )
            cleaned = _clean(item, item.name, set())
            if cleaned is not None:
                prepared.append(cleaned)
        return prepared

    def arrange(self, items: Iterable[Any], within: str | None = None) -> list[Any]:
        """``items`` as they render: with ``group_fragments``, fragments become groups.

        Fragments are grouped by the plural of their name; a group takes the place of its first
        member, and everything else keeps its position. Without the option this is ``list(items)``.
        A group is not wrapped when the wrapper would only repeat a name: the plural is the
        members' own name (``rules``), or the name of the list they sit in (``within``, as in
        ``policies`` holding ``policy`` fragments): ``<policies><policies>`` says nothing.
        """
        if not self.group_fragments:
            return list(items)
        listed = list(items)
        groups: dict[str, list[Fragment]] = {}
        for item in listed:
            if isinstance(item, Fragment):
                groups.setdefault(plural(item.name), []).append(item)
        wrapped = {
            name
            for name, members in groups.items()
            if name != within and any(member.name != name for member in members)
        }
        result: list[Any] = []
        placed: set[str] = set()
        for item in listed:
            name = plural(item.name) if isinstance(item, Fragment) else None
            if name is None or name not in wrapped:
                result.append(item)
            elif name not in placed:
                placed.add(name)
                result.append(FragmentGroup(name, tuple(groups[name])))
        return result


def _clean(value: Any, path: str, active: set[int]) -> Any:
    """``value`` without None, message fragments and fragments whose data is None.

    Returns None when nothing of ``value`` is left.

    ``path`` names the value in error messages; ``active`` holds the containers being walked, so
    that a list or dict that contains itself is reported instead of recursing forever.
    """
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, (str, int, float)):
        return _plain_scalar(value)
    if not isinstance(value, (Fragment, list, dict)):
        raise ValidationError(
            f"{path}: cannot render a value of type {type(value).__name__}; renderers take str, "
            "int, float, bool, None, Fragment, list and dict (materialize lazy data first)"
        )
    if id(value) in active:
        raise ValidationError(f"{path}: the data contains itself")
    active.add(id(value))
    try:
        return _clean_container(value, path, active)
    finally:
        active.discard(id(value))


def _clean_container(
    value: Fragment | list[Any] | dict[Any, Any], path: str, active: set[int]
) -> Any:
    if isinstance(value, Fragment):
        if value.is_message:
            return None
        data = _clean(value.data, path, active)
        return None if data is None else dataclasses.replace(value, data=data)
    if isinstance(value, list):
        items = (
            _clean(item, _child_path(path, item, f"[{i}]"), active) for i, item in enumerate(value)
        )
        return [item for item in items if item is not None]
    cleaned: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise ValidationError(f"{path}: dict keys must be strings, got {key!r}")
        kept = _clean(item, _child_path(path, item, f".{key}"), active)
        if kept is not None:
            cleaned[str.__str__(key)] = kept
    return cleaned


def _child_path(path: str, item: Any, step: str) -> str:
    """The path of a list item or dict value; a nested fragment adds its own name."""
    if isinstance(item, Fragment):
        return f"{path}{step}.{item.name}"
    return f"{path}{step}"


def _plain_scalar(value: str | int | float) -> str | int | float:
    """The built-in value of a str, int or float subclass (an enum member, say).

    Subclasses may override ``__str__``; formatting their built-in value keeps the output the
    same as for a plain value.
    """
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int.__int__(value)
    return float.__float__(value)


def is_primitive(value: Any) -> bool:
    """True for the leaf values of cleaned data: str, int, float and bool."""
    return isinstance(value, (str, int, float))


def plain_text(value: str | int | float) -> str:
    """A leaf value as prose formats (XML, Markdown) print it: booleans as ``true``/``false``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    return repr(value)


def pad(depth: int) -> str:
    """The indentation of ``depth`` levels."""
    return PAD * depth


def text_lines(text: str) -> list[str]:
    """The lines of ``text``, split at ``\\n``, ``\\r\\n`` or a lone ``\\r``."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def indent_lines(lines: Iterable[str], depth: int) -> str:
    """``lines`` indented ``depth`` levels and joined; blank lines get no trailing spaces."""
    return "\n".join(pad(depth) + line if line else "" for line in lines)


def hang(block: str, depth: int) -> str:
    """Turn ``block``, rendered one level deeper than ``depth``, into a ``- `` list item.

    The marker takes the place of the first line's last indentation level, so the first line
    keeps its column and the lines below stay aligned with it (Markdown and TOON list items).
    """
    return pad(depth) + "- " + block[len(pad(depth + 1)) :]


_WORD_SEPARATORS = re.compile(r"[\s_\-.]+")
_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def title_case(name: str) -> str:
    """A fragment name as a heading: ``style_guide`` and ``styleGuide`` -> ``Style Guide``.

    Words are split at ``_``, ``-``, ``.``, spaces and camelCase boundaries; each word's first
    letter is capitalized and the rest is kept, so acronyms survive (``userAPIKey`` -> ``User API
    Key``).
    """
    spaced = _CAMEL_BOUNDARY.sub(" ", _WORD_SEPARATORS.sub(" ", name))
    words = [word[0].upper() + word[1:] for word in spaced.split()]
    return " ".join(words) or name
