"""Chat-completions messages (and Responses items) to UI messages, so a chat stored in the
model's format can be shown by a ``useChat`` frontend.

A run of assistant messages and the tool messages that answer them is one assistant UI message,
each model message one step (``step-start`` before it, as the SDK writes a multi-step answer);
a call becomes a ``tool-<name>`` part, ``output-available`` with the tool message's content
when one answers it (a JSON object or array written without spaces, as the SDK writes it,
becomes that value; anything else stays the string it was: either way ``to_model_messages``
gives the same text back), ``input-available`` when none does. String content is one
``text`` part; content parts become ``text`` and ``file`` parts. Responses items convert the
same way: ``function_call`` / ``function_call_output`` as a call and its result,
``reasoning`` as a ``reasoning`` part, ``message`` items by their role. A UI message passes
through as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.ui.parts import is_ui_message
from ctxstore.ui.to_model import to_json_text

__all__ = ["to_ui_messages"]

_TEXT_PART_TYPES = ("text", "input_text", "output_text")


def to_ui_messages(
    messages: Iterable[Mapping[str, Any]], *, ids: Sequence[str] | None = None
) -> list[dict[str, Any]]:
    """UI messages for ``messages``. ``ids``: one per input message (a store's message ids); a
    UI message merged from several model messages takes the id of its first. Without ``ids``,
    message ``i`` is ``"msg-<i>"``."""
    items = list(messages)
    if ids is not None and len(ids) != len(items):
        raise ValidationError(f"ids: one per message, got {len(ids)} for {len(items)}")
    out: list[dict[str, Any]] = []
    open_calls: dict[str, dict[str, Any]] = {}  # call id -> its part in the current answer
    answer: dict[str, Any] | None = None  # the assistant UI message being built
    for index, message in enumerate(items):
        if not isinstance(message, Mapping):
            raise ValidationError(f"messages[{index}] is not a message dict: {message!r}")
        message_id = ids[index] if ids is not None else f"msg-{index}"
        if is_ui_message(message):
            out.append({"id": message_id, **{k: v for k, v in message.items() if k != "id"}})
            answer = None
            continue
        role = message.get("role")
        kind = message.get("type")
        if role is None and kind == "message":
            role = message.get("role")
        if role in ("tool", "function") or (role is None and _is_output_item(kind)):
            call_id = message.get("tool_call_id", message.get("call_id"))
            part = open_calls.pop(str(call_id), None)
            if part is not None:
                part["state"] = "output-available"
                part["output"] = _output(_text_of(message.get("content", message.get("output"))))
            continue
        if role == "assistant" or (role is None and kind in ("function_call", "reasoning")):
            if answer is None:
                answer = {"id": message_id, "role": "assistant", "parts": []}
                out.append(answer)
                open_calls = {}
            answer["parts"].append({"type": "step-start"})
            answer["parts"].extend(_assistant_parts(message, open_calls))
            continue
        answer = None
        if role in ("system", "developer"):
            out.append({"id": message_id, "role": "system", "parts": _content_parts(message)})
        elif role == "user":
            out.append({"id": message_id, "role": "user", "parts": _content_parts(message)})
    return out


def _is_output_item(kind: object) -> bool:
    return isinstance(kind, str) and kind.endswith("_call_output")


def _assistant_parts(
    message: Mapping[str, Any], open_calls: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    kind = message.get("type")
    if kind == "reasoning":
        text = _text_of(message.get("summary"))
        return [{"type": "reasoning", "text": text}] if text else []
    if kind == "function_call":
        return [
            _call_part(
                message.get("call_id"), message.get("name"), message.get("arguments"), open_calls
            )
        ]
    parts = [part for part in _content_parts(message) if part.get("text") != ""]
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            parts.append(
                _call_part(
                    call.get("id"), function.get("name"), function.get("arguments"), open_calls
                )
            )
    return parts


def _call_part(
    call_id: object, name: object, arguments: object, open_calls: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    part: dict[str, Any] = {
        "type": f"tool-{name}",
        "toolCallId": str(call_id),
        "state": "input-available",
        "input": _parsed(arguments),
    }
    open_calls[str(call_id)] = part
    return part


def _output(content: str) -> Any:
    """A tool message's content as a part's output: a JSON object or array written as the
    SDK writes JSON (no spaces) becomes that value, so a frontend renders it as data and
    ``to_model_messages`` writes it back to the same text; anything else stays the string."""
    if not content.startswith(("{", "[")):
        return content
    try:
        value = json.loads(content)
    except ValueError:
        return content
    return value if to_json_text(value) == content else content


def _parsed(arguments: object) -> Any:
    """A call's arguments as the value they encode (the text itself when it is not JSON)."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return arguments


def _content_parts(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts: list[dict[str, Any]] = []
    for part in content if isinstance(content, list) else []:
        if not isinstance(part, Mapping):
            continue
        kind = part.get("type")
        if kind in _TEXT_PART_TYPES and isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            parts.append({"type": "file", "mediaType": _media_type(url, "image"), "url": url})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            url = part["image_url"]
            parts.append({"type": "file", "mediaType": _media_type(url, "image"), "url": url})
        elif kind == "file" and isinstance(part.get("file"), Mapping):
            file = part["file"]
            url = str(file.get("file_data", file.get("file_id", "")))
            converted = {
                "type": "file",
                "mediaType": _media_type(url, "application/octet-stream"),
                "url": url,
            }
            if isinstance(file.get("filename"), str):
                converted["filename"] = file["filename"]
            parts.append(converted)
    return parts


def _media_type(url: object, default: str) -> str:
    """The media type a data URL declares, else ``default``."""
    if isinstance(url, str) and url.startswith("data:"):
        declared = url[5:].split(";", 1)[0].split(",", 1)[0]
        if declared:
            return declared
    return default


def _text_of(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(str(part.get("text", "")) for part in value if isinstance(part, Mapping))
    return "" if value is None else json.dumps(value)
