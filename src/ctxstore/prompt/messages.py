"""Message fragments: chat messages in the OpenAI / litellm format, ready to store and send.

A message fragment is ``Fragment(name=<role>, data=<chat-message dict>, id=..., kind="message")``.
The dict is exactly what goes to ``litellm.completion(messages=[...])``: ``role``, ``content``
(a string or a list of content parts), and for assistant and tool messages ``tool_calls`` /
``tool_call_id``. The id lives on the fragment, never inside the dict: the store keeps ids out
of payloads, and providers reject unknown keys.

Every builder copies what it is given, so later changes to the caller's dicts do not leak into
the context.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard

from ctxstore.errors import ValidationError
from ctxstore.prompt.fragment import Fragment
from ctxstore.ui.parts import is_ui_message
from ctxstore.ui.validation import check_ui_message

__all__ = [
    "LAST_ASSISTANT_METADATA",
    "assistant",
    "assistant_text",
    "is_message_fragment",
    "last_assistant_message",
    "message",
    "message_payload",
    "replaces_last_assistant",
    "user",
]

#: Content of a user or assistant message: text, or a list of OpenAI content parts.
Content = str | Sequence[Mapping[str, Any]]

#: Metadata that makes the engine's save() update the branch's last assistant message in place.
LAST_ASSISTANT_METADATA: dict[str, Any] = {"replace": "last_assistant"}


def user(content: Content | Mapping[str, Any], *, id: str | None = None) -> Fragment:
    """A user message: text, content parts, or a whole message dict (a chat message or an AI
    SDK ``UIMessage``, whose id becomes the fragment's); without an id the store gives it one
    when it is saved."""
    if isinstance(content, Mapping):
        return _whole_message(content, "user", id)
    return _message_fragment({"role": "user", "content": _content("user", content)}, id)


def assistant(content: Content | Mapping[str, Any], *, id: str | None = None) -> Fragment:
    """An assistant message: text, content parts, or a full assistant message dict.

    A dict may carry ``tool_calls`` and a top-level ``"id"`` (moved to the fragment); its role,
    if given, must be ``assistant``. An ``id=`` that contradicts the dict's id is an error.
    """
    if isinstance(content, Mapping):
        return _whole_message(content, "assistant", id)
    return _message_fragment({"role": "assistant", "content": _content("assistant", content)}, id)


def _whole_message(source: Mapping[str, Any], role: str, id: str | None) -> Fragment:
    """``user()`` / ``assistant()`` of a whole message dict: its role, if given, must be
    ``role``; an ``id=`` that contradicts the dict's id is an error."""
    payload, payload_id = _payload(source, default_role=role)
    if payload["role"] != role:
        raise ValidationError(f"{role}() got a {payload['role']!r} message")
    if id is not None and payload_id is not None and id != payload_id:
        raise ValidationError(f"{role}() got two ids: {id!r} and {payload_id!r}")
    return _message_fragment(payload, payload_id if id is None else id)


def assistant_text(text: str, *, id: str | None = None) -> Fragment:
    """An assistant message holding plain text."""
    if not isinstance(text, str):
        raise ValidationError(f"assistant_text() needs a string, got {text!r}")
    return assistant(text, id=id)


def message(
    msg: Mapping[str, Any] | object, *, metadata: Mapping[str, Any] | None = None
) -> Fragment:
    """A message fragment of any role from a chat-message dict or a pydantic message object.

    Objects with ``model_dump()`` (litellm's ``Message``, any pydantic model) are dumped with
    ``exclude_none=True``. A top-level ``"id"`` becomes the fragment id (the id the message is
    stored under) and leaves the stored dict; without one the store generates the id.
    ``metadata`` is stored beside the message, returned by the store, never sent to a model.
    """
    payload, payload_id = _payload(_as_mapping(msg), default_role=None)
    result = _message_fragment(payload, payload_id)
    if metadata is not None:
        if not isinstance(metadata, Mapping):
            raise ValidationError(f"metadata must be a mapping, got {type(metadata).__name__}")
        result.metadata = copy.deepcopy(dict(metadata))
    return result


def stored_metadata(fragment: Fragment) -> dict[str, Any] | None:
    """The metadata a message fragment stores: its own, without the engine's operational flags
    (such as the one :func:`last_assistant_message` sets)."""
    if not fragment.metadata:
        return None
    kept = {
        key: value
        for key, value in fragment.metadata.items()
        if LAST_ASSISTANT_METADATA.get(key, _ABSENT) != value
    }
    return kept or None


_ABSENT = object()


def last_assistant_message(content: Content | Mapping[str, Any]) -> Fragment:
    """An assistant message that replaces the branch's last assistant message on save().

    Used to rewrite a streamed or repaired answer instead of appending a second one.
    """
    result = assistant(content)
    result.metadata = dict(LAST_ASSISTANT_METADATA)
    return result


def replaces_last_assistant(item: Fragment) -> bool:
    """Whether ``item`` was made by :func:`last_assistant_message`."""
    metadata = item.metadata or {}
    return all(metadata.get(key) == value for key, value in LAST_ASSISTANT_METADATA.items())


def message_payload(fragment: Fragment) -> dict[str, Any]:
    """A copy of the chat-message dict a message fragment carries."""
    if not is_message_fragment(fragment) or not isinstance(fragment.data, Mapping):
        raise ValidationError(f"not a message fragment: {fragment!r}")
    return copy.deepcopy(dict(fragment.data))


def is_message_fragment(value: object) -> TypeGuard[Fragment]:
    """True for fragments of kind ``message`` (the ones stored in the chat graph)."""
    return isinstance(value, Fragment) and value.is_message


# --- helpers -----------------------------------------------------------------------------------


def _message_fragment(payload: dict[str, Any], id: str | None) -> Fragment:
    """A message fragment; ``id`` None lets the store generate the id when it is saved (a
    generated id costs no index entry, a chosen one does)."""
    return Fragment(payload["role"], payload, id=id, kind="message")


def _as_mapping(msg: object) -> Mapping[str, Any]:
    if isinstance(msg, Mapping):
        return msg
    dump = getattr(msg, "model_dump", None)
    if callable(dump):
        dumped = dump(exclude_none=True)
        if isinstance(dumped, Mapping):
            return dumped
    raise ValidationError(
        f"message() needs a chat-message dict or an object with model_dump(), got {msg!r}"
    )


def _payload(
    source: Mapping[str, Any], *, default_role: str | None
) -> tuple[dict[str, Any], str | None]:
    """A checked deep copy of a chat-message dict, and the id it carried (removed from it). A
    UI message is checked as the AI SDK checks it (an id is optional here: the store can give
    one)."""
    if is_ui_message(source):
        check_ui_message({"id": "generated", "role": default_role, **source})
    payload = copy.deepcopy(dict(source))
    for key in payload:
        if not isinstance(key, str):
            raise ValidationError(f"chat-message keys must be strings, got {key!r}")
    payload.setdefault("role", default_role)
    role = payload["role"]
    if not isinstance(role, str) or not role.strip():
        raise ValidationError(f"a chat message needs a string 'role', got {role!r}")
    payload_id = payload.pop("id", None)
    if payload_id is not None and (not isinstance(payload_id, str) or not payload_id):
        raise ValidationError(f"a message id must be a non-empty string, got {payload_id!r}")
    if payload.get("content") is not None:
        payload["content"] = _content(role, payload["content"])
    tool_calls = payload.get("tool_calls")
    if tool_calls is not None and (
        not isinstance(tool_calls, list)
        or not all(isinstance(call, Mapping) for call in tool_calls)
    ):
        raise ValidationError(f"{role} message: tool_calls must be a list of dicts")
    return payload, payload_id


def _content(role: str, content: object) -> str | list[dict[str, Any]]:
    """Text, or a copied list of content parts, each a dict with a string ``type``."""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):
        parts = []
        for index, part in enumerate(content):
            if not isinstance(part, Mapping) or not isinstance(part.get("type"), str):
                raise ValidationError(
                    f"{role} message: content part {index} must be a dict with a string "
                    f"'type', got {part!r}"
                )
            parts.append(copy.deepcopy(dict(part)))
        return parts
    raise ValidationError(
        f"{role} message: content must be a string or a list of content parts, got {content!r}"
    )
