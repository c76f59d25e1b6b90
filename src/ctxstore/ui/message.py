"""The type of a UI message, for type checkers: apart from the functions, so that the readers
that only tell a UI message apart (every count, every read) never build it."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

__all__ = ["UIMessage"]


class UIMessage(TypedDict):
    """The AI SDK's ``UIMessage``: what a ``useChat`` frontend shows and sends."""

    id: str
    role: Literal["system", "user", "assistant"]
    parts: list[dict[str, Any]]
    metadata: NotRequired[Any]
