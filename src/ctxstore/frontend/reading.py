"""One model call of ``chat()`` read as UI message stream chunks: a chat-completions stream
(litellm's chunks) in, the chunks a ``useChat`` client reads out, and what the call asked for
(its tool calls, its usage, why it stopped).

Text comes as ``text-start`` / ``text-delta`` / ``text-end``; litellm's ``reasoning_content``
as ``reasoning-*``; each tool call as ``tool-input-start`` and ``tool-input-delta`` while its
arguments stream, its ``tool-input-available`` (or ``tool-input-error`` when the arguments are
not JSON) once the call ended.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ctxstore.frontend.protocol import finish_reason

__all__ = ["ModelCallReader", "ToolCallRequest"]


@dataclass
class ToolCallRequest:
    """A tool call the model made: its id, the tool's name, its arguments as sent."""

    call_id: str
    name: str
    arguments: str = ""
    started: bool = False


@dataclass
class ModelCallReader:
    """Reads one model call's chunks (``step``: the call's rank, for the part ids)."""

    step: int
    calls: dict[int, ToolCallRequest] = field(default_factory=dict)
    usage: Any = None
    finish: str = "other"
    _text_id: str | None = None
    _reasoning_id: str | None = None
    _parts: int = 0
    #: A delta's index -> the key of the call it continues; the last call's key.
    _by_index: dict[int, int] = field(default_factory=dict)
    _last: int | None = None

    def read(self, chunk: Any) -> list[dict[str, Any]]:
        """The UI chunks one model chunk makes."""
        usage = _field(chunk, "usage")
        if usage is not None:
            self.usage = usage
        choices = _field(chunk, "choices") or []
        if not choices:
            return []
        choice = choices[0]
        reason = _field(choice, "finish_reason")
        if reason is not None:
            self.finish = finish_reason(reason)
        delta = _field(choice, "delta")
        if delta is None:
            return []
        out: list[dict[str, Any]] = []
        reasoning = _field(delta, "reasoning_content")
        if isinstance(reasoning, str) and reasoning:
            out.extend(self._reasoning(reasoning))
        content = _field(delta, "content")
        if isinstance(content, str) and content:
            out.extend(self._text(content))
        for call in _field(delta, "tool_calls") or []:
            out.extend(self._tool_call(call))
        return out

    def close(self) -> list[dict[str, Any]]:
        """The chunks that end the call: open text and reasoning closed, each tool call's input
        available (or refused)."""
        out = self._close_text() + self._close_reasoning()
        for request in self.calls.values():
            if not request.started:
                out.append(_input_start(request))
            try:
                value = json.loads(request.arguments) if request.arguments.strip() else {}
            except ValueError:
                out.append(
                    {
                        "type": "tool-input-error",
                        "toolCallId": request.call_id,
                        "toolName": request.name,
                        "input": request.arguments,
                        "errorText": "the model sent arguments that are not JSON",
                    }
                )
                continue
            out.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": request.call_id,
                    "toolName": request.name,
                    "input": value,
                }
            )
        return out

    def _next_id(self, kind: str) -> str:
        self._parts += 1
        return f"{kind}-{self.step}-{self._parts}"

    def _text(self, delta: str) -> list[dict[str, Any]]:
        out = self._close_reasoning()
        if self._text_id is None:
            self._text_id = self._next_id("text")
            out.append({"type": "text-start", "id": self._text_id})
        out.append({"type": "text-delta", "id": self._text_id, "delta": delta})
        return out

    def _reasoning(self, delta: str) -> list[dict[str, Any]]:
        out = self._close_text()
        if self._reasoning_id is None:
            self._reasoning_id = self._next_id("reasoning")
            out.append({"type": "reasoning-start", "id": self._reasoning_id})
        out.append({"type": "reasoning-delta", "id": self._reasoning_id, "delta": delta})
        return out

    def _close_text(self) -> list[dict[str, Any]]:
        if self._text_id is None:
            return []
        ended, self._text_id = self._text_id, None
        return [{"type": "text-end", "id": ended}]

    def _close_reasoning(self) -> list[dict[str, Any]]:
        if self._reasoning_id is None:
            return []
        ended, self._reasoning_id = self._reasoning_id, None
        return [{"type": "reasoning-end", "id": ended}]

    def _tool_call(self, call: Any) -> list[dict[str, Any]]:
        request = self._request_of(call)
        function = _field(call, "function")
        name = _field(function, "name") if function is not None else None
        fragment = _field(function, "arguments") if function is not None else None
        if isinstance(name, str) and name and not request.name:
            request.name = name
        out: list[dict[str, Any]] = []
        if isinstance(fragment, str) and fragment:
            request.arguments += fragment
        else:
            fragment = ""
        if not request.started and request.name:
            out.extend(self._close_text() + self._close_reasoning())
            out.append(_input_start(request))
            fragment = request.arguments  # what came before the name, too
        if request.started and fragment:
            out.append(
                {
                    "type": "tool-input-delta",
                    "toolCallId": request.call_id,
                    "inputTextDelta": fragment,
                }
            )
        return out

    def _request_of(self, call: Any) -> ToolCallRequest:
        """The call a delta continues, or a new one: by its index, unless it names another
        call id there (some providers send every parallel call at index 0); a delta without an
        index continues the last call."""
        index = _field(call, "index")
        call_id = _field(call, "id")
        call_id = call_id if isinstance(call_id, str) and call_id else None
        key = self._by_index.get(index) if isinstance(index, int) else self._last
        if key is not None and (call_id is None or call_id == self.calls[key].call_id):
            return self.calls[key]
        key = len(self.calls)
        self.calls[key] = ToolCallRequest(call_id or f"call-{self.step}-{key}", "")
        if isinstance(index, int):
            self._by_index[index] = key
        self._last = key
        return self.calls[key]


def _input_start(request: ToolCallRequest) -> dict[str, Any]:
    request.started = True
    return {"type": "tool-input-start", "toolCallId": request.call_id, "toolName": request.name}


def _field(value: Any, name: str) -> Any:
    """An attribute of a litellm object, or a key of the same thing as a dict."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        return value.get(name)
    return getattr(value, name, None)
