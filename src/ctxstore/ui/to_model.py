"""UI messages to the chat-completions messages a model takes (litellm's format).

The rules follow the AI SDK's ``convertToModelMessages`` and then what its OpenAI chat provider
sends, so a chat saved by a ``useChat`` frontend reaches any litellm model as the SDK itself
would send it:

- ``text`` parts: a system message's and an assistant step's texts are joined into its
  ``content`` string; a user message whose only part is one text is a string, else a list of
  content parts (``text``, and ``file`` parts as ``image_url`` for images or ``file`` with
  ``file_data`` for the rest).
- ``step-start`` splits an assistant message: each step is one assistant message (its text and
  its ``tool_calls``) followed by one ``tool`` message per call of that step.
- ``tool-<name>`` and ``dynamic-tool`` parts: a ``tool_calls`` entry (arguments: the input as
  JSON) and a ``tool`` message: ``output-available`` gives the output (a string as it is, any
  other value as JSON), ``output-error`` the error text, ``output-denied`` (or a refused
  approval) the reason. A call without a result (``input-available``, an approved call never
  run) is closed with an explicit "no result" tool message, so a provider never sees a call
  without its answer (the SDK leaves it dangling and providers reject the request). Parts
  still streaming their input, calls awaiting approval and calls the provider executed itself
  are not sent.
- ``reasoning``, ``reasoning-file``, ``file`` parts of an assistant, ``source-*``, ``custom``
  and ``data-*`` parts stay in storage and are not sent. A ``steering-message`` part is the
  user message it was.
- A message that is not a UI message (a chat-completions message, a Responses item) passes
  through as it is: a chat may hold both.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ctxstore.ui.parts import is_tool_part, is_ui_message, tool_name
from ctxstore.ui.validation import check_ui_message

__all__ = ["NO_RESULT", "model_messages_of", "to_json_text", "to_model_messages"]

#: The content of the tool message that closes a call which never got a result.
NO_RESULT = "No result: the tool call did not complete."
_DENIED = "Tool call execution denied."


def to_model_messages(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat-completions messages for ``messages`` (UI messages are checked first: a bad one is
    a ``ValidationError`` naming it; other messages pass through)."""
    items = list(messages)
    for index, message in enumerate(items):
        if is_ui_message(message):
            check_ui_message(message, index)
    converted: list[dict[str, Any]] = []
    for message in items:
        converted.extend(model_messages_of(message))
    return converted


def model_messages_of(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model messages one message becomes, unchecked (a counter's and a reader's path: the
    message was checked when it was saved); a non-UI message is itself."""
    if not is_ui_message(message):
        return [dict(message)]
    return ui_model_messages(message)


def ui_model_messages(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The model messages of a UI message (the caller knows it is one).

    Counting a saved chat converts every message, so the shapes most messages have (a question
    of one text part; an answer of one step of text) take a short path that builds the same
    message as the general one."""
    role = message.get("role")
    parts = message["parts"]
    if len(parts) <= 2 and role in ("user", "assistant"):
        text = _plain_text(parts, role)
        if text is not None:
            return [{"role": role, "content": text}] if text or role == "user" else []
    parts = [part for part in parts if type(part) is dict or isinstance(part, Mapping)]
    if role == "system":
        return [{"role": "system", "content": _joined_text(parts)}]
    if role == "user":
        return [_user_message(parts)]
    if role == "assistant":
        return _assistant_messages(parts)
    return []


def _plain_text(parts: list[Any], role: object) -> str | None:
    """The text of a one-text message: ``[text]`` (a question), ``[step-start, text]`` or
    ``[text]`` (a one-step answer); None for any other shape."""
    first = parts[0] if parts else None
    if type(first) is not dict:
        return None
    kind = first.get("type")
    if len(parts) == 1:
        text = first.get("text")
        return text if kind == "text" and type(text) is str else None
    second = parts[1]
    if role != "assistant" or kind != "step-start" or type(second) is not dict:
        return None
    text = second.get("text")
    return text if second.get("type") == "text" and type(text) is str else None


def to_json_text(value: object) -> str:
    """``value`` as JavaScript's ``JSON.stringify`` writes it (no spaces, non-ASCII kept): what
    the SDK sends, so a count or a comparison agrees to the character."""
    return _JSON.encode(value)


#: One encoder for every call: ``json.dumps`` with non-default options builds a new one each time.
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


def _joined_text(parts: list[Mapping[str, Any]]) -> str:
    return "".join(str(part.get("text", "")) for part in parts if part.get("type") == "text")


def _user_message(parts: list[Mapping[str, Any]]) -> dict[str, Any]:
    content = [
        converted
        for converted in (_user_content_part(part) for part in parts)
        if converted is not None
    ]
    if len(content) == 1 and content[0]["type"] == "text":
        return {"role": "user", "content": content[0]["text"]}
    return {"role": "user", "content": content}


def _user_content_part(part: Mapping[str, Any]) -> dict[str, Any] | None:
    kind = part.get("type")
    if kind == "text":
        return {"type": "text", "text": str(part.get("text", ""))}
    if kind != "file":
        return None
    url = str(part.get("url", ""))
    media_type = str(part.get("mediaType", ""))
    if media_type == "image" or media_type.startswith("image/"):
        return {"type": "image_url", "image_url": {"url": url}}
    file: dict[str, Any] = {"file_data": url}
    if isinstance(part.get("filename"), str):
        file["filename"] = part["filename"]
    return {"type": "file", "file": file}


def _assistant_messages(parts: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    block: list[Mapping[str, Any]] = []
    for part in parts:
        kind = part.get("type")
        if kind == "step-start":
            _flush_step(block, out)
            block = []
        elif kind == "steering-message":
            _flush_step(block, out)
            block = []
            inner = part.get("parts")
            steering = inner if isinstance(inner, list) else []
            out.append(_user_message([item for item in steering if isinstance(item, Mapping)]))
        else:
            block.append(part)
    _flush_step(block, out)
    return out


def _flush_step(block: list[Mapping[str, Any]], out: list[dict[str, Any]]) -> None:
    """One step: an assistant message with its text and calls, then a tool message per call."""
    text = ""
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for part in block:
        kind = part.get("type")
        if kind == "text":
            text += str(part.get("text", ""))
        elif is_tool_part(part):
            state = part.get("state")
            if state in ("input-streaming", "approval-requested") or part.get("providerExecuted"):
                continue
            call_id = str(part.get("toolCallId", ""))
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": tool_name(part), "arguments": _arguments(part)},
                }
            )
            results.append({"role": "tool", "tool_call_id": call_id, "content": _result(part)})
    if calls:
        out.append({"role": "assistant", "content": text or None, "tool_calls": calls})
        out.extend(results)
    elif text:
        out.append({"role": "assistant", "content": text})


def _arguments(part: Mapping[str, Any]) -> str:
    value = part.get("input")
    return to_json_text({} if value is None else value)


def _result(part: Mapping[str, Any]) -> str:
    state = part.get("state")
    approval = part.get("approval")
    refused = isinstance(approval, Mapping) and approval.get("approved") is False
    if state == "output-available":
        output = part.get("output")
        return output if isinstance(output, str) else to_json_text(output)
    if state == "output-error":
        return str(part.get("errorText", ""))
    if state == "output-denied" or refused:
        reason = approval.get("reason") if isinstance(approval, Mapping) else None
        return reason if isinstance(reason, str) else _DENIED
    return NO_RESULT
