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

from ctxstore.ui.parts import UIMessage, is_tool_part, is_ui_message, tool_name
from ctxstore.ui.to_model import NO_RESULT, to_model_messages
from ctxstore.ui.to_ui import to_ui_messages
from ctxstore.ui.validation import validate_ui_messages

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
