"""Token entries: the chat's ``tok`` string, :data:`TOK_WIDTH` bytes per log position.

An entry is a flags byte and the tokens of the chain from its root through that message,
big-endian in 40 bits. The one flag, :data:`TOOL_RESULT` (the name is historical), says that the
message continues the tool group of the message before it: a tool result, or a Responses API
call or output item (:func:`ctxstore.messages.tool_groups.continues_tool_group`), so no window
and no compaction cut starts with it. A chain's size is one read at its head, and the newest
messages that fit a budget are a binary search, with no payload read.

A save sends one entry per message (``lua/append.lua``, ARGV[3]), totals counted from ``base``:
the size the client believes the chain before the first message has (known from its last save
or read of that head); the script shifts them when ``base`` was wrong, so a long append costs
Redis one ``APPEND``. An import builds the same entries from the export's counts. Both use
:func:`flags_of` and :func:`entry`: the flag is derived from the payload in exactly one place.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxstore.errors import ValidationError
from ctxstore.messages.tokens import MessageCounter
from ctxstore.messages.tool_groups import continues_tool_group

#: Bytes of one entry: the flags byte and 40 bits of chain total.
TOK_WIDTH = 6
#: The flag of a message that continues the tool group before it.
TOOL_RESULT = 1
#: Every flag a reader accepts.
KNOWN_FLAGS = (0, TOOL_RESULT)
#: The most tokens one message may claim (a window is far smaller; this only bounds bad input).
MAX_MESSAGE_TOKENS = (1 << 32) - 1
#: The most tokens a chain may hold (40 bits).
MAX_CHAIN_TOKENS = (1 << 40) - 1


def flags_of(payload: Mapping[str, Any]) -> int:
    """The flags byte a message's entry carries, from its payload alone."""
    return TOOL_RESULT if continues_tool_group(payload) else 0


def entry(flags: int, total: int) -> bytes:
    """One entry: ``flags`` and the chain's ``total`` tokens through the message."""
    return bytes((flags,)) + total.to_bytes(TOK_WIDTH - 1, "big")


def entry_at(tok: bytes, index: int) -> tuple[int, int]:
    """(flags, chain total) of the ``index``-th entry of ``tok``."""
    at = index * TOK_WIDTH
    return tok[at], int.from_bytes(tok[at + 1 : at + TOK_WIDTH], "big")


def check_message_tokens(tokens: object, where: str) -> int:
    """One message's own count: an int from 0 to :data:`MAX_MESSAGE_TOKENS`."""
    if (
        isinstance(tokens, bool)
        or not isinstance(tokens, int)
        or not 0 <= tokens <= MAX_MESSAGE_TOKENS
    ):
        raise ValidationError(
            f"{where} counted {tokens!r} tokens; a count is an int from 0 to {MAX_MESSAGE_TOKENS}"
        )
    return tokens


def check_chain_total(total: int, where: str) -> int:
    """A chain total within the 40 bits an entry holds."""
    if total > MAX_CHAIN_TOKENS:
        raise ValidationError(f"{where} makes a chain of more than 2^40 tokens")
    return total


def token_entries(
    payloads: Sequence[Mapping[str, Any]], count: MessageCounter, base: int = 0
) -> bytes:
    """Flags and chain totals (from ``base``) of each payload, packed for the append script."""
    parts = []
    total = base
    for index, payload in enumerate(payloads):
        tokens = count(payload)
        if type(tokens) is not int or not 0 <= tokens <= MAX_MESSAGE_TOKENS:  # the rare path
            check_message_tokens(tokens, f"messages[{index}]")
        total += tokens
        if total > MAX_CHAIN_TOKENS:
            check_chain_total(total, f"messages[{index}]")
        parts.append(entry(flags_of(payload), total))
    return b"".join(parts)
