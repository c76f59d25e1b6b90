"""What a context summary is marked as, and how it appears in a system prompt, in one place.

The engine's ``resolve()`` and ``ContextManager.prepare_messages`` both move a summary out of
the message list and into the system prompt (a provider never sees a marker message), and both
use :func:`summary_section`, so a prompt looks the same whichever path built it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ctxstore.models import StoredSummary

#: ``metadata["type"]`` of a context summary, in the store and in plain message lists.
CONTEXT_SUMMARY = "context-summary"

SUMMARY_OPEN = "<context_summary>"
SUMMARY_CLOSE = "</context_summary>"
SUMMARY_PREAMBLE = "Summary of the earlier conversation (the messages below continue from it):"


def summary_section(text: str) -> str:
    """The system-prompt section that carries a summary's text."""
    return f"{SUMMARY_OPEN}\n{SUMMARY_PREAMBLE}\n{text.strip()}\n{SUMMARY_CLOSE}"


def summary_message(summary: StoredSummary) -> dict[str, Any]:
    """The summary as a message of a plain list: an assistant message marked as a context
    summary (``ctxstore.messages.is_context_summary`` tells; ``prepare_messages`` moves it into the
    system prompt, so no marker reaches a provider)."""
    return {
        "role": "assistant",
        "content": summary["content"],
        "metadata": dict(summary["metadata"]),
    }


def is_context_summary(message: object) -> bool:
    """Whether ``message`` is a context summary (a message whose ``metadata`` says
    ``{"type": "context-summary", ...}``)."""
    if not isinstance(message, Mapping):
        return False
    metadata = message.get("metadata")
    return isinstance(metadata, Mapping) and metadata.get("type") == CONTEXT_SUMMARY
