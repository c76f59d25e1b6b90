"""The text of a chat message (or of a role-less Responses API item), and a one-line preview of
it for graphs, trees and transcripts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ctxstore.ui.parts import is_tool_part, is_ui_message, tool_name
from ctxstore.ui.to_model import to_json_text

_WHITESPACE = re.compile(r"\s+")
_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def message_text(message: Mapping[str, Any]) -> str:
    """The readable text of a chat message: string content, or the text parts of list content
    (of a UI message: its ``text`` parts)."""
    if is_ui_message(message):
        return " ".join(
            part["text"]
            for part in message["parts"]
            if isinstance(part, Mapping)
            and part.get("type") == "text"
            and isinstance(part.get("text"), str)
        )
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part["text"]
            for part in content
            if isinstance(part, Mapping)
            and part.get("type") in _TEXT_PART_TYPES
            and isinstance(part.get("text"), str)
        ]
        return " ".join(texts)
    return ""


def item_text(message: Mapping[str, Any]) -> str:
    """The readable text of a role-less Responses API item besides its ``content``: an
    output's text (``function_call_output``, ...) or a reasoning item's summary; "" for a chat
    message and for items without one."""
    if message.get("role") is not None:
        return ""
    output = message.get("output")
    if isinstance(output, str):
        return output
    texts: list[str] = []
    for field in ("output", "summary"):
        parts = message.get(field)
        if isinstance(parts, list):
            texts.extend(
                part["text"]
                for part in parts
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
    return " ".join(texts)


def called_tools(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """``(name, arguments)`` of each tool a message calls: its ``tool_calls``, its tool parts
    (a UI message), or the message itself when it is a role-less call item (``function_call``;
    ``input`` for a custom tool)."""
    if is_ui_message(message):
        return [
            (tool_name(part), to_json_text(part.get("input", {})))
            for part in message["parts"]
            if isinstance(part, Mapping) and is_tool_part(part)
        ]
    calls = message.get("tool_calls")
    if isinstance(calls, list):
        found = []
        for call in calls:
            function = call.get("function") if isinstance(call, Mapping) else None
            if isinstance(function, Mapping):
                found.append((str(function.get("name", "?")), str(function.get("arguments", ""))))
            elif isinstance(call, Mapping):
                found.append(("?", ""))
        return found
    if message.get("role") is None and isinstance(message.get("name"), str):
        kind = message.get("type")
        if isinstance(kind, str) and kind.endswith("_call"):
            arguments = message.get("arguments", message.get("input", ""))
            return [(message["name"], arguments if isinstance(arguments, str) else "")]
    return []


def message_label(message: Mapping[str, Any]) -> str:
    """Who a message is from: its role, or for a role-less item its ``type``
    (``function_call``, ``reasoning``, ...)."""
    for field in ("role", "type"):
        value = message.get(field)
        if isinstance(value, str) and value:
            return value
    return ""


def one_line(value: str, width: int) -> str:
    """``value`` with whitespace collapsed, cut to ``width`` characters with an ellipsis."""
    flat = _WHITESPACE.sub(" ", value).strip()
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def preview(message: Mapping[str, Any], width: int = 60) -> str:
    """What a message says, on one line: its text, else the tools it calls."""
    text = message_text(message) or item_text(message)
    if not text.strip():
        calls = called_tools(message)
        if calls:
            text = "calls " + ", ".join(name for name, _arguments in calls)
    return one_line(text, width)


#: The title of a chat whose first message has no text.
DEFAULT_TITLE = "New Chat"
#: A static title keeps this many characters of its message's text.
STATIC_TITLE_CHARS = 100


def collapsed_text(message: Mapping[str, Any]) -> str:
    """The message's readable text with its whitespace collapsed (what titles are made of)."""
    return " ".join(message_text(message).split())


def static_title(text: str) -> str:
    """The static title of a message whose collapsed text is ``text``: the text, cut to
    ``STATIC_TITLE_CHARS`` characters plus ``...``; ``DEFAULT_TITLE`` for none."""
    if not text:
        return DEFAULT_TITLE
    if len(text) > STATIC_TITLE_CHARS:
        return text[:STATIC_TITLE_CHARS] + "..."
    return text
