"""The redacted form of a message: its text gone, its place in the conversation kept.

A redacted message still answers what the model APIs check: its role (or item type) and id
stay, a tool result keeps the id of the call it answers, an assistant message keeps its tool
calls' ids and names (their arguments become the marker, as JSON, so a provider that parses
them still can), a Responses call or output item keeps its ``call_id`` and name, a UI message
its id and role with one text part. Everything else the message held (text, images, audio,
reasoning, arguments, outputs, annotations) is dropped or becomes the marker. The metadata
stored beside a message keeps its keys, each value the marker, plus ``redacted``: when and why
(kept from the first redaction, so redacting twice changes nothing).

Pure functions over the stored dicts; :mod:`ctxstore._core.ops.redaction` writes the result.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ctxstore.ui.parts import is_ui_message

#: The text a redacted message shows unless the store's settings name another.
DEFAULT_REDACTION_MARKER = "[redacted]"
#: The metadata key that says a message was redacted, when and why.
REDACTION_KEY = "redacted"

#: Keys a redacted chat-completions message or item keeps (what pairs and orders it).
_KEPT = ("role", "type", "id", "call_id", "tool_call_id", "name", "status")


def redacted_payload(payload: Mapping[str, Any], marker: str) -> dict[str, Any]:
    """The redacted form of a stored payload (see the module docstring)."""
    if is_ui_message(payload):
        return {
            "id": payload["id"],
            "role": payload["role"],
            "parts": [{"type": "text", "text": marker}],
        }
    kind = payload.get("type")
    kept = {key: payload[key] for key in _KEPT if key in payload}
    if kind is None or kind == "message":
        if kind == "message" and isinstance(payload.get("content"), list):
            part = "output_text" if payload.get("role") == "assistant" else "input_text"
            kept["content"] = [{"type": part, "text": marker}]
        else:
            kept["content"] = marker
        calls = payload.get("tool_calls")
        if isinstance(calls, list):
            kept["tool_calls"] = [_redacted_call(call, marker) for call in calls]
        legacy = payload.get("function_call")
        if isinstance(legacy, Mapping):
            kept["function_call"] = {"name": legacy.get("name"), "arguments": _arguments(marker)}
        return kept
    if kind == "reasoning":
        kept["summary"] = [{"type": "summary_text", "text": marker}]
        return kept
    if "arguments" in payload:
        kept["arguments"] = _arguments(marker)
    if "input" in payload:
        kept["input"] = marker
    if "output" in payload or kind.endswith("_output"):
        kept["output"] = marker
    if "content" in payload:
        kept["content"] = marker
    return kept


def redacted_metadata(
    metadata: Mapping[str, Any] | None, marker: str, reason: str | None, now: int
) -> dict[str, Any]:
    """A message's metadata with every value the marker and ``redacted`` saying when and why
    (the first redaction's, when it was redacted before)."""
    if metadata is None:
        metadata = {}
    earlier = metadata.get(REDACTION_KEY)
    out: dict[str, Any] = {key: marker for key in metadata if key != REDACTION_KEY}
    if isinstance(earlier, Mapping) and is_redaction_note(earlier):
        out[REDACTION_KEY] = dict(earlier)
    else:
        out[REDACTION_KEY] = {"at": now, "reason": reason}
    return out


def is_redaction_note(value: Any) -> bool:
    """Whether ``value`` is what :func:`redacted_metadata` records under ``redacted``."""
    return isinstance(value, Mapping) and set(value) == {"at", "reason"}


def _redacted_call(call: Any, marker: str) -> Any:
    if not isinstance(call, Mapping):
        return marker
    kept = {key: call[key] for key in ("id", "type") if key in call}
    function = call.get("function")
    if isinstance(function, Mapping):
        kept["function"] = {"name": function.get("name"), "arguments": _arguments(marker)}
    return kept


def _arguments(marker: str) -> str:
    """Tool-call arguments that say they were redacted and still parse as a JSON object."""
    return json.dumps({REDACTION_KEY: marker})
