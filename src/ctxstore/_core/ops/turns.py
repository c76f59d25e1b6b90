"""Turn leases (``lua/turn_lease.lua``): one turn at a time on a chat, fenced.

Compare-and-set keeps every write; it does not keep a turn (the user's question, the tool calls,
the answer) together when two turns run at once on one chat. A turn therefore takes the chat's
lease first. Each grant to a new holder bumps the chat's *fencing token*, and every write of the
turn carries it (``fenced``); the scripts refuse a write whose token is no longer the newest
(``LeaseLostError``), so a worker that paused past its lease (a GC pause, a frozen VM, a slow
network) cannot write after another turn took over. Leases never replace compare-and-set: both
hold.

A second turn on a busy chat follows a strategy, after LangGraph Platform's double-texting ones:
``"reject"`` raises :class:`~ctxstore.errors.ChatBusyError` at once, ``"enqueue"`` waits (up to a
bound) for the lease, ``"interrupt"`` takes it over and makes the old turn's token stale.
:func:`acquire` is that decision as a plan (:mod:`ctxstore._base.plans`), driven by the sync
and async engines alike.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, get_args

from ctxstore._base.plans import Pause, Plan, Run
from ctxstore._core.ops.chats import chat_context, keys_for, scope_args
from ctxstore._core.protocol import Operation, script_call
from ctxstore._core.scripts import load_script
from ctxstore._core.state import StoreState
from ctxstore.errors import ChatBusyError, ValidationError

TurnStrategy = Literal["reject", "enqueue", "interrupt"]
TURN_STRATEGIES: tuple[str, ...] = get_args(TurnStrategy)

#: The longest lease or wait a turn takes (a day): longer is surely a unit mistake.
MAX_TURN_SECONDS = 24 * 3600.0
#: How often an enqueued turn looks at the lease again, at first and at most (seconds).
FIRST_POLL = 0.01
LAST_POLL = 0.25


@dataclass(frozen=True)
class TurnGrant:
    """The lease as a take found or left it: whether the caller holds it now, the fencing token
    (the caller's when granted, the holder's otherwise), when it expires (epoch ms), and whether
    this take cut another turn's live lease short."""

    granted: bool
    fence: int
    expires_at: int
    interrupted: bool = False


def new_turn_token() -> str:
    return os.urandom(12).hex()


def fenced(incarnation: str | None, fence: int | None) -> str | None:
    """The ``inc`` argument of a write made inside a turn: ``<incarnation>#<fence>`` (see
    ``check_fence`` in ``lua/lib/base.lua``), so every script's identity check also checks the
    fence."""
    if fence is None:
        return incarnation
    return f"{incarnation or ''}#{fence}"


def seconds(value: float | timedelta, name: str, *, allow_zero: bool) -> float:
    """A duration in seconds from a number or a ``timedelta``; refused when negative, not finite
    or longer than a day."""
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{name} must be seconds (a number or a timedelta), got {value!r}")
    low_ok = value >= 0 if allow_zero else value > 0
    if not (low_ok and value <= MAX_TURN_SECONDS):
        bound = "non-negative" if allow_zero else "positive"
        raise ValidationError(f"{name} must be {bound} and at most a day, got {value!r}")
    return float(value)


def milliseconds(seconds: float) -> int:
    """A checked lease in whole milliseconds (at least one), as the lease script takes it."""
    return max(1, round(seconds * 1000))


def check_strategy(strategy: object) -> TurnStrategy:
    if strategy not in TURN_STRATEGIES:
        raise ValidationError(
            f"strategy must be one of {', '.join(TURN_STRATEGIES)}, got {strategy!r}"
        )
    return strategy  # type: ignore[return-value]


def _lease_call(
    state: StoreState,
    chat_id: str,
    action: str,
    token: str,
    ttl_ms: int,
    interrupt: bool,
    user_id: str | None,
    incarnation: str | None,
) -> Operation[TurnGrant]:
    chat = state.keyspace.chat(chat_id)
    script = load_script("turn_lease")

    def parse(reply: Sequence[Any]) -> TurnGrant:
        return TurnGrant(bool(int(reply[0])), int(reply[1]), int(reply[2]), bool(int(reply[3])))

    grant: TurnGrant = yield script_call(
        script,
        keys_for(script, chat),
        (
            *scope_args(user_id, incarnation),
            action,
            token,
            state.clock(),
            ttl_ms,
            "1" if interrupt else "0",
        ),
        parse=parse,
        context=chat_context(chat_id),
        writes=lambda grant: grant.granted,
    )
    return grant


def take_turn(
    state: StoreState,
    chat_id: str,
    token: str,
    ttl_ms: int,
    *,
    interrupt: bool = False,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[TurnGrant]:
    """Take the chat's turn lease for ``ttl_ms``: granted when it is free, expired, already the
    caller's (``token``), or ``interrupt`` is set; otherwise the live holder's fence and expiry."""
    grant = yield from _lease_call(
        state, chat_id, "take", token, ttl_ms, interrupt, user_id, incarnation
    )
    return grant


def extend_turn(
    state: StoreState,
    chat_id: str,
    token: str,
    ttl_ms: int,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[TurnGrant]:
    """Run the caller's lease ``ttl_ms`` from now; ``LeaseLostError`` when another turn has it."""
    grant = yield from _lease_call(
        state, chat_id, "extend", token, ttl_ms, False, user_id, incarnation
    )
    return grant


def give_turn(
    state: StoreState,
    chat_id: str,
    token: str,
    *,
    user_id: str | None = None,
    incarnation: str | None = None,
) -> Operation[bool]:
    """Give the lease back if it is still the caller's (True when it was); the fence stays."""
    grant = yield from _lease_call(state, chat_id, "give", token, 1, False, user_id, incarnation)
    return grant.granted


def acquire(
    state: StoreState,
    chat_id: str,
    token: str,
    strategy: TurnStrategy,
    *,
    lease_ms: int,
    wait: float,
    user_id: str,
    incarnation: str | None,
    monotonic: Any = time.monotonic,
) -> Plan[TurnGrant]:
    """Take the turn by ``strategy``; raises ``ChatBusyError`` when it cannot.

    ``"enqueue"`` looks again with a growing, jittered pause (10 ms up to 250 ms, never past the
    holder's expiry or the deadline): waiting turns are not served in arrival order.
    """
    deadline = monotonic() + (wait if strategy == "enqueue" else 0.0)
    pause = FIRST_POLL
    while True:
        grant: TurnGrant = yield Run(
            take_turn(
                state,
                chat_id,
                token,
                lease_ms,
                interrupt=strategy == "interrupt",
                user_id=user_id,
                incarnation=incarnation,
            )
        )
        if grant.granted:
            return grant
        left = deadline - monotonic()
        if left <= 0:
            waited = f" after waiting {wait:g} s" if strategy == "enqueue" else ""
            raise ChatBusyError(
                f"chat {chat_id!r} is busy with another turn{waited} (its lease runs until "
                f"{grant.expires_at} ms, fencing token {grant.fence})",
                chat_id=chat_id,
                expires_at=grant.expires_at,
                fence=grant.fence,
            )
        holder_left = max(grant.expires_at - state.clock(), 0) / 1000
        step = min(pause * random.uniform(0.5, 1.0), left, max(holder_left, FIRST_POLL))
        yield Pause(step)
        pause = min(pause * 2, LAST_POLL)
