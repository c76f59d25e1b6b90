"""A window of a chat's graph, for drawing: ``graph_window`` (``lua/graph_window.lua``).

A chat of 10,000 messages cannot be drawn whole, and should not be read whole to draw a part of
it. The window is every message whose depth (its chain length) lies within ``radius`` of a
chosen message's, on at most ``max_lanes`` runs (a run is a stretch of messages each the child
of the one before: a branch's own messages, or a version of a message and what follows it).
One script reads exactly the records drawn, the branch heads and checkpoints among them, the
summaries whose chain reaches into the window (each covers its chain from the root through its
own message, so the window shows the part of that range it holds), and which drawn messages
are on the active branch. Everything comes from one atomic read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ctxstore._base.ids import check_name
from ctxstore._core.format.chat import chat_meta
from ctxstore._core.format.fields import corrupt, pairs
from ctxstore._core.format.pointers import branch_record, checkpoint_record, to_branch_info
from ctxstore._core.format.records import Slice, decode_records, derived_id, record_fields
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.ops.data_keys import opened, opened_chat
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ValidationError
from ctxstore.messages.text import message_label, preview
from ctxstore.models import BranchInfo, ChatMeta, CheckpointInfo, StoredSummary

#: Depths drawn on each side of the center, unless the caller says otherwise.
DEFAULT_RADIUS = 6
#: The most runs (lanes) drawn, unless the caller says otherwise.
DEFAULT_LANES = 8
#: The most branch heads, checkpoints and summaries a window returns (each).
MAX_MARKS = 64


@dataclass(frozen=True)
class WindowNode:
    """A message drawn: its position in the log (stable, write order), depth, lane (the index
    of its segment), parent (id when drawn; position always, -1 for a root)."""

    id: str
    position: int
    depth: int
    lane: int
    parent_position: int
    parent_id: str | None
    role: str
    preview: str
    created_at: int
    on_active_branch: bool


@dataclass(frozen=True)
class WindowSummary:
    """A summary whose covered chain reaches into the window: the summary, the position of the
    last message it covers, and the drawn messages it covers (ids, oldest first)."""

    summary: StoredSummary
    position: int
    covered_ids: tuple[str, ...]


@dataclass(frozen=True)
class GraphWindow:
    """What :func:`graph_window` returns (see the module)."""

    chat: ChatMeta
    center_id: str | None
    low_depth: int
    high_depth: int
    nodes: tuple[WindowNode, ...]
    lanes: int
    lanes_left_out: int
    deepest: int
    branches: tuple[BranchInfo, ...]
    checkpoints: tuple[CheckpointInfo, ...]
    summaries: tuple[WindowSummary, ...]

    @property
    def has_earlier(self) -> bool:
        return self.low_depth > 1

    @property
    def has_later(self) -> bool:
        return self.deepest > self.high_depth


def graph_window(
    state: StoreState,
    chat_id: str,
    *,
    around: str | None = None,
    radius: int = DEFAULT_RADIUS,
    max_lanes: int = DEFAULT_LANES,
    user_id: str | None = None,
) -> Operation[GraphWindow]:
    """The window around message ``around`` (None: the active branch's head); one script."""
    if around is not None:
        check_name(around, "message id")
    for name, value, top in (("radius", radius, 500), ("max_lanes", max_lanes, 64)):
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ValidationError(f"{name} must be an integer from 1 to {top}, got {value!r}")
    chat = state.keyspace.chat(chat_id)
    script = load_script("graph_window")
    reply = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, None), around or "", radius, max_lanes, MAX_MARKS),
        parse=lambda raw: raw,
        context=chat_context(chat_id),
    )
    meta = yield from opened_chat(state, chat_id, chat.key("chat"), reply[0], chat_meta)
    window: GraphWindow = yield from opened(
        state,
        chat_id,
        meta.user_id,
        meta.incarnation,
        lambda seal: _window(chat, meta, reply, seal),
    )
    return window


def _window(
    chat: Any, meta: ChatMeta, reply: Sequence[Any], seal: ChatSeal | None = None
) -> GraphWindow:
    (_flat_chat, center, low, high, flat_segments, parts, left_out, deepest,
     flat_branches, flat_checkpoints, flat_summaries, active_ranges) = reply  # fmt: skip
    log_key = chat.key("log")
    segments = [flat_segments[i : i + 4] for i in range(0, len(flat_segments), 4)]
    slices = [
        Slice(int(first), int(last), records)
        for (first, last, _parent, _depth), records in zip(segments, parts, strict=True)
    ]
    records = decode_records(slices, log_key, seal)
    active = _positions(active_ranges)
    # (position, depth, lane) of every record, in the order the segments hold them
    placed = [
        (position, int(first_depth) + offset, lane)
        for lane, (first, last, _parent, first_depth) in enumerate(segments)
        for offset, position in enumerate(range(int(first), int(last) + 1))
    ]
    ids: dict[int, str] = {}
    fields: dict[int, tuple[int, int, dict[str, Any]]] = {}
    for (position, _depth, _lane), record in zip(placed, records, strict=True):
        parent, created_at, payload, chosen, tag = record_fields(record, log_key, position)
        if parent >= position or parent < -1:
            raise corrupt(log_key, str(position), "a parent that is not an older position")
        ids[position] = (
            chosen if chosen is not None else derived_id(position, meta.incarnation, tag)
        )
        fields[position] = (parent, created_at, payload)
    nodes = []
    for position, depth, lane in placed:
        parent, created_at, payload = fields[position]
        nodes.append(
            WindowNode(
                id=ids[position],
                position=position,
                depth=depth,
                lane=lane,
                parent_position=parent,
                parent_id=ids.get(parent),
                role=message_label(payload),
                preview=preview(payload),
                created_at=created_at,
                on_active_branch=position in active,
            )
        )
    branch_key = chat.key("branch")
    branches = tuple(
        to_branch_info(name, branch_record(name, raw, branch_key), active=meta.active_branch)
        for name, raw in pairs(flat_branches, branch_key).items()
    )
    checkpoints = []
    for name, raw in pairs(flat_checkpoints, chat.key("checkpoint")).items():
        _position, message_id, created_at, _seq = checkpoint_record(
            name, raw, chat.key("checkpoint")
        )
        checkpoints.append(CheckpointInfo(name=name, message_id=message_id, created_at=created_at))
    summaries = []
    for i in range(0, len(flat_summaries), 3):
        member, position, covered = flat_summaries[i : i + 3]
        stored = parse_summary_member(member, chat.key("summary"), int(position), seal)
        covered_ids = tuple(ids[p] for p in sorted(_positions(covered)) if p in ids)
        summaries.append(WindowSummary(stored, int(position), covered_ids))
    return GraphWindow(
        chat=meta,
        center_id=ids.get(int(center)),
        low_depth=int(low),
        high_depth=min(int(high), max(int(deepest), int(low))),
        nodes=tuple(nodes),
        lanes=len(segments),
        lanes_left_out=int(left_out),
        deepest=int(deepest),
        branches=branches,
        checkpoints=tuple(checkpoints),
        summaries=tuple(summaries),
    )


def _positions(flat: Sequence[Any]) -> set[int]:
    """The positions of flat ``{first, last, ...}`` ranges."""
    found: set[int] = set()
    for i in range(0, len(flat), 2):
        found.update(range(int(flat[i]), int(flat[i + 1]) + 1))
    return found
