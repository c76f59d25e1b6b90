"""ctxstore: conversation context for AI agents, kept in Redis as an immutable message graph.

Quick start::

    import ctxstore

    store = ctxstore.connect("redis://localhost:6379", namespace="acme")   # or "memory://"
    engine = ctxstore.ContextEngine(store=store, chat_id="chat-1", user_id="alice")
    engine.set(ctxstore.role("You are terse."), ctxstore.user("Hi"))
    context = engine.resolve()             # system prompt + messages, one round trip
    # reply = litellm.completion(model=..., messages=context.with_system())
    # engine.set(ctxstore.message(reply.choices[0].message)); engine.save()

The names here are the ones most code needs; everything else is importable from its
subpackage: ``ctxstore.store``, ``ctxstore.engine``, ``ctxstore.prompt`` (fragments, builders,
renderers), ``ctxstore.window`` (context-window policy, summarizer), ``ctxstore.messages``
(token counts, tool groups, usage), ``ctxstore.ui`` (AI SDK UI messages),
``ctxstore.frontend`` (``chat()`` and its stream), ``ctxstore.models`` (every returned value),
``ctxstore.errors`` (the whole exception tree), ``ctxstore.worker``, ``ctxstore.integrations``.
``ctxstore._core`` is internal.

``import ctxstore`` loads nothing but the error classes: serverless functions pay for imports on
every cold start. Every other name is imported on first use (PEP 562): the sync store (redis,
msgpack) when ``connect`` is used, the async store, fakeredis (``memory://``), litellm and
tiktoken only by what needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore._base.exports import install_moved_module_finder, lazy_exports
from ctxstore._base.release import __version__ as __version__
from ctxstore.errors import (
    BackendUnavailableError,
    ChatBusyError,
    ChatNotFoundError,
    ConflictError,
    CtxStoreError,
    HeadConflictError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)

#: Every public name and the module it lives in: the one table ``__all__``, the lazy imports and
#: the type checkers' imports below agree with (a test checks it).
PUBLIC: dict[str, str] = {
    # stores and their settings
    "Store": "ctxstore.store",
    "AsyncStore": "ctxstore.store",
    "connect": "ctxstore.store",
    "connect_async": "ctxstore.store",
    "Settings": "ctxstore.settings",
    "Limits": "ctxstore.settings",
    # the context engine and its turns
    "ContextEngine": "ctxstore.engine",
    "AsyncContextEngine": "ctxstore.engine",
    "Turn": "ctxstore.engine",
    "AsyncTurn": "ctxstore.engine",
    "StreamedTurn": "ctxstore.engine",
    "AsyncStreamedTurn": "ctxstore.engine",
    # a useChat frontend's turns (the AI SDK's UI message stream)
    "chat": "ctxstore.frontend",
    "achat": "ctxstore.frontend",
    "resume_sse": "ctxstore.frontend",
    "preload": "ctxstore.frontend",
    # long conversations
    "ContextManager": "ctxstore.window",
    "Worker": "ctxstore.worker",
    # values
    "NewMessage": "ctxstore.models",
    "StoredMessage": "ctxstore.models",
    "AppendResult": "ctxstore.models",
    "ResolveResult": "ctxstore.models",
    "SavedHead": "ctxstore.models",
    "ChatMeta": "ctxstore.models",
    "BranchInfo": "ctxstore.models",
    "CheckpointInfo": "ctxstore.models",
    # the fragments a conversation starts with
    "Fragment": "ctxstore.prompt",
    "role": "ctxstore.prompt",
    "hint": "ctxstore.prompt",
    "user": "ctxstore.prompt",
    "assistant": "ctxstore.prompt",
    "message": "ctxstore.prompt",
    # the errors most code catches (the whole tree: ctxstore.errors)
    "CtxStoreError": "ctxstore.errors",
    "NotFoundError": "ctxstore.errors",
    "ChatNotFoundError": "ctxstore.errors",
    "ConflictError": "ctxstore.errors",
    "HeadConflictError": "ctxstore.errors",
    "ChatBusyError": "ctxstore.errors",
    "ValidationError": "ctxstore.errors",
    "PermissionDeniedError": "ctxstore.errors",
    "BackendUnavailableError": "ctxstore.errors",
}

#: Root names of ctxstore 0.3 that live in a subpackage now: they resolve, with a
#: DeprecationWarning, for one release.
MOVED: dict[str, str] = {
    **dict.fromkeys(
        (
            "BackendBusyError",
            "BackendError",
            "BranchExistsError",
            "BranchNotFoundError",
            "ChatReplacedError",
            "CheckpointNotFoundError",
            "ConfigurationError",
            "CorruptionError",
            "DurabilityError",
            "EmptyBranchError",
            "InvalidIdError",
            "LeaseLostError",
            "LimitExceededError",
            "MessageExistsError",
            "MessageNotFoundError",
            "PayloadTooLargeError",
            "StreamFailedError",
            "StreamNotFoundError",
            "UnserializablePayloadError",
        ),
        "ctxstore.errors",
    ),
    **dict.fromkeys(
        (
            "BranchChain",
            "ChainSize",
            "ChatGraph",
            "ChatInfo",
            "ChatPage",
            "CompactionTrigger",
            "GraphNode",
            "OpenedChat",
            "StoredSummary",
            "StreamPiece",
            "VerifyReport",
        ),
        "ctxstore.models",
    ),
    **dict.fromkeys(
        (
            "MarkdownRenderer",
            "Renderer",
            "TomlRenderer",
            "ToonRenderer",
            "XmlRenderer",
            "alias",
            "assistant_text",
            "clarification",
            "correction",
            "example",
            "explain",
            "fragment",
            "fragment_from_dict",
            "fragment_to_dict",
            "from_fragment",
            "glossary",
            "guardrail",
            "identity",
            "last_assistant_message",
            "persona",
            "policy",
            "preference",
            "principle",
            "quirk",
            "register_fragment_type",
            "style_guide",
            "term",
            "to_fragment",
            "workflow",
        ),
        "ctxstore.prompt",
    ),
    **dict.fromkeys(
        ("agenerate_chat_title", "generate_chat_title", "static_chat_title"), "ctxstore.engine"
    ),
    "ContextState": "ctxstore.window",
    "is_context_summary": "ctxstore.messages",
    "count_tokens": "ctxstore.messages",
    "tokenizer_for": "ctxstore.messages",
}

__all__ = [
    "AppendResult",
    "AsyncContextEngine",
    "AsyncStore",
    "AsyncStreamedTurn",
    "AsyncTurn",
    "BackendUnavailableError",
    "BranchInfo",
    "ChatBusyError",
    "ChatMeta",
    "ChatNotFoundError",
    "CheckpointInfo",
    "ConflictError",
    "ContextEngine",
    "ContextManager",
    "CtxStoreError",
    "Fragment",
    "HeadConflictError",
    "Limits",
    "NewMessage",
    "NotFoundError",
    "PermissionDeniedError",
    "ResolveResult",
    "SavedHead",
    "Settings",
    "Store",
    "StoredMessage",
    "StreamedTurn",
    "Turn",
    "ValidationError",
    "Worker",
    "achat",
    "assistant",
    "chat",
    "connect",
    "connect_async",
    "hint",
    "message",
    "preload",
    "resume_sse",
    "role",
    "user",
]

install_moved_module_finder()
__getattr__, __dir__ = lazy_exports(
    __name__,
    PUBLIC,
    MOVED,
    submodules=(
        "engine",
        "frontend",
        "integrations",
        "messages",
        "models",
        "prompt",
        "settings",
        "store",
        "ui",
        "window",
        "worker",
    ),
)

if TYPE_CHECKING:  # what type checkers and IDEs see: every public name, imported
    from ctxstore.engine import (
        AsyncContextEngine,
        AsyncStreamedTurn,
        AsyncTurn,
        ContextEngine,
        StreamedTurn,
        Turn,
    )
    from ctxstore.frontend import achat, chat, preload, resume_sse
    from ctxstore.models import (
        AppendResult,
        BranchInfo,
        ChatMeta,
        CheckpointInfo,
        NewMessage,
        ResolveResult,
        SavedHead,
        StoredMessage,
    )
    from ctxstore.prompt import Fragment, assistant, hint, message, role, user
    from ctxstore.settings import Limits, Settings
    from ctxstore.store import (
        AsyncStore,
        Store,
        connect,
        connect_async,
    )
    from ctxstore.window import ContextManager
    from ctxstore.worker import Worker
