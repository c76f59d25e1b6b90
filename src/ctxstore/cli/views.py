"""The text the command line prints: tables of chats, branches and checkpoints, a branch's
log, a tree cut to a branch or to its newest messages, a verify report.

Every function returns the text for one :class:`~ctxstore.cli.terminal.Style` (colour or none).
Stored data is untrusted, so every piece of it passes through :func:`printable` before any
colour is added: a message cannot move the cursor or recolour the terminal of whoever looks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from ctxstore.cli.terminal import Style
from ctxstore.cli.tree import ROLE_CHARS, SHORT_ID_CHARS, printable, short_id
from ctxstore.messages.text import message_label, message_text, one_line, preview
from ctxstore.models import (
    BranchInfo,
    ChatGraph,
    ChatInfo,
    CheckpointInfo,
    GraphNode,
    StoredMessage,
    VerifyReport,
)

_TITLE_CHARS = 40
#: Continuation lines of a message in ``log`` start under its role, so the left column holds
#: only message ids and one glance down it shows where each message begins.
_LOG_INDENT = " " * (SHORT_ID_CHARS + 1)


def iso_utc(epoch_ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC to the second (``2023-11-14T22:13:20Z``)."""
    moment = datetime.fromtimestamp(epoch_ms / 1000, tz=timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def table(
    header: Sequence[str], rows: Sequence[Sequence[str]], numeric: set[int], style: Style
) -> str:
    """Aligned columns (``numeric`` ones right-aligned), the header in bold; cells are made
    printable and padded before any colour, so colour never shifts a column."""
    cells = [list(header)] + [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(header))]
    lines = [
        "  ".join(
            cell.rjust(width) if column in numeric else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in cells
    ]
    lines[0] = style.paint(lines[0], "bold")
    return "\n".join(lines)


def chat_table(chats: Sequence[ChatInfo], style: Style) -> str:
    """Chats as listed (newest first): counts right-aligned, times UTC."""
    rows = [
        (
            chat.id,
            chat.user_id,
            one_line(chat.title, _TITLE_CHARS) if chat.title else "-",
            str(chat.message_count),
            str(chat.branch_count),
            iso_utc(chat.updated_at),
        )
        for chat in chats
    ]
    header = ("ID", "USER", "TITLE", "MESSAGES", "BRANCHES", "UPDATED")
    return table(header, rows, {3, 4}, style)


def chats_json(chats: Sequence[ChatInfo]) -> str:
    """The chats as a JSON array (metadata values JSON cannot hold written as their repr)."""
    return json.dumps(
        [chat.model_dump() for chat in chats], indent=2, ensure_ascii=False, default=repr
    )


def branch_table(branches: Sequence[BranchInfo], style: Style) -> str:
    """Branches in creation order; the active one marked ``*`` (in green on a terminal)."""
    rows = [
        (
            f"{branch.name}*" if branch.is_active else branch.name,
            short_id(branch.head_message_id) if branch.head_message_id else "-",
            str(branch.message_count),
            iso_utc(branch.created_at),
        )
        for branch in branches
    ]
    text = table(("BRANCH", "HEAD", "MESSAGES", "CREATED"), rows, {2}, style)
    lines = text.split("\n")
    for index, branch in enumerate(branches, start=1):
        if branch.is_active:
            lines[index] = style.paint(lines[index], "green")
    return "\n".join(lines)


def checkpoint_table(chat_id: str, checkpoints: Sequence[CheckpointInfo], style: Style) -> str:
    """Checkpoints newest first, with the message each names."""
    if not checkpoints:
        return printable(f"chat {chat_id!r} has no checkpoints")
    rows = [
        (checkpoint.name, short_id(checkpoint.message_id), iso_utc(checkpoint.created_at))
        for checkpoint in checkpoints
    ]
    return table(("CHECKPOINT", "MESSAGE", "CREATED"), rows, set(), style)


def branch_log(
    branch: BranchInfo, messages: Sequence[StoredMessage], style: Style, *, limited: bool
) -> str:
    """A branch's messages, root first: a header, then each message's id, role and whole text
    (a message without text, a tool call, shows its preview). ``limited``: ``messages`` are
    the newest of the branch, and the header says how many of all."""
    active = " (active)" if branch.is_active else ""
    total = branch.message_count
    count = f"{total} message{'' if total == 1 else 's'}"
    if limited and len(messages) < total:
        count += f", the newest {len(messages)} shown"
    lines = [style.paint(printable(f"branch {branch.name}{active}: {count}"), "bold")]
    for stored in messages:
        message = stored["message"]
        text = message_text(message) or preview(message)
        first, *rest = [printable(line) for line in text.splitlines()] or [""]
        role = printable(one_line(message_label(message), ROLE_CHARS))
        ident = printable(short_id(stored["id"]))
        line = f"{ident} {role}: {first}".rstrip()
        if style.enabled:
            line = f"{style.paint(ident, 'yellow')} {style.paint(role, 'cyan')}: {first}".rstrip()
        lines.append(line)
        lines.extend((_LOG_INDENT + item).rstrip() for item in rest)
    return "\n".join(lines)


def cut_graph(graph: ChatGraph, branch: str | None, limit: int | None) -> tuple[ChatGraph, int]:
    """The graph cut to one branch's chain and/or to its newest ``limit`` messages (in write
    order), and how many messages were left out. A message whose parent is left out is drawn
    as a root."""
    messages: Sequence[GraphNode] = graph.messages
    if branch is not None:
        chosen = next((item for item in graph.branches if item.name == branch), None)
        if chosen is None:
            from ctxstore.errors import BranchNotFoundError

            raise BranchNotFoundError(
                f"branch {branch!r} does not exist in chat {graph.chat.id!r}",
                chat_id=graph.chat.id,
                id=branch,
            )
        on_chain = _chain_ids(graph, chosen.head_message_id)
        messages = [node for node in messages if node.id in on_chain]
    if limit is not None and len(messages) > limit:
        messages = messages[len(messages) - limit :]
    left_out = len(graph.messages) - len(messages)
    return graph.model_copy(update={"messages": tuple(messages)}), left_out


def _chain_ids(graph: ChatGraph, head: str | None) -> set[str]:
    parents = {node.id: node.parent_id for node in graph.messages}
    chain: set[str] = set()
    current = head
    while current is not None and current in parents and current not in chain:
        chain.add(current)
        current = parents[current]
    return chain


def verify_text(report: VerifyReport, style: Style) -> str:
    """What was repaired, then ``ok: ...`` or one ``kind key field: detail`` line per problem."""
    lines = [style.paint(printable(f"repaired: {what}"), "yellow") for what in report.repaired]
    if report.ok:
        messages = f"{report.messages} message{'' if report.messages == 1 else 's'}"
        branches = f"{report.branches} branch{'' if report.branches == 1 else 'es'}"
        lines.append(
            style.paint(printable(f"ok: chat {report.chat_id}, {messages}, {branches}"), "green")
        )
    for problem in report.problems:
        where = " ".join(part for part in (problem.kind, problem.key, problem.field) if part)
        lines.append(style.paint(printable(f"{where}: {problem.detail}"), "red"))
    return "\n".join(lines)


def summary_line(kind: str, count: int) -> str:
    """``3 messages``, ``1 branch``: a count and its noun."""
    plural = {"branch": "branches", "summary": "summaries"}.get(kind, kind + "s")
    return f"{count} {kind if count == 1 else plural}"


def as_json(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)
