"""The chat page's list above the graph: every branch, checkpoint and summary of the chat.

The graph draws a window of the chat; what lies outside it (a branch made early in a long
chat, a checkpoint, an old summary) must still show, each as a link that opens the window
centred on it. One step of five reads, sent in the chat page's one round trip beside the graph
window (``protocol.together``): the branches and the checkpoints (each one script, as the
store's listings), the newest summaries and their count, and the chat's owner and incarnation
(a sealed chat's summaries are opened with the owner's keys). Bounded: at most :data:`SHOWN`
of each are listed, with how many there are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ctxstore._core.format.fields import field_text, scored_pairs
from ctxstore._core.format.sealed import ChatSeal
from ctxstore._core.format.summaries import parse_summary_member
from ctxstore._core.ops import branches, checkpoints
from ctxstore._core.ops.data_keys import opened
from ctxstore._core.protocol import Operation, command_call, together
from ctxstore._core.state import StoreState
from ctxstore.errors import CtxStoreError
from ctxstore.models import BranchInfo, CheckpointInfo, StoredSummary

#: The most branches, checkpoints and summaries the list shows of each.
SHOWN = 300


@dataclass(frozen=True)
class Marks:
    """What the list shows: the first :data:`SHOWN` of each kind and how many there are."""

    branches: list[BranchInfo]
    branch_count: int
    checkpoints: list[CheckpointInfo]
    checkpoint_count: int
    summaries: list[StoredSummary]
    summary_count: int


def chat_marks(state: StoreState, chat_id: str) -> Operation[Marks]:
    """The chat's branches (oldest first), checkpoints (newest first) and summaries (the newest
    first): one step."""
    found: list[Any] = yield from together(
        [
            branches.list_branches(state, chat_id),
            checkpoints.list_checkpoints(state, chat_id),
            _summaries(state, chat_id),
        ]
    )
    for outcome in found:
        if isinstance(outcome, CtxStoreError):
            raise outcome
    every_branch: list[BranchInfo] = found[0]
    every_checkpoint: list[CheckpointInfo] = found[1]
    summaries: list[StoredSummary]
    summaries, summary_count = found[2]
    return Marks(
        every_branch[:SHOWN],
        len(every_branch),
        every_checkpoint[:SHOWN],
        len(every_checkpoint),
        summaries,
        summary_count,
    )


def _summaries(state: StoreState, chat_id: str) -> Operation[tuple[list[StoredSummary], int]]:
    """The newest :data:`SHOWN` summaries of the chat and how many it has."""
    keys = state.keyspace.chat(chat_id)
    summary_key, chat_key = keys.key("summary"), keys.key("chat")
    flat, count, identity = yield (
        command_call(  # (ZREVRANGEBYSCORE: deploy/acl.conf's tenant users have it)
            ("ZREVRANGEBYSCORE", summary_key, "+inf", "-inf", "WITHSCORES", "LIMIT", 0, SHOWN),
            (summary_key,),
        ),
        command_call(("ZCARD", summary_key), (summary_key,)),
        command_call(("HMGET", chat_key, "user_id", "inc"), (chat_key,)),
    )
    for outcome in (flat, count, identity):
        if isinstance(outcome, CtxStoreError):
            raise outcome
    members = scored_pairs(flat)

    def decode(seal: ChatSeal | None) -> list[StoredSummary]:
        return [
            parse_summary_member(member, summary_key, int(float(score)), seal)
            for member, score in members
        ]

    owner, incarnation = identity
    if not members or owner is None or incarnation is None:  # none, or the chat is gone
        return decode(None), int(count)
    summaries: list[StoredSummary] = yield from opened(
        state, chat_id, field_text(owner, chat_key, "user_id"),
        field_text(incarnation, chat_key, "inc"), decode,
    )  # fmt: skip
    return summaries, int(count)
