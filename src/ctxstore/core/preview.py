"""The text of a chat message, and a one-line preview of it for graphs and trees."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_WHITESPACE = re.compile(r"\s+")
_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def message_text(message: Mapping[str, Any]) -> str:
    """The readable text of a chat message: string content, or the text parts of list content."""
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


def one_line(value: str, width: int) -> str:
    """``value`` with whitespace collapsed, cut to ``width`` characters with an ellipsis."""
    flat = _WHITESPACE.sub(" ", value).strip()
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


def preview(message: Mapping[str, Any], width: int = 60) -> str:
    """What a message says, on one line: its text, else the tools it calls."""
    text = message_text(message)
    if not text.strip():
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            names = [
                str(call.get("function", {}).get("name", "?"))
                for call in calls
                if isinstance(call, Mapping)
            ]
            text = "calls " + ", ".join(names)
    return one_line(text, width)
