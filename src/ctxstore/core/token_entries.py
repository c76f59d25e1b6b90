"""The token entries a save sends beside its records (``lua/append.lua``, ARGV[3]).

Each message gets 6 bytes: a flags byte (1: the message is a tool result, so a window never
starts with it) and its own tokens, big-endian in 40 bits. The script adds the tokens of the
chain before it and stores the running total per log position (the chat's ``tok`` key), so a
chain's size, and the newest messages that fit a budget, are known without reading a payload.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.tokens import MessageCounter

TOK_WIDTH = 6
TOOL_RESULT = 1
#: Roles whose messages answer a tool call.
TOOL_RESULT_ROLES = frozenset({"tool", "function"})
#: The most tokens one message may claim (a window is far smaller; this only bounds bad input).
MAX_MESSAGE_TOKENS = (1 << 32) - 1


def token_entries(payloads: Sequence[Mapping[str, Any]], count: MessageCounter) -> bytes:
    """Flags and own tokens of each payload, packed for the append script."""
    parts = []
    for index, payload in enumerate(payloads):
        tokens = count(payload)
        if (
            isinstance(tokens, bool)
            or not isinstance(tokens, int)
            or not (0 <= tokens <= MAX_MESSAGE_TOKENS)
        ):
            raise ValidationError(
                f"messages[{index}] counted {tokens!r} tokens; a count is an int from 0 to "
                f"{MAX_MESSAGE_TOKENS}"
            )
        flags = TOOL_RESULT if payload.get("role") in TOOL_RESULT_ROLES else 0
        parts.append(bytes((flags,)) + tokens.to_bytes(TOK_WIDTH - 1, "big"))
    return b"".join(parts)
