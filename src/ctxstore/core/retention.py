"""Retention: a chat that nobody writes to for ``ttl`` expires whole.

A chat's ``ttl`` (milliseconds) is a field of its hash, set when the chat is created (the
store's default, ``connect(ttl=)``, or ``upsert_chat(ttl=)``) and changed by
``store.expire_chat``. Every write script ends by setting that expiry again on every key of the
chat (``slide_expiry`` in the Lua prelude), so the keys share one deadline and the chat vanishes
whole, at once, the ``ttl`` after its last write; reads never move it. The listing indexes live
in other slots: a listing that finds an expired chat's entry removes it (lazily, like any stale
entry), so expired chats vanish from listings too.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Final

from ctxstore.core.chats import chat_context, keys_for, scope_args
from ctxstore.core.protocol import Operation, script_call
from ctxstore.core.scripts import load_script
from ctxstore.core.state import StoreState
from ctxstore.errors import ValidationError

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


def ttl_arg(ttl: int | None) -> str:
    """The script argument of a retention: milliseconds, or "" for none."""
    return "" if ttl is None else str(ttl)


def expire_chat(
    state: StoreState,
    chat_id: str,
    ttl: TTL,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[float | None]:
    """Set the chat's retention to ``ttl`` seconds from now (every later write slides it), or
    clear it (``None``: the chat never expires). Returns the retention now, in seconds."""
    milliseconds = ttl_ms(ttl)
    chat = state.keyspace.chat(chat_id)
    script = load_script("expire_chat")
    stored: float | None = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), ttl_arg(milliseconds)),
        parse=lambda reply: int(reply) / 1000 if reply not in (b"", "") else None,
        context=chat_context(chat_id),
        writes=True,
    )
    return stored
