"""Renderers: turn context fragments into the text of a system prompt.

Four formats share one behaviour (see :mod:`ctxstore.prompt.renderers.base`): message fragments
and None values are left out, and ``group_fragments=True`` gathers sibling fragments under the
plural of their name.

* :class:`XmlRenderer`: nested tags, for models that follow tagged sections.
* :class:`MarkdownRenderer`: ``##`` sections and bullet lists.
* :class:`TomlRenderer`: a valid TOML document.
* :class:`ToonRenderer`: TOON, compact and tabular, for data-heavy prompts.
"""

from ctxstore.prompt.renderers.base import Entry, FragmentGroup, Renderer
from ctxstore.prompt.renderers.markdown import MarkdownRenderer
from ctxstore.prompt.renderers.toml import TomlRenderer
from ctxstore.prompt.renderers.toon import ToonRenderer
from ctxstore.prompt.renderers.xml import XmlRenderer

__all__ = [
    "Entry",
    "FragmentGroup",
    "MarkdownRenderer",
    "Renderer",
    "TomlRenderer",
    "ToonRenderer",
    "XmlRenderer",
]
