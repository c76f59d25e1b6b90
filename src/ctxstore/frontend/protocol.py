"""The AI SDK's UI message stream protocol (v1, the ``ai`` package 5 to 7): the chunks a
``useChat`` client reads, their server-sent-event form, and the answer they build.

:class:`AnswerBuilder` applies each chunk the server sends to the assistant ``UIMessage`` the
way the SDK's client does (``processUIMessageStream``), so the message ctxstore saves is the one
the client ends up holding: same parts, same fields, same merged metadata.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

__all__ = [
    "SSE_DONE",
    "UI_MESSAGE_STREAM_HEADERS",
    "AnswerBuilder",
    "finish_reason",
    "merge_metadata",
    "sse_event",
]

#: The response headers of a UI message stream (the SDK's ``UI_MESSAGE_STREAM_HEADERS``).
UI_MESSAGE_STREAM_HEADERS: Final[dict[str, str]] = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "connection": "keep-alive",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
#: The last event of a stream.
SSE_DONE: Final = "data: [DONE]\n\n"

#: Chat-completions finish reasons in the SDK's spelling.
_FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool-calls",
    "function_call": "tool-calls",
    "content_filter": "content-filter",
}


def chunk_json(chunk: Mapping[str, Any]) -> str:
    """A chunk as ``JSON.stringify`` writes it (no spaces: one line, no newline inside)."""
    return json.dumps(chunk, separators=(",", ":"), ensure_ascii=False)


def sse_event(chunk: Mapping[str, Any], event_id: str | None = None) -> str:
    """One server-sent event carrying ``chunk`` (with an ``id:`` line when given)."""
    prefix = f"id: {event_id}\n" if event_id is not None else ""
    return f"{prefix}data: {chunk_json(chunk)}\n\n"


def finish_reason(reason: object) -> str:
    """A model's finish reason as the SDK names it (``"other"`` for one it does not know)."""
    return _FINISH_REASONS.get(reason, "other") if isinstance(reason, str) else "other"


def merge_metadata(base: Any, overrides: Any) -> Any:
    """The SDK's ``mergeObjects``: nested dicts merged key by key, anything else replaced."""
    if overrides is None:
        return base
    if not isinstance(base, dict) or not isinstance(overrides, dict):
        return overrides
    merged = dict(base)
    for key, value in overrides.items():
        current = merged.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            merged[key] = merge_metadata(current, value)
        else:
            merged[key] = value
    return merged


