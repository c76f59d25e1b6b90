"""ctxstore: conversation context for AI agents, kept in Redis as an immutable message graph.

Quick start::

    import ctxstore

    store = ctxstore.connect("redis://localhost:6379", namespace="acme")   # or "memory://"
    engine = ctxstore.ContextEngine(store=store, chat_id="chat-1", user_id="alice")
    engine.set(ctxstore.role("You are terse."), ctxstore.user("Hi"))
    context = engine.resolve()             # system prompt + messages, one round trip
    # reply = litellm.completion(model=..., messages=context.with_system())
    # engine.set(ctxstore.message(reply.choices[0].message)); engine.save()

``import ctxstore`` loads nothing but the error classes: serverless functions pay for imports on
every cold start. Everything else is imported on first use of its name (PEP 562): the sync
store (redis, msgpack) when ``connect`` is used, pydantic when a chat, branch or checkpoint model
is first built, the async store, fakeredis (``memory://``), litellm and tiktoken only by what
needs them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ctxstore.errors import (
    BackendBusyError,
    BackendError,
    BackendUnavailableError,
    BranchExistsError,
    BranchNotFoundError,
    ChatBusyError,
    ChatNotFoundError,
    ChatReplacedError,
    CheckpointNotFoundError,
    ConfigurationError,
    ConflictError,
    CorruptionError,
    CtxStoreError,
    DurabilityError,
    EmptyBranchError,
    HeadConflictError,
    InvalidIdError,
    LeaseLostError,
    LimitExceededError,
    MessageExistsError,
    MessageNotFoundError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    StreamFailedError,
    StreamNotFoundError,
    UnserializablePayloadError,
    ValidationError,
)

__version__ = "0.3.0"

#: Where each lazily imported name lives.
_LAZY: dict[str, str] = {
    "ContextManager": "ctxstore.manager",
    "ContextState": "ctxstore.manager",
    "is_context_summary": "ctxstore.manager",
    "count_tokens": "ctxstore.tokens",
    "tokenizer_for": "ctxstore.tokens",
    "CompactionTrigger": "ctxstore.core.jobs",
    "ChainSize": "ctxstore.results",
    "StoredSummary": "ctxstore.results",
    "Worker": "ctxstore.worker",
    "AppendResult": "ctxstore.results",
    "AsyncContextEngine": "ctxstore.context",
    "AsyncStore": "ctxstore.async_store",
    "AsyncTurn": "ctxstore.context",
    "AsyncStreamedTurn": "ctxstore.context",
    "StreamedTurn": "ctxstore.context",
    "StreamPiece": "ctxstore.core.answer_stream",
    "SavedHead": "ctxstore.context",
    "Turn": "ctxstore.context",
    "BranchChain": "ctxstore.results",
    "BranchInfo": "ctxstore.models",
    "ChatGraph": "ctxstore.models",
    "ChatInfo": "ctxstore.models",
    "ChatMeta": "ctxstore.models",
    "ChatPage": "ctxstore.results",
    "CheckpointInfo": "ctxstore.models",
    "ContextEngine": "ctxstore.context",
    "Fragment": "ctxstore.context",
    "GraphNode": "ctxstore.models",
    "Limits": "ctxstore.core.state",
    "MarkdownRenderer": "ctxstore.context",
    "NewMessage": "ctxstore.results",
    "OpenedChat": "ctxstore.results",
    "Renderer": "ctxstore.context",
    "ResolveResult": "ctxstore.context",
    "Store": "ctxstore.store",
    "StoredMessage": "ctxstore.results",
    "TomlRenderer": "ctxstore.context",
    "ToonRenderer": "ctxstore.context",
    "VerifyReport": "ctxstore.core.verify",
    "XmlRenderer": "ctxstore.context",
    "agenerate_chat_title": "ctxstore.context",
    "alias": "ctxstore.context",
    "assistant": "ctxstore.context",
    "assistant_text": "ctxstore.context",
    "clarification": "ctxstore.context",
    "connect": "ctxstore.store",
    "connect_async": "ctxstore.async_store",
    "correction": "ctxstore.context",
    "example": "ctxstore.context",
    "explain": "ctxstore.context",
    "fragment": "ctxstore.context.fragment",
    "fragment_from_dict": "ctxstore.context",
    "fragment_to_dict": "ctxstore.context",
    "from_fragment": "ctxstore.context",
    "generate_chat_title": "ctxstore.context",
    "glossary": "ctxstore.context",
    "guardrail": "ctxstore.context",
    "hint": "ctxstore.context",
    "identity": "ctxstore.context",
    "last_assistant_message": "ctxstore.context",
    "message": "ctxstore.context",
    "persona": "ctxstore.context",
    "policy": "ctxstore.context",
    "preference": "ctxstore.context",
    "principle": "ctxstore.context",
    "quirk": "ctxstore.context",
    "register_fragment_type": "ctxstore.context",
    "role": "ctxstore.context",
    "static_chat_title": "ctxstore.context",
    "style_guide": "ctxstore.context",
    "term": "ctxstore.context",
    "to_fragment": "ctxstore.context",
    "user": "ctxstore.context",
    "workflow": "ctxstore.context",
}

__all__ = [
    "AppendResult",
    "AsyncContextEngine",
    "AsyncStore",
    "AsyncStreamedTurn",
    "AsyncTurn",
    "BackendBusyError",
    "BackendError",
    "BackendUnavailableError",
    "BranchChain",
    "BranchExistsError",
    "BranchInfo",
    "BranchNotFoundError",
    "ChainSize",
    "ChatBusyError",
    "ChatGraph",
    "ChatInfo",
    "ChatMeta",
    "ChatNotFoundError",
    "ChatPage",
    "ChatReplacedError",
    "CheckpointInfo",
    "CheckpointNotFoundError",
    "CompactionTrigger",
    "ConfigurationError",
    "ConflictError",
    "ContextEngine",
    "ContextManager",
    "ContextState",
    "CorruptionError",
    "CtxStoreError",
    "DurabilityError",
    "EmptyBranchError",
    "Fragment",
    "GraphNode",
    "HeadConflictError",
    "InvalidIdError",
    "LeaseLostError",
    "LimitExceededError",
    "Limits",
    "MarkdownRenderer",
    "MessageExistsError",
    "MessageNotFoundError",
    "NewMessage",
    "NotFoundError",
    "OpenedChat",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Renderer",
    "ResolveResult",
    "SavedHead",
    "Store",
    "StoredMessage",
    "StoredSummary",
    "StreamFailedError",
    "StreamNotFoundError",
    "StreamPiece",
    "StreamedTurn",
    "TomlRenderer",
    "ToonRenderer",
    "Turn",
    "UnserializablePayloadError",
    "ValidationError",
    "VerifyReport",
    "Worker",
    "XmlRenderer",
    "agenerate_chat_title",
    "alias",
    "assistant",
    "assistant_text",
    "clarification",
    "connect",
    "connect_async",
    "correction",
    "count_tokens",
    "example",
    "explain",
    "fragment",
    "fragment_from_dict",
    "fragment_to_dict",
    "from_fragment",
    "generate_chat_title",
    "glossary",
    "guardrail",
    "hint",
    "identity",
    "is_context_summary",
    "last_assistant_message",
    "message",
    "persona",
    "policy",
    "preference",
    "principle",
    "quirk",
    "register_fragment_type",
    "role",
    "static_chat_title",
    "style_guide",
    "term",
    "to_fragment",
    "tokenizer_for",
    "user",
    "workflow",
]


def __getattr__(name: str) -> Any:
    """Import a public name on first use and keep it, so later lookups are plain attributes."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ctxstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


