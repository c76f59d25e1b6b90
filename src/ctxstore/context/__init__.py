"""Context fragments, their renderers, and the context engine."""

from ctxstore.context.domain import (
    clarification,
    example,
    explain,
    glossary,
    guardrail,
    hint,
    policy,
    principle,
    quirk,
    role,
    style_guide,
    term,
    workflow,
)
from ctxstore.context.engine import AsyncContextEngine, ContextEngine
from ctxstore.context.engine_core import ResolveResult, SavedHead
from ctxstore.context.fragment import Fragment, fragment
from ctxstore.context.messages import (
    assistant,
    assistant_text,
    last_assistant_message,
    message,
    user,
)
from ctxstore.context.renderers import (
    MarkdownRenderer,
    Renderer,
    TomlRenderer,
    ToonRenderer,
    XmlRenderer,
)
from ctxstore.context.serialization import (
    fragment_from_dict,
    fragment_to_dict,
    from_fragment,
    register_fragment_type,
    to_fragment,
)
from ctxstore.context.streamed_turn import AsyncStreamedTurn, StreamedTurn
from ctxstore.context.titles import agenerate_chat_title, generate_chat_title, static_chat_title
from ctxstore.context.turn import AsyncTurn, Turn
from ctxstore.context.user_context import alias, correction, identity, persona, preference

__all__ = [
    "AsyncContextEngine",
    "AsyncStreamedTurn",
    "AsyncTurn",
    "ContextEngine",
    "Fragment",
    "MarkdownRenderer",
    "Renderer",
    "ResolveResult",
    "SavedHead",
    "StreamedTurn",
    "TomlRenderer",
    "ToonRenderer",
    "Turn",
    "XmlRenderer",
    "agenerate_chat_title",
    "alias",
    "assistant",
    "assistant_text",
    "clarification",
    "correction",
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
    "user",
    "workflow",
]
