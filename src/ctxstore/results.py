"""The light results of store operations: messages, append results, branch chains.

These are TypedDicts and frozen dataclasses, not pydantic models: a chain holds thousands of
messages and an append happens on every turn, so they must cost nothing to build, and importing
them must not load pydantic (serverless functions pay for imports on every cold start). The
models of chats, branches and checkpoints are in :mod:`ctxstore.models`.

All times are epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from typing_extensions import NotRequired, TypedDict

if TYPE_CHECKING:
    from ctxstore.models import BranchInfo, ChatInfo, ChatMeta

ConflictPolicy = Literal["raise", "rebase", "fork"]
ExistingPolicy = Literal["raise", "fork"]


@dataclass(frozen=True)
class AppendResult:
    """Where an append landed.

    ``branch`` is where the last message went: the requested branch, a conflict fork
    (``conflict_fork`` names it), or an edit fork (listed in ``created_branches``).
    A frozen dataclass rather than a model: it is built on every save, the hottest path.
    """

    branch: str
    head_message_id: str
    message_ids: tuple[str, ...]
    updated_at: int
    rebased: bool = False
    conflict_fork: str | None = None
    created_branches: tuple[str, ...] = ()
    #: The branch's context (newest summary and the messages after it) in stored tokens, when
    #: the append checked a compaction threshold; -1 otherwise.
    context_tokens: int = -1
    #: The compaction job this append enqueued (its marker), None for none.
    compaction_job: str | None = None


class StoredMessage(TypedDict):
    """A message as read back: its id, its parent, when it was written, and the payload.

    ``message`` is the chat-message dict exactly as appended (``role``, ``content``,
    ``tool_calls``, ...), ready for ``litellm.completion(messages=...)``.
    """

    id: str
    parent_id: str | None
    created_at: int
    message: dict[str, Any]
    #: The caller's metadata of the message (never sent to a model); only when it has some.
    metadata: NotRequired[dict[str, Any]]


@dataclass(frozen=True)
class NewMessage:
    """A message to append under a chosen id (plain dicts get a generated id), with optional
    metadata stored beside it: returned by reads as ``metadata``, never part of ``message``."""

    message: Mapping[str, Any]
    id: str | None = None
    metadata: Mapping[str, Any] | None = None


#: What ``append`` takes per message: a chat-message dict (id generated) or a NewMessage.
MessageInput = Mapping[str, Any] | NewMessage


class StoredSummary(TypedDict):
    """A summary as read back: the last message it covers, its text, its metadata
    (``type``, ``covered``, ``tokens_before``, ``tokens_after``, ``model``, ...) and its tokens."""

    message_id: str
    created_at: int
    content: str
    metadata: dict[str, Any]
    tokens: int


@dataclass(frozen=True)
class BranchChain:
    """A branch and its chain (or the window of it asked for), root first, in one round trip.

    ``tokens`` counts what is returned (the messages, and the summary when there is one),
    ``chain_tokens`` and ``chain_length`` the whole chain (counts as stored at save; -1 where
    the read did not ask, as when a chat is opened). ``summary``: the newest summary on the
    chain, for a read ``after_summary``; ``context_tokens``: that summary plus every message
    after it (the chain's tokens when there is none).
    """

    branch: BranchInfo
    messages: list[StoredMessage]
    tokens: int = -1
    chain_tokens: int = -1
    chain_length: int = -1
    summary: StoredSummary | None = None
    context_tokens: int = -1


@dataclass(frozen=True)
class ChainSize:
    """The size of a branch's chain without its payloads: messages and stored tokens, the
    tokens of its newest summary plus the messages after it, and that summary's message."""

    messages: int
    tokens: int
    context_tokens: int
    summary_message_id: str | None


@dataclass(frozen=True)
class OpenedChat:
    """A chat opened by its owner: whether this call created it, its active branch and, when
    asked for, that branch's chain (root first)."""

    chat: ChatMeta
    created: bool
    branch: BranchInfo
    messages: list[StoredMessage]


@dataclass(frozen=True)
class ChatPage:
    """One page of a chat listing, newest first (``store.list_chats_page``).

    ``next_cursor`` continues after this page (None: this page ends the listing). ``skipped``
    names the chats left out of this page as corrupt (their hash is not what ctxstore writes,
    or the index holds something that is no chat id); each is logged on the ``ctxstore``
    logger too.
    """

    chats: tuple[ChatInfo, ...]
    next_cursor: str | None
    skipped: tuple[str, ...] = ()
