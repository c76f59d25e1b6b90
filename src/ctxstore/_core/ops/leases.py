"""The per-chat compaction lease (``lua/compaction_lease.lua``): one summarizer per chat at once.

A worker and an inline compaction (``resolve()`` past the hard threshold) both take it before
they read what to summarize and give it back after the summary is written; a holder that dies
leaves it to expire after ``ttl_ms``.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ConfigurationError


def new_lease_token() -> str:
    return os.urandom(12).hex()


def _lease(
    state: StoreState,
    chat_id: str,
    action: str,
    token: str,
    ttl_ms: int,
    user_id: str | None,
    incarnation: str | None,
    job: str = "",
) -> Operation[tuple[bool, int]]:
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
        raise ConfigurationError(f"a lease's ttl_ms must be a positive integer, got {ttl_ms!r}")
    chat = state.keyspace.chat(chat_id)
    script = load_script("compaction_lease")

    def parse(reply: Sequence[Any]) -> tuple[bool, int]:
        return bool(int(reply[0])), int(reply[1])

    result: tuple[bool, int] = yield script_call(
        script,
        keys_for(script, chat),
        (*scope_args(user_id, incarnation), action, token, state.clock(), ttl_ms, job),
        parse=parse,
        context=chat_context(chat_id),
        writes=True,
    )
    return result


def take_lease(
    state: StoreState,
    chat_id: str,
    token: str,
    ttl_ms: int,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[tuple[bool, int]]:
    """(whether the lease is the caller's now, when it expires): another holder's unexpired
    lease is not taken; the caller's own is extended."""
    result = yield from _lease(state, chat_id, "take", token, ttl_ms, user_id, incarnation)
    return result


def give_lease(
    state: StoreState,
    chat_id: str,
    token: str,
    *,
    job: str = "",
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[bool]:
    """Give the lease back if it is still the caller's; True when it was. ``job``: a
    compaction marker settled without a summary (nothing was due), cleared if still set."""
    given, _expires = yield from _lease(state, chat_id, "give", token, 1, user_id, incarnation, job)
    return given
