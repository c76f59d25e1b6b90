"""ctxstore: conversation context for AI agents, kept in Redis as an immutable message graph.

``import ctxstore`` loads redis, msgpack and pydantic only: serverless functions pay for imports
on every cold start. The embedded store (fakeredis) loads when a ``memory://`` store is made;
litellm and tiktoken load on first use of what needs them.
"""

from ctxstore.async_store import AsyncStore, connect_async
from ctxstore.context import *  # noqa: F403 - the engine API is part of the top-level API
from ctxstore.context import __all__ as _context_all
from ctxstore.core.state import Limits
from ctxstore.errors import (
    BackendBusyError,
    BackendError,
    BackendUnavailableError,
    BranchExistsError,
    BranchNotFoundError,
    ChatNotFoundError,
    ChatReplacedError,
    CheckpointNotFoundError,
    ConfigurationError,
    ConflictError,
    CorruptionError,
    CtxStoreError,
    EmptyBranchError,
    HeadConflictError,
    InvalidIdError,
    LimitExceededError,
    MessageExistsError,
    MessageNotFoundError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    UnserializablePayloadError,
    ValidationError,
)
from ctxstore.models import (
    AppendResult,
    BranchChain,
    BranchInfo,
    ChatGraph,
    ChatInfo,
    ChatMeta,
    CheckpointInfo,
    GraphNode,
    NewMessage,
    OpenedChat,
    StoredMessage,
)
from ctxstore.store import Store, connect

__version__ = "0.1.0"

__all__ = [  # noqa: PLE0604 - the context names are added below
    *_context_all,
    "AppendResult",
    "AsyncStore",
    "BackendBusyError",
    "BackendError",
    "BackendUnavailableError",
    "BranchChain",
    "BranchExistsError",
    "BranchInfo",
    "BranchNotFoundError",
    "ChatGraph",
    "ChatInfo",
    "ChatMeta",
    "ChatNotFoundError",
    "ChatReplacedError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "ConfigurationError",
    "ConflictError",
    "CorruptionError",
    "CtxStoreError",
    "EmptyBranchError",
    "GraphNode",
    "HeadConflictError",
    "InvalidIdError",
    "LimitExceededError",
    "Limits",
    "MessageExistsError",
    "MessageNotFoundError",
    "NewMessage",
    "NotFoundError",
    "OpenedChat",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Store",
    "StoredMessage",
    "UnserializablePayloadError",
    "ValidationError",
    "connect",
    "connect_async",
]
