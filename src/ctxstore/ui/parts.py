"""What a UI message is, and the kinds of its parts.

A UI message is what the Vercel AI SDK's ``useChat`` keeps and sends: ``{"id", "role",
"parts": [...], "metadata"}``, role ``system``, ``user`` or ``assistant``. A chat-completions
message has ``content`` instead of ``parts`` and a Responses item has a ``type``: a dict with a
``parts`` list and neither is a UI message, which is how every reader in ctxstore tells them
apart without being told.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "TOOL_STATES",
    "first_ui_message",
    "is_tool_part",
    "is_ui_message",
    "tool_name",
]


#: The states of a tool part, in the order a call goes through them.
TOOL_STATES = (
    "input-streaming",
    "input-available",
    "approval-requested",
    "approval-responded",
    "output-available",
    "output-error",
    "output-denied",
)


def is_ui_message(message: object) -> bool:
    """Whether ``message`` is a UI message: a dict with a ``parts`` list, no ``content`` and no
    ``type`` (a chat-completions message or a Responses item has one of those)."""
    if type(message) is not dict and not isinstance(message, Mapping):
        return False
    return type(message.get("parts")) is list and "content" not in message and "type" not in message


def first_ui_message(messages: list[Any], start: int = 0) -> int:
    """The index of the first UI message of ``messages`` from ``start`` on, -1 for none (a
    chain keeps it, so its reads never scan it again)."""
    for index in range(start, len(messages)):
        message = messages[index]
        if "parts" in message and is_ui_message(message):
            return index
    return -1


def is_tool_part(part: Mapping[str, Any]) -> bool:
    """A tool invocation part: ``tool-<name>`` (a tool the server declared) or
    ``dynamic-tool`` (one it did not know ahead of time, such as an MCP tool)."""
    kind = part.get("type")
    return type(kind) is str and (kind.startswith("tool-") or kind == "dynamic-tool")


def tool_name(part: Mapping[str, Any]) -> str:
    """The name of the tool a tool part calls."""
    kind = str(part.get("type", ""))
    if kind == "dynamic-tool":
        return str(part.get("toolName", ""))
    return kind[len("tool-") :]