if TYPE_CHECKING:  # what type checkers and IDEs see: every name, imported
    from ctxstore.async_store import (
        AsyncStore,
        connect_async,
    )
    from ctxstore.context import (
        AsyncContextEngine,
        ContextEngine,
        Fragment,
        MarkdownRenderer,
        Renderer,
        ResolveResult,
        TomlRenderer,
        ToonRenderer,
        XmlRenderer,
        agenerate_chat_title,
        alias,
        assistant,
        assistant_text,
        clarification,
        correction,
        example,
        explain,
        fragment_from_dict,
        fragment_to_dict,
        from_fragment,
        generate_chat_title,
        glossary,
        guardrail,
        hint,
        identity,
        last_assistant_message,
        message,
        persona,
        policy,
        preference,
        principle,
        quirk,
        register_fragment_type,
        role,
        static_chat_title,
        style_guide,
        term,
        to_fragment,
        user,
        workflow,
    )
    from ctxstore.context.fragment import fragment
    from ctxstore.core.state import (
        Limits,
    )
    from ctxstore.core.verify import VerifyReport
    from ctxstore.manager import ContextManager, ContextState, is_context_summary
    from ctxstore.models import (
        BranchInfo,
        ChatGraph,
        ChatInfo,
        ChatMeta,
        CheckpointInfo,
        GraphNode,
    )
    from ctxstore.results import (
        AppendResult,
        BranchChain,
        ChatPage,
        NewMessage,
        OpenedChat,
        StoredMessage,
    )
    from ctxstore.store import (
        Store,
        connect,
    )
    from ctxstore.tokens import count_tokens, tokenizer_for
