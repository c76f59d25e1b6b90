"""The token entries a save sends beside its records (``lua/append.lua``, ARGV[3]).

Each message gets 6 bytes: a flags byte (1: the message continues the tool group of the message
before it, a tool result or a Responses API call or output item, so a window never starts with
it; see :mod:`ctxstore.tool_groups`) and the chain's tokens through it, big-endian in 40 bits,
counted from ``base``: the size the client believes the chain before the first message has
(known from its last save or read of that head). The script stores the running totals per log
position (the chat's ``tok`` key), as they are when ``base`` was right, so a chain's size, and
the newest messages that fit a budget, are known without reading a payload, and a long append
costs Redis one ``APPEND``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.messages.tokens import MessageCounter
from ctxstore.messages.tool_groups import continues_tool_group

TOK_WIDTH = 6
TOOL_RESULT = 1
#: The most tokens one message may claim (a window is far smaller; this only bounds bad input).
MAX_MESSAGE_TOKENS = (1 << 32) - 1
#: The most tokens a chain may hold (40 bits).
MAX_CHAIN_TOKENS = (1 << 40) - 1


def token_entries(
    payloads: Sequence[Mapping[str, Any]], count: MessageCounter, base: int = 0
) -> bytes:
    """Flags and chain totals (from ``base``) of each payload, packed for the append script."""
    parts = []
    total = base
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
        total += tokens
        if total > MAX_CHAIN_TOKENS:
            raise ValidationError("a chain may hold at most 2^40 tokens")
        flags = TOOL_RESULT if continues_tool_group(payload) else 0
        parts.append(bytes((flags,)) + total.to_bytes(TOK_WIDTH - 1, "big"))
    return b"".join(parts)
