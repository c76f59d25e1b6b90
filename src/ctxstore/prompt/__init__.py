"""Context fragments, their builders and their renderers: the prompt DSL, with no store.

A :class:`Fragment` is one named piece of context (a role, a hint, a term, a message...); the
builders make the common ones, the renderers turn context fragments into a system prompt, and
:func:`fragment_to_dict` / :func:`fragment_from_dict` carry them through JSON.
"""

from ctxstore.prompt.domain import (
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
from ctxstore.prompt.fragment import (
    Fragment,
    fragment,
    is_fragment,
    is_fragment_object,
    is_lazy,
    is_lazy_fragment,
)
from ctxstore.prompt.messages import (
    assistant,
    assistant_text,
    is_message_fragment,
    last_assistant_message,
    message,
    user,
)
from ctxstore.prompt.renderers import (
    MarkdownRenderer,
    Renderer,
    TomlRenderer,
    ToonRenderer,
    XmlRenderer,
)
from ctxstore.prompt.serialization import (
    fragment_from_dict,
    fragment_to_dict,
    from_fragment,
    register_fragment_type,
    to_fragment,
)
from ctxstore.prompt.user_context import alias, correction, identity, persona, preference

__all__ = [
    "Fragment",
    "MarkdownRenderer",
    "Renderer",
    "TomlRenderer",
    "ToonRenderer",
    "XmlRenderer",
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
    "glossary",
    "guardrail",
    "hint",
    "identity",
    "is_fragment",
    "is_fragment_object",
    "is_lazy",
    "is_lazy_fragment",
    "is_message_fragment",
    "last_assistant_message",
    "message",
    "persona",
    "policy",
    "preference",
    "principle",
    "quirk",
    "register_fragment_type",
    "role",
    "style_guide",
    "term",
    "to_fragment",
    "user",
    "workflow",
]
