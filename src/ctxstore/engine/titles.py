"""Chat titles: a static one cut from the first user message, or a short one an LLM writes.

:func:`generate_chat_title` and :func:`agenerate_chat_title` never fail: whatever goes wrong
(the call raises, the reply is empty, too long, or not 2 to 5 words) they fall back to
:func:`static_chat_title`, because a chat without a title is worse than a plain one. Both share
the prompt (:func:`_title_request`) and the reply handling (:func:`_title_from_response`); only
the call differs.

litellm is imported on first use, not with this module: it is an optional dependency and slow
to import. Before that import ``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` so litellm
reads its bundled price map instead of fetching one over the network.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ctxstore._base.litellm import aimport_litellm, import_litellm, reply_text
from ctxstore.errors import ValidationError
from ctxstore.messages.text import DEFAULT_TITLE, collapsed_text, static_title
from ctxstore.prompt.fragment import Fragment
from ctxstore.prompt.messages import message_payload

__all__ = [
    "DEFAULT_TITLE",
    "DEFAULT_TITLE_MODEL",
    "agenerate_chat_title",
    "generate_chat_title",
    "static_chat_title",
]

logger = logging.getLogger(__name__)

#: The model asked for titles when the caller names none.
DEFAULT_TITLE_MODEL = "gpt-4o-mini"

#: How much of the message the model sees: the title is about its opening, and long pastes
#: would only cost tokens.
_PROMPT_TEXT_CHARS = 2000
_MIN_WORDS = 2
_MAX_WORDS = 5
_MAX_TITLE_CHARS = 60

_TITLE_PROMPT = """\
Write a short title (2 to 5 words) for a chat that starts with the user's message below.
Reply with the title only: no quotes, no trailing punctuation, no explanation.

Examples:
- "what's the weather in nyc" -> Weather in NYC
- "help me write an essay about space" -> Space Essay Help
- "debug my python code" -> Python Debugging"""

_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb*"
_TRAILING_PUNCTUATION = ".,;:!?\u2026"
_LABEL = re.compile(r"^\s*title\s*:\s*", re.IGNORECASE)

#: A chat-message dict or a message fragment.
TitleSource = Fragment | Mapping[str, Any]


def static_chat_title(message: TitleSource) -> str:
    """The message's text, whitespace collapsed, cut to 100 characters plus ``...``.

    ``message`` is a message fragment or a chat-message dict; list content contributes its text
    parts. A message without text gets ``New Chat``.
    """
    return static_title(_message_text(message))


def generate_chat_title(
    message: TitleSource,
    model: str = DEFAULT_TITLE_MODEL,
    *,
    completion: Callable[..., Any] | None = None,
    **kwargs: Any,
) -> str:
    """A 2 to 5 word title written by ``model``, or the static title if that fails.

    ``completion`` replaces ``litellm.completion`` (same signature); ``kwargs`` go to the call
    as they are (``api_key``, ``timeout``, litellm's ``mock_response``...).
    """
    fallback, request = _title_request(message, model, kwargs)
    if request is None:
        return fallback
    try:
        call = completion if completion is not None else import_litellm().completion
        response = call(**request)
    except Exception:
        logger.warning("chat title generation failed; using the static title", exc_info=True)
        return fallback
    return _title_from_response(response, fallback)


async def agenerate_chat_title(
    message: TitleSource,
    model: str = DEFAULT_TITLE_MODEL,
    *,
    acompletion: Callable[..., Awaitable[Any]] | None = None,
    **kwargs: Any,
) -> str:
    """Async twin of :func:`generate_chat_title`, through ``litellm.acompletion``."""
    fallback, request = _title_request(message, model, kwargs)
    if request is None:
        return fallback
    try:
        call = acompletion or (await aimport_litellm(request.get("model"))).acompletion
        response = await call(**request)
    except Exception:
        logger.warning("chat title generation failed; using the static title", exc_info=True)
        return fallback
    return _title_from_response(response, fallback)


# --- shared by the sync and async paths --------------------------------------------------------


def _title_request(
    message: TitleSource, model: str, kwargs: Mapping[str, Any]
) -> tuple[str, dict[str, Any] | None]:
    """The static fallback title, and the completion arguments (None: no text to title)."""
    text = _message_text(message)
    fallback = static_title(text)
    if not text:
        return fallback, None
    request = {
        **kwargs,
        "model": model,
        "messages": [
            {"role": "system", "content": _TITLE_PROMPT},
            {"role": "user", "content": text[:_PROMPT_TEXT_CHARS]},
        ],
    }
    return fallback, request


def _title_from_response(response: Any, fallback: str) -> str:
    """The cleaned title in a completion response, or ``fallback`` if there is no usable one."""
    try:
        reply = reply_text(response)
    except (AttributeError, IndexError, KeyError, TypeError):
        logger.warning("chat title reply has no text; using the static title", exc_info=True)
        return fallback
    title = _clean_title(reply)
    if title is None:
        logger.info("chat title reply %r is not a 2 to 5 word title; using the static title", reply)
        return fallback
    return title


def _clean_title(reply: str) -> str | None:
    """The reply without a ``Title:`` label, quotes and trailing punctuation, if it fits."""
    title = " ".join(_LABEL.sub("", reply).split())
    previous = None
    while title != previous:
        previous = title
        title = title.strip(_QUOTES).rstrip(_TRAILING_PUNCTUATION).strip()
    words = title.split()
    if not _MIN_WORDS <= len(words) <= _MAX_WORDS or len(title) > _MAX_TITLE_CHARS:
        return None
    return title


def _message_text(message: TitleSource) -> str:
    """The text of a message, whitespace collapsed: string content or its text parts joined."""
    if isinstance(message, Fragment):
        payload = message_payload(message)
    elif isinstance(message, Mapping):
        payload = dict(message)
    else:
        raise ValidationError(f"a chat title needs a message fragment or dict, got {message!r}")
    return collapsed_text(payload)