class AnswerBuilder:
    """The assistant UI message the chunks of one answer build, as the client builds it."""

    #: chunk type -> the method that applies it (set below the class).
    _HANDLERS: ClassVar[dict[str, Callable[[AnswerBuilder, Mapping[str, Any]], None]]]

    def __init__(self, message_id: str) -> None:
        self.message: dict[str, Any] = {"id": message_id, "role": "assistant", "parts": []}
        self._text: dict[str, dict[str, Any]] = {}
        self._reasoning: dict[str, dict[str, Any]] = {}
        self._tools: dict[str, dict[str, Any]] = {}

    @property
    def parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = self.message["parts"]
        return parts

    def apply(self, chunk: Mapping[str, Any]) -> None:
        """Update the message with one chunk the server sends."""
        kind = chunk["type"]
        handler = self._HANDLERS.get(kind)
        if handler is not None:
            handler(self, chunk)
        elif kind.startswith("data-") and not chunk.get("transient"):
            self._data(chunk)

    def _data(self, chunk: Mapping[str, Any]) -> None:
        """A data part; one with the type and id of a part already there replaces its data."""
        if chunk.get("id") is not None:
            for part in self.parts:
                if part.get("type") == chunk["type"] and part.get("id") == chunk["id"]:
                    part["data"] = chunk.get("data")
                    return
        self.parts.append({key: chunk[key] for key in ("type", "id", "data") if key in chunk})

    def _start_step(self, _chunk: Mapping[str, Any]) -> None:
        self.parts.append({"type": "step-start"})

    def _text_start(self, chunk: Mapping[str, Any]) -> None:
        part = {"type": "text", "text": "", "state": "streaming"}
        self._text[chunk["id"]] = part
        self.parts.append(part)

    def _text_delta(self, chunk: Mapping[str, Any]) -> None:
        self._text[chunk["id"]]["text"] += chunk["delta"]

    def _text_end(self, chunk: Mapping[str, Any]) -> None:
        self._text.pop(chunk["id"])["state"] = "done"

    def _reasoning_start(self, chunk: Mapping[str, Any]) -> None:
        part = {"type": "reasoning", "id": chunk["id"], "text": "", "state": "streaming"}
        self._reasoning[chunk["id"]] = part
        self.parts.append(part)

    def _reasoning_delta(self, chunk: Mapping[str, Any]) -> None:
        self._reasoning[chunk["id"]]["text"] += chunk["delta"]

    def _reasoning_end(self, chunk: Mapping[str, Any]) -> None:
        self._reasoning.pop(chunk["id"])["state"] = "done"

    def _tool_input_start(self, chunk: Mapping[str, Any]) -> None:
        part = {
            "type": f"tool-{chunk['toolName']}",
            "toolCallId": chunk["toolCallId"],
            "state": "input-streaming",
        }
        self._tools[chunk["toolCallId"]] = part
        self.parts.append(part)

    def _tool_input_delta(self, chunk: Mapping[str, Any]) -> None:
        part = self._tools[chunk["toolCallId"]]
        part["rawInput"] = part.get("rawInput", "") + chunk["inputTextDelta"]

    def _tool_output(self, chunk: Mapping[str, Any]) -> None:
        part = self._tools[chunk["toolCallId"]]
        if chunk["type"] == "tool-output-available":
            part.update(state="output-available", output=chunk["output"])
        else:
            part.update(state="output-error", errorText=chunk["errorText"])

    def _metadata_chunk(self, chunk: Mapping[str, Any]) -> None:
        self.message_metadata(chunk.get("messageMetadata"))

    def tool_part(self, call_id: str) -> dict[str, Any] | None:
        """The part of the tool call ``call_id`` (None: no such call)."""
        return self._tools.get(call_id)

    def message_metadata(self, metadata: Any) -> None:
        if metadata is not None:
            merged = merge_metadata(self.message.get("metadata"), metadata)
            self.message["metadata"] = merged

    def _settle_input(self, chunk: Mapping[str, Any]) -> None:
        call_id = chunk["toolCallId"]
        part = self._tools.get(call_id)
        if part is None:
            part = {"type": f"tool-{chunk['toolName']}", "toolCallId": call_id}
            self._tools[call_id] = part
            self.parts.append(part)
        part.pop("rawInput", None)
        if chunk["type"] == "tool-input-available":
            part.update(state="input-available", input=chunk["input"])
        else:
            part.update(state="output-error", input=chunk["input"], errorText=chunk["errorText"])

    def stopped(self) -> dict[str, Any]:
        """The message as it stands when the answer stops early: open texts closed, calls
        whose input was still streaming dropped (they were never made)."""
        for part in [*self._text.values(), *self._reasoning.values()]:
            part["state"] = "done"
        self._text.clear()
        self._reasoning.clear()
        self.message["parts"] = [
            part for part in self.parts if part.get("state") != "input-streaming"
        ]
        return self.message


AnswerBuilder._HANDLERS = {
    "start-step": AnswerBuilder._start_step,
    "text-start": AnswerBuilder._text_start,
    "text-delta": AnswerBuilder._text_delta,
    "text-end": AnswerBuilder._text_end,
    "reasoning-start": AnswerBuilder._reasoning_start,
    "reasoning-delta": AnswerBuilder._reasoning_delta,
    "reasoning-end": AnswerBuilder._reasoning_end,
    "tool-input-start": AnswerBuilder._tool_input_start,
    "tool-input-delta": AnswerBuilder._tool_input_delta,
    "tool-input-available": AnswerBuilder._settle_input,
    "tool-input-error": AnswerBuilder._settle_input,
    "tool-output-available": AnswerBuilder._tool_output,
    "tool-output-error": AnswerBuilder._tool_output,
    "start": AnswerBuilder._metadata_chunk,
    "finish": AnswerBuilder._metadata_chunk,
    "message-metadata": AnswerBuilder._metadata_chunk,
}
