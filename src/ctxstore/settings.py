"""TODO docstring: ctxstore.settings."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import Final

from ctxstore.errors import ConfigurationError, ValidationError

#: The longest retention a chat takes (about 100 years): longer is surely a unit mistake.
MAX_TTL_SECONDS: Final = 100 * 365 * 24 * 3600


#: A retention in seconds (a number or a timedelta); None for no expiry.
TTL = float | int | timedelta | None


class StoreDefault:
    """The ``ttl=`` default of ``upsert_chat``: the store's own (``connect(ttl=)``); callers
    test for it with ``isinstance``, so one instance, ``STORE_DEFAULT``, is all there is."""

    def __repr__(self) -> str:
        return "STORE_DEFAULT"


STORE_DEFAULT: Final = StoreDefault()


def ttl_ms(ttl: TTL, name: str = "ttl") -> int | None:
    """Milliseconds (at least 1) of a retention given in seconds or as a timedelta; None stays
    None (no expiry). Refused when not a finite positive duration of at most about 100 years."""
    if ttl is None:
        return None
    seconds = ttl.total_seconds() if isinstance(ttl, timedelta) else ttl
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ValidationError(
            f"{name} must be seconds (a number or a timedelta) or None, got {ttl!r}"
        )
    if not (math.isfinite(seconds) and 0 < seconds <= MAX_TTL_SECONDS):
        raise ValidationError(
            f"{name} must be a positive duration of at most 100 years, got {ttl!r}"
        )
    return max(1, round(seconds * 1000))


@dataclass(frozen=True)
class Limits:
    """Safety bounds. Each turns a runaway input into a clear error instead of a stuck Redis."""

    #: Largest encoded message record or metadata value.
    max_message_bytes: int = 1 << 20
    #: Longest chain a walk follows; a longer one is a LimitExceededError.
    max_chain_depth: int = 100_000
    #: Most messages in one append.
    max_batch: int = 10_000
    #: Most messages get_graph returns.
    max_graph_messages: int = 100_000
    #: Most records a read script returns itself. Every record passed through Lua costs Redis
    #: about half a microsecond, five times a plain LRANGE, so longer reads come back as ranges
    #: that the client reads with LRANGE (one more round trip, much less Redis time).
    read_inline_messages: int = 128
    #: Most records one LRANGE of a long read asks for: Redis serves other clients between them.
    read_chunk_messages: int = 1024
    #: Most metadata keys a chat holds, counting what it has and what an update merges in.
    #: Every chat read returns the whole metadata (a listing page returns it for each chat),
    #: so it is meant for a handful of labels and ids, not for data.
    max_metadata_keys: int = 256
    #: Most bytes of a chat's metadata as stored: every ``m:<key>`` field name and msgpack
    #: value together (64 KiB: a listing page of 50 chats at the bound is 3.2 MiB).
    max_metadata_bytes: int = 64 * 1024

    def __post_init__(self) -> None:
        for name in (
            "max_message_bytes",
            "max_chain_depth",
            "max_batch",
            "max_graph_messages",
            "read_inline_messages",
            "read_chunk_messages",
            "max_metadata_keys",
            "max_metadata_bytes",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{name} must be a positive integer, got {value!r}")
