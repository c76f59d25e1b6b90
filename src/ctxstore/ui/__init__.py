"""The AI SDK's UI messages as a first-class format: ``{"id", "role", "parts", "metadata"}``,
what a ``useChat`` frontend keeps and sends.

The store keeps a UI message as given; token counts, previews, titles, the summarizer and the
tool-group cut read its parts; these functions convert between it and the chat-completions
messages a model takes:

- :func:`to_model_messages`: UI messages to chat-completions messages (what the SDK's
  ``convertToModelMessages`` and its OpenAI chat provider send);
- :func:`to_ui_messages`: the inverse, so a chat stored in chat-completions form can be shown
  by a ``useChat`` frontend;
- :func:`validate_ui_messages`: what the SDK's ``validateUIMessages`` checks.

Pure functions: no I/O, no store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ctxstore._base.exports import lazy_exports

__all__ = [
    "NO_RESULT",
    "UIMessage",
    "is_tool_part",
    "is_ui_message",
    "to_model_messages",
    "to_ui_messages",
    "tool_name",
    "validate_ui_messages",
]

# Loaded on first use: the store's readers import ctxstore.ui.parts alone.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "NO_RESULT": "ctxstore.ui.to_model",
        "UIMessage": "ctxstore.ui.message",
        "is_tool_part": "ctxstore.ui.parts",
        "is_ui_message": "ctxstore.ui.parts",
        "to_model_messages": "ctxstore.ui.to_model",
        "to_ui_messages": "ctxstore.ui.to_ui",
        "tool_name": "ctxstore.ui.parts",
        "validate_ui_messages": "ctxstore.ui.validation",
    },
)

if TYPE_CHECKING:
    from ctxstore.ui.message import UIMessage
    from ctxstore.ui.parts import is_tool_part, is_ui_message, tool_name
    from ctxstore.ui.to_model import NO_RESULT, to_model_messages
    from ctxstore.ui.to_ui import to_ui_messages
    from ctxstore.ui.validation import validate_ui_messages
