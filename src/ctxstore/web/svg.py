"""A graph window drawn as SVG by the server: no JavaScript, no layout library.

Columns are depths (a message's chain length), rows are lanes (runs: a branch's own messages,
or a version of a message and what follows it), so the versions of a message stand side by
side in one column. Each message is a link (``href`` chosen by the caller) around a
``<g class="node">``; parent edges are ``<path class="edge">`` (a parent outside the window is a
short stub from the left edge); branch heads and checkpoints are labels by their message; the
active branch's messages carry ``active``; each summary is a bracket over the drawn messages it
covers (``<g class="summary">``), above them: the raw messages stay drawn.

Everything taken from the data (ids, previews, names) is escaped, control characters made
visible, so a message cannot inject markup into the page.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from ctxstore._core.ops.graph_window import GraphWindow, WindowNode, WindowSummary

COLUMN = 124
ROW = 72
NODE_W = 108
NODE_H = 40
LEFT = 30
TOP = 40
#: Height of one summary bracket row above the lanes.
BRACKET = 22
PREVIEW_CHARS = 15

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def text(value: object) -> str:
    """``value`` as escaped text for an SVG or HTML element or attribute."""
    shown = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(value))
    return html.escape(shown, quote=True)


def draw(window: GraphWindow, link: Callable[[str], str], selected: str | None = None) -> str:
    """The SVG of ``window``; ``link(message_id)`` is each node's ``href``."""
    summaries = list(window.summaries)
    top = TOP + BRACKET * len(summaries)
    columns = window.high_depth - window.low_depth + 1
    width = LEFT * 2 + COLUMN * max(columns, 1)
    height = top + ROW * max(window.lanes, 1) + 20
    where: dict[str, tuple[int, int]] = {}
    for node in window.nodes:
        x = LEFT + (node.depth - window.low_depth) * COLUMN
        y = top + node.lane * ROW
        where[node.id] = (x, y)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" role="img" '
        'style="max-width: 100%; height: auto" '
        f'aria-label="{text(f"messages at depths {window.low_depth} to {window.high_depth}")}">'
    ]
    parts.append('<g class="edges">')
    for node in window.nodes:
        parts.append(_edge(node, where))
    parts.append("</g>")
    labels = _labels(window)
    for node in window.nodes:
        x, y = where[node.id]
        classes = ["node", _role_class(node.role)]
        if node.on_active_branch:
            classes.append("active")
        if node.id == selected:
            classes.append("selected")
        if node.id == window.center_id:
            classes.append("center")
        title = f"{node.role} · depth {node.depth} · {node.id}"
        parts.append(
            f'<a href="{text(link(node.id))}" class="node-link">'
            f'<g class="{" ".join(classes)}" data-id="{text(node.id)}" data-depth="{node.depth}">'
            f"<title>{text(title)}</title>"
            f'<rect x="{x}" y="{y}" width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text x="{x + 8}" y="{y + 16}" class="role">{text(node.role)}</text>'
            f'<text x="{x + 8}" y="{y + 32}" class="preview">{text(_short(node.preview))}</text>'
            "</g></a>"
        )
        for offset, (kind, name) in enumerate(labels.get(node.id, ())):
            parts.append(  # under the node: the gap between lanes
                f'<text x="{x + 2}" y="{y + NODE_H + 12 + 11 * offset}" class="{kind}">'
                f"{text(name)}</text>"
            )
    for row, summary in enumerate(summaries):
        parts.append(_bracket(summary, where, TOP + BRACKET * row))
    parts.append("</svg>")
    return "".join(parts)


def _edge(node: WindowNode, where: dict[str, tuple[int, int]]) -> str:
    x, y = where[node.id]
    active = " active" if node.on_active_branch else ""
    if node.parent_id is not None and node.parent_id in where:
        px, py = where[node.parent_id]
        sx, sy, ex, ey = px + NODE_W, py + NODE_H // 2, x, y + NODE_H // 2
        middle = (sx + ex) // 2
        return (
            f'<path class="edge{active}" data-from="{text(node.parent_id)}" '
            f'data-to="{text(node.id)}" d="M{sx},{sy} C{middle},{sy} {middle},{ey} {ex},{ey}"/>'
        )
    if node.parent_position >= 0:  # the parent lies before the window
        ey = y + NODE_H // 2
        return (
            f'<path class="edge stub{active}" data-to="{text(node.id)}" '
            f'd="M{max(x - 24, 2)},{ey} L{x},{ey}"/>'
        )
    return ""


def _labels(window: GraphWindow) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {}
    for branch in window.branches:
        if branch.head_message_id is not None:
            kind = "branch active-branch" if branch.is_active else "branch"
            found.setdefault(branch.head_message_id, []).append((kind, f"⎇ {branch.name}"))
    for checkpoint in window.checkpoints:
        found.setdefault(checkpoint.message_id, []).append(("checkpoint", f"⚑ {checkpoint.name}"))
    return found


def _bracket(summary: WindowSummary, where: dict[str, tuple[int, int]], y: int) -> str:
    covered = summary.covered_ids
    drawn = [where[i] for i in covered if i in where]
    if not drawn:
        return ""
    left = min(x for x, _ in drawn)
    right = max(x for x, _ in drawn) + NODE_W
    label = f"summary · {summary.summary['tokens']} tokens · {len(covered)} drawn messages"
    message_id = summary.summary["message_id"]
    return (
        f'<g class="summary" data-summary="{text(message_id)}" data-covers="{len(covered)}">'
        f"<title>{text(label)}</title>"
        f'<path class="bracket" d="M{left},{y + 14} L{left},{y + 6} L{right},{y + 6} '
        f'L{right},{y + 14}"/>'
        f'<text x="{left + 6}" y="{y + 2}" class="summary-label">{text(label)}</text></g>'
    )


def _short(preview: str) -> str:
    return preview if len(preview) <= PREVIEW_CHARS else preview[: PREVIEW_CHARS - 1] + "…"


def _role_class(role: str) -> str:
    return "role-" + (role if role in ("user", "assistant", "system", "tool") else "other")
