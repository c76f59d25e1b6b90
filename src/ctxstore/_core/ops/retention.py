"""Retention: a chat that nobody writes to for ``ttl`` expires whole.

A chat's ``ttl`` (milliseconds) is a field of its hash, set when the chat is created (the
store's default, ``connect(ttl=)``, or ``upsert_chat(ttl=)``) and changed by
``store.expire_chat``. Every write script ends by setting that expiry again on every key of the
chat (``slide_expiry`` in ``lua/lib/retention.lua``), so the keys share one deadline and the
chat vanishes whole, at once, the ``ttl`` after its last write; reads never move it. The listing
indexes live in other slots: a listing that finds an expired chat's entry removes it (lazily,
like any stale entry), so expired chats vanish from listings too.
"""

from __future__ import annotations

from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.settings import TTL, ttl_ms


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
