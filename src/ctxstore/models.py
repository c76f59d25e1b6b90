"""What the store returns.

Chats, branches and checkpoints are frozen pydantic models: there are few of them per call,
they serialize straight into HTTP responses (``model_dump()`` / ``model_dump_json()``), and frozen
models cannot be changed behind the store's back. Messages are different: a chain can hold
thousands, and building a model per message costs allocations and garbage-collection passes on
exactly the hot path (``resolve()`` before every LLM call). Messages therefore cross the API as
plain dicts (:class:`StoredMessage`), and results that carry messages are frozen dataclasses.

All times are epoch milliseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from pydantic import BaseModel, ConfigDict, Field

ConflictPolicy = Literal["raise", "rebase", "fork"]
ExistingPolicy = Literal["raise", "fork"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ChatMeta(_Frozen):
    """A chat's own fields. ``metadata["usage"]`` holds the counters of ``add_usage``."""

    id: str
    user_id: str
    title: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: int
    updated_at: int
    active_branch: str = "main"
    #: Set when the chat is created: a chat deleted and re-created under the same id gets a new
    #: one, so caches and engines that knew the old chat never mistake the new one for it.
    incarnation: str = ""


class ChatInfo(ChatMeta):
    """A chat as listed: its fields plus how many messages and branches it holds."""

    message_count: int
    branch_count: int


class BranchInfo(_Frozen):
    """A branch: a named head. ``message_count`` is the length of its chain."""

    name: str
    head_message_id: str | None
    is_active: bool
    message_count: int
    created_at: int


class CheckpointInfo(_Frozen):
    """A named pointer to a message."""

    name: str
    message_id: str
    created_at: int


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


class GraphNode(_Frozen):
    """One message as drawn in a graph: its place and a one-line preview."""

    id: str
    parent_id: str | None
    role: str
    preview: str
    created_at: int


class ChatGraph(_Frozen):
    """The whole chat: every message, every branch (with the active flag), every checkpoint."""

    chat: ChatMeta
    messages: tuple[GraphNode, ...]
    branches: tuple[BranchInfo, ...]
    checkpoints: tuple[CheckpointInfo, ...]


class StoredMessage(TypedDict):
    """A message as read back: its id, its parent, when it was written, and the payload.

    ``message`` is the chat-message dict exactly as appended (``role``, ``content``,
    ``tool_calls``, ...), ready for ``litellm.completion(messages=...)``.
    """

    id: str
    parent_id: str | None
    created_at: int
    message: dict[str, Any]


@dataclass(frozen=True)
class NewMessage:
    """A message to append under a chosen id (plain dicts get a generated id)."""

    message: Mapping[str, Any]
    id: str | None = None


#: What ``append`` takes per message: a chat-message dict (id generated) or a NewMessage.
MessageInput = Mapping[str, Any] | NewMessage


@dataclass(frozen=True)
class BranchChain:
    """A branch and its chain, root first, read in one round trip."""

    branch: BranchInfo
    messages: list[StoredMessage]


@dataclass(frozen=True)
class OpenedChat:
    """A chat opened by its owner: whether this call created it, its active branch and, when
    asked for, that branch's chain (root first)."""

    chat: ChatMeta
    created: bool
    branch: BranchInfo
    messages: list[StoredMessage]
