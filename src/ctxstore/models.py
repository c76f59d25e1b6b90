"""What the store returns.

Chats, branches and checkpoints are frozen pydantic models: there are few of them per call,
they serialize straight into HTTP responses (``model_dump()`` / ``model_dump_json()``), and frozen
models cannot be changed behind the store's back. Messages are different: a chain can hold
thousands, and building a model per message costs allocations and garbage-collection passes on
exactly the hot path (``resolve()`` before every LLM call). Messages therefore cross the API as
plain dicts (:class:`StoredMessage`), and results that carry messages are frozen dataclasses
(in :mod:`ctxstore.results`, which does not import pydantic).

All times are epoch milliseconds.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The light result types live in ctxstore.results (no pydantic: the write path and `import
# ctxstore` never load it); they are re-exported here, where they were first defined.
from ctxstore.results import (
    AppendResult,
    BranchChain,
    ConflictPolicy,
    ExistingPolicy,
    MessageInput,
    NewMessage,
    OpenedChat,
    StoredMessage,
)

__all__ = [
    "AppendResult",
    "BranchChain",
    "BranchInfo",
    "ChatGraph",
    "ChatInfo",
    "ChatMeta",
    "CheckpointInfo",
    "ConflictPolicy",
    "ExistingPolicy",
    "GraphNode",
    "MessageInput",
    "NewMessage",
    "OpenedChat",
    "StoredMessage",
]


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
    #: The retention in seconds: the chat expires whole that long after its last write (None:
    #: never). See ``connect(ttl=)``, ``upsert_chat(ttl=)``, ``store.expire_chat``.
    ttl: float | None = None


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
