"""What ``chat()`` is asked, checked before anything is written or any model is called."""

from __future__ import annotations

import secrets
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from ctxstore._base.ids import check_name
from ctxstore.engine.streamed import StreamOptions
from ctxstore.errors import ValidationError
from ctxstore.frontend.tools import ToolSpec, tool_specs
from ctxstore.ui.validation import validate_ui_messages

__all__ = ["ChatRequest", "Trigger", "new_message_id"]

Trigger = Literal["submit-message", "regenerate-message"]
_TRIGGERS = ("submit-message", "regenerate-message")
#: Keyword arguments of the model call chat() sends itself.
_OWN_ARGUMENTS = ("messages", "stream", "tools")
_ID_ALPHABET = string.ascii_letters + string.digits


def new_message_id() -> str:
    """An id for the answer, announced in the ``start`` chunk and stored with the answer (16
    letters and digits, as the SDK's ``generateId`` makes them)."""
    return "".join(secrets.choice(_ID_ALPHABET) for _ in range(16))


@dataclass(frozen=True)
class ChatRequest:
    """One ``chat()`` call's settings, checked."""

    model: str
    #: The new user message (None for a regenerate).
    user_message: dict[str, Any] | None
    trigger: Trigger
    #: The assistant message a regenerate replaces (None: the branch's head).
    message_id: str | None
    tools: dict[str, ToolSpec]
    max_steps: int
    generate_title: bool
    title_model: str | None
    context_variables: Any
    transform: Callable[[dict[str, Any]], Any] | None
    on_error: Callable[[BaseException], str] | None
    message_metadata: Mapping[str, Any] | Callable[[dict[str, Any]], Any] | None
    final_assistant_metadata: Mapping[str, Any] | None
    arguments: dict[str, Any]
    stream: StreamOptions
    #: The id of the answer (the ``start`` chunk's ``messageId``).
    answer_id: str

    @classmethod
    def of(
        cls,
        messages: object,
        *,
        model: object,
        tools: object,
        max_steps: object,
        generate_title: object,
        title_model: object,
        context_variables: Any,
        transform: object,
        on_error: object,
        message_metadata: object,
        final_assistant_metadata: object,
        trigger: object,
        message_id: object,
        stream_ttl: float | timedelta,
        writer_ttl: float | timedelta,
        arguments: Mapping[str, Any],
    ) -> ChatRequest:
        if not isinstance(model, str) or not model:
            raise ValidationError(f"model must be a model name, got {model!r}")
        if trigger not in _TRIGGERS:
            raise ValidationError(f"trigger must be one of {_TRIGGERS}, got {trigger!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValidationError(f"max_steps must be an integer of at least 1, got {max_steps!r}")
        if not isinstance(generate_title, bool):
            raise ValidationError(f"generate_title must be True or False, got {generate_title!r}")
        for name, value in (("transform", transform), ("on_error", on_error)):
            if value is not None and not callable(value):
                raise ValidationError(f"{name} must be a function, got {value!r}")
        if message_metadata is not None and not (
            callable(message_metadata) or isinstance(message_metadata, Mapping)
        ):
            raise ValidationError(
                f"message_metadata must be a mapping or a function, got {message_metadata!r}"
            )
        if final_assistant_metadata is not None and not isinstance(
            final_assistant_metadata, Mapping
        ):
            raise ValidationError(
                f"final_assistant_metadata must be a mapping, got {final_assistant_metadata!r}"
            )
        for name in _OWN_ARGUMENTS:
            if name in arguments:
                raise ValidationError(f"chat() sends {name}= itself; do not pass it")
        if message_id is not None:
            check_name(message_id, "message_id")
        user_message = _new_user_message(messages, trigger)
        stream = StreamOptions.of(
            stream_ttl=stream_ttl,
            writer_ttl=writer_ttl,
            title=True,
            title_model=title_model,  # type: ignore[arg-type]
            title_options=None,
        )
        return cls(
            model=model,
            user_message=user_message,
            trigger=trigger,  # type: ignore[arg-type]
            message_id=message_id,  # type: ignore[arg-type]
            tools=tool_specs(tools),
            max_steps=max_steps,
            generate_title=generate_title,
            title_model=stream.title_model,
            context_variables=context_variables,
            transform=transform,  # type: ignore[arg-type]
            on_error=on_error,  # type: ignore[arg-type]
            message_metadata=message_metadata,
            final_assistant_metadata=(
                dict(final_assistant_metadata) if final_assistant_metadata is not None else None
            ),
            arguments=dict(arguments),
            stream=stream,
            answer_id=new_message_id(),
        )


def _new_user_message(messages: object, trigger: object) -> dict[str, Any] | None:
    """The one message chat() takes from the client: the last, a user message, for a submit
    (the rest of the client's history is not trusted: the store holds the chat)."""
    if trigger == "regenerate-message" and (messages is None or messages == []):
        return None
    checked = validate_ui_messages(messages)
    if trigger == "regenerate-message":
        return None
    last = checked[-1]
    if last.get("role") != "user":
        raise ValidationError(
            f"a submit-message needs the new user message last, got a {last.get('role')!r} "
            f"message (id {last.get('id')!r})"
        )
    check_name(last["id"], "the user message's id")
    return dict(last)
