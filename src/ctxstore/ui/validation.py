"""What the AI SDK's ``validateUIMessages`` checks, in Python: roles, part shapes, tool states
and ids. A chat backend receives UI messages from a browser, so they are untrusted input: a bad
one is a :class:`~ctxstore.errors.ValidationError` naming the message and the part (its
``details`` carry ``message_index``, ``message_id`` and ``part_index``), raised before
anything is written or any model is called.

Unknown keys are allowed, as the SDK allows them (its schemas strip them; ctxstore keeps them:
a store returns what it was given).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.ui.parts import TOOL_STATES, is_tool_part

__all__ = ["check_ui_message", "validate_ui_messages"]

_ROLES = ("system", "user", "assistant")
_TEXT_STATES = ("streaming", "done")
#: Required string fields, then optional string fields, of each part type the SDK defines.
_STATIC_PARTS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "text": (("text",), ()),
    "reasoning": (("text",), ("id",)),
    "custom": (("kind",), ()),
    "source-url": (("sourceId", "url"), ("title",)),
    "source-document": (("sourceId", "mediaType", "title"), ("filename",)),
    "file": (("mediaType", "url"), ("filename",)),
    "reasoning-file": (("mediaType", "url"), ()),
    "steering-message": (("id",), ()),
    "step-start": ((), ()),
}
#: Whether a tool part in a state must (True), may (None) or must not (False) carry an approval.
_APPROVAL_BY_STATE: dict[str, bool | None] = {
    "input-streaming": False,
    "input-available": False,
    "approval-requested": True,
    "approval-responded": True,
    "output-available": None,
    "output-error": None,
    "output-denied": True,
}


class _PartError(Exception):
    """A part is malformed: the reason, located by the caller."""


def validate_ui_messages(messages: object) -> list[dict[str, Any]]:
    """``messages`` checked as the SDK's ``validateUIMessages`` checks them: a non-empty list of
    UI messages. Returns them as a list (the same dicts: nothing is copied)."""
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence):
        raise ValidationError(f"UI messages must be a list, got {type(messages).__name__}")
    if not messages:
        raise ValidationError("UI messages must not be empty")
    for index, message in enumerate(messages):
        check_ui_message(message, index)
    return list(messages)


def check_ui_message(message: object, index: int = 0) -> None:
    """One UI message checked (``index``: its place in a list, for the error)."""
    where = f"messages[{index}]"
    if not isinstance(message, Mapping):
        raise ValidationError(
            f"{where} is not a UI message dict: {type(message).__name__}", message_index=index
        )
    message_id = message.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise ValidationError(
            f"{where} needs a non-empty string 'id', got {message_id!r}", message_index=index
        )
    where = f"{where} (id {message_id!r})"
    details: dict[str, Any] = {"message_index": index, "message_id": message_id}
    role = message.get("role")
    if role not in _ROLES:
        raise ValidationError(f"{where}: role must be one of {_ROLES}, got {role!r}", **details)
    if "content" in message:
        raise ValidationError(f"{where}: a UI message has 'parts', not 'content'", **details)
    parts = message.get("parts")
    if not isinstance(parts, list):
        raise ValidationError(f"{where}: 'parts' must be a list, got {parts!r}", **details)
    if not parts and role != "assistant":
        raise ValidationError(f"{where}: a {role} message needs at least one part", **details)
    for part_index, part in enumerate(parts):
        try:
            _check_part(part)
        except _PartError as error:
            raise ValidationError(
                f"{where} parts[{part_index}]: {error}", part_index=part_index, **details
            ) from None


def _check_part(part: object) -> None:
    if not isinstance(part, Mapping):
        raise _PartError(f"a part must be a dict, got {type(part).__name__}")
    kind = part.get("type")
    if not isinstance(kind, str):
        raise _PartError(f"a part needs a string 'type', got {kind!r}")
    if kind.startswith("data-"):
        _optional_strings(part, ("id",))
        return
    if is_tool_part(part):
        _check_tool_part(part, kind)
        return
    shape = _STATIC_PARTS.get(kind)
    if shape is None:
        raise _PartError(
            f"unknown part type {kind!r} (known: {', '.join(_STATIC_PARTS)}, tool-<name>, "
            "dynamic-tool, data-<name>)"
        )
    required, optional = shape
    _required_strings(part, required)
    _optional_strings(part, optional)
    if kind in ("text", "reasoning") and part.get("state", "done") not in _TEXT_STATES:
        raise _PartError(f"a {kind} part's state must be one of {_TEXT_STATES}")
    if kind == "steering-message":
        inner = part.get("parts")
        if not isinstance(inner, list):
            raise _PartError("a steering-message part needs a 'parts' list")
        for item in inner:
            item_kind = item.get("type") if isinstance(item, Mapping) else None
            if item_kind not in ("text", "file"):
                raise _PartError("a steering-message part holds only text and file parts")
            _check_part(item)


def _check_tool_part(part: Mapping[str, Any], kind: str) -> None:
    if kind == "dynamic-tool":
        _required_strings(part, ("toolName",))
        if not part["toolName"]:
            raise _PartError("a dynamic-tool part needs a tool name")
    elif kind == "tool-":
        raise _PartError("a tool part's type must name its tool: 'tool-<name>'")
    _required_strings(part, ("toolCallId",))
    if not part["toolCallId"]:
        raise _PartError("a tool part needs a non-empty 'toolCallId'")
    _optional_strings(part, ("title",))
    state = part.get("state")
    if state not in TOOL_STATES:
        raise _PartError(f"a tool part's state must be one of {TOOL_STATES}, got {state!r}")
    if "providerExecuted" in part and not isinstance(part["providerExecuted"], bool):
        raise _PartError("'providerExecuted' must be a boolean")
    if "output" in part and state != "output-available":
        raise _PartError(f"a tool part in state {state!r} cannot have an 'output'")
    if state == "output-error":
        _required_strings(part, ("errorText",))
    elif "errorText" in part:
        raise _PartError(f"a tool part in state {state!r} cannot have an 'errorText'")
    if state == "input-streaming":
        _optional_strings(part, ("rawInput",))
    _check_approval(part, str(state))


def _check_approval(part: Mapping[str, Any], state: str) -> None:
    wanted = _APPROVAL_BY_STATE[state]
    approval = part.get("approval")
    if approval is None:
        if wanted:
            raise _PartError(f"a tool part in state {state!r} needs an 'approval'")
        return
    if wanted is False:
        raise _PartError(f"a tool part in state {state!r} cannot have an 'approval'")
    if not isinstance(approval, Mapping) or not isinstance(approval.get("id"), str):
        raise _PartError("'approval' must be a dict with a string 'id'")
    approved = approval.get("approved")
    rules: dict[str, Callable[[object], bool]] = {
        "approval-requested": lambda value: value is None,
        "approval-responded": lambda value: isinstance(value, bool),
        "output-available": lambda value: value is True,
        "output-error": lambda value: value is True,
        "output-denied": lambda value: value is False,
    }
    if not rules[state](approved):
        raise _PartError(
            f"a tool part in state {state!r} cannot have an approval with approved={approved!r}"
        )


def _required_strings(part: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    for field in fields:
        if not isinstance(part.get(field), str):
            raise _PartError(
                f"a {part.get('type')} part needs a string {field!r}, got {part.get(field)!r}"
            )


def _optional_strings(part: Mapping[str, Any], fields: tuple[str, ...]) -> None:
    for field in fields:
        if field in part and not isinstance(part[field], str):
            raise _PartError(f"{field!r} must be a string, got {part[field]!r}")
