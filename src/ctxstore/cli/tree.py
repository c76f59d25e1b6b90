"""A chat graph drawn as an ASCII tree, for terminals, logs and bug reports.

A chat is mostly one long line of messages with a few forks (an edit, a retry, a side
question). Indenting every reply under the one before would push a 50-message chat 200 columns
to the right and make the output grow with the square of the chat's length, so only forks
indent: a message with a single child is followed by that child straight below it, at the same
indentation, and a message with several children lists them with ``├── ``/``└── ``::

    3f2a9c1e user: Plan a weekend in Lisbon.
    ├── 7b4d0e2a assistant: Day 1: Alfama and the castle. [main]
    │   0c5e8d1a user: And on Sunday?
    └── c91e5f3b assistant: Day 1: LX Factory. [main-v2*] (checkpoints: plan-b)

Several roots (a chat restarted from scratch) are drawn one after the other, separated by a
blank line, since each starts at the left edge like its own chain.

The walk is iterative (an explicit stack), never recursive: chains run to the store's depth
limit (100,000 by default), far past Python's recursion limit.

Everything drawn comes from stored user data, so it passes through :func:`printable`: a message
cannot move the cursor, clear the screen or recolour the terminal of whoever inspects it.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator

from ctxstore.messages.text import one_line
from ctxstore.models import ChatGraph, GraphNode

__all__ = [
    "PREVIEW_CHARS",
    "ROLE_CHARS",
    "SHORT_ID_CHARS",
    "node_label",
    "printable",
    "short_id",
    "visualize_graph",
]

#: How much of a message id is shown: enough to tell messages of one chat apart.
SHORT_ID_CHARS = 8
#: Widths of the preview and the role on a line: a label fits a terminal next to its marks.
PREVIEW_CHARS = 60
ROLE_CHARS = 20

_BRANCH_CONNECTOR = ("├── ", "│   ")
_LAST_CONNECTOR = ("└── ", "    ")

#: Control characters other than tab and newline (C0, DEL, C1): terminal escapes start here.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_REPLACEMENT = "\N{REPLACEMENT CHARACTER}"


def printable(text: str) -> str:
    """``text`` with control characters (except tab and newline) replaced by ``�``.

    Stored content is untrusted: an escape sequence printed raw would act on the terminal.
    """
    return _CONTROL.sub(_REPLACEMENT, text)


def short_id(message_id: str) -> str:
    """The first characters of a message id, as trees, logs and exports show it."""
    return message_id[:SHORT_ID_CHARS]


def node_label(node: GraphNode) -> str:
    """``<short id> <role>: <preview>`` on one printable line, whatever the message holds."""
    role = one_line(node.role, ROLE_CHARS)
    return printable(f"{short_id(node.id)} {role}: {one_line(node.preview, PREVIEW_CHARS)}")


#: Colours a part of a tree line: ``paint(kind, text)`` with kind ``"id"``, ``"role"``,
#: ``"heads"`` or ``"checkpoints"``; the text is already printable.
Paint = Callable[[str, str], str]


def _plain(_kind: str, text: str) -> str:
    return text


def visualize_graph(graph: ChatGraph, paint: Paint = _plain) -> str:
    """The chat as an ASCII tree: one line per message, branch heads and checkpoints marked.

    Children come in creation order (then id, for messages written in the same millisecond).
    A message that heads branches shows them in brackets, ``*`` marking the active one
    (``[main*, main-v2]``); one with checkpoints lists them (``(checkpoints: before-edit)``).
    Branches without a message are listed on a last line, so the active branch is always
    visible. ``paint`` colours ids, roles and those marks (the command line's, on a terminal).
    """
    if graph.messages:
        roots, children = _tree(graph)
        marks = _marks(graph, paint)
        blocks = ["\n".join(_walk(root, children, marks, paint)) for root in roots]
        lines = ["\n\n".join(blocks)]
    else:
        lines = [printable(f"chat {graph.chat.id!r} has no messages")]
    empty = [_branch_name(name, active) for name, active in _empty_branches(graph)]
    if empty:
        lines.append(printable(f"(empty branches: {', '.join(empty)})"))
    return "\n".join(lines)


def _order(node: GraphNode) -> tuple[int, str]:
    return (node.created_at, node.id)


def _tree(graph: ChatGraph) -> tuple[list[GraphNode], dict[str, list[GraphNode]]]:
    """Roots and children per parent, each in drawing order.

    A message whose parent is not in the graph is drawn as a root rather than dropped: a tree
    that hides messages would mislead exactly when someone is debugging the data.
    """
    known = {node.id for node in graph.messages}
    roots: list[GraphNode] = []
    children: dict[str, list[GraphNode]] = defaultdict(list)
    for node in sorted(graph.messages, key=_order):
        if node.parent_id is None or node.parent_id not in known:
            roots.append(node)
        else:
            children[node.parent_id].append(node)
    return roots, children


def _walk(
    root: GraphNode, children: dict[str, list[GraphNode]], marks: dict[str, str], paint: Paint
) -> Iterator[str]:
    """The lines of one root's tree, depth first, with an explicit stack.

    Each stack entry holds a message, the text before its label (indentation and connector)
    and the indentation of what comes under it.
    """
    stack: list[tuple[GraphNode, str, str]] = [(root, "", "")]
    while stack:
        node, lead, indent = stack.pop()
        label = node_label(node) if paint is _plain else _painted_label(node, paint)
        yield lead + label + marks.get(node.id, "")
        kids = children.get(node.id, [])
        if len(kids) == 1:
            stack.append((kids[0], indent, indent))
            continue
        for position in range(len(kids) - 1, -1, -1):
            connector, under = _LAST_CONNECTOR if position == len(kids) - 1 else _BRANCH_CONNECTOR
            stack.append((kids[position], indent + connector, indent + under))


def _painted_label(node: GraphNode, paint: Paint) -> str:
    """:func:`node_label` with its id and role painted (each part made printable first: the
    paint's escape codes must survive, the stored text's must not)."""
    role = printable(one_line(node.role, ROLE_CHARS))
    text = printable(one_line(node.preview, PREVIEW_CHARS))
    return f"{paint('id', printable(short_id(node.id)))} {paint('role', role)}: {text}"


def _branch_name(name: str, active: bool) -> str:
    return f"{name}*" if active else name


def _marks(graph: ChatGraph, paint: Paint = _plain) -> dict[str, str]:
    """Per message id, the text after its label: heads in branch order, then checkpoints."""
    heads: dict[str, list[str]] = defaultdict(list)
    for branch in graph.branches:
        if branch.head_message_id is not None:
            heads[branch.head_message_id].append(_branch_name(branch.name, branch.is_active))
    points: dict[str, list[str]] = defaultdict(list)
    for checkpoint in sorted(graph.checkpoints, key=lambda item: (item.created_at, item.name)):
        points[checkpoint.message_id].append(checkpoint.name)
    marks: dict[str, str] = {}
    for message_id in heads.keys() | points.keys():
        parts = []
        if message_id in heads:
            parts.append(paint("heads", printable(f"[{', '.join(heads[message_id])}]")))
        if message_id in points:
            text = printable(f"(checkpoints: {', '.join(points[message_id])})")
            parts.append(paint("checkpoints", text))
        marks[message_id] = " " + " ".join(parts)
    return marks


def _empty_branches(graph: ChatGraph) -> list[tuple[str, bool]]:
    return [
        (branch.name, branch.is_active)
        for branch in graph.branches
        if branch.head_message_id is None
    ]
