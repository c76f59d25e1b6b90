"""Where an engine stands in its chat, and the named transitions that move it.

A :class:`ChatSession` is the engine's view of the chat: the chat's fields, the branch it works
on and that branch's head as last seen, its *anchor* (the newest message it saved there: a save
that finds another turn's message after it goes onto a side branch from it), the turn it is in
(whose fence every write carries), whether a write of that turn was refused (its lease was
taken), and what the last read found (the newest summary, the context's stored size, the
chain for finding the last assistant message). No I/O: the engine core runs the operations and
reports each outcome here, through a method named for what happened.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TypedDict

from ctxstore._core.cache import CachedChain
from ctxstore._core.ops import turns
from ctxstore.errors import EmptyBranchError
from ctxstore.models import AppendResult, BranchInfo, ChatMeta, StoredSummary


class Scope(TypedDict):
    """The identity every call of an opened engine carries."""

    user_id: str
    incarnation: str | None


class ChatSession:
    """One engine's position in one chat (see the module docstring). Not safe to share."""

    def __init__(self, chat_id: str, user_id: str) -> None:
        self.chat_id = chat_id
        self.user_id = user_id
        #: The chat's fields as last read or written; None until the chat is opened.
        self.chat: ChatMeta | None = None
        #: The branch the engine works on, and its head as last seen.
        self.branch = "main"
        self.head: str | None = None
        #: The last read's messages that have versions (id -> (rank, count)), when it asked.
        self.versions: dict[str, tuple[int, int]] | None = None
        #: Whether the chat may have forks (its last read said so): then reads ask for the
        #: versions in the same round trip; a chat without forks has none to ask for.
        self.forked = False
        #: The newest message this engine saved on its branch (None before its first save and
        #: after it moved to another branch).
        self.anchor: str | None = None
        #: The turn this engine is in (None outside ``turn()``).
        self.turn: turns.TurnGrant | None = None
        self.turn_token = ""
        #: A write of the turn was refused (its lease was taken): the pending messages go onto
        #: a side branch at the next save outside the turn.
        self.lease_lost = False
        #: The newest summary the last read found on the branch, and the stored tokens of the
        #: context from it on (-1: not read yet).
        self.summary: StoredSummary | None = None
        self.context_tokens = -1
        # The branch's last assistant message (for last_assistant_message()): known from a
        # save, or searched in the chain last read, only when a save needs it.
        self._last_assistant: str | None = None
        self._last_assistant_known = False
        self._read_chain: CachedChain | None = None

    # --- what it is ------------------------------------------------------------------------

    @property
    def opened(self) -> bool:
        return self.chat is not None

    @property
    def scope(self) -> Scope:
        """What every call carries: the user and the chat's incarnation, so another owner's chat,
        or this chat deleted and re-created, is refused in the script."""
        return {
            "user_id": self.user_id,
            "incarnation": self.chat.incarnation if self.chat is not None else None,
        }

    @property
    def write_scope(self) -> Scope:
        """The scope of a write: inside a turn, the incarnation carries the turn's fencing
        token, so the script refuses the write once another turn has taken the chat."""
        scope = self.scope
        if self.turn is not None:
            scope["incarnation"] = turns.fenced(scope["incarnation"], self.turn.fence)
        return scope

    def saved_head(self, operation: str) -> str:
        """The head, for an operation that starts from a message (the branch must have one)."""
        if self.head is None:
            raise EmptyBranchError(
                f"{operation}() needs a saved message on branch {self.branch!r} "
                f"of chat {self.chat_id!r}"
            )
        return self.head

    @property
    def knows_last_assistant(self) -> bool:
        """Whether :meth:`last_assistant_id` can answer without reading the branch."""
        return self._last_assistant_known or self.head is None

    def last_assistant_id(self) -> str | None:
        """The id of the branch's last assistant message (searched in the chain last read)."""
        if self._last_assistant is None and self._read_chain is not None:
            self._last_assistant = next(
                (
                    item["id"]
                    for item in self._read_chain.newest_first()
                    if item["message"].get("role") == "assistant"
                ),
                None,
            )
            self._read_chain = None
        return self._last_assistant

    # --- transitions -----------------------------------------------------------------------

    def opened_chat(self, chat: ChatMeta, branch: BranchInfo) -> None:
        """The chat was opened (created or found) on its active ``branch``."""
        self.chat = chat
        self.followed(branch)

    def followed(self, branch: BranchInfo) -> None:
        """The engine works on ``branch`` from now on, at the head a read or write found."""
        if branch.name != self.branch or branch.head_message_id != self.head:
            self._last_assistant_known = False
        self.branch = branch.name
        self.head = branch.head_message_id

    def read_chain(
        self,
        branch: BranchInfo,
        chain: CachedChain,
        summary: StoredSummary | None,
        context_tokens: int,
        versions: dict[str, tuple[int, int]] | None = None,
    ) -> None:
        """A read returned ``branch``'s chain (from its newest ``summary`` on, when it has one;
        with ``versions``, the ranks of its messages that have versions)."""
        self.followed(branch)
        self.summary = summary
        self.context_tokens = context_tokens
        self.versions = versions
        self._read_chain = chain
        self._last_assistant_known = True
        self._last_assistant = None

    def read_size(self, branch: BranchInfo, summary: StoredSummary | None) -> None:
        """A read returned ``branch``'s size and its newest summary, no message."""
        self.followed(branch)
        self.summary = summary

    def saved(self, result: AppendResult, assistants: Sequence[str]) -> None:
        """An append stored the pending messages (``assistants``: the ids of the assistant
        messages among them): the engine is at the new head, which is its anchor."""
        self.branch = result.branch
        self.head = self.anchor = result.head_message_id
        self.lease_lost = False
        if assistants:
            self._last_assistant = assistants[-1]
            self._read_chain = None

    def untitled(self) -> bool:
        """Whether the chat, as the engine last saw it, has no title."""
        return self.chat is not None and self.chat.title is None

    def titled(self, title: str) -> None:
        """A save gave the untitled chat ``title`` (if another writer's came first, the chat
        keeps that one; either way the engine stops offering one)."""
        if self.chat is not None:
            self.chat = dataclasses.replace(self.chat, title=title)

    def stepped_aside(self, side: BranchInfo, start: str) -> None:
        """The engine moved to a side branch from its anchor ``start`` (a lost turn's answer)."""
        self.followed(side)
        self.anchor = start

    def moved(self, branch: BranchInfo) -> None:
        """A rewind, restore or switch: the engine works on ``branch``, with no anchor there."""
        self.followed(branch)
        self.anchor = None
        self.lease_lost = False

    def chat_changed(self, chat: ChatMeta) -> None:
        """The chat's fields as a write left them."""
        self.chat = chat

    def began_turn(self, grant: turns.TurnGrant, token: str, *, computed_before: bool) -> None:
        """The engine holds the chat's turn lease: its writes carry the fence from now on.

        A turn starts from the chat as it is: what other turns wrote before this one began is
        the conversation, not a conflict. So the engine drops its anchor (its next save goes
        onto the branch's current head) unless it carries messages ``computed_before`` the turn
        (an answer or a tool result already pending, made from an older view of the chat):
        those keep the anchor rule and go onto a side branch if another turn wrote since.
        """
        self.turn, self.turn_token = grant, token
        self.lease_lost = False
        if not computed_before:
            self.anchor = None
            self._last_assistant_known = False  # the head may have moved since the last turn

    def extended_turn(self, grant: turns.TurnGrant) -> None:
        self.turn = grant

    def ended_turn(self) -> str:
        """The turn is over (its writes no longer carry the fence); returns its token ("" when
        there was none)."""
        token, self.turn, self.turn_token = self.turn_token, None, ""
        return token

    def lost_lease(self) -> None:
        """A write of the turn was refused: another turn has the chat."""
        self.lease_lost = True
