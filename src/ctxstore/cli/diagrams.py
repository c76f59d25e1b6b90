"""A chat graph as JSON, Mermaid or Graphviz DOT, for tools, docs and diagrams.

These draw the graph ``get_graph`` returns: one-line previews of the messages, not their
content. The whole chat, for a backup or a move, is ``store.export_chat`` (JSON Lines,
:mod:`ctxstore._core.format.portable`). JSON here is the graph as a model (it loads back with
``ChatGraph.model_validate``); Mermaid and DOT are diagrams of the same content: one node per
message, an edge from each parent to its child, and one node per branch and per checkpoint
pointing (dashed) at its message.

Diagram node ids are generated (``m0``, ``m1``, ... for messages, ``p0``, ... for branches and
checkpoints) and every label is escaped: ids, roles, previews and names are stored user data,
and a preview such as ``"]; drop`` or ``<script>`` must stay text, not become syntax or markup.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from ctxstore.cli.tree import node_label, printable
from ctxstore.models import BranchInfo, ChatGraph

__all__ = ["to_dot", "to_json", "to_mermaid"]

NodeKind = Literal["message", "branch", "checkpoint"]


@dataclass(frozen=True)
class _Node:
    key: str
    label: str
    kind: NodeKind


@dataclass(frozen=True)
class _Edge:
    source: str
    target: str
    pointer: bool


def to_json(graph: ChatGraph) -> str:
    """The graph as indented JSON: ``chat``, ``messages`` (with their previews), ``branches``,
    ``checkpoints``.

    Keys are sorted and messages keep the graph's order, so one graph always gives the same
    text (diffable, cacheable). The output is ASCII: non-ASCII text is ``\\u``-escaped, so it
    survives any terminal or file encoding. Metadata values JSON cannot hold (bytes) are
    written as their ``repr``.
    """
    return json.dumps(graph.model_dump(), indent=2, sort_keys=True, default=repr)


def to_mermaid(graph: ChatGraph) -> str:
    """A Mermaid ``flowchart TD``: messages as boxes, branches as stadiums, checkpoints as
    hexagons, each pointer drawn as a dotted arrow to its message."""
    nodes, edges = _diagram(graph)
    lines = ["flowchart TD"]
    lines.extend(f"    {node.key}{_mermaid_shape(node)}" for node in nodes)
    lines.extend(
        f"    {edge.source} {'-.->' if edge.pointer else '-->'} {edge.target}" for edge in edges
    )
    return "\n".join(lines)


def to_dot(graph: ChatGraph) -> str:
    """A Graphviz ``digraph`` of the same content as :func:`to_mermaid`, labelled with the chat."""
    nodes, edges = _diagram(graph)
    lines = [
        "digraph chat {",
        f"    label={_dot_string(f'chat {graph.chat.id}')};",
        "    labelloc=t;",
        '    node [shape=box, fontname="Helvetica"];',
    ]
    lines.extend(
        f"    {node.key} [label={_dot_string(node.label)}{_DOT_STYLE[node.kind]}];"
        for node in nodes
    )
    lines.extend(
        f"    {edge.source} -> {edge.target}{' [style=dashed]' if edge.pointer else ''};"
        for edge in edges
    )
    lines.append("}")
    return "\n".join(lines)


def _diagram(graph: ChatGraph) -> tuple[list[_Node], list[_Edge]]:
    """The nodes and edges both diagram formats draw, with generated, syntax-safe keys."""
    keys = {node.id: f"m{index}" for index, node in enumerate(graph.messages)}
    nodes = [_Node(keys[node.id], node_label(node), "message") for node in graph.messages]
    edges = [
        _Edge(keys[node.parent_id], keys[node.id], pointer=False)
        for node in graph.messages
        if node.parent_id is not None and node.parent_id in keys
    ]
    pointers: list[tuple[NodeKind, str, str | None]] = [
        ("branch", _branch_label(branch), branch.head_message_id) for branch in graph.branches
    ]
    pointers.extend(
        ("checkpoint", f"checkpoint: {checkpoint.name}", checkpoint.message_id)
        for checkpoint in graph.checkpoints
    )
    for index, (kind, label, target) in enumerate(pointers):
        key = f"p{index}"
        nodes.append(_Node(key, label, kind))
        if target is not None and target in keys:
            edges.append(_Edge(key, keys[target], pointer=True))
    return nodes, edges


def _branch_label(branch: BranchInfo) -> str:
    return f"branch: {branch.name}{' (active)' if branch.is_active else ''}"


# --- Mermaid ---------------------------------------------------------------------------------

_MERMAID_SHAPES: dict[NodeKind, tuple[str, str]] = {
    "message": ("[", "]"),
    "branch": ("([", "])"),
    "checkpoint": ("{{", "}}"),
}
#: Characters left as they are in a Mermaid label; every other character (quotes, brackets,
#: ``#``, ``<``, ``;``, backticks, ...) becomes a ``#<code>;`` entity, which Mermaid renders as
#: the character itself but never parses.
_MERMAID_PLAIN = re.compile(r"[\w .,:()\-/*!?'@+=]")


def _mermaid_shape(node: _Node) -> str:
    opening, closing = _MERMAID_SHAPES[node.kind]
    return f'{opening}"{_mermaid_text(node.label)}"{closing}'


def _mermaid_text(text: str) -> str:
    return "".join(
        char if _MERMAID_PLAIN.fullmatch(char) else f"#{ord(char)};" for char in printable(text)
    )


# --- DOT -------------------------------------------------------------------------------------

_DOT_STYLE: dict[NodeKind, str] = {
    "message": "",
    "branch": ", shape=ellipse, style=filled, fillcolor=lightblue",
    "checkpoint": ", shape=hexagon, style=filled, fillcolor=lightyellow",
}
#: Inside a quoted DOT string a backslash starts an escape and a quote ends the string; the
#: markup characters become entities, which Graphviz decodes in labels, so text that looks
#: like markup stays text in SVG and HTML output.
_DOT_ESCAPES = str.maketrans(
    {"\\": "\\\\", '"': '\\"', "&": "&amp;", "<": "&lt;", ">": "&gt;", "\n": " "}
)


def _dot_string(text: str) -> str:
    return f'"{printable(text).translate(_DOT_ESCAPES)}"'
